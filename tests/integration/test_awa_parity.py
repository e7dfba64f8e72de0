"""awa-beat's calendar against a real awa-pg 0.6.9 worker.

A leader replays ``catch_up`` rows whose cursors sit before DST transitions (New York,
Auckland, Lord Howe, Troll, Paris) and rows using ``W``, ``#``, ``L`` and the day-of-month /
day-of-week OR rule; every job it inserts must carry exactly the ``cron_fire_time`` values that
:func:`awa_beat._schedules.fire_times.fires_between` predicts. A second test compares what Awa's
registration validator accepts with :meth:`CronExpression.parse` and :func:`load_timezone`.
"""

from __future__ import annotations

import asyncio
import time
import zoneinfo
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awa_beat._schedules.cron import CronExpression, load_timezone
from awa_beat._schedules.fire_times import (
    Calendar,
    calendar_for,
    due_fires,
    fires_between,
    parse_iso,
)
from awa_beat._testing import awa_url
from awa_beat.errors import InvalidCronExpression, InvalidTimezone
from tests.unit.test_cron import ACCEPTED, REJECTED

pytestmark = pytest.mark.integration
awa = pytest.importorskip("awa", reason="awa-pg is not installed")

UTC = timezone.utc
KIND = "awa_beat_parity_probe"
QUEUE = "awa_beat_parity_unserved"  # no worker listens here, so fired jobs stay put
WORKER_QUEUE = "awa_beat_parity_idle"
DEADLINE_S = 45.0


@dataclass
class ParityIdle:
    """A job kind that is never inserted; Awa's runtime needs one handler to start."""


@dataclass(frozen=True)
class Row:
    name: str
    expr: str
    zone: str
    policy: str
    last: str | None  # ISO instant, "-<days>d" before now, or None for a brand-new row


# Day-restricted around DST transitions, so the replay stays small in any year.
ROWS = [
    Row("ny_fall_quarters", "*/15 * 2 11 *", "America/New_York", "catch_up", "2025-11-01T00:00Z"),
    Row("ny_fall_0130", "30 1 * 11 *", "America/New_York", "catch_up", "2025-10-30T00:00Z"),
    Row("ny_fall_seconds", "*/30 */20 1-2 2 11 *", "America/New_York", "catch_up",
        "2025-11-01T00:00Z"),
    Row("ny_spring_0230", "30 2 * 3 *", "America/New_York", "catch_up", "2025-03-01T00:00Z"),
    Row("ny_spring_hour2", "* 2 9 3 *", "America/New_York", "catch_up", "2025-03-01T00:00Z"),
    Row("akl_fall", "*/30 1-3 6 4 *", "Pacific/Auckland", "catch_up", "2025-04-01T00:00Z"),
    Row("akl_spring", "*/30 1-3 28 9 *", "Pacific/Auckland", "catch_up", "2025-09-01T00:00Z"),
    Row("lhi_fall", "*/15 1-2 6 4 *", "Australia/Lord_Howe", "catch_up", "2025-04-01T00:00Z"),
    Row("lhi_spring", "*/15 2-3 5 10 *", "Australia/Lord_Howe", "catch_up", "2025-10-01T00:00Z"),
    Row("paris_spring", "0 2,3 30 3 *", "Europe/Paris", "catch_up", "2025-03-01T00:00Z"),
    # Troll's 2 h gap: Sundays in March fire until 30 March 2025, then the row stalls for good.
    Row("troll_stall", "0 1 * 3 0", "Antarctica/Troll", "catch_up", "2025-03-01T00:00Z"),
    Row("w_first", "0 0 1W * *", "UTC", "catch_up", "-400d"),
    Row("w_last", "0 0 31W * *", "UTC", "catch_up", "-400d"),
    Row("w_mid_tokyo", "0 0 15W * *", "Asia/Tokyo", "catch_up", "-400d"),
    Row("nth_last_fri", "0 12 * * 5#L", "America/Sao_Paulo", "catch_up", "-400d"),
    Row("nth_last_sun", "0 0 * * SUN#L", "UTC", "catch_up", "-400d"),
    Row("last_sun_0l", "0 0 * * 0L", "UTC", "catch_up", "-400d"),
    Row("fifth_wed", "0 0 * * 3#5", "UTC", "catch_up", "-400d"),
    Row("or_rule", "0 0 */2 * 1", "UTC", "catch_up", "-400d"),
    Row("dow_step", "0 6 * * 1/2", "Europe/Berlin", "catch_up", "-400d"),
    Row("dom_last", "0 0 L * *", "UTC", "catch_up", "-400d"),
    Row("never_feb30", "0 0 30 2 *", "UTC", "catch_up", "-400d"),
    Row("never_7l", "0 0 * * 7L", "UTC", "catch_up", "-400d"),
    Row("never_bare_l", "0 0 * * L", "UTC", "catch_up", "-400d"),
    Row("coalesce_latest", "0 0 * * 5#L", "UTC", "coalesce", "-400d"),
    Row("new_row", "0 9 * * *", "UTC", "coalesce", None),
]  # fmt: skip


