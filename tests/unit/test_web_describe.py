"""The calendar in words, for Awa's dialect; six fields put the seconds first."""

from __future__ import annotations

import pytest

from awa_beat._schedules.describe import describe, duration


@pytest.mark.parametrize(("expr", "words"), [
    ("0 9 * * 1-5", "at 09:00, on Monday through Friday"),
    ("*/15 * * * *", "every 15 minutes"),
    ("30 */2 * * *", "at minute 30, every 2 hours"),
    ("* * * * *", "every minute"),
    ("0 9,17 * * *", "at 09:00 and 17:00, every day"),
    ("*/15 9-17 * * mon-fri", "every 15 minutes, in hours 9 through 17, on Monday through Friday"),
    ("0 0 1 jan,jul *", "at 00:00, on day 1 of the month, in January and July"),
    ("0 0 L * *", "at 00:00, on the last day of the month"),
    ("0 0 15W * *", "at 00:00, on the weekday nearest day 15 of the month"),
    ("0 0 * * 5#2", "at 00:00, on the 2nd Friday of the month"),
    ("0 0 * * 5L", "at 00:00, on the last Friday of the month"),
    ("0 0 */2 * 1", "at 00:00, on every 2nd day of the month or on Monday"),  # Awa ORs
    ("@daily", "at 00:00, every day"),
    ("@hourly", "at minute 0, every hour"),
    ("@every 90s", "every 90 seconds (1 min 30 s)"),
    ("@every 7200s", "every 2 hours"),
])
def test_five_field_expressions_and_markers(expr: str, words: str) -> None:
    assert describe(expr) == words


@pytest.mark.parametrize(("expr", "words"), [
    ("*/10 * * * * *", "every 10 seconds"),
    ("* * * * * *", "every second"),
    ("0 30 9 * * *", "at 09:30, every day"),  # not "at minute 0 of hour 30"
    ("30 0 9 * * *", "at 09:00:30, every day"),
    ("5 * * * * *", "at second 5, every minute"),
    ("0 */5 * * * *", "every 5 minutes"),
    ("0 30 6 1 * *", "at 06:30, on day 1 of the month"),
    ("0 0 12 * * sun", "at 12:00, on Sunday"),
])
def test_six_field_expressions_read_the_seconds_first(expr: str, words: str) -> None:
    assert describe(expr) == words


@pytest.mark.parametrize("expr", ["@midnight", "0 0 * * * * *", "FRI-MON * * * *", "nope"])
def test_what_awa_refuses_is_not_described(expr: str) -> None:
    assert describe(expr) is None


def test_duration() -> None:
    assert [duration(s) for s in (1, 45, 60, 3600, 86400, 3 * 86400, 3725)] == [
        "second", "45 seconds", "minute", "hour", "day", "3 days",
        "3725 seconds (1 h 2 min 5 s)"]


# -- awa-beat's markers (issue 34, defect 1: every stored schedule is described) -----------


@pytest.mark.parametrize(("expr", "words"), [
    ("@solar sunrise 48.85 2.35", "at sunrise at 48.85, 2.35"),
    ("@solar dusk_nautical -33.5 151", "at nautical dusk at -33.5, 151"),
    ("@at 2027-01-01T00:00:00Z | runs=1", "once, at 2027-01-01 00:00 UTC"),
    ("@at 2027-01-01T09:30:15Z | runs=1", "once, at 2027-01-01 09:30:15 UTC"),
    ("@every 7s | runs=3", "every 7 seconds; at most 3 runs"),
    ("@cron 15 * * * * | runs=3", "at minute 15, every hour; at most 3 runs"),
    ("@cron 45 4 * * * | runs=1", "at 04:45, every day; at most 1 run (one-off)"),
    ("@cron 0 * * * * | start=2030-06-01T00:00:00Z",
     "at minute 0, every hour; from 2030-06-01 00:00 UTC"),
    ("@cron 0 * * * * | end=2035-01-01T00:00:00Z",
     "at minute 0, every hour; until 2035-01-01 00:00 UTC"),
    ("@cron 0 3 * * * | start=2027-01-01T00:00:00Z end=2027-06-30T00:00:00Z runs=3",
     "at 03:00, every day; from 2027-01-01 00:00 UTC until 2027-06-30 00:00 UTC, "
     "at most 3 runs"),
    ("@cron * * * * * * | runs=2", "every second; at most 2 runs"),
    ("@solar sunset 0 0 | end=2030-01-01T00:00:00Z",
     "at sunset at 0, 0; until 2030-01-01 00:00 UTC"),
    # Celery's crontab ANDs the day fields where Awa ORs them.
    ("@crontab 0 9 1-7 * 1", "at 09:00, on days 1 through 7 of the month, if it falls on Monday"),
    ("@crontab 30 2 * * * dst=celery", "at 02:30, every day (Celery's steps over clock changes)"),
    ("@crontab 0 9 15 * 5 | runs=2",
     "at 09:00, on day 15 of the month, if it falls on Friday; at most 2 runs"),
])
def test_solar_at_and_bounds_in_words(expr: str, words: str) -> None:
    assert describe(expr) == words


