"""The store's contract, run against :class:`~awa_beat._testing.MemoryStore` and against
PostgreSQL in both table layouts.

The engine's and the node's unit tests run on the in-memory store; these tests hold it
to what the SQL does, so that it cannot drift. Each test drives the store as the engine
and the node do (sync, read, fire), and sets the table up as another writer would (a row
inserted or edited by hand, a pause, a write at run time) through a :class:`Subject`,
the one place that knows how each store is written to. Where the two disagree, the SQL
is the reference: MemoryStore is fixed to match it.

What MemoryStore does not model is left out: the job columns Awa's limits check, the
overlap policies skip and buffer_one (they read the job's metadata and outcomes), the
records a fire leaves besides its jobs (coalesced, overlap's skipped and buffered
occurrences) and the states of jobs. The catch-up window's skipped occurrence and a
jittered job's run time are modelled, and so is what a row without an overlap policy
does: it holds no fire, so ``fire_buffered`` starts nothing and counts none held.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

from awa_beat._db.batches import SyncBatch
from awa_beat._db.database import Database
from awa_beat._db.records import (
    RETIRED_BY,
    Coalesced,
    CronState,
    FireRequest,
    SyncResult,
    Windowed,
)
from awa_beat._testing import MemoryStore, TempDatabases

pytestmark = pytest.mark.integration
UTC = timezone.utc
SUBJECTS = ("memory", "standalone", "awa")


def definition(name: str, cron_expr: str = "* * * * *", **over: Any) -> dict[str, Any]:
    """A schedule row as a configuration registers it."""
    return {"name": name, "cron_expr": cron_expr, "timezone": "UTC", "kind": "app.tick",
            "queue": "default", "args": {"args": [], "kwargs": {}}, "priority": 2,
            "max_attempts": 25, "tags": [], "metadata": {}, "missed_fire_policy": "coalesce",
            **over}


def stored_text(t: datetime) -> str:
    """A fire time as PostgreSQL writes ``timestamptz::text`` in a UTC session."""
    text = t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f").rstrip("0").rstrip(".")
    return text + "+00"


class Subject:
    """One store under test, and how to write to its table as another writer would."""

    store: Any
    evaluator: Any
    """The part that reads the rows for the evaluator and fires."""
    schedules: Any
    """The part that syncs a configuration."""
    cluster: Any
    """The part that keeps the beats' heartbeats."""

    def _take_parts(self) -> None:
        self.evaluator = self.store.evaluator
        self.schedules = self.store.schedules
        self.cluster = self.store.cluster

    def now(self) -> datetime:
        """The store's clock: the database's ``now()``, or the memory store's clock."""
        raise NotImplementedError

    def put(self, name: str, cron_expr: str = "* * * * *", *,
            cursor: datetime | None = None, paused: bool = False,
            missed_fire_policy: str = "coalesce") -> None:
        """Insert a row as another writer would (no owner)."""
        raise NotImplementedError

    def edit(self, name: str, **changes: Any) -> None:
        """Change a row's evaluator columns as another writer would (``updated_at`` bumped)."""
        raise NotImplementedError

    def delete(self, name: str) -> None:
        """Delete a row as another writer would (its owner left as it was)."""
        raise NotImplementedError

    def take_at_runtime(self, name: str) -> None:
        """Write the row through the Python API: its owner becomes 'runtime'."""
        raise NotImplementedError

    def pause(self, name: str) -> None:
        raise NotImplementedError

    def resume(self, name: str) -> None:
        raise NotImplementedError

    def fired(self, name: str) -> list[str]:
        """The fire times of the jobs inserted for ``name``, in order."""
        raise NotImplementedError

    def paused_by(self, name: str) -> str | None:
        raise NotImplementedError

    def occurrences(self, name: str) -> list[tuple[Any, ...]]:
        """The skipped occurrences recorded for ``name``: (kind, fire_time,
        last_fire_time, count, reason)."""
        raise NotImplementedError

    def run_ats(self, name: str) -> list[datetime]:
        """When each of ``name``'s jobs is to run, in order."""
        raise NotImplementedError

    def states(self, name: str) -> list[str] | None:
        """The states of ``name``'s jobs, or None where they are not modelled."""
        return None

    def row(self, name: str) -> Any:
        """The row as the evaluator reads it."""
        found = self.evaluator.cron_states_by_name([name])
        return found[0] if found else None