def _fire_text(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S+00")


def _initial(row: Row, now: datetime) -> datetime | None:
    if row.last is None:
        return None
    if row.last.startswith("-"):
        return (now - timedelta(days=int(row.last[1:-1]))).replace(microsecond=0)
    return parse_iso(row.last)


def _expected(row: Row, calendar: Calendar, last: datetime | None, created: datetime,
              now: datetime) -> list[datetime]:
    """Every fire Awa should have enqueued for the row by ``now``."""
    if row.policy == "catch_up" and last is not None:
        return fires_between(calendar, last, now, 1_000_000)
    return due_fires(calendar, last_enqueued_at=last, created_at=created, now=now,
                     policy=row.policy)


def test_real_worker_fires_on_our_calendar(awa_db_url: str) -> None:
    started = datetime.now(UTC)
    created_new = started - timedelta(days=3)
    initial = {row.name: _initial(row, started) for row in ROWS}
    created = {row.name: initial[row.name] or created_new for row in ROWS}
    calendars = {row.name: calendar_for(row.expr, row.zone) for row in ROWS}

    with psycopg.connect(awa_db_url, autocommit=True) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        conn.execute("DELETE FROM awa.cron_jobs")
        for row in ROWS:
            conn.execute(
                "INSERT INTO awa.cron_jobs (name, cron_expr, timezone, kind, queue,"
                " missed_fire_policy, last_enqueued_at, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (row.name, row.expr, row.zone, KIND, QUEUE, row.policy, initial[row.name],
                 created[row.name]),
            )

        def cursors() -> dict[str, datetime | None]:
            return dict(conn.execute("SELECT name, last_enqueued_at FROM awa.cron_jobs"))

        def pending(cur: dict[str, datetime | None]) -> list[str]:
            now = datetime.now(UTC)
            late = []
            for row in ROWS:
                fires = _expected(row, calendars[row.name], initial[row.name],
                                  created[row.name], now)
                want = fires[-1] if fires else initial[row.name]
                if cur[row.name] != want:
                    late.append(f"{row.name}: awa at {cur[row.name]}, expected {want}")
            return late

        async def replay() -> list[str]:
            client = awa.AsyncClient(awa_url(awa_db_url))

            @client.task(ParityIdle, queue=WORKER_QUEUE)
            async def idle(job: Any) -> None:  # never called: no such job is inserted
                return None

            await client.start([(WORKER_QUEUE, 1)], leader_election_interval_ms=200)
            try:
                deadline = time.monotonic() + DEADLINE_S
                late = ["not polled yet"]
                while late and time.monotonic() < deadline:
                    await asyncio.sleep(0.5)
                    late = pending(cursors())
                return late
            finally:
                await client.shutdown()
                await client.close()

        late = asyncio.run(replay())
        assert not late, "the Awa worker did not reach the expected cursors:\n" + "\n".join(late)

        final = cursors()
        jobs: dict[str, list[str]] = {row.name: [] for row in ROWS}
        for name, fire in conn.execute(
            "SELECT metadata->>'cron_name', metadata->>'cron_fire_time' FROM awa.jobs"
            " WHERE kind = %s",
            (KIND,),
        ):
            jobs[name].append(fire)

    mismatches = []
    total = 0
    for row in ROWS:
        cursor = final[row.name]
        calendar = calendars[row.name]
        if row.policy == "catch_up":
            ours = fires_between(calendar, initial[row.name], cursor, 1_000_000) if cursor else []
        else:
            ours = [] if cursor is None else [cursor]
            assert cursor in (None, *due_fires(
                calendar, last_enqueued_at=initial[row.name], created_at=created[row.name],
                now=datetime.now(UTC), policy=row.policy)), row.name
        theirs = sorted(jobs[row.name])
        total += len(theirs)
        if theirs != [_fire_text(t) for t in ours]:
            extra = sorted(set(theirs) - {_fire_text(t) for t in ours})
            missing = sorted({_fire_text(t) for t in ours} - set(theirs))
            mismatches.append(
                f"{row.name} {row.expr!r} {row.zone}: awa {len(theirs)} jobs, ours {len(ours)};"
                f" only awa {extra[:5]}, only ours {missing[:5]}"
            )
    assert not mismatches, "\n".join(mismatches)
    assert total > 500  # the replay really ran
    assert len(jobs["ny_spring_hour2"]) >= 1 and not jobs["never_feb30"]
    assert "2025-11-02 05:30:00+00" in jobs["ny_fall_0130"]
    assert "2025-11-02 06:30:00+00" not in jobs["ny_fall_0130"]  # no second-pass fire
    assert "2025-03-09 07:00:00+00" in jobs["ny_spring_0230"]  # 02:30 moved to 03:00 EDT


