"""``Operations.explain`` against a real database, in both layouts, on records made by
the real code paths: the engine's pass and the fire statement (fires, coalesces, overlap
skips, buffer_one's held fires, the catch-up window's skips, jitter's run times), manual
triggers, backfills, pauses, and the workers' reports (outcomes, the automatic pause
after failures)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from awa_beat._db.database import Database, connect
from awa_beat._db.records import RETIRED_BY, FireRequest
from awa_beat._engine.engine import Engine
from awa_beat._ops.operations import Operations
from awa_beat._schedules.fire_times import calendar_for, run_times
from awa_beat._schedules.spec import spec_from_entry
from awa_beat._testing import FAKE_CLOCK_TOLERANCE, FakeClock
from awa_beat.errors import NotFound, ValidationError
from awa_beat.outcomes import Report, outcome_params

pytestmark = pytest.mark.integration
UTC = timezone.utc
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
TEXT = "%Y-%m-%d %H:%M:%S+00"
MINUTE = timedelta(minutes=1)


@pytest.fixture
def store(db_url: str) -> Iterator[Database]:
    with Database(db_url) as store:
        store.clock_tolerance = 10 ** 9  # the clock is fake, and years behind the server's
        yield store


def register(store: Database, name: str, schedule: Any = 60.0, *, cursor: datetime = T0,
             dispatch: str = "celery", **awa: Any) -> None:
    """Register ``name`` as beat's sync does, then date it as if created a day before
    ``cursor`` and fired up to it."""
    spec = spec_from_entry(name, {"task": "t.run", "schedule": schedule,
                                  "options": {"awa_beat": {"dispatch": dispatch, **awa}}})
    store.schedules.sync([spec.row("proj")], deployment="proj")
    with connect(store.conninfo) as c:
        c.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s, created_at = %s "
                  "WHERE name = %s", (cursor, cursor - timedelta(days=1), name))


def explain(store: Database, name: str, at: datetime, now: datetime) -> Any:
    # Not closed: closing the operations would close the fixture's store.
    return Operations(store, clock=FakeClock(now)).explain(name, at)


def finish(store: Database, name: str, fire_time: datetime, state: str = "succeeded",
           error: str | None = None) -> None:
    from awa_beat._bridge.messages import fire_task_id

    text = fire_time.strftime(TEXT)
    store.outcomes.record(outcome_params([Report(
        fire_task_id(name, text, 0), name, text, None, state,
        finished_at=datetime.now(UTC), runtime=0.5, error=error)]))


def test_fired_with_its_job_and_outcome_through_the_engine(store: Database) -> None:
    register(store, "minutely")
    now = T0 + MINUTE + timedelta(seconds=2)
    Engine(store.evaluator, clock=FakeClock(now)).run_pass()
    finish(store, "minutely", T0 + MINUTE, "failed", "ValueError: boom")
    found = explain(store, "minutely", T0 + MINUTE + timedelta(milliseconds=700), now)
    assert found.kind == "fired" and found.fire_time == T0 + MINUTE
    (job,) = found.jobs
    assert (job.kind, job.outcome, job.error) == ("fired", "failed", "ValueError: boom")
    assert f"job {job.job_id}" in found.summary and "failed" in found.summary


def test_awa_dispatch_reads_the_jobs_state(store: Database) -> None:
    register(store, "awa-run", dispatch="awa")
    now = T0 + MINUTE
    Engine(store.evaluator, clock=FakeClock(now)).run_pass()
    with connect(store.conninfo) as c:
        c.execute("UPDATE awa.jobs SET state = 'completed', finalized_at = now()")
    found = explain(store, "awa-run", T0 + MINUTE, now)
    assert found.kind == "fired" and found.jobs[0].outcome == "succeeded"
    assert found.jobs[0].state == "completed"


def test_skipped_by_overlap(store: Database) -> None:
    register(store, "nightly", overlap="skip", max_runtime=600)
    t1, t2 = T0 + MINUTE, T0 + 2 * MINUTE
    store.evaluator.fire([FireRequest("nightly", T0, [t1])])
    store.evaluator.fire([FireRequest("nightly", t1, [t2])])  # t1 has not finished
    found = explain(store, "nightly", t2, t2)
    assert found.kind == "skipped" and "overlap" in found.summary
    assert found.occurrences[0].reason.startswith("overlap")


def test_skipped_by_the_catch_up_window_and_run_late_by_jitter_through_the_engine(
        store: Database) -> None:
    register(store, "windowed", catch_up_window=120, jitter=20,
             missed_fire_policy="catch_up")
    now = T0 + 10 * MINUTE + timedelta(seconds=5)
    Engine(store.evaluator, clock=FakeClock(now)).run_pass()
    old = explain(store, "windowed", T0 + 3 * MINUTE, now)
    assert old.kind == "skipped" and "older than the catch-up window" in old.summary
    assert (old.occurrences[0].fire_time, old.occurrences[0].last_fire_time) == (
        T0 + MINUTE, T0 + 8 * MINUTE)
    recent = explain(store, "windowed", T0 + 9 * MINUTE, now)
    assert recent.kind == "fired"
    calendar = calendar_for(store.schedules.get("windowed").cron_expr, "UTC")
    assert [recent.jobs[0].run_at] == run_times("windowed", calendar, [T0 + 9 * MINUTE])
    assert any("(jitter)" in d for d in recent.details)
    ahead = explain(store, "windowed", T0 + 20 * MINUTE, now)
    assert ahead.kind == "will_fire"
    assert [ahead.run_at] == run_times("windowed", calendar, [T0 + 20 * MINUTE])


def test_coalesced_through_the_engine(store: Database) -> None:
    register(store, "minutely")
    now = T0 + 10 * MINUTE + timedelta(seconds=5)
    Engine(store.evaluator, clock=FakeClock(now)).run_pass()
    found = explain(store, "minutely", T0 + 4 * MINUTE, now)
    assert found.kind == "coalesced" and "9 fire times" in found.summary
    assert found.occurrences[0].last_fire_time == T0 + 9 * MINUTE
    assert explain(store, "minutely", T0 + 10 * MINUTE, now).kind == "fired"


def test_triggered_by_hand(store: Database) -> None:
    register(store, "minutely")
    ops = Operations(store)
    job = ops.trigger("minutely")
    created = ops.history("minutely")[0].created_at
    found = ops.explain("minutely", created)
    assert created is not None
    assert found.kind == "triggered" and found.jobs[0].job_id == job


def test_backfilled_through_the_backfill(store: Database) -> None:
    register(store, "minutely")
    t = T0 - 30 * MINUTE
    ops = Operations(store, clock=FakeClock(T0))
    ops.backfill("minutely", t, t + MINUTE, actor="ops")
    found = explain(store, "minutely", t, T0)
    (job,) = found.jobs
    assert found.kind == "backfilled" and job.kind == "backfilled" and job.present
    assert f"was backfilled (job {job.job_id})" in found.summary
    with connect(store.conninfo) as c:  # as Awa's retention prunes a finished job
        c.execute("DELETE FROM awa.jobs WHERE (metadata ->> 'cron_fire_time')::timestamptz"
                  " = %s", (t + MINUTE,))
    gone = explain(store, "minutely", t + MINUTE, T0)
    assert gone.kind == "backfilled" and not gone.jobs[0].present
    assert "has since been pruned" in gone.summary


def test_buffered_and_skipped_by_buffer_one_through_the_fire_statement(store: Database
                                                                     ) -> None:
    register(store, "nightly", overlap="buffer_one", max_runtime=600)
    t1, t2, t3 = (T0 + k * MINUTE for k in (1, 2, 3))
    store.evaluator.fire([FireRequest("nightly", T0, [t1])])
    store.evaluator.fire([FireRequest("nightly", t1, [t2])])  # held: t1 runs
    store.evaluator.fire([FireRequest("nightly", t2, [t3])])  # skipped: one is held
    waiting = explain(store, "nightly", t2, t3)
    assert waiting.kind == "buffered" and "no job has been made" in waiting.summary
    skipped = explain(store, "nightly", t3, t3)
    assert skipped.kind == "skipped" and "held already (buffer_one)" in skipped.summary
    finish(store, "nightly", t1)
    (started,) = store.evaluator.fire_buffered().jobs
    found = explain(store, "nightly", t2, t3)
    assert found.kind == "buffered" and found.jobs[0].job_id == started.job_id
    assert "fired when the run before it finished" in found.summary
    assert [o.kind for o in found.occurrences] == ["buffered"]


def test_paused_by_whom_with_the_note(store: Database) -> None:
    register(store, "minutely")
    ops = Operations(store)
    ops.pause("minutely", "oncall", "vendor outage")
    found = explain(store, "minutely", T0 + 5 * MINUTE, T0)
    assert found.kind == "paused"
    assert "oncall" in found.summary and "vendor outage" in found.summary


def test_paused_automatically_after_failures_through_the_workers_reports(store: Database
                                                                        ) -> None:
    register(store, "flaky", pause_after_failures=3)
    for k in (1, 2, 3):  # three failed runs in a row, as the workers report them
        finish(store, "flaky", T0 + k * MINUTE, "failed", f"ValueError: boom {k}")
    past = explain(store, "flaky", T0 + 5 * MINUTE, T0 + 10 * MINUTE)
    assert past.kind == "paused" and "did not fire" in past.summary
    assert "paused automatically by awa-beat" in past.summary
    assert "paused after 3 consecutive failures" in past.summary
    assert "ValueError: boom 3" in past.summary


def test_retired_after_its_run_limit(store: Database) -> None:
    register(store, "twice", max_runs=1)
    now = T0 + MINUTE
    Engine(store.evaluator, clock=FakeClock(now)).run_pass()
    with connect(store.conninfo) as c:
        assert c.execute("SELECT paused_by FROM awa.cron_jobs").fetchone()[0] == RETIRED_BY
    assert explain(store, "twice", T0 + MINUTE, now).kind == "fired"
    assert explain(store, "twice", T0 + 3 * MINUTE, now).kind == "retired"


def test_before_created_no_record_due_will_fire_and_between(store: Database) -> None:
    register(store, "minutely")
    now = T0 + MINUTE
    Engine(store.evaluator, clock=FakeClock(now)).run_pass()
    before = explain(store, "minutely", T0 - timedelta(days=2), now)
    assert before.kind == "before_created"
    with connect(store.conninfo) as c:
        c.execute("DELETE FROM awa.jobs")  # as a retention would
    pruned = explain(store, "minutely", T0 + MINUTE, now)
    assert pruned.kind == "no_record" and "pruned" in pruned.summary
    due = explain(store, "minutely", T0 + 2 * MINUTE, T0 + 5 * MINUTE)
    assert due.kind == "due"
    assert explain(store, "minutely", T0 + 9 * MINUTE, now).kind == "will_fire"
    between = explain(store, "minutely", T0 + MINUTE + timedelta(seconds=30), now)
    assert between.kind == "not_a_fire_time"
    assert (between.previous, between.next) == (T0 + MINUTE, T0 + 2 * MINUTE)


def test_out_of_bounds(store: Database) -> None:
    register(store, "later", start_time="2026-02-01T00:00:00Z",
             end_time="2026-03-01T00:00:00Z")
    found = explain(store, "later", T0 + MINUTE, T0)
    assert found.kind == "out_of_bounds" and "start_time" in found.summary
    after = explain(store, "later", datetime(2026, 4, 1, tzinfo=UTC), T0)
    assert after.kind == "out_of_bounds" and "end_time" in after.summary


def test_errors(store: Database) -> None:
    register(store, "minutely")
    ops = Operations(store)
    with pytest.raises(NotFound):
        ops.explain("nope", T0)
    with pytest.raises(ValidationError, match="'at'"):
        ops.explain("minutely", datetime(2026, 1, 5, 9, 0))
    with pytest.raises(ValidationError, match="from 1970 to 9999"):
        ops.explain("minutely", datetime(1, 1, 1, tzinfo=UTC))


def test_explain_writes_nothing(store: Database) -> None:
    register(store, "minutely")
    with connect(store.conninfo) as c:
        before = c.execute("SELECT updated_at, last_enqueued_at FROM awa.cron_jobs"
                           ).fetchall()
    explain(store, "minutely", T0 + MINUTE, T0)
    with connect(store.conninfo) as c:
        assert c.execute("SELECT updated_at, last_enqueued_at FROM awa.cron_jobs"
                         ).fetchall() == before
    assert FAKE_CLOCK_TOLERANCE  # the store fixture's tolerance is set on purpose
