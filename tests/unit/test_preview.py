"""The preview of a calendar: its next fires, the DST changes marked, and its warnings."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from awa_beat._schedules.fire_times import calendar_for, next_fire_after
from awa_beat._schedules.preview import DEFAULT_COUNT, MAX_COUNT, preview
from awa_beat.errors import InvalidCronExpression, InvalidTimezone, ValidationError

UTC = timezone.utc
NEW_YORK = ZoneInfo("America/New_York")
NOW = datetime(2026, 12, 7, 20, 0, tzinfo=UTC)
SPRING = datetime(2027, 3, 13, 12, 0, tzinfo=UTC)  # the day before New York's gap
AUTUMN = datetime(2027, 11, 6, 12, 0, tzinfo=UTC)  # the day before New York's fold


def walk(expr: str, zone: str, now: datetime, n: int) -> list[datetime]:
    calendar, fires, t = calendar_for(expr, zone), [], now
    for _ in range(n):
        t = next_fire_after(calendar, t)
        fires.append(t)
    return fires


@pytest.mark.parametrize("expr, zone", [
    ("30 7 * * *", "Europe/Paris"), ("@every 7s", "UTC"), ("0 */10 * * * *", "UTC"),
    ("@solar sunrise 48.8566 2.3522", "UTC"),
    ("@rrule DTSTART=20260105T090000;FREQ=WEEKLY;BYDAY=MO,WE", "Europe/Berlin"),
    ("@crontab 0 9 13 * 5", "UTC"), ("@crontab 30 2 * * * dst=celery", "America/New_York"),
    ("@cron 0 * * * * | start=2030-06-01T00:00:00Z", "UTC"),
])
def test_the_fires_are_the_evaluators(expr: str, zone: str) -> None:
    found = preview(expr, zone, NOW)
    assert [f.at for f in found.fires] == walk(expr, zone, NOW, DEFAULT_COUNT)
    assert all(f.local == f.at.astimezone(ZoneInfo(zone)) for f in found.fires)
    assert found.more and found.description


def test_a_fire_in_the_gap_is_marked_moved_and_warned_about() -> None:
    found = preview("30 2 * * *", "America/New_York", SPRING, count=2)
    gap, after = found.fires
    # Awa's calendar moves 02:30, which does not exist, to the end of the gap.
    assert gap.at == datetime(2027, 3, 14, 7, 0, tzinfo=UTC) and gap.mark == "gap"
    assert "02:00-03:00 is skipped on 2027-03-14 in America/New_York" in gap.note
    assert "fires at 03:00:00" in gap.note and "-05:00 -> -04:00" in gap.note
    assert after.mark == "" and after.local.hour == 2
    assert any(w.startswith("moves a fire in a DST change: 02:00-03:00")
               for w in found.warnings)


def test_celerys_crontab_moves_by_the_length_of_the_gap() -> None:
    found = preview("@crontab 30 2 * * * dst=celery", "America/New_York", SPRING, count=1)
    (gap,) = found.fires
    assert gap.at == datetime(2027, 3, 14, 7, 30, tzinfo=UTC) and gap.mark == "gap"
    assert "fires at 03:30:00" in gap.note


def test_a_wall_time_at_the_end_of_the_gap_is_not_moved() -> None:
    found = preview("0 3 * * *", "America/New_York", SPRING, count=1)
    assert found.fires[0].mark == "offset"
    assert found.fires[0].note == "DST: UTC offset -05:00 -> -04:00"
    assert not any("DST" in w for w in found.warnings)


def test_a_fire_in_the_repeated_hour_says_which_pass() -> None:
    found = preview("30 1 * * *", "America/New_York", AUTUMN, count=2)
    fold, after = found.fires
    assert fold.mark == "fold" and fold.at == datetime(2027, 11, 7, 5, 30, tzinfo=UTC)
    assert "01:30:00 happens twice on 2027-11-07" in fold.note and "first pass" in fold.note
    assert after.mark == "offset" and "-04:00 -> -05:00" in after.note
    # Awa fires the first pass only: not twice.
    assert not any(w.startswith("fires twice") for w in found.warnings)


def test_a_calendar_that_fires_a_wall_time_twice_is_warned_about() -> None:
    # An interval steps by instants, so in a zone with a repeated hour its wall times
    # come round twice.
    found = preview("@every 1800s", "America/New_York", AUTUMN,
                    until=AUTUMN + timedelta(days=1))
    assert any(w.startswith("fires twice in a DST change: 2027-11-07 01:") for w in
               found.warnings), found.warnings
    passes = {f.note.split("this fire is in the ")[1].split(" ")[0]
              for f in found.fires if f.mark == "fold"}
    assert passes == {"first", "second"}


def test_never_and_every_second_are_warned_about() -> None:
    never = preview("0 0 30 2 *", "UTC", NOW)
    assert never.fires == () and not never.more
    assert never.warnings == (
        "never fires: its calendar has no fire time after 2026-12-07 20:00:00 UTC",)
    past = preview("@at 2020-01-01T00:00:00Z | runs=1", "UTC", NOW)
    assert past.warnings[0].startswith("never fires")
    fast = preview("* * * * * *", "UTC", NOW)
    assert [w.split(",")[0] for w in fast.warnings] == ["fires every second"]
    assert not preview("*/2 * * * * *", "UTC", NOW).warnings


def test_count_until_and_runs_left() -> None:
    assert len(preview("* * * * *", "UTC", NOW, count=3).fires) == 3
    until = preview("0 * * * *", "UTC", NOW, until=NOW + timedelta(hours=5))
    assert [f.at for f in until.fires] == [NOW + timedelta(hours=h) for h in range(1, 6)]
    capped = preview("@every 7s", "UTC", NOW, until=NOW + timedelta(days=1))
    assert len(capped.fires) == MAX_COUNT
    assert capped.notices == (f"only the first {MAX_COUNT} fires up to 2026-12-08 20:00:00"
                              " UTC are listed",)
    left = preview("@cron 15 * * * * | runs=3", "UTC", NOW, count=10, runs_left=2)
    assert len(left.fires) == 2 and not left.more
    assert left.notices == ("2 runs left: it retires after the fire at 2026-12-07 21:15:00 "
                            "UTC",)
    ended = preview("@cron 0 * * * * | end=2026-12-07T22:00:00Z", "UTC", NOW)
    assert [f.at.hour for f in ended.fires] == [21, 22] and not ended.more


@pytest.mark.parametrize("kwargs, field", [
    ({"count": 0}, "count"), ({"count": MAX_COUNT + 1}, "count"),
    ({"until": NOW}, "until"), ({"until": datetime(2027, 1, 1)}, "until"),
    ({"count": 3, "until": NOW + timedelta(days=1)}, "until"),
])
def test_a_bad_count_or_until_names_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        preview("0 * * * *", "UTC", NOW, name="s", **kwargs)
    assert err.value.problems[0][:2] == ("s", field)


def test_a_bad_calendar_raises_its_own_error() -> None:
    with pytest.raises(InvalidCronExpression):
        preview("61 * * * *", "UTC", NOW)
    with pytest.raises(InvalidTimezone):
        preview("0 * * * *", "Mars/Olympus", NOW)