class InMemory(Subject):
    def __init__(self) -> None:
        self.store = MemoryStore(lambda: datetime.now(UTC))
        self._take_parts()

    def now(self) -> datetime:
        return self.store.clock()

    def put(self, name: str, cron_expr: str = "* * * * *", *,
            cursor: datetime | None = None, paused: bool = False,
            missed_fire_policy: str = "coalesce") -> None:
        self.store.add(name, cron_expr, last_enqueued_at=cursor,
                       missed_fire_policy=missed_fire_policy,
                       paused_at=self.now() if paused else None)

    def edit(self, name: str, **changes: Any) -> None:
        self.store.update(name, **changes)

    def delete(self, name: str) -> None:
        del self.store.rows[name]

    def take_at_runtime(self, name: str) -> None:
        self.store.runtime.add(name)
        self.store.owners[name] = "api"

    def pause(self, name: str) -> None:
        self.store.update(name, paused_at=self.now())
        self.store.paused_by[name] = "oncall"

    def resume(self, name: str) -> None:
        self.store.update(name, paused_at=None)
        self.store.paused_by[name] = None

    def fired(self, name: str) -> list[str]:
        return self.store.fired(name)

    def paused_by(self, name: str) -> str | None:
        return self.store.paused_by.get(name)

    def occurrences(self, name: str) -> list[tuple[Any, ...]]:
        return [o[1:] for o in self.store.occurrences if o[0] == name]

    def run_ats(self, name: str) -> list[datetime]:
        return [self.store.run_ats.get(j.job_id, j.updated_at)
                for j in self.store.jobs if j.name == name]


class InPostgres(Subject):
    def __init__(self, url: str) -> None:
        self.store = Database(url).open()
        self._take_parts()
        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute("SET TimeZone = 'UTC'")

    def close(self) -> None:
        self.conn.close()
        self.store.close()

    def now(self) -> datetime:
        return self.conn.execute("SELECT now()").fetchone()[0]

    def put(self, name: str, cron_expr: str = "* * * * *", *,
            cursor: datetime | None = None, paused: bool = False,
            missed_fire_policy: str = "coalesce") -> None:
        self.conn.execute(
            "INSERT INTO awa.cron_jobs (name, cron_expr, kind, missed_fire_policy,"
            " last_enqueued_at, paused_at) VALUES (%s, %s, 'app.tick', %s, %s,"
            " CASE WHEN %s THEN now() END)",
            (name, cron_expr, missed_fire_policy, cursor, paused))

    def edit(self, name: str, **changes: Any) -> None:
        for column, value in changes.items():
            assert column in {f.name for f in dataclasses.fields(CronState)}
            self.conn.execute(
                psycopg.sql.SQL("UPDATE awa.cron_jobs SET {} = %s, updated_at = now()"
                                " WHERE name = %s").format(psycopg.sql.Identifier(column)),
                (value, name))

    def delete(self, name: str) -> None:
        self.conn.execute("DELETE FROM awa.cron_jobs WHERE name = %s", (name,))

    def take_at_runtime(self, name: str) -> None:
        current = self.store.schedules.get(name)
        row = definition(name, current.cron_expr, timezone=current.timezone,
                         missed_fire_policy=current.missed_fire_policy)
        with self.store.transaction() as conn:
            self.store.schedules.upsert_runtime(conn, [row], deployment="api", replace=True)

    def pause(self, name: str) -> None:
        self.store.schedules.pause(name, by="oncall")

    def resume(self, name: str) -> None:
        self.store.schedules.resume(name)

    def fired(self, name: str) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT metadata ->> 'cron_fire_time' FROM awa.jobs"
            " WHERE metadata ->> 'cron_name' = %s ORDER BY id", (name,))]

    def paused_by(self, name: str) -> str | None:
        return self.store.schedules.get(name).paused_by

    def occurrences(self, name: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.conn.execute(
            "SELECT kind, fire_time, last_fire_time, count, reason"
            " FROM awa_beat.occurrences WHERE schedule = %s ORDER BY id", (name,))]

    def _jobs(self, name: str, column: str) -> list[Any]:
        return [r[0] for r in self.conn.execute(
            psycopg.sql.SQL("SELECT {} FROM awa.jobs WHERE metadata ->> 'cron_name' = %s"
                            " ORDER BY id").format(psycopg.sql.SQL(column)), (name,))]

    def run_ats(self, name: str) -> list[datetime]:
        return self._jobs(name, "run_at")

    def states(self, name: str) -> list[str] | None:
        return self._jobs(name, "state::text")


