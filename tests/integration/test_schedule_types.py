"""Schedule types with run limits and bounds against a real PostgreSQL, clock injected:
a one-off fires once even with two engines racing, max_runs stops at N, end_time stops."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

from awa_beat._db.database import Database
from awa_beat._db.records import RETIRED_BY
from awa_beat._engine.engine import Engine
from awa_beat._ops.rows import next_fire
from awa_beat._schedules.calendars import at
from awa_beat._schedules.spec import spec_from_entry
from awa_beat._testing import FakeClock

pytestmark = pytest.mark.integration
UTC = timezone.utc
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def register(store: Database, conn: psycopg.Connection, name: str, schedule: Any,
             cursor: datetime, **awa: Any) -> str:
    awa.setdefault("missed_fire_policy", "catch_up")
    spec = spec_from_entry(name, {"task": "t.k", "schedule": schedule,
                                  "options": {"awa_beat": awa}})
    store.schedules.sync([spec.row()], deployment="test")
    conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s WHERE name = %s",
                 (cursor, name))
    return spec.cron_expr


def fired(conn: psycopg.Connection, name: str) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT metadata ->> 'cron_fire_time' FROM awa.jobs"
        " WHERE metadata ->> 'cron_name' = %s ORDER BY id", (name,))]


def runs(conn: psycopg.Connection, name: str) -> int | None:
    row = conn.execute("SELECT runs FROM awa_beat.schedule_runs WHERE name = %s",
                       (name,)).fetchone()
    return None if row is None else row[0]


def test_a_one_off_fires_once_with_two_engines_racing(store: Database, conn, db_url: str) -> None:
    names = [f"once-{i}" for i in range(12)]
    for name in names:
        register(store, conn, name, at(T0 + timedelta(seconds=30)), T0)
    clock = FakeClock(T0 + timedelta(seconds=31))
    with Database(db_url) as other:
        engines = [Engine(store.evaluator, clock=clock), Engine(other.evaluator, clock=clock)]
        for engine in engines:
            engine.load()
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def race(engine: Engine) -> None:
            try:
                barrier.wait()
                engine.fire_due()
            except BaseException as exc:  # reported below, not lost in the thread
                errors.append(exc)

        threads = [threading.Thread(target=race, args=(e,)) for e in engines]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        # Later passes, and a fresh engine (a restart), find nothing more to fire.
        clock.advance(days=2)
        for engine in [*engines, Engine(other.evaluator, clock=clock)]:
            engine.run_pass()
    for name in names:
        assert fired(conn, name) == ["2026-03-02 12:00:30+00"], name
        assert runs(conn, name) == 1
        row = store.schedules.get(name)
        assert row.retired and row.paused_by == RETIRED_BY
        assert row.last_enqueued_at == T0 + timedelta(seconds=30)
        assert next_fire(row, clock()) == (None, None)


def test_max_runs_stops_at_n_counted_by_the_statement(store: Database, conn) -> None:
    register(store, conn, "three", "* * * * * *", T0, max_runs=3)
    clock = FakeClock(T0 + timedelta(seconds=10))
    engine = Engine(store.evaluator, clock=clock)
    engine.run_pass()  # ten fires are due; the statement lets three through
    assert fired(conn, "three") == [f"2026-03-02 12:00:0{s}+00" for s in (1, 2, 3)]
    assert runs(conn, "three") == 3
    row = store.schedules.get("three")
    assert row.retired and row.last_enqueued_at == T0 + timedelta(seconds=3)
    # Resumed, it has no run left: the next fire retires it again and inserts nothing.
    store.schedules.resume("three")
    clock.advance(seconds=5)
    for _ in range(3):
        engine.refresh_soon()
        engine.run_pass()
    assert len(fired(conn, "three")) == 3 and runs(conn, "three") == 3
    assert store.schedules.get("three").retired


def test_max_runs_counts_across_passes_and_engines(store: Database, conn) -> None:
    register(store, conn, "two", "* * * * *", T0, max_runs=2, missed_fire_policy="coalesce")
    clock = FakeClock(T0 + timedelta(minutes=1, seconds=1))
    Engine(store.evaluator, clock=clock).run_pass()
    assert runs(conn, "two") == 1 and not store.schedules.get("two").retired
    clock.advance(minutes=1)
    Engine(store.evaluator, clock=clock).run_pass()  # another process, same count
    clock.advance(minutes=5)
    Engine(store.evaluator, clock=clock).run_pass()
    assert fired(conn, "two") == ["2026-03-02 12:01:00+00", "2026-03-02 12:02:00+00"]
    assert store.schedules.get("two").retired


def test_end_time_stops_and_start_time_waits(store: Database, conn) -> None:
    register(store, conn, "window", "* * * * *", T0,
             start_time=T0 + timedelta(minutes=2), end_time=T0 + timedelta(minutes=4))
    clock = FakeClock(T0 + timedelta(hours=1))
    engine = Engine(store.evaluator, clock=clock)
    engine.run_pass()
    clock.advance(hours=1)
    engine.run_pass()
    assert fired(conn, "window") == ["2026-03-02 12:02:00+00", "2026-03-02 12:03:00+00",
                                     "2026-03-02 12:04:00+00"]
    row = store.schedules.get("window")
    assert not row.retired and next_fire(row, clock()) == (None, None)
    assert runs(conn, "window") is None  # no run limit, nothing counted


def test_removing_a_schedule_forgets_its_run_count(store: Database, conn) -> None:
    register(store, conn, "gone", at(T0 + timedelta(seconds=5)), T0)
    Engine(store.evaluator, clock=FakeClock(T0 + timedelta(seconds=6))).run_pass()
    assert runs(conn, "gone") == 1
    assert store.schedules.remove("gone")
    assert runs(conn, "gone") is None
