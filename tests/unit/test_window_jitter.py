"""The catch-up window and the jitter: their marker grammar, their options, and the delay
function (pure, no database)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from awa_beat._engine.engine import Engine
from awa_beat._schedules.calendars import at
from awa_beat._schedules.describe import describe
from awa_beat._schedules.fire_times import (
    calendar_for,
    catch_up_window,
    jitter_delay,
    jitter_of,
    run_times,
)
from awa_beat._schedules.markers import (
    Bounds,
    max_runs,
    seconds_text,
    split_bounds,
    with_timing,
)
from awa_beat._schedules.spec import spec_from_entry
from awa_beat._schedules.stored_entries import bound_options, merge_entry, split_schedule
from awa_beat._testing import FakeClock, MemoryStore
from awa_beat.errors import InvalidCronExpression, ScheduleError, ValidationError

UTC = timezone.utc
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def entry(schedule: object = 3600, **awa: object) -> dict[str, object]:
    return {"task": "t", "schedule": schedule, "options": {"awa_beat": awa}}


# -- the marker ------------------------------------------------------------------------------


@pytest.mark.parametrize("marker", [
    "@cron 0 9 * * * | window=300",
    "@cron 0 9 * * * | jitter=0.5",
    "@cron 0 9 * * * | window=300 jitter=60",
    "@every 17s | start=2027-01-01T00:00:00Z end=2028-01-01T00:00:00Z window=60 jitter=1.25 "
    "runs=3",
    "@at 2030-01-01T00:00:00Z | window=5 jitter=0.001 runs=1",
    "@solar sunset 48.85 2.35 | jitter=30",
    "@crontab 0 9 1-7 * 1 | window=3600",
])
def test_a_timed_marker_reads_back_to_the_same_text(marker: str) -> None:
    base, bounds = split_bounds(marker)
    assert f"{base} | {bounds.text()}" == marker
    calendar = calendar_for(marker, "UTC")
    assert catch_up_window(calendar) == bounds.window
    assert jitter_of(calendar) == bounds.jitter
    assert calendar.window == bounds.window and calendar.jitter == bounds.jitter


def test_the_run_limit_stays_last_where_the_fire_statement_reads_it() -> None:
    marker = with_timing("@every 17s | start=2027-01-01T00:00:00Z runs=3", 60.0, 2.0)
    assert marker == "@every 17s | start=2027-01-01T00:00:00Z window=60 jitter=2 runs=3"
    assert max_runs(marker) == 3


def test_a_plain_expression_with_a_window_becomes_a_cron_marker_and_back() -> None:
    assert with_timing("0 9 * * *", 300.0, None) == "@cron 0 9 * * * | window=300"
    assert with_timing("@cron 0 9 * * * | window=300", None, None) == "0 9 * * *"
    assert with_timing("@cron 0 9 * * * | window=300 runs=2", None, None) == \
        "@cron 0 9 * * * | runs=2"


def test_calendars_without_a_window_or_jitter_say_none() -> None:
    for expr in ("0 9 * * *", "@every 17s", "@cron 0 9 * * * | runs=2",
                 "@at 2030-01-01T00:00:00Z | runs=1", "@solar sunset 1 2"):
        calendar = calendar_for(expr, "UTC")
        assert catch_up_window(calendar) is None and jitter_of(calendar) is None


@pytest.mark.parametrize("marker", [
    "@cron 0 9 * * * | window=300.0",      # not canonical
    "@cron 0 9 * * * | window=0300",
    "@cron 0 9 * * * | jitter=0.50",
    "@cron 0 9 * * * | jitter=0.0001",
    "@cron 0 9 * * * | window=0.5",        # shorter than a second
    "@cron 0 9 * * * | jitter=0",
    "@cron 0 9 * * * | window=-5",
    "@cron 0 9 * * * | jitter=60 window=300",   # out of order
    "@cron 0 9 * * * | runs=2 window=300",
    "@cron 0 9 * * * | window=1e3",
])
def test_a_bad_timing_marker_is_refused(marker: str) -> None:
    with pytest.raises((InvalidCronExpression, ScheduleError)):
        calendar_for(marker, "UTC")


def test_seconds_text_is_canonical() -> None:
    assert [seconds_text(x) for x in (300, 300.0, 0.5, 1.25, 0.001, 2.100)] == [
        "300", "300", "0.5", "1.25", "0.001", "2.1"]


def test_describe_says_the_window_and_the_jitter() -> None:
    words = describe("@cron 0 9 * * * | window=300 jitter=0.5")
    assert words is not None
    assert "older than 5 minutes skipped" in words and "up to 0.5 s late" in words


# -- the options -----------------------------------------------------------------------------


def test_options_become_the_marker() -> None:
    spec = spec_from_entry("a", entry("0 9 * * *", catch_up_window=300, jitter=60))
    assert spec.cron_expr == "@cron 0 9 * * * | window=300 jitter=60"
    spec = spec_from_entry("a", entry(3600, catch_up_window=timedelta(minutes=2),
                                      jitter=0.25, max_runs=4))
    assert spec.cron_expr == "@cron 0 0 * * * * | window=120 jitter=0.25 runs=4"
    spec = spec_from_entry("a", entry(at(datetime(2030, 1, 1, tzinfo=UTC)), jitter=5))
    assert spec.cron_expr == "@at 2030-01-01T00:00:00Z | jitter=5 runs=1"
    assert spec_from_entry("a", entry("0 9 * * *")).cron_expr == "0 9 * * *"


@pytest.mark.parametrize(("key", "value", "says"), [
    ("catch_up_window", 0, "positive"),
    ("catch_up_window", 0.5, "at least 1 s"),
    ("catch_up_window", float("inf"), "positive"),
    ("catch_up_window", float("nan"), "positive"),
    ("catch_up_window", "300", "not a number"),
    ("catch_up_window", True, "not a number"),
    ("catch_up_window", 10**12, "too long"),
    ("jitter", -1, "positive"),
    ("jitter", 0.0001, "three decimals"),
    ("jitter", [1], "not a number"),
])
def test_bad_options_name_the_entry_and_the_field(key: str, value: object, says: str) -> None:
    with pytest.raises(ValidationError) as caught:
        spec_from_entry("nightly", entry(**{key: value}))
    text = str(caught.value)
    assert "'nightly'" in text and f"options.awa_beat.{key}" in text and says in text


def test_a_stored_row_gives_its_timing_back_as_options() -> None:
    schedule, bounds = split_schedule("@cron 0 9 * * * | window=300 jitter=0.5")
    assert schedule == "0 9 * * *"
    assert bound_options(bounds) == {"catch_up_window": 300, "jitter": 0.5}
    schedule, bounds = split_schedule("@at 2030-01-01T00:00:00Z | jitter=5 runs=1")
    assert schedule == "@at 2030-01-01T00:00:00Z | runs=1"
    assert bound_options(bounds) == {"jitter": 5}
    # And that entry registers the same row again.
    again = spec_from_entry("a", entry(schedule, **bound_options(bounds)))
    assert again.cron_expr == "@at 2030-01-01T00:00:00Z | jitter=5 runs=1"


def test_an_edit_removes_the_window_with_none_and_keeps_the_jitter() -> None:
    old = entry("0 9 * * *", catch_up_window=300, jitter=60)
    merged = merge_entry(old, {"options": {"awa_beat": {"catch_up_window": None}}})
    assert spec_from_entry("a", merged).cron_expr == "@cron 0 9 * * * | jitter=60"
    merged = merge_entry(old, {"schedule": at(datetime(2030, 1, 1, tzinfo=UTC))})
    assert spec_from_entry("a", merged).cron_expr == \
        "@at 2030-01-01T00:00:00Z | window=300 jitter=60 runs=1"


def test_bounds_hold_the_values_checked() -> None:
    assert Bounds(window=300).window == 300.0
    with pytest.raises(ScheduleError, match="window"):
        Bounds(window=0)
    assert not Bounds() and Bounds(jitter=1)


# -- the delay -------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=30), st.integers(0, 2**33),
       st.floats(0.001, 10**6, allow_nan=False), st.one_of(st.none(), st.integers(1, 10**6)))
def test_the_delay_is_deterministic_bounded_and_never_reaches_the_next_fire(
        name: str, fire: int, jitter: float, gap: int | None) -> None:
    jitter = round(jitter, 3)
    nxt = None if gap is None else fire + gap
    delay = jitter_delay(name, fire, jitter, nxt)
    assert delay == jitter_delay(name, fire, jitter, nxt)  # every replica computes this
    assert 0 <= delay < round(jitter * 1_000_000)
    if nxt is not None:
        assert delay < gap * 1_000_000  # type: ignore[operator]


def test_the_delay_spreads_names_and_fires_over_the_jitter() -> None:
    delays = [jitter_delay(f"tenant-{i}", 1_800_000_000, 60.0, None) for i in range(1000)]
    assert len(set(delays)) > 990
    # Spread over the whole minute, not bunched: each tenth of it holds some.
    tenths = {d * 10 // 60_000_000 for d in delays}
    assert tenths == set(range(10))
    assert jitter_delay("a", 1, 60.0, None) != jitter_delay("a", 2, 60.0, None)


def test_run_times_are_the_fire_plus_its_delay_capped_by_the_next_fire() -> None:
    calendar = calendar_for("@cron * * * * * * | jitter=3600", "UTC")  # every second
    fires = [T0 + timedelta(seconds=s) for s in range(50)]
    runs = run_times("x", calendar, fires)
    assert runs is not None
    for fire, run in zip(fires, runs, strict=True):
        assert fire <= run < fire + timedelta(seconds=1)
    assert run_times("x", calendar_for("* * * * * *", "UTC"), fires) is None


# -- the firing rules, on the in-memory store ------------------------------------------------


def _down(expr: str, policy: str, *, hours: float = 2) -> tuple[FakeClock, MemoryStore, Engine]:
    """A schedule whose beat was down for ``hours`` from T0 (its cursor at T0)."""
    clock = FakeClock(T0)
    store = MemoryStore(clock)
    store.add("s", expr, last_enqueued_at=T0, missed_fire_policy=policy)
    engine = Engine(store.evaluator, clock=clock)
    engine.load()
    clock.advance(hours=hours)
    return clock, store, engine


def test_catch_up_fires_only_inside_the_window_and_records_the_older_ones_skipped() -> None:
    # Every 10 minutes, down two hours: 12 fires due, a 25-minute window keeps 3.
    _clock, store, engine = _down("@cron */10 * * * * | window=1500", "catch_up")
    engine.run_pass()
    assert store.fired("s") == ["2026-03-02 13:40:00+00", "2026-03-02 13:50:00+00",
                                "2026-03-02 14:00:00+00"]
    [(name, kind, first, last, count, reason)] = store.occurrences
    assert (name, kind, count) == ("s", "skipped", 9)
    assert (first, last) == (T0 + timedelta(minutes=10), T0 + timedelta(minutes=90))
    assert reason.startswith("catch-up window")
    assert store.rows["s"].last_enqueued_at == T0 + timedelta(hours=2)
    assert engine.stats.skipped["window"] == 9
    engine.run_pass()
    assert len(store.occurrences) == 1 and len(store.fired("s")) == 3


def test_coalesce_fires_the_latest_inside_the_window() -> None:
    clock, store, engine = _down("@cron */10 * * * * | window=300", "coalesce")
    clock.advance(minutes=1)  # The latest (14:00) is a minute old: inside 5 minutes.
    engine.run_pass()
    assert store.fired("s") == ["2026-03-02 14:00:00+00"]
    assert store.occurrences == [] and engine.stats.skipped["window"] == 0
    assert engine.stats.coalesced == 11  # The older ones coalesced, as without a window.


def test_coalesce_fires_nothing_when_the_latest_is_outside_the_window() -> None:
    clock, store, engine = _down("@cron */10 * * * * | window=300", "coalesce")
    clock.advance(minutes=6)  # The latest (14:00) is six minutes old.
    engine.run_pass()
    assert store.fired("s") == []
    [(_, kind, first, last, count, _)] = store.occurrences
    assert (kind, count) == ("skipped", 12)
    assert (first, last) == (T0 + timedelta(minutes=10), T0 + timedelta(hours=2))
    assert store.rows["s"].last_enqueued_at == T0 + timedelta(hours=2)
    assert engine.stats.skipped["window"] == 12
    clock.advance(minutes=4)  # 14:10 fires on time.
    engine.run_pass()
    assert store.fired("s") == ["2026-03-02 14:10:00+00"] and len(store.occurrences) == 1


def test_a_fire_exactly_as_old_as_the_window_still_fires() -> None:
    _clock, store, engine = _down("@cron */10 * * * * | window=600", "catch_up", hours=1)
    engine.run_pass()
    assert store.fired("s") == ["2026-03-02 12:50:00+00", "2026-03-02 13:00:00+00"]
    _clock, store, engine = _down("@cron */10 * * * * | window=600", "catch_up", hours=1 / 3)
    engine.run_pass()
    assert store.fired("s") == ["2026-03-02 12:10:00+00", "2026-03-02 12:20:00+00"]
    assert store.occurrences == []


def test_without_a_window_awa_rules_stand() -> None:
    _clock, store, engine = _down("*/10 * * * *", "catch_up")
    engine.run_pass()
    assert len(store.fired("s")) == 12 and store.occurrences == []


def test_a_fire_on_time_is_not_held_to_the_window() -> None:
    clock, store, engine = _down("@cron */10 * * * * | window=1", "catch_up", hours=0)
    for _ in range(3):
        clock.advance(minutes=10)
        engine.run_pass()
    assert len(store.fired("s")) == 3 and store.occurrences == []


def test_jitter_puts_each_job_off_by_its_delay_and_keeps_the_fire_time() -> None:
    clock = FakeClock(T0)
    store = MemoryStore(clock)
    for i in range(20):
        store.add(f"t{i}", "@cron 0 * * * * | jitter=60", last_enqueued_at=T0)
    engine = Engine(store.evaluator, clock=clock)
    engine.load()
    clock.advance(hours=1)
    engine.run_pass()
    fire = T0 + timedelta(hours=1)
    assert len(store.jobs) == 20
    assert {j.fire_time for j in store.jobs} == {"2026-03-02 13:00:00+00"}
    runs = {j.name: store.run_ats[j.job_id] for j in store.jobs}
    for name, run in runs.items():
        assert run == fire + timedelta(microseconds=jitter_delay(
            name, int(fire.timestamp()), 60.0, int(fire.timestamp()) + 3600))
    assert len(set(runs.values())) == 20


def test_marker_window_and_engine_agree_with_the_spec_option() -> None:
    spec = spec_from_entry("a", entry("*/10 * * * *", catch_up_window=1500))
    assert isinstance(spec.cron_expr, str)
    _clock, store, engine = _down(spec.cron_expr, "catch_up")
    engine.run_pass()
    assert len(store.fired("s")) == 3
