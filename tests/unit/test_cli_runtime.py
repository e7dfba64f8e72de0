"""`awa-beat add|edit`: the entry the options build, with no database."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from celery.schedules import solar

from awa_beat._cli.runtime import entry_from_options, parse_every
from awa_beat._schedules.calendars import at
from awa_beat.errors import ScheduleError


def test_the_options_build_a_beat_schedule_entry_with_only_what_is_given() -> None:
    assert entry_from_options(task="t", cron="*/5 * * * *", args="[1]",
                              kwargs='{"a": 2}', queue="q", tz="Europe/Paris",
                              policy="catch_up", dispatch="celery", priority=1,
                              max_attempts=3, tags=("x",), option=("expires=60",)) == {
        "task": "t", "schedule": "*/5 * * * *", "args": [1], "kwargs": {"a": 2},
        "options": {"expires": 60, "queue": "q", "awa_beat": {
            "queue": "q", "timezone": "Europe/Paris", "missed_fire_policy": "catch_up",
            "dispatch": "celery", "priority": 1, "max_attempts": 3, "tags": ["x"]}}}
    assert entry_from_options(tz="Asia/Tokyo") == {
        "options": {"awa_beat": {"timezone": "Asia/Tokyo"}}}
    assert entry_from_options() == {}


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("5m", 300), ("1h30m", 5400),
                                               ("2d", 172800), ("45", 45)])
def test_every(text: str, seconds: int) -> None:
    assert parse_every(text) == timedelta(seconds=seconds)
    assert entry_from_options(every=text)["schedule"] == timedelta(seconds=seconds)


def test_at_is_a_fire_once_calendar_and_solar_is_celerys() -> None:
    entry = entry_from_options(task="t", at_="2026-12-24T09:00+01:00")
    assert entry["schedule"] == at(datetime(2026, 12, 24, 8, 0, tzinfo=timezone.utc))
    local = entry_from_options(at_="2026-12-24T09:00", tz="Europe/Paris")["schedule"]
    assert local.instant.utcoffset() == timedelta(hours=1)
    sun = entry_from_options(solar="sunset:48.85:-2.35")["schedule"]
    assert isinstance(sun, solar)
    assert (sun.event, sun.lat, sun.lon) == ("sunset", 48.85, -2.35)


@pytest.mark.parametrize(("options", "message"), [
    ({"every": "soon"}, "'--every': 'soon'"),
    ({"at_": "tomorrow"}, "ISO 8601"),
    ({"at_": "2026-12-24T09:00"}, "no UTC offset"),
    ({"solar": "sunset:48.85"}, "EVENT:LAT:LON"),
    ({"solar": "noonish:1:2"}, "EVENT:LAT:LON"),
    ({"args": "{"}, "not valid JSON"),
    ({"kwargs": "[1]"}, "must be a JSON object"),
    ({"option": ("expires",)}, "KEY=JSON"),
    # Issue 34: each of these was a traceback.
    ({"every": "²"}, "'--every': '²'"),
    ({"every": "99999999999999999999d"}, "at most 3660 days"),
    ({"at_": "0001-01-01T00:00:00+14:00"}, "out of range"),
    ({"args": "[" * 5000 + "]" * 5000}, "'--args': nested too deep"),
    ({"option": ("headers=" + "[" * 5000 + "]" * 5000,)}, "'--option': headers: nested too deep"),
])
def test_a_bad_option_is_a_schedule_error(options: dict, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        entry_from_options(**options)


def test_one_schedule_at_most() -> None:
    with pytest.raises(ScheduleError, match="--cron and --every"):
        entry_from_options(cron="* * * * *", every="5s")