# -- Awa's registration validator --------------------------------------------------------------

_ATOMS = [
    "*", "?", "0", "1", "5", "7", "12", "15", "23", "24", "31", "32", "59", "60", "255", "256",
    "+3", "05", "l", "L", "w", "W", "#", "#2", "#L", "#6", "-", "/", ",", "/2", "/0", "*/5",
    "1-5", "5-1", "mon", "SUN", "-sun", "jan", "DEC", "fri", "@", "LW", "5L", "15W", "H", "0-7",
]  # fmt: skip
_fields = st.lists(st.sampled_from(_ATOMS), min_size=1, max_size=3).map("".join)
_expressions = st.one_of(
    st.lists(_fields, min_size=4, max_size=7).map(" ".join),
    st.sampled_from(["@daily", "@WEEKLY", "@midnight", " @hourly ", "@annually", "@every 5s"]),
)


@dataclass
class Probe:
    """Args type for registering throw-away periodic jobs."""


@pytest.fixture
def awa_validator(awa_db_url: str) -> Any:
    """``periodic`` of an awa-pg client: it validates with croner and chrono-tz."""
    client = awa.AsyncClient(awa_url(awa_db_url))
    yield client.periodic
    asyncio.run(client.close())


def _awa_accepts(periodic: Any, expr: str, zone: str = "UTC") -> bool:
    try:
        periodic("probe", expr, Probe, Probe(), timezone=zone)
    except Exception as exc:  # awa raises its own ValidationError type
        assert "invalid" in str(exc), exc
        return False
    return True


def _we_accept(expr: str) -> bool:
    try:
        CronExpression.parse(expr)
    except InvalidCronExpression:
        return False
    return True


def test_grammar_matches_awa_validator(awa_validator: Any) -> None:
    for expr, _ in REJECTED:
        assert not _awa_accepts(awa_validator, expr), expr
    for expr in ACCEPTED:
        assert _awa_accepts(awa_validator, expr), expr

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
    @given(expr=_expressions)
    def agree(expr: str) -> None:
        assert _we_accept(expr) == _awa_accepts(awa_validator, expr), expr

    agree()


def test_awa_rejects_every_marker_awa_beat_writes(awa_validator: Any) -> None:
    from tests.integration.test_awa_worker import MARKERS

    for expr in MARKERS:
        assert not _awa_accepts(awa_validator, expr), expr
        assert not _we_accept(expr), expr  # never taken for an Awa expression either


def test_zone_names_match_chrono_tz(awa_validator: Any) -> None:
    names = sorted(zoneinfo.available_timezones() | {"utc", "posixrules", "US/Eastern "})
    disagree = []
    for name in names:
        try:
            load_timezone(name)
            ours = True
        except InvalidTimezone:
            ours = False
        if ours != _awa_accepts(awa_validator, "* * * * *", name):
            disagree.append(name)
    assert not disagree, f"zone names judged differently from Awa (chrono-tz): {disagree}"
