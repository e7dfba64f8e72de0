"""Conformance of awa_beat's cron and fire-time code with Awa (croner 2.2.0 + chrono-tz).

Every expected instant in the tables below is UTC. The DST, ``W``, ``L`` and ``#`` rows come from
the Awa research report (sections 2 and 7), which recorded what a real awa-pg 0.6.9 worker fired;
``tests/integration/test_awa_parity.py`` re-checks the same kinds of rows against a live worker.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from awa_beat._schedules.cron import CronExpression, load_timezone
from awa_beat._schedules.fire_times import (
    Calendar,
    CronCalendar,
    IntervalCalendar,
    calendar_for,
    due_fires,
    fires_between,
    interval_expression,
    next_fire_after,
    parse_iso,
)
from awa_beat.errors import InvalidCronExpression, InvalidTimezone

UTC = timezone.utc
SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def utc(text: str) -> datetime:
    return parse_iso(text).astimezone(UTC)


def take(calendar: Calendar, start: datetime, n: int) -> list[datetime]:
    """The first ``n`` fires of croner's ``iter_from(start)``."""
    out: list[datetime] = []
    t = start
    while len(out) < n:
        fire = calendar.next_from(t)
        if fire is None:
            break
        out.append(fire)
        t = fire + timedelta(seconds=1)
    return out


def iso(fires: list[datetime]) -> list[str]:
    return [f.strftime("%Y-%m-%dT%H:%M:%SZ") for f in fires]


NY = "America/New_York"