@pytest.fixture(params=SUBJECTS)
def subject(request: pytest.FixtureRequest) -> Iterator[Subject]:
    if request.param == "memory":
        yield InMemory()
        return
    databases: TempDatabases = request.getfixturevalue("databases")
    pg = InPostgres(databases.fresh(request.param))
    try:
        yield pg
    finally:
        pg.close()


def minute(subject: Subject, ago: int) -> datetime:
    """The start of the minute ``ago`` minutes before the store's clock."""
    return subject.now().replace(second=0, microsecond=0) - timedelta(minutes=ago)


def names(rows: Any) -> list[str]:
    return sorted(r.name for r in rows)


# -- reading rows ---------------------------------------------------------------------------


def test_every_row_is_read_with_its_evaluator_columns(subject: Subject) -> None:
    cursor = minute(subject, 5)
    subject.put("a", "*/5 * * * *", cursor=cursor, missed_fire_policy="catch_up")
    subject.put("b", paused=True)
    state, rows = subject.evaluator.cron_states()
    by_name = {r.name: r for r in rows}
    assert state.total == 2 and sorted(by_name) == ["a", "b"]
    a, b = by_name["a"], by_name["b"]
    assert (a.cron_expr, a.timezone, a.missed_fire_policy) == ("*/5 * * * *", "UTC", "catch_up")
    assert a.last_enqueued_at == cursor and a.paused_at is None
    assert b.last_enqueued_at is None and b.paused_at is not None
    assert a.created_at <= a.updated_at <= state.db_now
    assert sorted(subject.evaluator.cron_names()) == ["a", "b"]


def test_rows_read_by_name_are_those_that_exist(subject: Subject) -> None:
    subject.put("a")
    subject.put("b")
    assert names(subject.evaluator.cron_states_by_name(["b", "gone"])) == ["b"]


def test_a_sweep_reads_slices_in_name_order_and_says_when_it_is_done(subject: Subject) -> None:
    for name in "edcba":
        subject.put(name)
    slices = []
    after: str | None = ""
    while after is not None:
        after, rows = subject.evaluator.cron_states_after(after, 2)
        slices.append([r.name for r in rows])
    assert slices == [["a", "b"], ["c", "d"], ["e"]]
    subject.delete("e")
    last, rows = subject.evaluator.cron_states_after("b", 2)
    assert (last, [r.name for r in rows]) == ("d", ["c", "d"])
    last, rows = subject.evaluator.cron_states_after("d", 2)
    assert (last, list(rows)) == (None, [])


def test_changes_are_the_rows_updated_after_since(subject: Subject) -> None:
    subject.put("a")
    subject.put("b")
    since = subject.now()
    state, rows = subject.evaluator.changes(since)
    assert list(rows) == []
    subject.edit("b", cron_expr="*/2 * * * *")
    changed_state, rows = subject.evaluator.changes(since)
    [row] = list(rows)
    assert row.name == "b" and row.cron_expr == "*/2 * * * *" and row.updated_at > since
    # An edit leaves the set of names as it was: the fingerprint says so.
    assert (changed_state.total, changed_state.fingerprint) == (state.total, state.fingerprint)


def test_a_row_changed_after_a_read_is_listed_by_the_next_refresh(subject: Subject) -> None:
    subject.put("a")
    subject.put("b")
    state, _ = subject.evaluator.cron_states()
    subject.edit("a", missed_fire_policy="catch_up")
    # Rows the last read had already returned may be left out (those written by
    # transactions older than its snapshot's xmin, seen_xmin: how many depends on what
    # else runs on the server); a row written after it is always listed.
    since = state.db_now - timedelta(seconds=5)
    _, rows = subject.evaluator.changes(since, state.xmin)
    listed = {r.name: r for r in rows}
    assert listed["a"].missed_fire_policy == "catch_up"
    assert set(listed) <= {"a", "b"} and all(r.updated_at > since for r in listed.values())


