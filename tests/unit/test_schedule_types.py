"""Solar, at, rrule and bounded schedules: conversion, markers and fire times (pure, the
clock injected), checked against Celery's and RedBeat's own computations; and the
engine firing them against the in-memory store."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from celery.schedules import crontab, solar
from dateutil.rrule import DAILY, FR, MO, MONTHLY, WEEKLY
from dateutil.rrule import rrule as dateutil_rrule
from hypothesis import given, settings
from hypothesis import strategies as st
from redbeat.schedules import rrule as redbeat_rrule

from awa_beat._db.records import RETIRED_BY
from awa_beat._engine.engine import Engine
from awa_beat._schedules.calendars import at
from awa_beat._schedules.fire_times import calendar_for, due_fires, fires_between, next_fire_after
from awa_beat._schedules.markers import is_marker, max_runs, split_bounds
from awa_beat._schedules.spec import spec_from_entry
from awa_beat._testing import FakeClock, MemoryStore
from awa_beat.errors import ValidationError

UTC = timezone.utc
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
# Awa's croner accepts only these aliases; every marker must be something else.
AWA_ALIASES = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@hourly"}


def spec(schedule: object, **awa: object):
    return spec_from_entry("e", {"task": "t", "schedule": schedule,
                                 "options": {"awa_beat": awa}})


# -- storage -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("schedule", "awa", "expr", "zone"), [
    (solar("sunrise", 51.5, -0.1), {}, "@solar sunrise 51.5 -0.1", "UTC"),
    (solar("solar_noon", 0, 0), {"timezone": "Europe/Paris"}, "@solar solar_noon 0 0", "UTC"),
    (at(datetime(2027, 1, 1, 9, 0, 0, 900_000, tzinfo=ZoneInfo("Europe/Paris"))), {},
     "@at 2027-01-01T08:00:00Z | runs=1", "UTC"),
    (crontab(minute=0, hour=9), {"timezone": "Europe/Paris", "max_runs": 3},
     "@cron 0 9 * * * | runs=3", "Europe/Paris"),
    (60, {"one_off": True}, "@cron 0 * * * * * | runs=1", "UTC"),
    (90, {"start_time": datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
          "end_time": "2026-02-01T00:00:00.9+00:00"},
     "@every 90s | start=2026-01-01T00:00:01Z end=2026-02-01T00:00:00Z", "UTC"),
    (redbeat_rrule("MINUTELY", dtstart=datetime(2026, 1, 1, tzinfo=UTC), count=3), {},
     "@rrule DTSTART=20260101T000000+0000;FREQ=MINUTELY;COUNT=3", "UTC"),
    (dateutil_rrule(WEEKLY, dtstart=datetime(2026, 1, 2, 9, tzinfo=ZoneInfo("America/New_York")),
                    byweekday=(MO, FR), until=datetime(2026, 6, 1, tzinfo=UTC)), {},
     "@rrule DTSTART=20260102T090000;FREQ=WEEKLY;UNTIL=20260601T000000Z;BYDAY=MO,FR",
     "America/New_York"),
    (dateutil_rrule(MONTHLY, dtstart=datetime(2026, 1, 1, 8, tzinfo=UTC), byweekday=FR(-1),
                    interval=2), {"end_time": datetime(2027, 1, 1, tzinfo=UTC)},
     "@rrule DTSTART=20260101T080000+0000;FREQ=MONTHLY;INTERVAL=2;BYDAY=-1FR"
     " | end=2027-01-01T00:00:00Z", "UTC"),
])
def test_each_type_is_stored_as_a_marker_awa_rejects(schedule, awa, expr: str, zone: str) -> None:
    s = spec(schedule, **awa)
    assert (s.cron_expr, s.timezone) == (expr, zone)
    assert s.cron_expr.startswith("@") and s.cron_expr.split(" ")[0] not in AWA_ALIASES
    assert is_marker(s.cron_expr)
    calendar_for(s.cron_expr, s.timezone)  # reads back
    assert spec(s.cron_expr, timezone=zone).cron_expr == expr  # export/import round trip


def test_an_unbounded_awa_expression_stays_as_it_is() -> None:
    assert spec(crontab(minute=0, hour=9)).cron_expr == "0 9 * * *"
    assert spec(30).cron_expr == "*/30 * * * * *"
    assert max_runs("0 9 * * *") is None and max_runs("@every 5s | runs=4") == 4


@pytest.mark.parametrize(("schedule", "awa", "field", "message"), [
    (60, {"max_runs": 0}, "options.awa_beat.max_runs", "whole number >= 1"),
    (60, {"max_runs": True}, "options.awa_beat.max_runs", "whole number >= 1"),
    (60, {"one_off": True, "max_runs": 2}, "options.awa_beat.one_off", "contradicts"),
    (60, {"start_time": datetime(2026, 1, 1)}, "options.awa_beat.start_time", "aware"),
    (60, {"end_time": "tomorrow"}, "options.awa_beat.end_time", "ISO 8601"),
    (60, {"start_time": T0, "end_time": T0 - timedelta(1)}, "options.awa_beat.end_time",
     "before start"),
    (at(T0), {"max_runs": 2}, "options.awa_beat.max_runs", "at() fires once"),
    (at(T0), {"end_time": T0}, "options.awa_beat.end_time", "at() fires once"),
    ("@solar sunrise 91 0", {}, "schedule", "latitude 91.0 is out of range"),
    ("@cron 0 9 * * * | runs=2", {"max_runs": 3}, "schedule", "already has bounds"),
])
def test_bad_types_and_bounds_name_the_entry_and_field(schedule, awa, field: str,
                                                        message: str) -> None:
    with pytest.raises(ValidationError) as info:
        spec(schedule, **awa)
    assert [(n, f) for n, f, _ in info.value.problems] == [("e", field)]
    assert message in str(info.value)


# -- solar against Celery's own computation ----------------------------------------------------

PLACES = [
    ("sunrise", 51.5, -0.12), ("sunset", -33.9, 151.2), ("solar_noon", 0, 0),
    ("dawn_astronomical", 64.1, -21.9), ("dusk_nautical", 40.7, -74.0),
    # Svalbard: no sunrise or civil dusk in the polar night, none of the dawns in summer.
    ("sunrise", 78.2, 15.6), ("dusk_civil", 78.2, 15.6), ("dawn_nautical", 69.6, 18.9),
]


def celery_next(event: str, lat: float, lon: float, last: datetime) -> datetime:
    """When Celery's solar is next due after a run at ``last``, asked at ``last``."""
    s = solar(event, lat, lon, nowfun=lambda: last)
    return last + s.remaining_estimate(last)


