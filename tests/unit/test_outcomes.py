"""The pure parts of outcome tracking: state mapping, identification, merging, the
bounded buffer, the writer through a database outage, the overdue rules, the spec keys
and the settings."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest

from awa_beat._bridge.messages import fire_task_id
from awa_beat._config import Settings
from awa_beat._schedules.runs import overdue_reasons
from awa_beat._schedules.spec import DEFAULT_MAX_RUNTIME, spec_from_entry
from awa_beat.errors import ConfigError, DatabaseUnavailable, ValidationError
from awa_beat.outcomes import (
    Buffer,
    Report,
    Tracker,
    Writer,
    identify,
    merge,
    outcome_state,
)

UTC = timezone.utc
FIRE = "2026-12-03 12:00:00+00"


def headers(name: str = "s", fire: str = FIRE, job: int = 5, once: str = "0") -> dict[str, Any]:
    return {"awa_beat_job": str(job), "awa_beat_schedule": name, "awa_beat_fire_time": fire,
            "awa_beat_at_most_once": once}


@pytest.mark.parametrize(("celery", "recorded"), [
    ("SUCCESS", "succeeded"), ("FAILURE", "failed"), ("RETRY", "retried"),
    ("REVOKED", "revoked"), ("IGNORED", None), ("STARTED", None), (None, None)])
def test_celery_states_map_to_recorded_ones(celery: str | None, recorded: str | None) -> None:
    assert outcome_state(celery) == recorded


def test_a_task_is_ours_only_when_its_id_matches_its_headers() -> None:
    tid = fire_task_id("s", FIRE, 5)
    assert identify(tid, headers()).schedule == "s"  # type: ignore[union-attr]
    assert identify(tid, headers(once="1")).at_most_once  # type: ignore[union-attr]
    assert identify("some-other-id", headers()) is None
    assert identify(tid, {}) is None  # not fired by awa-beat
    trigger = fire_task_id(None, None, 9)
    assert identify(trigger, headers(name="s", fire="", job=9)).fire_time is None  # type: ignore[union-attr]
    assert identify(tid, SimpleNamespace(**headers())) is not None  # a Context's attributes


def test_merge_keeps_the_start_of_a_run_and_restarts_on_a_new_start() -> None:
    t = datetime(2026, 12, 3, tzinfo=UTC)
    start = Report("a", "s", FIRE, 1, "started", 0, t, worker="w")
    retried = Report("a", "s", FIRE, 1, "retried", 0, finished_at=t, error="again")
    again = Report("a", "s", FIRE, 1, "started", 1, t + timedelta(seconds=1), worker="w2")
    done = Report("a", "s", FIRE, 1, "succeeded", 1, finished_at=t, runtime=0.1)
    (one,) = merge([start, retried])
    assert (one.state, one.started_at, one.worker, one.error) == ("retried", t, "w", "again")
    (two,) = merge([start, retried, again, done])
    assert (two.state, two.retries, two.worker, two.started_at) == (
        "succeeded", 1, "w2", t + timedelta(seconds=1))


def test_the_buffer_drops_the_oldest_beyond_its_limit() -> None:
    buffer = Buffer(limit=3)
    for i in range(5):
        buffer.append(Report(str(i), "s", None, None, "started"))
    assert buffer.dropped == 2
    taken = buffer.take(10)
    assert [r.task_id for r in taken] == ["2", "3", "4"]
    buffer.append(Report("5", "s", None, None, "started"))
    buffer.put_back(taken)  # written later, ahead of the newer ones, within the bound
    assert [r.task_id for r in buffer.take(10)] == ["3", "4", "5"]


class FlakyStore:
    """A database whose outcome part fails while it is down."""

    def __init__(self) -> None:
        self.up = False
        self.rows: list[str] = []
        self.claimed: set[str] = set()
        self.outcomes = self

    def record(self, columns: dict[str, list[Any]]) -> None:
        if not self.up:
            raise DatabaseUnavailable("connection refused")
        self.rows += columns["task_ids"]

    def claim(self, **run: Any) -> bool:
        if not self.up:
            raise DatabaseUnavailable("connection refused")
        fresh = run["task_id"] not in self.claimed
        self.claimed.add(run["task_id"])
        return fresh

    def purge(self, retention: timedelta, limit: int = 5000) -> int:
        return 0

    def close(self) -> None:
        pass


def test_the_writer_keeps_reports_through_an_outage_and_logs_it_once(
        caplog: pytest.LogCaptureFixture) -> None:
    store = FlakyStore()
    writer = Writer(lambda: store, retention=timedelta(days=1), flush_interval=3600)
    writer._pid = -1  # no thread: the test flushes
    for i in range(3):
        writer.buffer.append(Report(str(i), "s", None, None, "started"))
    with caplog.at_level(logging.INFO, "awa_beat"):
        assert not writer.flush()
        assert not writer.flush()
        store.up = True
        assert writer.flush()
    assert store.rows == ["0", "1", "2"]
    actions = [getattr(r, "action", None) for r in caplog.records]
    assert actions.count("outcomes.outage") == 1 and "outcomes.recovered" in actions


def test_a_claim_while_the_database_is_down_lets_the_task_run() -> None:
    store = FlakyStore()
    now = [100.0]
    writer = Writer(lambda: store, retention=timedelta(days=1), clock=lambda: now[0])
    report = Report("t", "s", FIRE, 1, "started", 0, datetime.now(UTC))
    writer.add = writer.buffer.append  # type: ignore[method-assign]
    assert writer.claim(report) and writer.claim_failures == 1
    store.up = True
    assert writer.claim(report) and writer.claim_failures == 1  # backing off: not asked
    now[0] += 10
    assert writer.claim(report)  # asked: the first claim of "t"
    assert not writer.claim(report)  # the duplicate


class FakeWriter:
    def __init__(self, claims: bool = True) -> None:
        self.reports: list[Report] = []
        self.claims = claims

    def add(self, report: Report) -> None:
        self.reports.append(report)

    def claim(self, report: Report) -> bool:
        return self.claims


def task(**request: Any) -> Any:
    return SimpleNamespace(request=SimpleNamespace(retries=0, hostname="w@h", **request))


def test_the_tracker_reports_start_and_end_and_flags_a_duplicate() -> None:
    tid = fire_task_id("s", FIRE, 5)
    writer = FakeWriter()
    tracker = Tracker(writer)  # type: ignore[arg-type]
    t = task(id=tid, **headers())
    tracker.prerun(tid, t)
    tracker.failure(tid, ValueError("boom\nmore"))
    tracker.postrun(tid, t, state="FAILURE")
    assert [(r.state, r.error) for r in writer.reports] == [
        ("started", None), ("failed", "ValueError: boom")]
    other = task(id="x")
    tracker.prerun("x", other)
    tracker.postrun("x", other, state="SUCCESS")
    assert len(writer.reports) == 2  # not awa-beat's: untouched

    refusing = Tracker(FakeWriter(claims=False))  # type: ignore[arg-type]
    dup = task(id=tid, **headers(once="1"))
    refusing.prerun(tid, dup)
    assert dup.request.awa_beat_duplicate and refusing.duplicates == 1


def overdue(now: datetime, **over: Any) -> list[str]:
    args = {"cron_expr": "0 * * * *", "timezone_name": "UTC", "policy": "coalesce",
            "cursor": datetime(2026, 12, 3, 12, tzinfo=UTC),
            "created_at": datetime(2026, 12, 1, tzinfo=UTC), "paused": False, "now": now,
            "deadline": None, "last_outcome": "succeeded", "cursor_outcome": "succeeded",
            "cursor_finished_at": datetime(2026, 12, 3, 12, 0, 5, tzinfo=UTC)}
    return [r.split(":")[0] for r in overdue_reasons(**{**args, **over})]


def test_overdue_rules() -> None:
    at = datetime(2026, 12, 3, 12, 30, tzinfo=UTC)
    assert overdue(at) == []
    assert overdue(datetime(2026, 12, 3, 13, 0, 20, tzinfo=UTC)) == []  # within the grace
    assert overdue(datetime(2026, 12, 3, 13, 1, tzinfo=UTC)) == ["missed"]
    assert overdue(datetime(2026, 12, 3, 13, 1, tzinfo=UTC), paused=True) == []
    assert overdue(at, last_outcome="failed") == ["failed"]
    assert overdue(at, last_outcome="lost") == ["failed"]
    assert overdue(at, deadline=60.0) == []  # succeeded after 5 s
    assert overdue(at, deadline=2.0) == ["deadline"]  # succeeded, but late
    assert overdue(at, deadline=60.0, cursor_outcome=None, cursor_finished_at=None) == [
        "deadline"]
    assert overdue(datetime(2026, 12, 3, 12, 0, 30, tzinfo=UTC), deadline=60.0,
                   cursor_outcome="started", cursor_finished_at=None) == []  # not yet due


def test_a_deadline_counts_from_a_fire_never_from_the_registration() -> None:
    # Registered at 11:47:12.4 (the cursor is that second), a daily schedule at 03:00 has
    # never been due two seconds later, nor after a change of its calendar at 11:50:00.
    registered = datetime(2026, 12, 3, 11, 47, 12, 400_000, tzinfo=UTC)
    cursor = registered.replace(microsecond=0)
    for moved in (cursor, datetime(2026, 12, 3, 11, 50, tzinfo=UTC)):
        assert overdue(moved + timedelta(seconds=2), cron_expr="0 3 * * *", cursor=moved,
                       created_at=registered, deadline=1.0, cursor_outcome=None,
                       cursor_finished_at=None) == []
    fired = datetime(2026, 12, 4, 3, tzinfo=UTC)
    assert overdue(fired + timedelta(seconds=2), cron_expr="0 3 * * *", cursor=fired,
                   created_at=registered, deadline=1.0, cursor_outcome=None,
                   cursor_finished_at=None) == ["deadline"]


def test_spec_keys_are_validated_and_stored_in_metadata() -> None:
    entry = {"task": "t", "schedule": 60.0, "options": {"expires": 120, "awa_beat": {
        "overlap": "skip", "deadline": 300, "at_most_once": True}}}
    meta = spec_from_entry("e", entry).row()["metadata"]["awa_beat"]
    assert meta == {"overlap": "skip", "deadline": 300.0, "at_most_once": True,
                    "max_runtime": 120.0}
    plain = spec_from_entry("p", {"task": "t", "schedule": 60.0}).row()["metadata"]
    assert "awa_beat" not in plain  # rows of entries without these keys are unchanged
    skip = spec_from_entry("s", {"task": "t", "schedule": 60.0,
                                 "options": {"awa_beat": {"overlap": "skip"}}})
    assert skip.outcomes["max_runtime"] == DEFAULT_MAX_RUNTIME
    bad = {"task": "t", "schedule": 60.0, "options": {"awa_beat": {
        "overlap": "queue", "max_runtime": -1, "deadline": "soon", "at_most_once": "yes"}}}
    with pytest.raises(ValidationError) as caught:
        spec_from_entry("bad", bad)
    fields = {f for _, f, _ in caught.value.problems}
    assert fields == {"options.awa_beat.overlap", "options.awa_beat.max_runtime",
                      "options.awa_beat.deadline", "options.awa_beat.at_most_once"}
    assert "entry 'bad', field 'options.awa_beat.overlap'" in str(caught.value)


def test_settings_read_the_flags_from_the_app_or_the_environment() -> None:
    assert Settings.from_app({}, {}).track_outcomes is False
    assert Settings.from_app({"awa_beat_track_outcomes": True}, {}).track_outcomes
    env = {"AWA_BEAT_TRACK_OUTCOMES": "1", "AWA_BEAT_AT_MOST_ONCE": "true",
           "AWA_BEAT_OUTCOME_RETENTION": "7"}
    settings = Settings.from_app({}, env)
    assert (settings.track_outcomes, settings.at_most_once, settings.outcome_retention) == (
        True, True, 7.0)
    with pytest.raises(ConfigError, match="awa_beat_track_outcomes"):
        Settings.from_app({}, {"AWA_BEAT_TRACK_OUTCOMES": "maybe"})


def test_a_coalesce_counts_the_fires_it_left_out_and_a_normal_fire_none() -> None:
    from awa_beat._db.records import CronState
    from awa_beat._engine.firing import left_out as _left_out
    from awa_beat._schedules.fire_times import calendar_for

    calendar = calendar_for("* * * * *", "UTC")
    t0 = datetime(2026, 12, 3, 12, tzinfo=UTC)

    def row(policy: str = "coalesce", cursor: datetime | None = t0) -> CronState:
        return CronState("s", "* * * * *", "UTC", policy, cursor, t0, t0, None)

    assert _left_out(calendar, row(), [t0 + timedelta(minutes=1)]) is None
    left = _left_out(calendar, row(), [t0 + timedelta(minutes=10)])
    assert left is not None and (left.first, left.last, left.count, left.capped) == (
        t0 + timedelta(minutes=1), t0 + timedelta(minutes=9), 9, False)
    assert _left_out(calendar, row("catch_up"), [t0 + timedelta(minutes=10)]) is None
    assert _left_out(calendar, row(cursor=None), [t0 + timedelta(minutes=10)]) is None
