"""The engine's passes against the in-memory store: what fires, when, and what not."""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from awa_beat._engine.engine import Engine
from awa_beat._testing import FakeClock, MemoryStore, actions
from awa_beat.errors import DatabaseUnavailable

UTC = timezone.utc
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def store(clock: FakeClock) -> MemoryStore:
    return MemoryStore(clock)


def test_coalesce_fires_the_latest_missed_time_once_and_catch_up_every_one(
        clock: FakeClock, store: MemoryStore) -> None:
    store.add("co", "* * * * *", last_enqueued_at=T0)
    store.add("cu", "* * * * *", last_enqueued_at=T0, missed_fire_policy="catch_up")
    clock.advance(minutes=3, seconds=30)
    Engine(store.evaluator, clock=clock).run_pass()
    assert store.fired("co") == ["2026-03-02 12:03:00+00"]
    assert store.fired("cu") == [f"2026-03-02 12:0{m}:00+00" for m in (1, 2, 3)]


def test_rows_sharing_a_calendar_each_fire_from_their_own_cursor_and_policy(
        clock: FakeClock, store: MemoryStore) -> None:
    # One batch works out the fires of rows with the same calendar, cursor and policy
    # once: a row that differs in any of them must still get its own.
    for name in ("a1", "a2"):
        store.add(name, "* * * * *", last_enqueued_at=T0)
    store.add("late", "* * * * *", last_enqueued_at=T0 - timedelta(minutes=2))
    store.add("late_cu", "* * * * *", last_enqueued_at=T0 - timedelta(minutes=2),
              missed_fire_policy="catch_up")
    store.add("same_cu", "* * * * *", last_enqueued_at=T0, missed_fire_policy="catch_up")
    store.add("other_zone", "* * * * *", last_enqueued_at=T0, timezone="Asia/Kolkata")
    store.add("new_old", "0 * * * *", created_at=T0 - timedelta(hours=2))
    store.add("new_now", "0 * * * *", created_at=T0 + timedelta(minutes=1, seconds=20))
    clock.advance(minutes=1, seconds=30)
    Engine(store.evaluator, clock=clock).run_pass()
    assert store.fired("new_old") == ["2026-03-02 12:00:00+00"]
    assert store.fired("new_now") == []
    assert store.fired("a1") == store.fired("a2") == ["2026-03-02 12:01:00+00"]
    assert store.fired("late") == ["2026-03-02 12:01:00+00"]
    assert store.fired("late_cu") == [f"2026-03-02 {t}:00+00" for t in
                                      ("11:59", "12:00", "12:01")]
    assert store.fired("same_cu") == ["2026-03-02 12:01:00+00"]
    assert store.fired("other_zone") == ["2026-03-02 12:01:00+00"]


