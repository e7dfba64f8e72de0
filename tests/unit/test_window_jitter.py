"""The catch-up window and the jitter: their marker grammar, their options, and the delay
function (pure, no database)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from awa_beat._schedules.calendars import at
from awa_beat._schedules.describe import describe
from awa_beat._schedules.fire_times import calendar_for, catch_up_window, jitter_of
from awa_beat._schedules.markers import (
    Bounds,
    max_runs,
    seconds_text,
    split_bounds,
    with_timing,
)
from awa_beat._schedules.spec import spec_from_entry
from awa_beat._schedules.stored_entries import bound_options, merge_entry, split_schedule
from awa_beat.errors import InvalidCronExpression, ScheduleError, ValidationError

UTC = timezone.utc


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
