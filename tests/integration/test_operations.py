"""The operations layer against a real database, with an injected clock."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from awa_beat._db.database import Database
from awa_beat._db.lock import Leadership
from awa_beat._ops.doctor import checks, diagnose
from awa_beat._ops.operations import Operations, utcnow, whoami
from awa_beat._ops.records import Check, UpcomingFire
from awa_beat._testing import FakeClock
from awa_beat.errors import NotFound

pytestmark = pytest.mark.integration
UTC = timezone.utc
#: A Friday, two days before Paris moves its clocks forward (2026-03-29).
NOW = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)


def row(name: str, **over: Any) -> dict[str, Any]:
    return {"name": name, "cron_expr": "0 9 * * *", "timezone": "Europe/Paris",
            "kind": "t.daily", "queue": "default", "args": {"args": [1], "kwargs": {}},
            "priority": 2, "max_attempts": 25, "tags": [], "metadata": {},
            "missed_fire_policy": "coalesce", **over}


@pytest.fixture
def ops(db_url: str) -> Iterator[Operations]:
    with Database(db_url) as store:
        store.schedules.sync([row("daily"),
                              row("every-90s", cron_expr="@every 90s", timezone="UTC"),
                              row("to-celery", metadata={"celery": {"dispatch": "celery"}})],
                             deployment="proj")
    configured = ["daily", "every-90s"]  # to-celery has left the app's beat_schedule
    with Operations.open(db_url, clock=FakeClock(NOW), deployment="proj",
                         configured=lambda: configured) as ops:
        yield ops


def test_schedules_next_fire_problem_and_orphans(ops: Operations, conn) -> None:
    conn.execute("INSERT INTO awa.cron_jobs (name, cron_expr, kind) "
                 "VALUES ('bad', '@midnight', 'k')")
    views = {v.name: v for v in ops.schedules()}
    assert views["daily"].next_fire == datetime(2026, 3, 28, 8, 0, tzinfo=UTC)  # 09:00 CET
    assert views["every-90s"].next_fire == datetime(2026, 3, 27, 12, 1, 30, tzinfo=UTC)
    assert views["bad"].invalid and views["bad"].next_fire is None
    assert "@midnight" in (views["bad"].problem or "")
    assert not views["daily"].invalid
    assert {n for n, v in views.items() if v.orphan} == {"to-celery"}  # bad: not proj's
    assert [v.name for v in ops.schedules("every-%")] == ["every-90s"]
    assert ops.get("to-celery").orphan and not ops.get("daily").orphan


def test_pause_resume_trigger_history_remove(ops: Operations) -> None:
    ops.pause("daily", "oncall")
    assert ops.get("daily").row.paused_by == "oncall"
    ops.resume("daily")
    assert ops.get("daily").row.paused_at is None
    ops.pause("daily")
    assert ops.get("daily").row.paused_by == whoami()
    first, second = ops.trigger("daily"), ops.trigger("every-90s")  # even while paused
    assert [(j.job_id, j.schedule, j.triggered_manually) for j in ops.history()] == [
        (second, "every-90s", True), (first, "daily", True)]
    assert [j.job_id for j in ops.history("daily")] == [first]
    assert len(ops.history(limit=1)) == 1
    ops.remove("daily")
    with pytest.raises(NotFound):
        ops.get("daily")
    assert [j.job_id for j in ops.history()] == [second, first]  # its jobs stay


@pytest.mark.parametrize("action", ["get", "pause", "resume", "trigger", "remove", "history"])
def test_an_unknown_name_is_not_found(ops: Operations, action: str) -> None:
    with pytest.raises(NotFound, match="no schedule named 'nope'"):
        getattr(ops, action)("nope")


def test_upcoming_marks_the_dst_change(ops: Operations) -> None:
    daily = ops.get("daily").row
    assert ops.upcoming(daily, count=3) == [
        UpcomingFire(datetime(2026, 3, 28, 8, 0, tzinfo=UTC)),
        UpcomingFire(datetime(2026, 3, 29, 7, 0, tzinfo=UTC),
                     "DST: UTC offset +01:00 -> +02:00"),
        UpcomingFire(datetime(2026, 3, 30, 7, 0, tzinfo=UTC)),
    ]
    later = datetime(2026, 10, 23, 12, 0, tzinfo=UTC)  # two days before they move back
    assert [f.note for f in ops.upcoming(daily, later, 2)] == [
        "", "DST: UTC offset +02:00 -> +01:00"]


def test_export_entries(ops: Operations) -> None:
    entries = ops.export_entries()
    assert entries["every-90s"]["schedule"] == 90  # the interval, as beat_schedule has it
    assert entries["daily"] == {
        "task": "t.daily", "schedule": "0 9 * * *", "args": [1], "kwargs": {},
        "options": {"awa_beat": {"timezone": "Europe/Paris",
                                 "missed_fire_policy": "coalesce"}}}
    assert entries["to-celery"]["options"]["awa_beat"]["dispatch"] == "celery"
    assert list(ops.export_entries("daily")) == ["daily"]


def test_status_leaders_standbys_and_backlog(ops: Operations, db_url: str,
                                             layout: str) -> None:
    key = 1234567
    started = datetime.now(UTC)
    beat = {"host": "h", "pid": os.getpid(), "deployment": "proj", "lock_key": key,
            "started_at": started, "last_lag_ms": 3.5}
    ops.store.cluster.heartbeat(identity="leader", role="leader", leader_since=started, **beat)
    ops.store.cluster.heartbeat(identity="standby", role="standby", leader_since=None,
                                **{**beat, "pid": 1})
    assert ops.cluster.status().leaders == []  # no lock held: not really a leader
    lock = Leadership(db_url, key)
    assert lock.try_acquire()
    try:
        ops.trigger("to-celery")
        status = ops.cluster.status()
    finally:
        lock.resign()
    assert [(b.identity, b.holds_lock, b.last_lag_ms) for b in status.leaders] == [
        ("leader", True, 3.5)]
    assert [b.identity for b in status.standbys] == ["standby"]
    # Where Awa owns awa.jobs, its workers run every job: nothing waits for the bridge.
    assert status.backlog == (0 if layout == "awa" else 1)


def test_checks_as_data(ops: Operations, conn) -> None:
    ops.clock = utcnow  # the fixture's clock is months off the database's
    found = list(checks(ops))
    assert len(found) == 12  # reachable, schema, locks, this host's clock, the beats'
    # clocks, tz data, rows, rows that can never fire again, overdue, unpublished Celery
    # jobs, jobs for Awa with no Awa, orphans
    assert found[0].what.startswith("database reachable")
    assert [c.what for c in found if not c.ok] == [
        "1 stored schedule(s) no longer in beat_schedule"]
    conn.execute("INSERT INTO awa.cron_jobs (name, cron_expr, kind) "
                 "VALUES ('bad', '@midnight', 'k')")
    # The daily rows fire at 09:00 in Paris; a run just before that would see them miss a
    # fire in the five minutes below too. Move their fire half a day from the real time.
    away = datetime.now(UTC) + timedelta(hours=12)
    conn.execute("UPDATE awa.cron_jobs SET cron_expr = %s, timezone = 'UTC' "
                 "WHERE name IN ('daily', 'to-celery')", (f"0 {away.hour} * * *",))
    ops.clock = FakeClock(datetime.now(UTC) + timedelta(minutes=5))
    failed = {c.what.split(":")[0]: c for c in checks(ops) if not c.ok}
    # Five minutes on and no beat running: the every-90s schedule missed its fires. (The
    # clock checks measure this host's real clock, not the one that reads schedules.)
    assert set(failed) == {"4 schedule(s), 1 invalid", "1 overdue schedule(s)",
                           "1 stored schedule(s) no longer in beat_schedule"}
    assert ": missed" in failed["1 overdue schedule(s)"].details[0]
    assert failed["4 schedule(s), 1 invalid"].details[0].startswith("bad: ")
    assert failed["1 stored schedule(s) no longer in beat_schedule"].details == ("to-celery",)
    assert all(c.fix for c in failed.values())


def test_diagnose_an_unreachable_database() -> None:
    [check] = diagnose("postgresql://u:s3cret@127.0.0.1:1/x")
    assert isinstance(check, Check) and not check.ok
    assert check.what.startswith("database reachable: cannot connect to")
    assert "s3cret" not in check.what


def test_operations_without_a_configuration_flag_no_orphans(db_url: str) -> None:
    with Operations.open(db_url) as ops:
        ops.store.schedules.sync([row("daily")], deployment="proj")
        assert ops.orphans() is None
        assert [v.orphan for v in ops.schedules()] == [False]