def test_the_fingerprint_changes_when_a_row_comes_or_goes(subject: Subject) -> None:
    subject.put("a")
    first, _ = subject.evaluator.cron_states()
    subject.put("b")
    second, _ = subject.evaluator.cron_states()
    subject.delete("b")
    third, _ = subject.evaluator.cron_states()
    assert second.total == 2 and second.fingerprint != first.fingerprint
    assert (third.total, third.fingerprint) == (first.total, first.fingerprint)


# -- firing ----------------------------------------------------------------------------------


def test_a_fire_moves_the_cursor_and_inserts_a_job_per_fire_time(subject: Subject) -> None:
    start = minute(subject, 3)
    subject.put("a", cursor=start, missed_fire_policy="catch_up")
    times = [start + timedelta(minutes=1), start + timedelta(minutes=2)]
    result = subject.evaluator.fire([FireRequest("a", start, times)])
    assert [(j.name, j.fire_time) for j in result.jobs] == [
        ("a", stored_text(t)) for t in times]
    assert all(j.job_id for j in result.jobs)
    assert (result.failed, result.skipped, result.ahead, result.buffered) == ({}, [], [], [])
    assert subject.fired("a") == [stored_text(t) for t in times]
    row = subject.row("a")
    assert row.last_enqueued_at == times[-1]
    # Each job comes back with the updated_at its row now has.
    assert {j.updated_at for j in result.jobs} == {row.updated_at}


def test_rows_without_an_overlap_policy_hold_no_fire(subject: Subject) -> None:
    start = minute(subject, 3)
    subject.put("a", cursor=start, missed_fire_policy="catch_up")
    times = [start + timedelta(minutes=1), start + timedelta(minutes=2)]
    assert subject.evaluator.fire([FireRequest("a", start, times)]).buffered == []
    started = subject.evaluator.fire_buffered()
    assert (started.jobs, started.still_held) == ([], 0)
    assert subject.fired("a") == [stored_text(t) for t in times]


def test_a_fire_time_with_a_fraction_of_a_second_is_stored_as_the_database_writes_it(
        subject: Subject) -> None:
    start = minute(subject, 2)
    subject.put("a", "@every 1.5s", cursor=start)
    at = start + timedelta(seconds=1, microseconds=500_000)
    result = subject.evaluator.fire([FireRequest("a", start, [at])])
    assert [j.fire_time for j in result.jobs] == [stored_text(at)]
    assert subject.fired("a") == [stored_text(at)]


def test_a_fire_whose_cursor_moved_meanwhile_fires_nothing(subject: Subject) -> None:
    start = minute(subject, 3)
    subject.put("a", cursor=start)
    result = subject.evaluator.fire([FireRequest("a", start - timedelta(minutes=1),
                                             [start + timedelta(minutes=1)])])
    assert (result.jobs, result.failed, result.skipped, result.ahead) == ([], {}, [], [])
    assert subject.fired("a") == [] and subject.row("a").last_enqueued_at == start


def test_a_row_that_never_fired_fires_when_the_request_expects_no_cursor(
        subject: Subject) -> None:
    start = minute(subject, 3)
    subject.put("a")
    assert subject.evaluator.fire([FireRequest("a", start, [start])]).jobs == []
    assert len(subject.evaluator.fire([FireRequest("a", None, [start])]).jobs) == 1
    assert subject.row("a").last_enqueued_at == start


def test_the_requests_of_a_batch_fire_each_on_its_own_compare_and_swap(
        subject: Subject) -> None:
    start = minute(subject, 3)
    for name in ("a", "b", "c"):
        subject.put(name, cursor=start)
    at = [start + timedelta(minutes=1)]
    result = subject.evaluator.fire([FireRequest("a", start, at),
                                 FireRequest("b", start - timedelta(minutes=1), at),
                                 FireRequest("c", start, at)])
    assert sorted(j.name for j in result.jobs) == ["a", "c"]
    assert subject.row("b").last_enqueued_at == start


def test_a_paused_row_fires_nothing_until_it_is_resumed(subject: Subject) -> None:
    start = minute(subject, 3)
    subject.put("a", cursor=start)
    subject.pause("a")
    request = FireRequest("a", start, [start + timedelta(minutes=1)])
    assert subject.evaluator.fire([request]).jobs == []
    assert subject.row("a").last_enqueued_at == start
    subject.resume("a")
    assert len(subject.evaluator.fire([request]).jobs) == 1


