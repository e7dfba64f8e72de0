"""The calendar in words, for Awa's dialect; six fields put the seconds first."""

from __future__ import annotations

import pytest

from awa_beat.web.describe import describe, duration


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