@pytest.mark.parametrize(("expr", "words"), [
    ("@rrule DTSTART=20260105T090000;FREQ=WEEKLY;BYDAY=MO,WE",
     "every week, on Monday and Wednesday, at 09:00, from 2026-01-05 09:00"),
    ("@rrule DTSTART=20260105T090000;FREQ=WEEKLY;INTERVAL=2;COUNT=10;BYDAY=MO,FR",
     "every 2 weeks, on Monday and Friday, at 09:00, from 2026-01-05 09:00, 10 times"),
    ("@rrule DTSTART=20260105T093000+0100;FREQ=MONTHLY;UNTIL=20271231T000000Z;BYDAY=-1FR",
     "every month, on the last Friday, at 09:30, from 2026-01-05 09:30 +01:00, "
     "until 2027-12-31 00:00 UTC"),
    ("@rrule DTSTART=20260105T090000;FREQ=DAILY;BYHOUR=9,17",
     "every day, at 09:00 and 17:00, from 2026-01-05 09:00"),
    ("@rrule DTSTART=20260105T090000;FREQ=YEARLY;BYMONTH=1,7;BYMONTHDAY=1",
     "every year, on day 1 of the month, in January and July, at 09:00, "
     "from 2026-01-05 09:00"),
    ("@rrule DTSTART=20260105T090000;FREQ=MINUTELY;INTERVAL=15",
     "every 15 minutes, from 2026-01-05 09:00"),
    ("@rrule DTSTART=20260105T090005;FREQ=SECONDLY;INTERVAL=15;COUNT=1",
     "every 15 seconds, from 2026-01-05 09:00:05, once"),
    # A part with no words of its own is quoted as written, never dropped.
    ("@rrule DTSTART=20260105T090000;FREQ=MONTHLY;BYSETPOS=-1;BYDAY=MO,TU,WE,TH,FR",
     "every month, on Monday, Tuesday, Wednesday, Thursday and Friday, at 09:00, "
     "from 2026-01-05 09:00, BYSETPOS=-1"),
])
def test_rrules_in_words(expr: str, words: str) -> None:
    assert describe(expr) == words


@pytest.mark.parametrize("expr", [
    "@at 2027-01-01 | runs=1",                  # not an instant
    "@solar sunrise 95 0",                       # latitude out of range
    "@solar noon 0 0",                           # no such event
    "@cron 0 3 * * *",                           # @cron without bounds
    "@cron 0 3 * * * | runs=0",                  # no run at all
    "@cron 0 3 * * * | runs=3 start=2027-01-01T00:00:00Z",  # bounds out of order
    "@rrule FREQ=DAILY",                         # no DTSTART
    "@rrule DTSTART=20260105T090000;FREQ=SOMETIMES",
])
def test_markers_awa_beat_refuses_are_not_described(expr: str) -> None:
    assert describe(expr) is None


def test_a_calendar_no_rule_words_is_shown_as_written(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    # Whatever the wording code cannot handle, the page still lists the row.
    from awa_beat._schedules import describe as module

    def broken(expr: str) -> str:
        raise IndexError("no words for this")

    monkeypatch.setattr(module, "_words", broken)
    assert describe("0 3 * * *") == "as written: 0 3 * * *"