@pytest.mark.parametrize(("event", "lat", "lon"), PLACES)
def test_solar_fires_when_celery_would(event: str, lat: float, lon: float) -> None:
    calendar = calendar_for(f"@solar {event} {lat} {lon}", "UTC")
    for day in range(0, 365, 23):
        last = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=day, hours=day % 24)
        ours = next_fire_after(calendar, last)
        theirs = celery_next(event, lat, lon, last)
        assert ours is not None and ours.microsecond == 0
        # The event's second, rounded up; ephem moves by milliseconds with its start.
        assert -0.1 < (ours - theirs).total_seconds() < 1.1, (last, ours, theirs)


def test_solar_skips_the_days_an_event_does_not_happen() -> None:
    calendar = calendar_for("@solar sunrise 78.2 15.6", "UTC")
    polar_night = datetime(2026, 11, 20, tzinfo=UTC)
    first = next_fire_after(calendar, polar_night)
    assert first is not None and datetime(2027, 2, 1, tzinfo=UTC) < first
    assert abs((first - celery_next("sunrise", 78.2, 15.6, polar_night)).total_seconds()) < 1


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 365 * 24 * 3600 - 1))
def test_every_search_gives_an_event_the_same_second(offset: int) -> None:
    # Replicas and passes search from different instants; one event must never become two
    # fires a second apart, or the cursor would let the second one through.
    calendar = calendar_for("@solar sunset 48.85 2.35", "UTC")
    start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=offset)
    fire = next_fire_after(calendar, start)
    assert fire is not None
    for back in (1, 7, 600, 3 * 3600, 20 * 3600):
        assert next_fire_after(calendar, max(start, fire - timedelta(seconds=back))) == fire
    assert next_fire_after(calendar, fire) > fire + timedelta(hours=20)


# -- at, rrule, bounds -------------------------------------------------------------------------


def test_at_fires_once_at_its_instant_under_either_policy() -> None:
    calendar = calendar_for("@at 2026-03-02T12:00:30Z | runs=1", "UTC")
    fire = T0 + timedelta(seconds=30)
    for policy in ("coalesce", "catch_up"):
        assert due_fires(calendar, last_enqueued_at=T0, created_at=T0, now=fire,
                         policy=policy) == [fire]
        assert due_fires(calendar, last_enqueued_at=T0, created_at=T0,
                         now=fire - timedelta(seconds=1), policy=policy) == []
        assert due_fires(calendar, last_enqueued_at=fire, created_at=T0,
                         now=fire + timedelta(days=9), policy=policy) == []


RRULES = [
    redbeat_rrule("MINUTELY", dtstart=datetime(2026, 1, 1, 9, 0, 30, tzinfo=UTC), interval=7,
                  count=40),
    redbeat_rrule("DAILY", dtstart=datetime(2026, 3, 1, 9, tzinfo=timezone(timedelta(hours=2))),
                  byhour=[9, 17], until=datetime(2026, 4, 1, tzinfo=UTC)),
    dateutil_rrule(DAILY, dtstart=datetime(2026, 3, 1, 2, 30, tzinfo=ZoneInfo("America/New_York")),
                   count=20),
    dateutil_rrule(MONTHLY, dtstart=datetime(2026, 1, 31, 8, tzinfo=UTC), bymonthday=-1,
                   byweekday=[MO, FR], bysetpos=1, count=10),
]