# (expression, zone, start, the first fires of iter_from(start) in UTC; fewer = iteration ends)
CONFORMANCE = [
    # -- clocks going back: only the first pass of a repeated hour fires ----------------------
    ("30 1 * 11 *", NY, "2025-11-02T00:00:00Z",
     ["2025-11-02T05:30:00Z", "2025-11-03T06:30:00Z"]),
    ("*/15 * * * *", NY, "2025-11-02T05:40:00Z",
     ["2025-11-02T05:45:00Z", "2025-11-02T07:00:00Z", "2025-11-02T07:15:00Z"]),
    ("0 * * * *", NY, "2025-11-02T04:30:00Z",
     ["2025-11-02T05:00:00Z", "2025-11-02T07:00:00Z"]),
    ("30 1 * * *", NY, "2026-10-31T00:00:00Z",
     ["2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]),
    ("30 2 * * *", "Pacific/Auckland", "2025-04-04T00:00:00Z",
     ["2025-04-04T13:30:00Z", "2025-04-05T13:30:00Z", "2025-04-06T14:30:00Z"]),
    ("*/30 2 * * *", "Pacific/Auckland", "2025-04-05T13:00:00Z",
     ["2025-04-05T13:00:00Z", "2025-04-05T13:30:00Z", "2025-04-06T14:00:00Z"]),
    # Lord Howe moves back 30 minutes at 02:00 (+11 -> +10:30).
    ("*/15 * * * *", "Australia/Lord_Howe", "2025-04-05T14:20:00Z",
     ["2025-04-05T14:30:00Z", "2025-04-05T14:45:00Z", "2025-04-05T15:30:00Z"]),
    # -- clocks going forward: a missing wall time fires at the end of the gap ----------------
    ("30 2 * * *", NY, "2025-03-08T12:00:00Z",
     ["2025-03-09T07:00:00Z", "2025-03-10T06:30:00Z"]),
    ("* 2 9 3 *", NY, "2025-03-01T00:00:00Z",
     ["2025-03-09T07:00:00Z", "2026-03-09T06:00:00Z", "2026-03-09T06:01:00Z"]),
    ("30 2 * * *", "Pacific/Auckland", "2025-09-26T00:00:00Z",
     ["2025-09-26T14:30:00Z", "2025-09-27T14:00:00Z", "2025-09-28T13:30:00Z"]),
    ("15 2 * * *", "Australia/Lord_Howe", "2025-10-03T00:00:00Z",
     ["2025-10-03T15:45:00Z", "2025-10-04T15:30:00Z", "2025-10-05T15:15:00Z"]),
    # Troll jumps 2 h (+00 -> +02 at 01:00Z): 02:30 moves to 03:00, but 01:00 is more than
    # 3600 s before the gap ends, so croner's search fails and the schedule stalls for good.
    ("30 2 * * *", "Antarctica/Troll", "2025-03-29T00:00:00Z",
     ["2025-03-29T02:30:00Z", "2025-03-30T01:00:00Z", "2025-03-31T00:30:00Z"]),
    ("0 1 * * *", "Antarctica/Troll", "2025-03-28T00:00:00Z",
     ["2025-03-28T01:00:00Z", "2025-03-29T01:00:00Z"]),
    # -- nearest weekday crosses month boundaries ---------------------------------------------
    ("0 0 1W * *", "UTC", "2025-01-02T00:00:00Z",
     ["2025-01-31T00:00:00Z", "2025-02-28T00:00:00Z", "2025-04-01T00:00:00Z"]),
    ("0 0 31W * *", "UTC", "2025-08-02T00:00:00Z",
     ["2025-09-01T00:00:00Z", "2025-10-31T00:00:00Z", "2025-12-31T00:00:00Z"]),
    ("0 0 15W * *", "UTC", "2025-03-01T00:00:00Z",  # Sat 15 Mar -> Fri 14; Tue 15 Apr
     ["2025-03-14T00:00:00Z", "2025-04-15T00:00:00Z", "2025-05-15T00:00:00Z",
      "2025-06-16T00:00:00Z"]),
    # -- day-of-month OR day-of-week when both are restricted ---------------------------------
    ("0 0 */2 * 1", "UTC", "2025-01-01T00:00:00Z",
     ["2025-01-01T00:00:00Z", "2025-01-03T00:00:00Z", "2025-01-05T00:00:00Z",
      "2025-01-06T00:00:00Z", "2025-01-07T00:00:00Z", "2025-01-09T00:00:00Z"]),
    ("0 0 1-31 * 1", "UTC", "2025-01-01T00:00:00Z",
     ["2025-01-01T00:00:00Z", "2025-01-02T00:00:00Z"]),
    ("0 0 ? * 1", "UTC", "2025-01-01T00:00:00Z",
     ["2025-01-06T00:00:00Z", "2025-01-13T00:00:00Z"]),
    ("0 0 1,15 * 1", "UTC", "2025-01-01T00:00:00Z",
     ["2025-01-01T00:00:00Z", "2025-01-06T00:00:00Z", "2025-01-13T00:00:00Z",
      "2025-01-15T00:00:00Z"]),
    ("0 0 1 * L", "UTC", "2025-01-02T00:00:00Z",  # bare L is inert, 1st still matches
     ["2025-02-01T00:00:00Z", "2025-03-01T00:00:00Z"]),
    # -- never fires ---------------------------------------------------------------------------
    ("0 0 30 2 *", "UTC", "2025-01-01T00:00:00Z", []),
    ("0 0 31 4,6,9,11 *", "UTC", "2025-01-01T00:00:00Z", []),
    ("0 0 * * 7L", "UTC", "2025-01-01T00:00:00Z", []),
    ("0 0 * * L", "UTC", "2025-01-01T00:00:00Z", []),
    ("L * * * *", "UTC", "2025-01-01T00:00:00Z", []),
    # -- day-of-week steps, last and nth -------------------------------------------------------
    ("0 0 * * 1/2", "UTC", "2025-01-01T00:00:00Z",  # Mon, Wed, Fri and Sun (7 -> 0)
     ["2025-01-01T00:00:00Z", "2025-01-03T00:00:00Z", "2025-01-05T00:00:00Z",
      "2025-01-06T00:00:00Z", "2025-01-08T00:00:00Z"]),
    ("0 0 * * */2", "UTC", "2025-01-01T00:00:00Z",  # Sun, Tue, Thu, Sat
     ["2025-01-02T00:00:00Z", "2025-01-04T00:00:00Z", "2025-01-05T00:00:00Z"]),
    ("0 0 * * 5L", "UTC", "2025-01-01T00:00:00Z",
     ["2025-01-31T00:00:00Z", "2025-02-28T00:00:00Z", "2025-03-28T00:00:00Z"]),
    ("0 0 * * 5#L", "UTC", "2025-01-01T00:00:00Z",
     ["2025-01-31T00:00:00Z", "2025-02-28T00:00:00Z", "2025-03-28T00:00:00Z"]),
    ("0 0 * * FRIl", "UTC", "2025-01-01T00:00:00Z",
     ["2025-01-31T00:00:00Z", "2025-02-28T00:00:00Z"]),
    ("0 0 * * 0L", "UTC", "2025-01-01T00:00:00Z",
     ["2025-01-26T00:00:00Z", "2025-02-23T00:00:00Z", "2025-03-30T00:00:00Z"]),
    ("0 0 * * SUN#L", "UTC", "2025-01-01T00:00:00Z",
     ["2025-01-26T00:00:00Z", "2025-02-23T00:00:00Z", "2025-03-30T00:00:00Z"]),
    ("0 0 * * 5#2", "UTC", "2025-01-01T00:00:00Z",
     ["2025-01-10T00:00:00Z", "2025-02-14T00:00:00Z"]),
    ("0 0 * * 3#5", "UTC", "2025-01-01T00:00:00Z",
     ["2025-01-29T00:00:00Z", "2025-04-30T00:00:00Z", "2025-07-30T00:00:00Z"]),
    ("0 0 * * 7#1", "UTC", "2025-01-01T00:00:00Z",  # 7 folds to Sunday for '#'
     ["2025-01-05T00:00:00Z", "2025-02-02T00:00:00Z"]),
    ("0 0 * * 5#3L", "UTC", "2025-01-01T00:00:00Z",  # croner: a trailing L wins over #3
     ["2025-01-31T00:00:00Z"]),
    ("0 0 * * 1-5#L", "UTC", "2025-01-25T00:00:00Z",  # the last of each weekday
     ["2025-01-27T00:00:00Z", "2025-01-28T00:00:00Z", "2025-01-29T00:00:00Z",
      "2025-01-30T00:00:00Z", "2025-01-31T00:00:00Z", "2025-02-24T00:00:00Z"]),
    # -- day-of-month last, leap day -----------------------------------------------------------
    ("0 0 L * *", "UTC", "2025-01-01T00:00:00Z",
     ["2025-01-31T00:00:00Z", "2025-02-28T00:00:00Z", "2025-03-31T00:00:00Z"]),
    ("0 0 L 2 *", "UTC", "2027-03-01T00:00:00Z",
     ["2028-02-29T00:00:00Z", "2029-02-28T00:00:00Z"]),
    ("0 0 L,15 * *", "UTC", "2025-01-01T00:00:00Z",
     ["2025-01-15T00:00:00Z", "2025-01-31T00:00:00Z", "2025-02-15T00:00:00Z"]),
    ("0 0 29 2 *", "UTC", "2025-01-01T00:00:00Z",
     ["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"]),
    ("0 0 29 2 1", "UTC", "2027-02-20T00:00:00Z",  # OR: February's Mondays and its 29th
     ["2027-02-22T00:00:00Z", "2028-02-07T00:00:00Z", "2028-02-14T00:00:00Z",
      "2028-02-21T00:00:00Z", "2028-02-28T00:00:00Z", "2028-02-29T00:00:00Z"]),
    # -- aliases, names, seconds, steps ---------------------------------------------------------
    ("@weekly", "UTC", "2025-01-01T00:00:00Z",
     ["2025-01-05T00:00:00Z", "2025-01-12T00:00:00Z"]),
    ("@MONTHLY", "UTC", "2025-01-01T00:00:01Z",
     ["2025-02-01T00:00:00Z", "2025-03-01T00:00:00Z"]),
    ("@yearly", "UTC", "2025-01-01T00:00:01Z", ["2026-01-01T00:00:00Z"]),
    ("@annually", "UTC", "2025-06-01T00:00:00Z", ["2026-01-01T00:00:00Z"]),
    (" @daily ", "Europe/Paris", "2025-06-01T00:00:00Z",
     ["2025-06-01T22:00:00Z", "2025-06-02T22:00:00Z"]),
    ("@hourly", "Asia/Kolkata", "2025-06-01T00:00:00Z",
     ["2025-06-01T00:30:00Z", "2025-06-01T01:30:00Z"]),
    ("0 9 * * MON-FRI", "Europe/Paris", "2025-03-28T12:00:00Z",  # EU DST starts 30 Mar
     ["2025-03-31T07:00:00Z", "2025-04-01T07:00:00Z"]),
    ("0 0 * * FRI-SUN", "UTC", "2025-01-01T00:00:00Z",  # -sun is 7: Fri, Sat, Sun
     ["2025-01-03T00:00:00Z", "2025-01-04T00:00:00Z", "2025-01-05T00:00:00Z",
      "2025-01-10T00:00:00Z"]),
    ("0 0 1 jan-mar *", "UTC", "2025-02-15T00:00:00Z",
     ["2025-03-01T00:00:00Z", "2026-01-01T00:00:00Z"]),
    ("*/20 * * * * *", "UTC", "2025-01-01T00:00:05Z",  # six fields: seconds first
     ["2025-01-01T00:00:20Z", "2025-01-01T00:00:40Z", "2025-01-01T00:01:00Z"]),
    ("30 5 * * * *", "UTC", "2025-01-01T00:00:00Z",
     ["2025-01-01T00:05:30Z", "2025-01-01T01:05:30Z"]),
    ("5/20 * * * *", "UTC", "2025-01-01T00:00:00Z",  # a/n runs from a to the maximum
     ["2025-01-01T00:05:00Z", "2025-01-01T00:25:00Z", "2025-01-01T00:45:00Z",
      "2025-01-01T01:05:00Z"]),
    ("10-30/10 8 * * *", "UTC", "2025-01-01T00:00:00Z",
     ["2025-01-01T08:10:00Z", "2025-01-01T08:20:00Z", "2025-01-01T08:30:00Z",
      "2025-01-02T08:10:00Z"]),
    ("? * * * *", "UTC", "2025-01-01T00:00:30Z",  # every '?' is '*'
     ["2025-01-01T00:01:00Z", "2025-01-01T00:02:00Z"]),
    ("+5,,10 0 1 1 *", "UTC", "2025-01-01T00:00:00Z",  # u8 parsing takes '+'; empty items
     ["2025-01-01T00:05:00Z", "2025-01-01T00:10:00Z", "2026-01-01T00:05:00Z"]),
    # A start with sub-seconds is truncated, so an inclusive search may return an earlier time.
    ("0 0 12 * * *", "UTC", "2025-01-01T12:00:00.700000Z",
     ["2025-01-01T12:00:00Z", "2025-01-02T12:00:00Z"]),
    ("0 0 12 * * *", "Etc/GMT+5", "2025-01-01T00:00:00Z",
     ["2025-01-01T17:00:00Z", "2025-01-02T17:00:00Z"]),
]  # fmt: skip


@pytest.mark.parametrize(("expr", "zone", "start", "expected"), CONFORMANCE)
def test_conformance(expr: str, zone: str, start: str, expected: list[str]) -> None:
    assert iso(take(calendar_for(expr, zone), utc(start), len(expected))) == expected


@pytest.mark.parametrize(
    ("expr", "zone", "start", "fires"),
    [
        ("0 0 30 2 *", "UTC", "2025-01-01T00:00:00Z", 0),
        ("0 0 * * 7L", "UTC", "2025-01-01T00:00:00Z", 0),
        ("0 0 * * L", "UTC", "2025-01-01T00:00:00Z", 0),
        ("L * * * *", "UTC", "2025-01-01T00:00:00Z", 0),
        ("0 1 * * *", "Antarctica/Troll", "2025-03-28T00:00:00Z", 2),
        ("0 0 * * 5#3L", "UTC", "2025-12-01T00:00:00Z", None),
    ],
)
def test_iteration_ends(expr: str, zone: str, start: str, fires: int | None) -> None:
    got = take(calendar_for(expr, zone), utc(start), 5)
    if fires is None:
        assert len(got) == 5
    else:
        assert len(got) == fires


def test_never_firing_answer_is_cached_and_cheap() -> None:
    expr = CronExpression.parse("0 0 30 2 *")
    assert expr.never_fires
    calendar = CronCalendar(expr, load_timezone("UTC"))
    for year in (1999, 2025, 4000):
        assert calendar.next_from(datetime(year, 1, 1, tzinfo=UTC)) is None
    assert not CronExpression.parse("0 0 29 2 *").never_fires


def test_second_pass_start_resolves_to_first_pass() -> None:
    """croner searches the wall clock and resolves a repeated time to its earliest instant,
    so a start in the second pass of a repeated hour yields an instant *before* it."""
    calendar = calendar_for("*/15 * * * *", NY)
    start = utc("2025-11-02T06:10:00Z")  # 01:10 EST, second pass
    assert calendar.next_from(start) == utc("2025-11-02T05:15:00Z")  # 01:15 EDT
    assert calendar.next_from(start, inclusive=False) == utc("2025-11-02T05:15:00Z")
    # Awa's evaluator skips fires at or before the cursor, so the next fire after it is 02:00.
    assert next_fire_after(calendar, start) == utc("2025-11-02T07:00:00Z")
    assert fires_between(calendar, start, utc("2025-11-02T07:30:00Z")) == [
        utc("2025-11-02T07:00:00Z"),
        utc("2025-11-02T07:15:00Z"),
        utc("2025-11-02T07:30:00Z"),
    ]


def test_fire_on_last_second_before_fold_ends_iteration() -> None:
    """After a fire at 01:59:59 EDT, croner's next step (+1 s = 01:00:00 EST) resolves back to
    01:00 EDT and Awa's loops cycle through the hour for ever (awa-pg 0.6.9 enqueued duplicate
    jobs and then hung its evaluator). We stop iterating at the backwards step instead."""
    calendar = calendar_for("59 59 1 * * *", NY)
    fire = utc("2025-11-02T05:59:59Z")
    assert calendar.next_from(fire + timedelta(seconds=1)) == fire  # the jump back
    assert fires_between(calendar, utc("2025-11-01T00:00:00Z"), utc("2025-11-04T00:00:00Z")) == [
        utc("2025-11-01T05:59:59Z"),
        fire,
    ]


def test_inclusive_and_exclusive() -> None:
    calendar = calendar_for("*/5 * * * *", "UTC")
    t = utc("2025-01-01T00:05:00Z")
    assert calendar.next_from(t) == t
    assert calendar.next_from(t, inclusive=False) == utc("2025-01-01T00:10:00Z")
    assert calendar.next_from(t + timedelta(microseconds=999_999)) == t
    fire = calendar.next_from(utc("2025-01-01T00:05:01Z"))
    assert fire is not None and fire.tzinfo is UTC


def test_naive_search_and_matching() -> None:
    expr = CronExpression.parse("0 30 2 * * *")
    # The wall-clock search knows nothing of zones: 02:30 exists on every naive day.
    assert expr.next_local(datetime(2025, 3, 9, 0, 0)) == datetime(2025, 3, 9, 2, 30)
    assert expr.next_local(datetime(2025, 3, 9, 2, 30, 0, 500_000)) == datetime(2025, 3, 9, 2, 30)
    assert expr.matches(datetime(2025, 3, 9, 2, 30))
    assert not expr.matches(datetime(2025, 3, 9, 2, 31))
    assert CronExpression.parse("0 0 30 2 *").next_local(datetime(2025, 1, 1)) is None


# -- rejections ---------------------------------------------------------------------------------

REJECTED = [
    ("", "empty"),
    ("   ", "empty"),
    ("@midnight", "not a supported alias"),
    ("@reboot", "not a supported alias"),
    ("@every 5s", "2 fields given"),
    ("@daily x", "2 fields given"),
    ("* * * *", "4 fields given"),
    ("0 0 0 * * * 2025", "7 fields given"),
    ("0 0 * * FRI-MON", "no wrap-around"),
    ("5-1 * * * *", "no wrap-around"),
    ("0 0 LW * *", "needs a day number"),
    ("0 0 W * *", "needs a day number"),
    ("0 0 L5 * *", "must stand alone"),
    ("0 0 1L * *", "only allowed in day-of-week"),
    ("0 0 1#2 * *", "only allowed in day-of-week"),
    ("0 0 1/2#2 * *", "only allowed in day-of-week"),
    ("5W * * * *", "only allowed in day-of-month"),
    ("0 0 H * *", "not a number"),
    ("H * * * *", "not a number"),
    ("*/0 * * * *", "cannot be zero"),
    ("0 0 1-31/0 * *", "cannot be zero"),
    ("*/256 * * * *", "step must be a number"),
    ("50/250 * * * *", "overflows"),
    ("60 * * * *", "out of range"),
    ("0 24 * * *", "out of range"),
    ("0 0 0 * *", "out of range"),
    ("0 0 32 * *", "out of range"),
    ("0 0 * 0 *", "out of range"),
    ("0 0 * 13 *", "out of range"),
    ("0 0 * * 8", "out of range"),
    ("60 0 0 * * *", "out of range"),
    ("0 0 0W * *", "out of range"),
    ("0 0 32W * *", "out of range"),
    ("0 0 * * 5#6", "n must be 1-5"),
    ("0 0 * * 5#0", "n must be 1-5"),
    ("0 0 * * 5#", "n must be 1-5"),
    ("0 0 * * L#2", "not a number"),
    ("0 0 * * #2", "not a number"),
    ("0 0 * * L5", "not a number"),
    ("*,5 * * * *", "not a number"),
    ("0 0 1-5W * *", "not a range of two numbers"),
    ("1-2-3 * * * *", "not a range like a-b"),
    ("-1 * * * *", "not a range of two numbers"),
    ("*/2/3 * * * *", "not a step"),
    ("/5 * * * *", "not a step"),
    ("0 0 * * SUNDAY", "not a number"),
    ("0 0 * DECEMBER *", "not a number"),
    ("256 * * * *", "not a number"),
]


@pytest.mark.parametrize(("expr", "message"), REJECTED)
def test_rejected(expr: str, message: str) -> None:
    with pytest.raises(InvalidCronExpression) as info:
        CronExpression.parse(expr)
    text = str(info.value)
    assert message in text
    assert not text[0].isupper()


def test_field_count_message() -> None:
    with pytest.raises(InvalidCronExpression) as info:
        CronExpression.parse("0 0 0 * * * *")
    assert str(info.value) == (
        "7 fields given; Awa accepts 5 (min hour dom mon dow) or 6 (sec min hour dom mon dow)"
    )


# Odd inputs that croner 2.2.0 accepts (checked against awa-pg 0.6.9's validator).
ACCEPTED = [
    "? ? ? ? ?", "+1 * * * *", ",5 * * * *", "* * * * 1,", "L * * * *", "0 0 15w5 * *",
    "0 0 1-5#L * *", "5/250 * * * *", "0-59/255 * * * *", "0 0 * jan-sun *", "0 0 * * 5LL",
    "0 0 * * 5#3L", "0 0 * * 5#+2", " @daily ", "@WEEKLY", "0\t0 * * *", "sun * * * *",
    "0 0 * * 7/1", "0 0 * * 0/7", "0 0 * * 7-7", "0 0 l * l", "00 00 * * 0005", "*/+1 * * * *",
]  # fmt: skip


@pytest.mark.parametrize("expr", ACCEPTED)
def test_accepted_quirks(expr: str) -> None:
    CronExpression.parse(expr)


@given(st.lists(st.sampled_from(["5", "*/7", "1-4", "1,3", "*"]), min_size=5, max_size=6),
       st.lists(st.integers(1, 3), min_size=7, max_size=7), st.sampled_from([" ", "\t"]))
def test_runs_of_whitespace_split_fields_alike(fields: list[str], gaps: list[int],
                                               space: str) -> None:
    # Digits and spaces take a shorter way to their fields than text with names or tabs:
    # both must split on runs of whitespace, leading and trailing ones included.
    spaced = space * gaps[0] + "".join(
        f + space * g for f, g in zip(fields, gaps[1:], strict=False))
    start = datetime(2026, 3, 1, 7, 13, 5)
    tidy = CronExpression._build(" ".join(fields))
    assert CronExpression._build(spaced).next_local(start) == tidy.next_local(start)


def test_fields_shared_between_expressions_are_read_alike() -> None:
    # Each distinct field is parsed once for every expression that has it: an error comes
    # back on every parse, naming the first bad field, and a field's meaning does not
    # depend on the fields or the expressions met before it.
    for _ in range(2):
        with pytest.raises(InvalidCronExpression, match="minute field '61'"):
            CronExpression._build("61 * * * 32")
        with pytest.raises(InvalidCronExpression, match="day-of-week field '8'"):
            CronExpression._build("0 1 * * 8")
    start = datetime(2026, 3, 1)  # a Sunday
    sunday, zero, last = (CronExpression._build(f"0 9 * * {dow}") for dow in ("7", "0", "7L"))
    assert sunday.next_local(start) == zero.next_local(start) == datetime(2026, 3, 1, 9)
    assert last.never_fires  # croner folds 7 to 0 for every bit but L
    days = [CronExpression._build(f"0 {h} 15W * *").next_local(start) for h in (9, 10)]
    assert days == [datetime(2026, 3, 16, 9), datetime(2026, 3, 16, 10)]  # 15th: a Sunday


def test_parse_rejects_non_text() -> None:
    with pytest.raises(InvalidCronExpression):
        CronExpression.parse(None)  # type: ignore[arg-type]


# -- time zones -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["UTC", "US/Eastern", "EST5EDT", "Etc/GMT+5", "Europe/Kyiv"])
def test_timezone_accepted(name: str) -> None:
    assert load_timezone(name) is load_timezone(name)
    assert load_timezone(name).key == name


@pytest.mark.parametrize(
    "name", ["utc", "Utc", "UTC ", "us/eastern", "Mars/Olympus", "localtime", "Factory", ""]
)
def test_timezone_rejected(name: str) -> None:
    with pytest.raises(InvalidTimezone) as info:
        load_timezone(name)
    assert repr(name) in str(info.value)


def test_calendar_for_errors_are_typed() -> None:
    with pytest.raises(InvalidTimezone):
        calendar_for("* * * * *", "utc")
    with pytest.raises(InvalidCronExpression):
        calendar_for("@midnight", "UTC")
    with pytest.raises(InvalidCronExpression):
        calendar_for("@every 0s", "UTC")
    assert isinstance(calendar_for("@every 7s", "UTC"), IntervalCalendar)
    assert isinstance(calendar_for("*/5 * * * *", "UTC"), CronCalendar)
    assert isinstance(calendar_for("*/5 * * * *", "UTC"), Calendar)


# -- intervals ----------------------------------------------------------------------------------

REPRESENTABLE = [n for n in range(1, 7 * 86400 + 1) if not interval_expression(n).startswith("@")]


def test_interval_expressions() -> None:
    assert interval_expression(1) == "* * * * * *"
    assert interval_expression(5) == "*/5 * * * * *"
    assert interval_expression(60) == "0 * * * * *"
    assert interval_expression(900) == "0 */15 * * * *"
    assert interval_expression(3600) == "0 0 * * * *"
    assert interval_expression(7200) == "0 0 */2 * * *"
    assert interval_expression(86400) == "0 0 0 * * *"
    assert interval_expression(604800) == "0 0 0 * * 4"
    for n in (7, 45, 90, 5400, 172800, 10**9):
        assert interval_expression(n) == f"@every {n}s"
        with pytest.raises(InvalidCronExpression):  # Awa rejects the marker: never fires it
            CronExpression.parse(interval_expression(n))
    for bad in (0, -5, 1.5, True):
        with pytest.raises(ValueError):
            interval_expression(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        IntervalCalendar(0)
    assert len(REPRESENTABLE) == 11 + 11 + 7 + 2  # divisors of 60 (<60) twice, of 24, day, week
    for n in REPRESENTABLE:
        CronExpression.parse(interval_expression(n))


def test_interval_calendar_grid() -> None:
    calendar = IntervalCalendar(7)
    assert calendar.next_from(utc("1970-01-01T00:00:00Z")) == utc("1970-01-01T00:00:00Z")
    assert calendar.next_from(utc("1970-01-01T00:00:01Z")) == utc("1970-01-01T00:00:07Z")
    assert calendar.next_from(utc("1970-01-01T00:00:07Z"), inclusive=False) == utc(
        "1970-01-01T00:00:14Z"
    )
    assert calendar.next_from(utc("1970-01-01T00:00:07.5Z")) == utc("1970-01-01T00:00:07Z")


starts = st.datetimes(
    min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


@SETTINGS
@given(n=st.sampled_from(REPRESENTABLE), start=starts, inclusive=st.booleans())
def test_interval_cron_form_matches_grid(n: int, start: datetime, inclusive: bool) -> None:
    cron = calendar_for(interval_expression(n), "UTC")
    grid = IntervalCalendar(n)
    assert cron.next_from(start, inclusive=inclusive) == grid.next_from(start, inclusive=inclusive)
    first = grid.next_from(start)
    assert first is not None
    assert take(cron, first, 3) == take(grid, first, 3)


# -- agreement with croniter where the dialects agree -----------------------------------------


def _numeric_field(lo: int, hi: int, steps: bool) -> st.SearchStrategy[str]:
    value = st.integers(lo, hi)
    single = value.map(str)
    # croniter 7 expands a one-value range such as 5-5 to '*', so ranges here span two values.
    ranged = st.tuples(value, value).filter(lambda p: p[0] != p[1]).map(
        lambda p: f"{min(p)}-{max(p)}"
    )
    options = [single, ranged, st.just("*")]
    if steps:
        step = st.integers(1, hi - lo + 1)
        options.append(step.map(lambda s: f"*/{s}"))
        options.append(
            st.tuples(value, value, step)
            .filter(lambda p: p[0] != p[1])
            .map(lambda p: f"{min(p[:2])}-{max(p[:2])}/{p[2]}")
        )
    item = st.one_of(options)
    return st.lists(item, min_size=1, max_size=3).map(
        lambda items: "*" if "*" in items else ",".join(items)
    )


def _expand(field: str, lo: int, hi: int) -> set[int]:
    values: set[int] = set()
    for item in field.split(","):
        base, _, step = item.partition("/")
        if base == "*":
            a, b = lo, hi
        elif "-" in base:
            a, b = (int(x) for x in base.split("-"))
        else:
            a = b = int(base)
        values.update(range(a, b + 1, int(step or 1)))
    return values


def _croniter_reads_alike(fields: tuple[str, ...]) -> bool:
    # croniter 7 turns a day field that lists every value (0-6, 1-31) into '*', which changes
    # its day-of-month/day-of-week OR into an AND; croner only treats a literal '*' so.
    dom, dow = fields[2], fields[4]
    return (dom == "*" or _expand(dom, 1, 31) != set(range(1, 32))) and (
        dow == "*" or _expand(dow, 0, 6) != set(range(7))
    )


plain_expressions = (
    st.tuples(
        _numeric_field(0, 59, True),
        _numeric_field(0, 23, True),
        _numeric_field(1, 31, True),
        _numeric_field(1, 12, True),
        _numeric_field(0, 6, False),
    )
    .filter(_croniter_reads_alike)
    .map(" ".join)
)


@SETTINGS
@given(expr=plain_expressions, start=starts)
def test_agrees_with_croniter_in_utc(expr: str, start: datetime) -> None:
    start = start.replace(microsecond=0)
    calendar = calendar_for(expr, "UTC")
    ours = calendar.next_from(start, inclusive=False)
    assume(ours is not None and ours.year < 2200)
    theirs = croniter(expr, start.replace(tzinfo=None)).get_next(datetime)
    assert ours.replace(tzinfo=None) == theirs


# -- search properties -------------------------------------------------------------------------

POOL = [
    "*/5 * * * *", "0 9 * * 1-5", "30 2 * * *", "30 1 * * *", "*/15 1-3 * * 0", "0 0 1W * *",
    "0 0 L * *", "0 0 * * 5#L", "0 0 */2 * 1", "7 3 15W 3,10,11 *", "0 */7 2 * * *",
    "*/20 */15 1-3 * * *", "0 0 29 2 *", "0 30 2 * * 0", "15 2 5,6 4,10 *", "0 0 * * 1/2",
]  # fmt: skip
ZONES = ["UTC", NY, "Pacific/Auckland", "Australia/Lord_Howe", "Europe/Paris", "Asia/Kolkata",
         "Antarctica/Troll", "Etc/GMT-14", "America/Sao_Paulo", "Pacific/Chatham"]  # fmt: skip
zoned_starts = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2032, 1, 1), timezones=st.just(UTC)
)


@SETTINGS
@given(expr=st.sampled_from(POOL), zone=st.sampled_from(ZONES), start=zoned_starts)
def test_results_match_the_wall_clock(expr: str, zone: str, start: datetime) -> None:
    """Each fire is the first matching wall time at or after the start's wall time, converted
    the chrono-tz way; the search agrees with a minute-by-minute scan of the wall clock."""
    calendar = calendar_for(expr, zone)
    tz = ZoneInfo(zone)
    fire = calendar.next_from(start)
    wall = start.astimezone(tz).replace(tzinfo=None, microsecond=0)
    expected_wall = CronExpression.parse(expr).next_local(wall)
    if fire is None:
        return
    assert expected_wall is not None
    # Brute force: no matching wall time between the start and the one found.
    probe = wall
    while probe < min(expected_wall, wall + timedelta(hours=3)):
        assert not CronExpression.parse(expr).matches(probe)
        probe = probe.replace(second=0) + timedelta(minutes=1)
    assert CronExpression.parse(expr).matches(expected_wall)
    local_fire = fire.astimezone(tz)
    if local_fire.replace(tzinfo=None) != expected_wall:
        # Only a wall time that does not exist may move, forward, to the end of its gap.
        moved = local_fire.replace(tzinfo=None) - expected_wall
        assert timedelta(0) < moved <= timedelta(hours=1)
        roundtrip = expected_wall.replace(tzinfo=tz).astimezone(UTC).astimezone(tz)
        assert roundtrip.replace(tzinfo=None) != expected_wall
    else:
        assert local_fire.fold == 0  # the first pass of a repeated hour


@SETTINGS
@given(expr=st.sampled_from(POOL), zone=st.sampled_from(ZONES), start=zoned_starts)
def test_exclusive_is_strictly_after_and_monotonic(expr: str, zone: str, start: datetime) -> None:
    calendar = calendar_for(expr, zone)
    second_pass = start.astimezone(ZoneInfo(zone)).fold == 1
    fire = calendar.next_from(start, inclusive=False)
    if fire is not None and not second_pass:
        assert fire > start
    prev = None
    for fire in take(calendar, start, 8):
        if prev is not None:
            assert fire > prev
        prev = fire


@SETTINGS
@given(expr=st.sampled_from(POOL), start=starts, inclusive=st.booleans())
def test_fixed_offset_zones_are_shifted_utc(expr: str, start: datetime, inclusive: bool) -> None:
    """Etc/GMT-3 is UTC+3 all year: the fast path must agree with shifting UTC by 3 h."""
    shifted = calendar_for(expr, "Etc/GMT-3").next_from(start, inclusive=inclusive)
    base = calendar_for(expr, "UTC").next_from(start + timedelta(hours=3), inclusive=inclusive)
    assert shifted == (None if base is None else base - timedelta(hours=3))


def _offset_changes(zone: str) -> list[int]:
    """The instants (epoch seconds) at which ``zone`` changes its UTC offset, from the
    transitions in its file and from its closing rule over a few years."""
    from zoneinfo import _zoneinfo  # the pure-Python reader, which keeps the transitions

    z = _zoneinfo.ZoneInfo.no_cache(zone)  # type: ignore[attr-defined]
    changes = []
    offset = z._tti_before.utcoff if z._tti_before else None
    for at, tti in zip(z._trans_utc, z._ttinfos, strict=True):
        if tti.utcoff != offset:
            changes.append(at)
            offset = tti.utcoff
    rule = z._tz_after
    if isinstance(rule, _zoneinfo._TZStr):  # type: ignore[attr-defined]
        last = datetime.fromtimestamp(changes[-1], UTC).year if changes else 2000
        for year in range(last, last + 4):  # overlapping the file's last changes
            start, end = rule.transitions(year)  # wall time, standard and summer
            changes.append(start - int(rule.std.utcoff.total_seconds()))
            changes.append(end - int(rule.dst.utcoff.total_seconds()))
    return sorted(set(changes))


def test_no_zone_changes_its_offset_twice_within_an_hour() -> None:
    """What the wall-hour memo of fire_times rests on: equal offsets at both ends of a wall
    hour, in both folds, mean no change within it."""
    from zoneinfo import available_timezones

    gaps = []
    for zone in available_timezones():
        changes = _offset_changes(zone)
        gaps.extend((later - earlier, zone) for earlier, later in pairwise(changes))
    assert min(gaps)[0] > 3600, min(gaps)


TRANSITION_DAYS = [  # (zone, a day with a change of offset, and the days either side)
    (NY, datetime(2026, 3, 8)), (NY, datetime(2026, 11, 1)),
    ("Europe/Paris", datetime(2026, 3, 29)), ("Europe/Paris", datetime(2026, 10, 25)),
    ("Australia/Lord_Howe", datetime(2026, 4, 5)), ("Australia/Lord_Howe", datetime(2026, 10, 4)),
    ("Pacific/Chatham", datetime(2026, 4, 5)), ("Antarctica/Troll", datetime(2026, 3, 29)),
    ("Pacific/Apia", datetime(2011, 12, 30)), ("UTC", datetime(2026, 3, 8)),
]  # fmt: skip


@SETTINGS
@given(picks=st.lists(st.tuples(st.sampled_from(TRANSITION_DAYS), st.integers(-1, 1),
                                st.integers(0, 23), st.integers(0, 59), st.integers(0, 59)),
                      min_size=1, max_size=20))
def test_wall_hours_remembered_resolve_as_each_alone(
        picks: list[tuple[tuple[str, datetime], int, int, int, int]]) -> None:
    """A wall time resolves to the instant it resolves to with nothing remembered,
    whatever was asked before it (other zones, the same hour, a skipped or repeated one)."""
    from awa_beat._schedules import fire_times

    fire_times._HOURS.clear()
    for (zone, day), shift, h, mi, s in picks:
        d = day + timedelta(days=shift)
        wall = (d.year, d.month, d.day, h, mi, s)
        tz = load_timezone(zone)
        assert fire_times._earliest_at(tz, wall) == fire_times._resolve(tz, wall), (zone, wall)


def test_a_fire_past_the_year_9999_is_none() -> None:
    # The wall time is in 9999, the instant in 10000: past what a datetime holds.
    last = datetime(9999, 12, 31, 23, 59, tzinfo=UTC)
    calendar = calendar_for("0 0 * * * *", NY)
    assert isinstance(calendar, CronCalendar)
    assert calendar.next_epoch(int(last.timestamp())) is None
    assert calendar.next_from(last) is None
    assert next_fire_after(calendar, last) is None


def test_a_new_rows_window_opens_a_minute_before_the_instant_it_was_created() -> None:
    # 01:30 in New York's second pass (06:30Z): a minute before is 06:29Z, not 05:29Z
    # as the wall clock would have it, so 06:00Z is not due.
    created = datetime(2026, 11, 1, 1, 30, tzinfo=ZoneInfo(NY), fold=1)
    now = utc("2026-11-01T06:45:00Z")
    hourly = calendar_for("0 0 * * * *", "UTC")
    assert due_fires(hourly, last_enqueued_at=None, created_at=created, now=now,
                     policy="coalesce") == []
    assert due_fires(hourly, last_enqueued_at=None, created_at=created.replace(fold=0),
                     now=now, policy="coalesce") == [utc("2026-11-01T06:00:00Z")]


def test_a_zone_that_cannot_be_hashed_still_makes_a_calendar() -> None:
    class Unhashable(timezone.__base__):  # type: ignore[misc,name-defined]
        __hash__ = None  # type: ignore[assignment]

        def utcoffset(self, dt: datetime | None) -> timedelta:
            return timedelta(hours=2)

        def dst(self, dt: datetime | None) -> timedelta:
            return timedelta(0)

    calendar = CronCalendar(CronExpression.parse("0 3 * * *"), Unhashable())
    assert calendar.next_from(utc("2026-01-01T00:00:00Z")) == utc("2026-01-01T01:00:00Z")


# -- Awa's evaluator rules --------------------------------------------------------------------


@SETTINGS
@given(
    expr=st.sampled_from(POOL),
    zone=st.sampled_from(ZONES),
    last=zoned_starts,
    gap=st.integers(0, 200_000),
    limit=st.sampled_from([1, 3, 1000]),
    micros=st.integers(0, 999_999),
)
def test_due_fires_policies(
    expr: str, zone: str, last: datetime, gap: int, limit: int, micros: int
) -> None:
    calendar = calendar_for(expr, zone)
    last = last.replace(microsecond=0)
    now = last + timedelta(seconds=gap, microseconds=micros)
    every = fires_between(calendar, last, now, 100_000)
    assert all(last < f <= now for f in every)
    assert every == sorted(set(every))
    caught = due_fires(
        calendar, last_enqueued_at=last, created_at=last, now=now, policy="catch_up", limit=limit
    )
    assert caught == every[:limit]
    coalesced = due_fires(
        calendar, last_enqueued_at=last, created_at=last, now=now, policy="coalesce"
    )
    assert coalesced == every[-1:]
    # First registration: the latest fire in [floor(created_at - 60 s), now], whatever the policy.
    created = last + timedelta(microseconds=micros)
    window = fires_between(calendar, last - timedelta(seconds=61), now, 100_000)
    floor_start = last - timedelta(seconds=60)
    expected = [f for f in window if f >= floor_start][-1:]
    for policy in ("coalesce", "catch_up"):
        assert (
            due_fires(calendar, last_enqueued_at=None, created_at=created + timedelta(seconds=0),
                      now=now, policy=policy)
            == expected
        )


def test_first_registration_window() -> None:
    calendar = calendar_for("0 9 * * *", "UTC")
    now = utc("2026-03-04T12:00:00Z")
    created = now - timedelta(days=3)
    for policy in ("coalesce", "catch_up"):
        assert due_fires(
            calendar, last_enqueued_at=None, created_at=created, now=now, policy=policy
        ) == [utc("2026-03-04T09:00:00Z")]
    at = utc("2026-03-04T09:01:00.700000Z")
    assert due_fires(calendar, last_enqueued_at=None, created_at=at, now=at, policy="coalesce") == [
        utc("2026-03-04T09:00:00Z")
    ]
    at = utc("2026-03-04T09:01:01Z")
    late = due_fires(calendar, last_enqueued_at=None, created_at=at, now=at, policy="coalesce")
    assert late == []


def test_catch_up_backlog_and_limit() -> None:
    calendar = calendar_for("* * * * *", "UTC")
    last = utc("2026-03-01T00:00:00Z")
    now = last + timedelta(days=2)
    assert len(fires_between(calendar, last, now, 10_000)) == 2880
    first_pass = due_fires(
        calendar, last_enqueued_at=last, created_at=last, now=now, policy="catch_up"
    )
    assert len(first_pass) == 1000
    assert first_pass[0] == last + timedelta(minutes=1)
    second_pass = due_fires(
        calendar, last_enqueued_at=first_pass[-1], created_at=last, now=now, policy="catch_up"
    )
    assert second_pass[0] == first_pass[-1] + timedelta(minutes=1)
    assert due_fires(
        calendar, last_enqueued_at=last, created_at=last, now=now, policy="coalesce"
    ) == [now]


def test_nothing_due_and_bad_policy() -> None:
    calendar = calendar_for("0 0 * * *", "UTC")
    last = utc("2026-03-01T00:00:00Z")
    for policy in ("coalesce", "catch_up"):
        assert (
            due_fires(calendar, last_enqueued_at=last, created_at=last,
                      now=last + timedelta(hours=23), policy=policy)
            == []
        )
    with pytest.raises(ValueError):
        due_fires(calendar, last_enqueued_at=last, created_at=last, now=last, policy="latest")
    never = calendar_for("0 0 30 2 *", "UTC")
    assert not due_fires(never, last_enqueued_at=None, created_at=last, now=last, policy="coalesce")
    assert next_fire_after(never, last) is None
    with pytest.raises(ValueError):
        calendar.next_from(datetime(2026, 1, 1))  # naive


def test_next_fire_after_and_fires_between() -> None:
    calendar = calendar_for("*/10 * * * *", "UTC")
    t = utc("2026-01-01T00:10:00Z")
    assert next_fire_after(calendar, t) == utc("2026-01-01T00:20:00Z")
    assert next_fire_after(calendar, t - timedelta(microseconds=1)) == t
    assert fires_between(calendar, t, t + timedelta(minutes=30), 2) == [
        utc("2026-01-01T00:20:00Z"),
        utc("2026-01-01T00:30:00Z"),
    ]
    assert fires_between(calendar, t, t + timedelta(minutes=30), 0) == []
    assert fires_between(IntervalCalendar(600), t, t + timedelta(minutes=20)) == [
        utc("2026-01-01T00:20:00Z"),
        utc("2026-01-01T00:30:00Z"),
    ]


@pytest.mark.parametrize("text, expected", [
    ("2026-12-03 09:00:18+00", datetime(2026, 12, 3, 9, 0, 18, tzinfo=UTC)),
    ("1970-01-01T00:00:07.5+00:00", datetime(1970, 1, 1, 0, 0, 7, 500000, tzinfo=UTC)),
    ("2025-11-02T06:10:00Z", datetime(2025, 11, 2, 6, 10, tzinfo=UTC)),
    ("2026-01-05 12:00:00.1234567-0530",
     datetime(2026, 1, 5, 12, 0, 0, 123456, tzinfo=timezone(-timedelta(hours=5, minutes=30)))),
    ("2026-01-05T12:00", datetime(2026, 1, 5, 12, 0)),
    ("2026-01-05", datetime(2026, 1, 5)),
])
def test_parse_iso_reads_what_python_3_11_reads_on_every_python(text: str,
                                                                 expected: datetime) -> None:
    got = parse_iso(text)
    assert got == expected and got.utcoffset() == expected.utcoffset()
    with pytest.raises(ValueError):
        parse_iso("2026-13-05 12:00:00+00")