def test_a_removed_row_fires_nothing(subject: Subject) -> None:
    start = minute(subject, 3)
    subject.put("a", cursor=start)
    subject.delete("a")
    result = subject.evaluator.fire([FireRequest("a", start, [start + timedelta(minutes=1)])])
    assert (result.jobs, result.failed) == ([], {})


def test_a_request_without_fire_times_fires_nothing(subject: Subject) -> None:
    start = minute(subject, 3)
    subject.put("a", cursor=start)
    assert subject.evaluator.fire([FireRequest("a", start, [])]).jobs == []
    assert subject.row("a").last_enqueued_at == start


def test_a_fire_dated_past_the_database_clock_and_its_tolerance_is_refused(
        subject: Subject) -> None:
    start = minute(subject, 3)
    subject.put("a", cursor=start)
    subject.put("b", cursor=start)
    ahead = subject.now() + timedelta(seconds=subject.store.clock_tolerance + 3600)
    result = subject.evaluator.fire([FireRequest("a", start, [start + timedelta(minutes=1), ahead]),
                                 FireRequest("b", start, [start + timedelta(minutes=1)])])
    assert result.ahead == ["a"] and [j.name for j in result.jobs] == ["b"]
    assert subject.fired("a") == [] and subject.row("a").last_enqueued_at == start


def test_a_coalesced_fire_fires_once_and_moves_the_cursor_past_what_it_left_out(
        subject: Subject) -> None:
    start = minute(subject, 10)
    subject.put("a", cursor=start)
    latest = start + timedelta(minutes=9)
    left_out = Coalesced(start + timedelta(minutes=1), start + timedelta(minutes=8), 8)
    result = subject.evaluator.fire([FireRequest("a", start, [latest], coalesced=left_out)])
    assert [j.fire_time for j in result.jobs] == [stored_text(latest)]
    assert subject.row("a").last_enqueued_at == latest


def test_a_run_limit_fires_the_runs_left_then_retires_the_schedule(subject: Subject) -> None:
    start = minute(subject, 10)
    subject.put("a", "@every 60s | runs=3", cursor=start)
    times = [start + timedelta(minutes=k) for k in range(1, 5)]
    first = subject.evaluator.fire([FireRequest("a", start, times[:2], limited=True)])
    assert len(first.jobs) == 2 and subject.row("a").paused_at is None
    second = subject.evaluator.fire([FireRequest("a", times[1], times[2:], limited=True)])
    # One run was left: the fire that uses it up retires the schedule, its cursor at
    # that fire.
    assert [j.fire_time for j in second.jobs] == [stored_text(times[2])]
    row = subject.row("a")
    assert row.last_enqueued_at == times[2] and row.paused_at is not None
    assert subject.paused_by("a") == RETIRED_BY
    assert subject.fired("a") == [stored_text(t) for t in times[:3]]


def test_a_limited_schedule_with_no_run_left_is_retired_without_a_fire(
        subject: Subject) -> None:
    start = minute(subject, 10)
    subject.put("a", "@every 60s | runs=1", cursor=start)
    at = [start + timedelta(minutes=1)]
    assert len(subject.evaluator.fire([FireRequest("a", start, at, limited=True)]).jobs) == 1
    subject.resume("a")  # by hand, though no run is left
    later = [start + timedelta(minutes=2)]
    assert subject.evaluator.fire([FireRequest("a", at[0], later, limited=True)]).jobs == []
    row = subject.row("a")
    assert row.last_enqueued_at == at[0] and row.paused_at is not None
    assert subject.paused_by("a") == RETIRED_BY


def test_a_request_marked_limited_fires_every_time_when_its_row_has_no_run_limit(
        subject: Subject) -> None:
    start = minute(subject, 10)
    subject.put("a", "@every 60s", cursor=start)
    times = [start + timedelta(minutes=k) for k in (1, 2, 3)]
    result = subject.evaluator.fire([FireRequest("a", start, times, limited=True)])
    assert len(result.jobs) == 3 and subject.row("a").paused_at is None