def test_catch_up_stops_at_the_limit_and_goes_on_next_pass(
        clock: FakeClock, store: MemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    store.add("cu", "* * * * *", last_enqueued_at=T0, missed_fire_policy="catch_up")
    clock.advance(minutes=5)
    engine = Engine(store.evaluator, clock=clock, catch_up_limit=2)
    with caplog.at_level(logging.WARNING, logger="awa_beat"):
        engine.run_pass()
        assert len(store.fired("cu")) == 2 and engine.wait() == 0.0
        engine.run_pass()
        engine.run_pass()
    assert store.fired("cu") == [f"2026-03-02 12:0{m}:00+00" for m in range(1, 6)]
    assert actions(caplog.records).count("fire.catch_up_limit") == 2


def test_a_fire_another_evaluator_took_first_is_not_repeated(
        clock: FakeClock, store: MemoryStore) -> None:
    store.add("s", "* * * * *", last_enqueued_at=T0)
    engine = Engine(store.evaluator, clock=clock)
    engine.load()
    clock.advance(minutes=1)
    store.update("s", last_enqueued_at=T0 + timedelta(minutes=1))  # Awa's leader fired it
    engine.fire_due()
    assert store.jobs == []  # the compare-and-swap found the cursor moved
    clock.advance(minutes=1)
    engine.fire_due()
    assert store.fired("s") == ["2026-03-02 12:02:00+00"]  # and the engine took its word


def test_a_paused_row_does_not_fire_even_if_the_engine_has_not_seen_the_pause(
        clock: FakeClock, store: MemoryStore) -> None:
    store.add("s", "* * * * *", last_enqueued_at=T0)
    engine = Engine(store.evaluator, clock=clock, refresh_interval=3600)
    engine.load()
    store.update("s", paused_at=T0)
    clock.advance(minutes=1)
    engine.run_pass()
    assert store.jobs == []


def test_an_invalid_row_is_reported_once_and_never_stops_the_others(
        clock: FakeClock, store: MemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    store.add("good", "* * * * *", last_enqueued_at=T0)
    store.add("bad", "61 * * * *", last_enqueued_at=T0)
    store.add("badtz", "* * * * *", last_enqueued_at=T0, timezone="Mars/Olympus")
    engine = Engine(store.evaluator, clock=clock)
    with caplog.at_level(logging.ERROR, logger="awa_beat"):
        for _ in range(3):
            clock.advance(minutes=1)
            engine.run_pass()
    assert len(store.fired("good")) == 3 and len(store.jobs) == 3
    assert sorted(r.schedule for r in caplog.records
                  if getattr(r, "action", None) == "schedule.invalid") == ["bad", "badtz"]


def test_a_database_error_retries_the_due_fires_a_second_later(
        clock: FakeClock, store: MemoryStore) -> None:
    store.add("s", "* * * * *", last_enqueued_at=T0)
    engine = Engine(store.evaluator, clock=clock, refresh_interval=3600)
    engine.load()
    clock.advance(minutes=1)
    store.down = "connection refused"
    with pytest.raises(DatabaseUnavailable, match="connection refused"):
        engine.run_pass()
    store.down = None
    assert engine.wait() == pytest.approx(1.0)
    clock.advance(seconds=1)
    engine.run_pass()
    assert store.fired("s") == ["2026-03-02 12:01:00+00"]


def test_the_periodic_sweep_reads_a_slice_per_pass_and_sees_a_late_commit(
        clock: FakeClock, store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from awa_beat._engine import view as view_module

    monkeypatch.setattr(view_module, "SWEEP_SLICE", 2)
    for i in range(5):
        store.add(f"s{i}", "0 0 1 1 *", last_enqueued_at=T0)
    engine = Engine(store.evaluator, clock=clock, refresh_interval=3600)
    engine.load()
    # As a transaction that took its now() long ago and committed just now would write:
    # outside every refresh's lookback.
    store.rows["s4"] = dataclasses.replace(store.rows["s4"], cron_expr="* * * * *")
    clock.advance(seconds=view_module.FULL_RELOAD_INTERVAL)
    pause = view_module.SWEEP_SLICE / view_module.SWEEP_RATE
    slices = 0
    while True:
        before = store.calls.count("cron_states_after")
        engine.run_pass()
        slices += store.calls.count("cron_states_after") - before
        if not engine.sweeping:
            break
        assert engine.wait() == pytest.approx(pause, rel=1e-3)  # at the sweep's pace
        clock.advance(seconds=engine.wait() + 0.001)  # a sleep overshoots a little
    assert slices == 3  # 2 + 2 + 1 rows, never the whole table at once
    assert store.calls.count("cron_states") == 1  # the first load only
    assert engine.state("s4").cron_expr == "* * * * *"
    clock.advance(minutes=1)
    engine.run_pass()
    assert store.fired("s4") == ["2026-03-02 12:06:00+00"]


def test_an_insert_and_a_delete_are_reconciled_from_the_names_alone(
        clock: FakeClock, store: MemoryStore) -> None:
    store.add("a", "0 0 1 1 *", last_enqueued_at=T0)
    store.add("b", "0 0 1 1 *", last_enqueued_at=T0)
    engine = Engine(store.evaluator, clock=clock, refresh_interval=1)
    engine.load()
    del store.rows["b"]
    store.add("c", "* * * * *", last_enqueued_at=T0)
    clock.advance(minutes=1)
    engine.run_pass()
    assert {row.name for row in engine.rows()} == {"a", "c"}
    assert store.calls.count("cron_states") == 1 and "cron_names" in store.calls


class _SlowChanges(MemoryStore):
    """A table large enough that the refresh's read takes ``seconds`` of the clock."""

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        super().__init__(clock)
        self.clock, self.seconds = clock, seconds
        read = self.evaluator.changes

        def changes(*args: Any, **kwargs: Any) -> Any:
            self.clock.advance(seconds=self.seconds)
            return read(*args, **kwargs)

        self.evaluator.changes = changes  # type: ignore[method-assign]


def test_a_refresh_due_just_before_a_fire_waits_until_after_it(clock: FakeClock) -> None:
    store = _SlowChanges(clock, 0.4)
    store.add("s", "* * * * *", last_enqueued_at=T0)
    clock.advance(seconds=30)
    engine = Engine(store.evaluator, clock=clock, refresh_interval=9.7)
    engine.load()
    for _ in range(2):  # 12:00:39.7-40.1, then 12:00:49.8-50.2
        clock.now = datetime.fromtimestamp(engine.view.next_refresh, UTC)
        engine.run_pass()
    assert store.calls.count("changes") == 2
    clock.now = datetime.fromtimestamp(engine.view.next_refresh, UTC)  # 12:00:59.9
    engine.run_pass()
    # A refresh now would end at 12:01:00.3 and make the fire due at 12:01 late: it runs
    # right after the fire instead.
    assert store.calls.count("changes") == 2
    assert engine.wait() == pytest.approx(0.1)
    clock.advance(seconds=0.1)
    calls = len(store.calls)
    engine.run_pass()
    assert store.calls[calls:calls + 2] == ["fire", "changes"]
    assert store.fired("s") == ["2026-03-02 12:01:00+00"]


def test_a_refresh_longer_than_the_gap_between_fires_still_runs(clock: FakeClock) -> None:
    store = _SlowChanges(clock, 0.6)
    store.add("e", "* * * * * *", last_enqueued_at=T0)  # every second
    engine = Engine(store.evaluator, clock=clock, refresh_interval=0.5)
    engine.load()
    for _ in range(8):
        clock.now = datetime.fromtimestamp(engine.next_due(), UTC)
        engine.run_pass()
    # Put off once, then run, and so on: never put off for good.
    assert store.calls.count("changes") >= 3
    assert len(store.fired("e")) >= 8