@pytest.mark.parametrize("rule", RRULES)
def test_rrule_fires_what_redbeat_would(rule) -> None:
    s = spec(rule)
    calendar = calendar_for(s.cron_expr, s.timezone)
    inner = getattr(rule, "rrule", rule)
    expected = [t.astimezone(UTC) for t in inner]
    start = expected[0] - timedelta(seconds=1)
    assert fires_between(calendar, start, expected[-1] + timedelta(days=400)) == expected
    # RedBeat's is_due: the next run after the last one is rrule.after(last_run_at).
    for last in expected[:-1]:
        assert next_fire_after(calendar, last) == inner.after(last).astimezone(UTC)
    assert next_fire_after(calendar, expected[-1]) is None


def test_bounds_keep_every_fire_inside_start_and_end() -> None:
    calendar = calendar_for("@cron */10 * * * * * | start=2026-03-02T12:00:05Z "
                            "end=2026-03-02T12:01:00Z", "UTC")
    assert fires_between(calendar, T0 - timedelta(hours=1), T0 + timedelta(hours=1)) == [
        T0 + timedelta(seconds=s) for s in (10, 20, 30, 40, 50, 60)]
    assert split_bounds("@solar sunset 1 2 | runs=2")[1].runs == 2


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 600), st.integers(-3000, 3000), st.integers(0, 3000),
       st.integers(-4000, 4000))
def test_bounded_interval_is_the_interval_cut_to_its_bounds(
        every: int, start: int, length: int, cursor: int) -> None:
    lo, hi = T0 + timedelta(seconds=start), T0 + timedelta(seconds=start + length)
    bounded = calendar_for(f"@every {every}s | start={lo:%Y-%m-%dT%H:%M:%SZ} "
                           f"end={hi:%Y-%m-%dT%H:%M:%SZ}", "UTC")
    plain = calendar_for(f"@every {every}s | runs=9", "UTC")
    after = T0 + timedelta(seconds=cursor)
    until = T0 + timedelta(seconds=8000)
    assert fires_between(bounded, after, until, limit=10_000) == [
        f for f in fires_between(plain, after, until, limit=10_000) if lo <= f <= hi]


# -- the engine, against the in-memory store ----------------------------------------------------


def test_engine_fires_a_one_off_once_and_the_store_retires_it() -> None:
    clock = FakeClock(T0)
    store = MemoryStore(clock)
    store.add("once", "@at 2026-03-02T12:00:30Z | runs=1", last_enqueued_at=T0)
    engine = Engine(store.evaluator, clock=clock)
    engine.run_pass()
    assert store.jobs == []
    clock.advance(seconds=31)
    engine.run_pass()
    clock.advance(days=3)
    engine.run_pass()
    assert store.fired("once") == ["2026-03-02 12:00:30+00"]
    assert store.rows["once"].paused_at is not None
    assert store.paused_by["once"] == RETIRED_BY and store.runs["once"] == 1


def test_engine_max_runs_stops_at_n_even_when_a_catch_up_asks_for_more() -> None:
    clock = FakeClock(T0)
    store = MemoryStore(clock)
    store.add("n", "@cron * * * * * * | runs=4", last_enqueued_at=T0,
              missed_fire_policy="catch_up")
    clock.advance(seconds=3)
    engine = Engine(store.evaluator, clock=clock)
    engine.run_pass()
    assert len(store.fired("n")) == 3 and store.rows["n"].paused_at is None
    clock.advance(seconds=10)
    engine.run_pass()
    assert store.fired("n") == [f"2026-03-02 12:00:0{s}+00" for s in (1, 2, 3, 4)]
    assert store.rows["n"].last_enqueued_at == T0 + timedelta(seconds=4)
    assert store.paused_by["n"] == RETIRED_BY
    # Resumed with no run left: nothing fires and it is retired again.
    store.update("n", paused_at=None)
    clock.advance(seconds=5)
    engine.refresh_soon()
    engine.run_pass()
    engine.run_pass()
    assert len(store.fired("n")) == 4 and store.rows["n"].paused_at is not None


def test_engine_solar_and_rrule_rows_fire_on_their_calendars() -> None:
    clock = FakeClock(datetime(2026, 6, 1, tzinfo=UTC))
    store = MemoryStore(clock)
    store.add("sun", "@solar solar_noon 0 0", last_enqueued_at=clock())
    store.add("rr", "@rrule DTSTART=20260601T000000+0000;FREQ=HOURLY;COUNT=2",
              last_enqueued_at=clock())
    engine = Engine(store.evaluator, clock=clock)
    engine.run_pass()
    wake = engine.next_due()
    assert wake == datetime(2026, 6, 1, 1, tzinfo=UTC).timestamp()  # the rrule's 01:00
    clock.advance(hours=13)
    engine.run_pass()
    assert store.fired("rr") == ["2026-06-01 01:00:00+00"]  # its only fire left (COUNT=2)
    (noon,) = store.fired("sun")
    assert noon.startswith("2026-06-01 11:5") or noon.startswith("2026-06-01 12:0")
    clock.advance(days=1)
    engine.run_pass()
    assert len(store.fired("rr")) == 1 and len(store.fired("sun")) == 2