def test_fires_older_than_the_window_are_recorded_skipped_and_passed_by_the_cursor(
        subject: Subject) -> None:
    start = minute(subject, 10)
    subject.put("a", cursor=start, missed_fire_policy="catch_up")
    subject.put("b", cursor=start, missed_fire_policy="catch_up")
    old = Windowed(start + timedelta(minutes=1), start + timedelta(minutes=7), 7, 180.0)
    times = [start + timedelta(minutes=k) for k in (8, 9)]
    result = subject.evaluator.fire([FireRequest("a", start, times, windowed=old),
                                     FireRequest("b", start, [], windowed=old)])
    # A schedule with nothing left to fire moves its cursor past the skipped ones alone.
    assert sorted(j.name for j in result.windowed) == ["a", "b"]
    assert [j.name for j in result.jobs] == ["a", "a"] and result.skipped == []
    assert subject.fired("a") == [stored_text(t) for t in times] and subject.fired("b") == []
    assert subject.row("a").last_enqueued_at == times[-1]
    assert subject.row("b").last_enqueued_at == old.last
    expected = ("skipped", old.first, old.last, 7, old.reason)
    assert subject.occurrences("a") == subject.occurrences("b") == [expected]
    assert old.reason.startswith("catch-up window")


def test_a_window_skip_whose_cursor_moved_meanwhile_records_nothing(subject: Subject) -> None:
    start = minute(subject, 10)
    subject.put("a", cursor=start)
    old = Windowed(start - timedelta(minutes=5), start - timedelta(minutes=1), 5, 60.0)
    result = subject.evaluator.fire([FireRequest("a", start - timedelta(minutes=6), [],
                                                 windowed=old)])
    assert result.windowed == [] and subject.occurrences("a") == []
    assert subject.row("a").last_enqueued_at == start


def test_a_jittered_job_runs_at_its_run_time_and_keeps_its_fire_time(
        subject: Subject) -> None:
    start = minute(subject, 3)
    subject.put("a", cursor=start, missed_fire_policy="catch_up")
    subject.put("b", cursor=start)
    times = [start + timedelta(minutes=1), start + timedelta(minutes=2)]
    later = subject.now() + timedelta(minutes=30)
    runs = [times[0] + timedelta(seconds=7, microseconds=250), later]
    result = subject.evaluator.fire([FireRequest("a", start, times, run_ats=runs),
                                     FireRequest("b", start, times[:1])])
    assert len(result.jobs) == 3
    assert subject.fired("a") == [stored_text(t) for t in times]
    assert subject.run_ats("a") == runs
    [plain] = subject.run_ats("b")
    assert plain <= subject.now() + timedelta(seconds=1)
    states = subject.states("a")
    if states is not None:  # A job not yet due waits; one already due is available.
        assert states == ["available", "scheduled"]
        assert subject.states("b") == ["available"]


# -- syncing a configuration -------------------------------------------------------------------


def sync(subject: Subject, *rows: dict[str, Any], deployment: str = "proj") -> SyncResult:
    return subject.schedules.sync(SyncBatch.encode(list(rows), deployment))


def test_sync_inserts_rows_with_the_cursor_at_the_second_of_registration(
        subject: Subject) -> None:
    before = subject.now().replace(microsecond=0)
    result = sync(subject, definition("a"), definition("b"))
    assert (result.inserted, result.updated, result.unchanged) == (2, 0, 0)
    a = subject.row("a")
    assert a.last_enqueued_at is not None and a.last_enqueued_at >= before
    assert a.last_enqueued_at.microsecond == 0
    assert a.last_enqueued_at == a.created_at.replace(microsecond=0)


def test_an_unchanged_resync_writes_nothing(subject: Subject) -> None:
    sync(subject, definition("a"), definition("b"))
    first = subject.row("a")
    result = sync(subject, definition("a"), definition("b"))
    assert (result.inserted, result.updated, result.unchanged) == (0, 0, 2)
    assert subject.row("a") == first


def test_a_resync_that_changes_the_calendar_moves_the_cursor_forward(
        subject: Subject) -> None:
    sync(subject, definition("a"), definition("b"))
    old = minute(subject, 60)
    subject.edit("a", last_enqueued_at=old)
    subject.edit("b", last_enqueued_at=old)
    before = subject.now().replace(microsecond=0)
    result = sync(subject, definition("a", "*/5 * * * *"),
                  definition("b", timezone="Europe/Paris"))
    assert (result.inserted, result.updated, result.unchanged) == (0, 2, 0)
    for name in ("a", "b"):
        row = subject.row(name)
        assert row.last_enqueued_at >= before, name
    assert subject.row("b").timezone == "Europe/Paris"


