"""Beat's own sync of beat_schedule and the cursor: a change of calendar never fires a
time from before the change; a redeploy that keeps the calendar keeps the backlog."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

from awa_beat._db.database import Database
from awa_beat._engine.engine import Engine
from awa_beat._schedules.fire_times import parse_iso
from awa_beat._testing import FakeClock

pytestmark = pytest.mark.integration
UTC = timezone.utc


def row(name: str, policy: str, **over: Any) -> dict[str, Any]:
    r = {"name": name, "cron_expr": "0 * * * *", "timezone": "UTC", "kind": "t.k",
         "queue": "default", "args": {"args": [], "kwargs": {}}, "priority": 2,
         "max_attempts": 25, "tags": [], "metadata": {}, "missed_fire_policy": policy}
    r.update(over)
    return r


def cursor(conn: psycopg.Connection, name: str) -> datetime:
    return conn.execute("SELECT last_enqueued_at FROM awa.cron_jobs WHERE name = %s",
                        (name,)).fetchone()[0]


def fired(conn: psycopg.Connection, name: str) -> list[datetime]:
    return [parse_iso(r[0]) for r in conn.execute(
        "SELECT metadata ->> 'cron_fire_time' FROM awa.jobs"
        " WHERE metadata ->> 'cron_name' = %s ORDER BY id", (name,))]


def next_half_hour(after: datetime) -> datetime:
    """The first xx:30 UTC after ``after``: when '0 * * * *' in Asia/Kolkata fires."""
    t = after.replace(minute=30, second=0, microsecond=0)
    return t if t > after else t + timedelta(hours=1)


@pytest.mark.parametrize("policy", ["coalesce", "catch_up"])
@pytest.mark.parametrize("change", [{"timezone": "Asia/Kolkata"},
                                    {"cron_expr": "30 * * * *"}])
def test_a_calendar_change_in_beat_schedule_fires_nothing_from_before_it(
        store: Database, conn, policy: str, change: dict[str, str]) -> None:
    # Both changes move the fires to xx:30 UTC; the old cursor is hours behind, so
    # the old rule would fire (old cursor, now] under the new calendar at once.
    store.schedules.sync([row("hourly", policy)], deployment="proj")
    old = store.database_clock().replace(microsecond=0) - timedelta(hours=3)
    conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s WHERE name = 'hourly'",
                 (old,))
    before = store.database_clock().replace(microsecond=0)
    assert store.schedules.sync([row("hourly", policy, **change)], deployment="proj").updated == 1
    moved = cursor(conn, "hourly")
    assert before <= moved <= store.database_clock()

    clock = FakeClock(store.database_clock() + timedelta(seconds=1))
    engine = Engine(store.evaluator, clock=clock)
    engine.run_pass()
    assert [t for t in fired(conn, "hourly") if t <= moved] == []
    first = next_half_hour(moved)
    clock.now = first + timedelta(seconds=1)
    engine.run_pass()
    assert fired(conn, "hourly") == [first]


def test_a_redeploy_without_a_calendar_change_keeps_the_cursor_and_the_backlog(
        store: Database, conn) -> None:
    store.schedules.sync([row("hourly", "catch_up")], deployment="proj")
    old = store.database_clock().replace(minute=0, second=0, microsecond=0) - timedelta(
        hours=3)
    conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s WHERE name = 'hourly'",
                 (old,))
    assert store.schedules.sync([row("hourly", "catch_up")], deployment="proj").unchanged == 1
    assert cursor(conn, "hourly") == old
    # A change of anything but the calendar rewrites the row and keeps the cursor too.
    assert store.schedules.sync([row("hourly", "catch_up", kind="t.other")],
                                deployment="proj").updated == 1
    assert cursor(conn, "hourly") == old

    now = store.database_clock()
    Engine(store.evaluator, clock=FakeClock(now)).run_pass()
    assert fired(conn, "hourly") == [old + timedelta(hours=h) for h in (1, 2, 3)]
