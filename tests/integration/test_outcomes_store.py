"""Outcomes in PostgreSQL: the overlap check and the coalesce record inside the fire
statement, the workers' reports and claims, history and the overdue rules' data."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from awa_beat._db.database import Database, connect
from awa_beat._db.records import Coalesced, FireRequest
from awa_beat._engine.engine import Engine
from awa_beat._ops.operations import Operations
from awa_beat._schedules.spec import spec_from_entry
from awa_beat._testing import FakeClock
from awa_beat.outcomes import Report, merge, outcome_params

pytestmark = pytest.mark.integration
UTC = timezone.utc
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
TEXT = "%Y-%m-%d %H:%M:%S+00"


def register(store: Database, name: str, dispatch: str = "celery", **awa: Any) -> None:
    spec = spec_from_entry(name, {"task": "t.run", "schedule": 60.0,
                                  "options": {"awa_beat": {"dispatch": dispatch, **awa}}})
    store.schedules.sync([spec.row("proj")], deployment="proj")
    with connect(store.conninfo) as c:
        c.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s WHERE name = %s", (T0, name))


def fire(store: Database, name: str, expected: datetime, *times: datetime,
         coalesced: Coalesced | None = None) -> tuple[list[int], list[str]]:
    result = store.evaluator.fire([FireRequest(name, expected, list(times), coalesced=coalesced)])
    return [j.job_id for j in result.jobs], [j.fire_time for j in result.skipped]


def finish(store: Database, name: str, fire_time: datetime, state: str = "succeeded") -> None:
    from awa_beat._bridge.messages import fire_task_id

    text = fire_time.strftime(TEXT)
    store.outcomes.record(outcome_params([Report(
        fire_task_id(name, text, 0), name, text, None, state,
        finished_at=datetime.now(UTC), runtime=0.5)]))


def test_overlap_skip_fires_nothing_while_the_last_run_is_unfinished(store: Database) -> None:
    register(store, "nightly", overlap="skip", max_runtime=600)
    t1, t2, t3 = (T0 + timedelta(minutes=k) for k in (1, 2, 3))
    assert fire(store, "nightly", T0, t1)[0]
    jobs, skipped = fire(store, "nightly", t1, t2)  # t1 has not reported back
    assert jobs == [] and skipped == [t2.strftime(TEXT)]
    finish(store, "nightly", t1)
    jobs, skipped = fire(store, "nightly", t2, t3)
    assert len(jobs) == 1 and skipped == []
    with Operations(store) as ops:
        kinds = [(o.kind, o.at) for o in ops.occurrences("nightly")]
    assert kinds == [("fired", t3), ("skipped", t2), ("fired", t1)]


def test_overlap_skip_is_bounded_by_max_runtime(store: Database) -> None:
    register(store, "hung", overlap="skip", max_runtime=1)
    t1, t2 = T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)
    assert fire(store, "hung", T0, t1)[0]
    with connect(store.conninfo) as c:
        c.execute("UPDATE awa_beat.last_runs SET fired_at = now() - interval '5 s'")
    assert fire(store, "hung", t1, t2)[0]  # the run that never reported no longer blocks


def test_overlap_skip_fires_one_of_several_catch_up_fires(store: Database) -> None:
    register(store, "burst", overlap="skip", missed_fire_policy="catch_up")
    times = [T0 + timedelta(minutes=k) for k in (1, 2, 3)]
    jobs, skipped = fire(store, "burst", T0, *times)
    assert len(jobs) == 1 and len(skipped) == 2


def test_allow_is_unchanged_and_records_no_run(store: Database) -> None:
    register(store, "plain")
    jobs, _ = fire(store, "plain", T0, T0 + timedelta(minutes=1))
    jobs2, _ = fire(store, "plain", T0 + timedelta(minutes=1), T0 + timedelta(minutes=2))
    assert len(jobs) == len(jobs2) == 1
    with connect(store.conninfo) as c:
        assert c.execute("SELECT count(*) FROM awa_beat.last_runs").fetchone()[0] == 0


def test_awa_dispatch_overlap_reads_awa_jobs_state(store: Database) -> None:
    register(store, "awa-run", dispatch="awa", overlap="skip")
    t1, t2, t3 = (T0 + timedelta(minutes=k) for k in (1, 2, 3))
    (job,), _ = fire(store, "awa-run", T0, t1)
    assert fire(store, "awa-run", t1, t2) == ([], [t2.strftime(TEXT)])  # available
    with connect(store.conninfo) as c:
        c.execute("UPDATE awa.jobs SET state = 'completed' WHERE id = %s", (job,))
    assert len(fire(store, "awa-run", t2, t3)[0]) == 1


def test_the_engine_records_fires_a_coalesce_left_out(store: Database) -> None:
    register(store, "minutely")
    clock = FakeClock(T0 + timedelta(minutes=10, seconds=5))
    engine = Engine(store.evaluator, clock=clock)
    engine.run_pass()
    with Operations(store) as ops:
        found = ops.occurrences("minutely")
    assert [o.kind for o in found] == ["fired", "coalesced"]
    left_out = found[1]
    assert (left_out.at, left_out.last_fire_time, left_out.count) == (
        T0 + timedelta(minutes=1), T0 + timedelta(minutes=9), 9)


def test_reports_merge_into_one_row_and_claims_refuse_a_second_run(store: Database) -> None:
    now = datetime.now(UTC)
    start = Report("tid", "s", "2026-01-05 09:01:00+00", 7, "started", 0, now, worker="w1")
    end = Report("tid", "s", "2026-01-05 09:01:00+00", 7, "failed", 0, finished_at=now,
                 runtime=1.5, error="ValueError: boom")
    (merged,) = merge([start, end])
    assert (merged.state, merged.started_at, merged.worker) == ("failed", now, "w1")
    store.outcomes.record(outcome_params([merged]))
    run = {"task_id": "tid2", "schedule": "s", "fire_time": None, "job_id": 8,
           "retries": 0, "started_at": now, "worker": "w1"}
    assert store.outcomes.claim(**run)
    assert not store.outcomes.claim(**run)  # the duplicate delivery
    store.outcomes.record(outcome_params([Report("tid2", "s", None, 8, "retried")]))
    assert store.outcomes.claim(**{**run, "retries": 1})  # a retry runs again
    with connect(store.conninfo) as c:
        rows = {r[0]: r[1:] for r in c.execute(
            "SELECT task_id, state, duplicates, error FROM awa_beat.outcomes")}
    assert rows["tid"] == ("failed", 0, "ValueError: boom")
    assert rows["tid2"] == ("started", 1, None)
    assert store.outcomes.purge(timedelta(days=1)) == 0


def test_overdue_lists_missed_failed_and_late_schedules(store: Database) -> None:
    register(store, "ok")
    register(store, "failing")
    register(store, "late", deadline=30)
    fired = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    with connect(store.conninfo) as c:
        c.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (fired,))
    register(store, "missed")  # its cursor is long past
    finish(store, "failing", fired, "failed")
    finish(store, "ok", fired)
    with Operations(store, clock=lambda: fired + timedelta(seconds=45)) as ops:
        found = {o.name: o.reasons for o in ops.overdue()}
    assert set(found) == {"failing", "late", "missed"}
    assert found["failing"][0].startswith("failed")
    assert found["late"][0].startswith("deadline")
    assert found["missed"][0].startswith("missed")


def test_history_status_and_doctor_commands_show_occurrences_and_overdue(store: Database
                                                                         ) -> None:
    import json

    from click.testing import CliRunner

    from awa_beat._cli import main

    register(store, "nightly", overlap="skip")
    t1, t2 = T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)
    fire(store, "nightly", T0, t1)
    fire(store, "nightly", t1, t2)
    finish(store, "nightly", t1, "failed")
    url = store.conninfo

    def cli(*args: str) -> Any:
        return CliRunner().invoke(main, [*args, "--database-url", url],
                                  catch_exceptions=False)

    shown = json.loads(cli("history", "nightly", "--json").output)
    assert [(o["kind"], o["outcome"]) for o in shown] == [("skipped", None),
                                                          ("fired", "failed")]
    assert shown[1]["runtime"] == 0.5 and shown[1]["fire_time"] == t1.isoformat()
    table = cli("history", "nightly").output
    assert "overlap: the previous run had not finished" in table and "0.500 s" in table
    status = json.loads(cli("status", "--json").output)
    assert [o["name"] for o in status["overdue"]] == ["nightly"]
    doctor = cli("doctor")
    assert doctor.exit_code == 1 and "1 overdue schedule(s)" in doctor.output
    assert "nightly: " in doctor.output


def test_metrics_sources_report_overdue_and_the_workers_outcomes(store: Database) -> None:
    from types import SimpleNamespace

    from awa_beat._beat.metrics import run_report_sources

    register(store, "ok")
    register(store, "failing")
    fired = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    with connect(store.conninfo) as c:
        c.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (fired,))
    finish(store, "failing", fired, "failed")
    finish(store, "ok", fired)
    engine = SimpleNamespace(stats=SimpleNamespace(outcomes={"ok": "fired", "other": "fired"}))
    ops = Operations(store, clock=lambda: fired + timedelta(seconds=45))
    sources = run_report_sources(ops.run_report, SimpleNamespace(engine=engine))
    assert sources["overdue"]() == 1
    # The workers' word first; beat's own outcome of its last fire where there is none.
    assert sources["outcomes"](["ok", "failing", "other", "absent"]) == {
        "ok": "succeeded", "failing": "failed", "other": "fired"}


# -- overlap buffer_one ----------------------------------------------------------------------


def fired_jobs(store: Database, name: str) -> list[dict[str, Any]]:
    with connect(store.conninfo) as c:
        return [r[0] for r in c.execute(
            "SELECT metadata || jsonb_build_object('id', id) FROM awa.jobs"
            " WHERE metadata ->> 'cron_name' = %s ORDER BY id", (name,))]


def held(store: Database, name: str) -> Any:
    with connect(store.conninfo) as c:
        row = c.execute("SELECT buffered_fire_time, job_id FROM awa_beat.last_runs"
                        " WHERE name = %s", (name,)).fetchone()
    return row


def test_buffer_one_holds_one_fire_and_starts_it_when_the_run_finishes(store: Database
                                                                      ) -> None:
    register(store, "nightly", overlap="buffer_one", max_runtime=600)
    t1, t2, t3, t4 = (T0 + timedelta(minutes=k) for k in (1, 2, 3, 4))
    (first,), _ = fire(store, "nightly", T0, t1)
    result = store.evaluator.fire([FireRequest("nightly", t1, [t2])])
    assert result.jobs == [] and result.skipped == []
    assert [j.fire_time for j in result.buffered] == [t2.strftime(TEXT)]
    assert fire(store, "nightly", t2, t3) == ([], [t3.strftime(TEXT)])  # one is held
    assert held(store, "nightly") == (t2, first)
    started = store.evaluator.fire_buffered()
    assert (started.jobs, started.still_held) == ([], 1)  # t1 has not finished
    finish(store, "nightly", t1)
    started = store.evaluator.fire_buffered()
    assert [j.fire_time for j in started.jobs] == [t2.strftime(TEXT)]
    assert started.still_held == 0
    job = fired_jobs(store, "nightly")[-1]
    assert (job["cron_fire_time"], job["buffered"], job["id"]) == (
        t2.strftime(TEXT), True, started.jobs[0].job_id)
    assert held(store, "nightly") == (None, started.jobs[0].job_id)
    assert store.evaluator.fire_buffered().jobs == []  # exactly once
    # The held fire's job now blocks in turn: the next fire is held behind it.
    result = store.evaluator.fire([FireRequest("nightly", t3, [t4])])
    assert [j.fire_time for j in result.buffered] == [t4.strftime(TEXT)]
    with Operations(store) as ops:
        kinds = [(o.kind, o.at, o.reason) for o in ops.occurrences("nightly")]
    assert ("buffered", t2, "overlap buffer_one: held until the previous run finishes") in kinds
    assert ("skipped", t3, "overlap: a fire is held already (buffer_one)") in kinds
    assert ("fired", t2, None) in kinds


def test_buffer_one_runs_the_first_of_several_fires_holds_the_second_skips_the_rest(
        store: Database) -> None:
    register(store, "burst", overlap="buffer_one", missed_fire_policy="catch_up")
    times = [T0 + timedelta(minutes=k) for k in (1, 2, 3)]
    result = store.evaluator.fire([FireRequest("burst", T0, times)])
    assert [j.fire_time for j in result.jobs] == [times[0].strftime(TEXT)]
    assert [j.fire_time for j in result.buffered] == [times[1].strftime(TEXT)]
    assert [j.fire_time for j in result.skipped] == [times[2].strftime(TEXT)]
    assert held(store, "burst") == (times[1], result.jobs[0].job_id)


def test_buffer_one_starts_the_held_fire_once_max_runtime_passes(store: Database) -> None:
    register(store, "hung", overlap="buffer_one", max_runtime=1)
    t1, t2 = T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)
    fire(store, "hung", T0, t1)
    assert store.evaluator.fire([FireRequest("hung", t1, [t2])]).buffered
    assert store.evaluator.fire_buffered().jobs == []
    with connect(store.conninfo) as c:
        c.execute("UPDATE awa_beat.last_runs SET fired_at = now() - interval '5 s'")
    assert len(store.evaluator.fire_buffered().jobs) == 1


def test_buffer_one_on_awa_dispatch_reads_awa_jobs_and_keeps_a_paused_fire_held(
        store: Database) -> None:
    register(store, "awa-run", dispatch="awa", overlap="buffer_one")
    t1, t2 = T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)
    (job,), _ = fire(store, "awa-run", T0, t1)
    assert store.evaluator.fire([FireRequest("awa-run", t1, [t2])]).buffered
    with connect(store.conninfo) as c:
        c.execute("UPDATE awa.jobs SET state = 'completed' WHERE id = %s", (job,))
    with Operations(store) as ops:
        ops.pause("awa-run", by="ops")
        assert store.evaluator.fire_buffered().jobs == []  # held while paused
        ops.resume("awa-run")
        (started,) = store.evaluator.fire_buffered().jobs
    assert started.fire_time == t2.strftime(TEXT)


def test_two_replicas_starting_a_held_fire_at_once_give_it_one_job(store: Database) -> None:
    import threading

    register(store, "raced", overlap="buffer_one")
    t1, t2 = T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)
    fire(store, "raced", T0, t1)
    store.evaluator.fire([FireRequest("raced", t1, [t2])])
    finish(store, "raced", t1)
    statement = store.layout.statements["fire_buffered"]
    params = {"retired_by": "x"}
    second: list[Any] = []
    with connect(store.conninfo) as first:
        first.autocommit = False
        rows = first.execute(statement, params).fetchall()  # holds the row's lock
        assert len([r for r in rows if r[0] is not None]) == 1
        other = threading.Thread(target=lambda: second.append(
            store.evaluator.fire_buffered()))
        other.start()
        other.join(0.5)
        assert other.is_alive()  # waiting for the first one's lock
        first.commit()
        other.join(10)
    # The second started nothing. Its count of fires still held was read before the
    # first committed, so it may still count this one; its next look counts none.
    assert second[0].jobs == []
    assert store.evaluator.fire_buffered().still_held == 0
    assert len(fired_jobs(store, "raced")) == 2


def test_the_engine_starts_held_fires_and_looks_only_while_one_is_held(store: Database
                                                                       ) -> None:
    register(store, "minutely", overlap="buffer_one")
    clock = FakeClock(T0 + timedelta(minutes=1))
    calls: list[str] = []
    evaluator = store.evaluator
    real = evaluator.fire_buffered

    def counted() -> Any:
        calls.append("fire_buffered")
        return real()

    evaluator.fire_buffered = counted  # type: ignore[method-assign]
    engine = Engine(evaluator, clock=clock)
    engine.run_pass()  # fires T0+1m; the first pass looks once for held fires
    assert calls == ["fire_buffered"] and engine.firing.held_check_at is None
    clock.advance(minutes=1)
    engine.run_pass()  # held
    assert engine.stats.buffered == 1 and engine.firing.held_check_at is not None
    assert engine.wait() <= 2.0
    clock.advance(seconds=3)
    engine.run_pass()  # still running: looked, nothing started
    assert len(calls) == 2 and engine.stats.buffered_started == 0
    finish(store, "minutely", T0 + timedelta(minutes=1))
    clock.advance(seconds=3)
    engine.run_pass()
    assert engine.stats.buffered_started == 1 and engine.firing.held_check_at is None
    clock.advance(seconds=3)
    engine.run_pass()  # nothing held: no look
    assert len(calls) == 3
    assert [j["cron_fire_time"] for j in fired_jobs(store, "minutely")] == [
        (T0 + timedelta(minutes=k)).strftime(TEXT) for k in (1, 2)]


# -- pause after failures ---------------------------------------------------------------------


def pause_state(store: Database, name: str) -> tuple[Any, ...]:
    with connect(store.conninfo) as c:
        return c.execute(
            "SELECT c.paused_by, n.note FROM awa.cron_jobs c LEFT JOIN awa_beat.pause_notes n"
            " ON n.name = c.name AND n.paused_at = c.paused_at WHERE c.name = %s",
            (name,)).fetchone()


def report(store: Database, name: str, fire_time: datetime, state: str,
           error: str | None = None) -> list[tuple[str, str]]:
    from awa_beat._bridge.messages import fire_task_id

    text = fire_time.strftime(TEXT)
    return store.outcomes.record(outcome_params([Report(
        fire_task_id(name, text, 0), name, text, None, state,
        finished_at=datetime.now(UTC), runtime=0.1, error=error)]))


def test_pause_after_failures_pauses_after_n_in_a_row_and_notes_the_last_error(
        store: Database) -> None:
    register(store, "flaky", pause_after_failures=3)
    register(store, "other")  # fails without the option: never paused
    t = [T0 + timedelta(minutes=k) for k in range(1, 8)]
    assert report(store, "flaky", t[0], "failed", "ValueError: one") == []
    assert report(store, "flaky", t[1], "failed", "ValueError: two") == []
    assert report(store, "flaky", t[2], "succeeded") == []  # a success resets
    assert report(store, "flaky", t[3], "failed", "ValueError: a") == []
    assert report(store, "flaky", t[4], "failed", "ValueError: b") == []
    assert pause_state(store, "flaky") == (None, None)
    long_error = "RuntimeError: " + "x" * 1000
    ((name, note),) = report(store, "flaky", t[5], "failed", long_error)
    assert name == "flaky"
    assert note.startswith("paused after 3 consecutive failures; last error: RuntimeError: x")
    assert note.endswith("...") and len(note) < 400
    assert pause_state(store, "flaky") == ("awa-beat", note)
    for k in range(4):
        assert report(store, "other", t[k], "failed", "E") == []
    with Operations(store) as ops:
        (entry,) = [e for e in ops.audit_log() if e.schedule == "flaky"]
        assert (entry.actor, entry.action, entry.detail["note"]) == ("awa-beat", "pause", note)
        assert ops.get("other").row.paused_at is None
        # Resumed by an operator: the failures before count no more.
        ops.resume("flaky")
        assert report(store, "flaky", t[6], "failed", "E") == []
        assert pause_state(store, "flaky") == (None, None)


def test_pause_after_failures_sees_a_concurrent_writers_failures(store: Database) -> None:
    import threading

    register(store, "raced", pause_after_failures=2)
    t1, t2 = T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)
    with connect(store.conninfo) as first:
        first.autocommit = False
        first.execute(queries_of(store)["lock_failure_guards"], {"names": ["raced"]})
        paused: list[Any] = []
        other = threading.Thread(target=lambda: paused.append(
            report(store, "raced", t2, "failed", "E2")))
        other.start()
        other.join(0.5)
        assert other.is_alive()  # waits for the lock the first writer holds
        report_on(first, "raced", t1, "failed")
        first.commit()
        other.join(10)
    assert [n for n, _ in paused[0]] == ["raced"]


def queries_of(store: Database) -> Any:
    return store.layout.statements


def report_on(conn: Any, name: str, fire_time: datetime, state: str) -> None:
    from awa_beat._bridge.messages import fire_task_id

    text = fire_time.strftime(TEXT)
    conn.execute(queries_of_any()["record_outcomes"], outcome_params([Report(
        fire_task_id(name, text, 0), name, text, None, state,
        finished_at=datetime.now(UTC), runtime=0.1, error="E1")]))


def queries_of_any() -> Any:
    from awa_beat._db.sql import queries

    return queries