def test_a_resync_that_changes_only_the_job_keeps_the_cursor_and_bumps_updated_at(
        subject: Subject) -> None:
    sync(subject, definition("a"))
    old = minute(subject, 60)
    subject.edit("a", last_enqueued_at=old)
    first = subject.row("a")
    result = sync(subject, definition("a", kind="app.tock", args={"args": [1], "kwargs": {}}))
    assert (result.inserted, result.updated, result.unchanged) == (0, 1, 0)
    row = subject.row("a")
    assert row.last_enqueued_at == old and row.updated_at > first.updated_at


def test_a_resync_keeps_the_pause(subject: Subject) -> None:
    sync(subject, definition("a"))
    subject.pause("a")
    sync(subject, definition("a", "*/5 * * * *"))
    assert subject.row("a").paused_at is not None


def test_sync_leaves_a_row_written_at_run_time_alone(subject: Subject) -> None:
    sync(subject, definition("a"), definition("b"))
    subject.take_at_runtime("a")
    assert subject.schedules.runtime_owned_names(["a", "b", "c"]) == ["a"]
    result = sync(subject, definition("a", "*/5 * * * *"), definition("b"))
    assert (result.inserted, result.updated, result.unchanged) == (0, 0, 2)
    assert subject.row("a").cron_expr == "* * * * *"


def test_orphans_are_the_deployments_registered_names_its_configuration_left(
        subject: Subject) -> None:
    sync(subject, definition("a"), definition("b"), definition("c"), definition("d"))
    sync(subject, definition("other"), deployment="elsewhere")
    subject.take_at_runtime("c")  # no configuration owns it now
    subject.delete("d")  # by hand: its registration is still ours, and says so
    assert subject.schedules.orphaned_names("proj", ["a"]) == ["b", "d"]
    assert subject.schedules.orphaned_names("elsewhere", []) == ["other"]


def test_a_recorded_configuration_is_in_force_until_a_definition_changes(
        subject: Subject) -> None:
    rows = [definition("a"), definition("b")]
    result = subject.schedules.sync_all([SyncBatch.encode(rows, "proj")])
    subject.schedules.record_config("proj", "digest-1", result)
    assert subject.schedules.config_in_force("proj", "digest-1")
    assert not subject.schedules.config_in_force("proj", "digest-2")
    assert not subject.schedules.config_in_force("elsewhere", "digest-1")
    # Fires and pauses leave the definitions alone.
    start = subject.row("a").last_enqueued_at
    subject.evaluator.fire([FireRequest("a", start, [start + timedelta(seconds=1)])])
    subject.pause("b")
    assert subject.schedules.config_in_force("proj", "digest-1")
    subject.edit("a", cron_expr="*/5 * * * *")
    assert not subject.schedules.config_in_force("proj", "digest-1")


def test_a_configuration_with_a_row_taken_at_run_time_is_no_longer_in_force(
        subject: Subject) -> None:
    rows = [definition("a"), definition("b")]
    result = subject.schedules.sync_all([SyncBatch.encode(rows, "proj")])
    subject.schedules.record_config("proj", "digest-1", result)
    subject.take_at_runtime("b")
    assert not subject.schedules.config_in_force("proj", "digest-1")


def test_a_configuration_whose_row_was_deleted_is_no_longer_in_force(
        subject: Subject) -> None:
    rows = [definition("a"), definition("b")]
    result = subject.schedules.sync_all([SyncBatch.encode(rows, "proj")])
    subject.schedules.record_config("proj", "digest-1", result)
    subject.delete("b")
    assert not subject.schedules.config_in_force("proj", "digest-1")


# -- the cluster --------------------------------------------------------------------------------


def test_a_heartbeat_lists_the_beat_until_it_is_gone(subject: Subject) -> None:
    now = subject.now()
    beat = {"identity": "host:1:x", "host": "host", "pid": 1, "deployment": "proj",
            "lock_key": 42, "role": "leader", "started_at": now, "leader_since": now,
            "last_lag_ms": 3, "publishes": False, "clock_skew_ms": 0}
    subject.cluster.heartbeat(**beat)
    subject.cluster.heartbeat(**{**beat, "role": "standby", "leader_since": None})
    [listed] = subject.cluster.beats()
    assert (listed["identity"], listed["role"], listed["deployment"]) == (
        "host:1:x", "standby", "proj")
    subject.cluster.beat_gone("host:1:x")
    assert subject.cluster.beats() == []
