"""Schedule specs: Celery schedule conversion and eager validation (pure, no database)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from celery.schedules import crontab, schedule, solar
from hypothesis import given, settings
from hypothesis import strategies as st
from kombu import Queue

from awa_beat._schedules.calendars import at
from awa_beat._schedules.fire_times import calendar_for
from awa_beat._schedules.spec import (
    ScheduleSpec,
    spec_from_entry,
    specs_from_beat_schedule,
    to_cron_expression,
)
from awa_beat.errors import ScheduleError, ValidationError

UTC = timezone.utc


@pytest.mark.parametrize(("tab", "expected"), [
    (crontab(), "* * * * *"),
    (crontab(minute=0, hour=9, day_of_week="mon-fri"), "0 9 * * 1-5"),
    (crontab(minute="*/15"), "0,15,30,45 * * * *"),
    (crontab(minute=30, hour="9-17"), "30 9-17 * * *"),
    (crontab(minute=0, hour=0, day_of_month="1"), "0 0 1 * *"),
    (crontab(minute=0, hour=0, day_of_month="1-31", month_of_year="1-12"), "0 0 * * *"),
    (crontab(minute=0, hour=0, day_of_week="0-6"), "0 0 * * *"),
    (crontab(minute=0, hour=0, day_of_week="sun,sat"), "0 0 * * 0,6"),
    (crontab(minute=0, hour=4, month_of_year="1,4,7,10", day_of_month=1), "0 4 1 1,4,7,10 *"),
    (crontab(minute=[0, 1], hour={2, 3, 4}), "0,1 2-4 * * *"),
    # Celery ANDs day_of_month with day_of_week: the first Monday of the month.
    (crontab(minute=0, hour=8, day_of_week="mon", day_of_month="1-7"), "0 8 * * 1#1"),
    (crontab(minute=0, hour=8, day_of_week="fri", day_of_month="22-28"), "0 8 * * 5#4"),
    (crontab(minute=0, hour=8, day_of_week="mon,wed", day_of_month="8-14"),
     "0 8 * * 1#2,3#2"),
])
def test_crontab_conversion(tab: crontab, expected: str) -> None:
    assert to_cron_expression(tab) == (expected, None)


@pytest.mark.parametrize(("tab", "marker"), [
    (crontab(minute=0, hour=0, day_of_week="fri", day_of_month="13"), "@crontab 0 0 13 * 5"),
    (crontab(minute=0, hour=0, day_of_week="mon", day_of_month="1-10"),
     "@crontab 0 0 1-10 * 1"),
    (crontab(minute=0, hour=0, day_of_week="mon", day_of_month="*/2"),
     "@crontab 0 0 1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31 * 1"),
])
def test_crontab_with_no_cron_equivalent_is_a_marker(tab: crontab, marker: str) -> None:
    """Celery requires both day fields, cron either: only awa-beat fires these."""
    assert to_cron_expression(tab) == (marker, None)


@pytest.mark.parametrize(("value", "expected"), [
    (5, "*/5 * * * * *"),
    (1, "* * * * * *"),
    (timedelta(seconds=30), "*/30 * * * * *"),
    (60.0, "0 * * * * *"),
    (timedelta(minutes=10), "0 */10 * * * *"),
    (schedule(timedelta(hours=6)), "0 0 */6 * * *"),
    (timedelta(days=1), "0 0 0 * * *"),
    (timedelta(weeks=1), "0 0 0 * * 4"),
    (7, "@every 7s"),
    (90, "@every 90s"),
    (timedelta(minutes=45), "@every 2700s"),
    (schedule(timedelta(days=2), relative=True), "@every 172800s"),
])
def test_interval_conversion_is_epoch_anchored_utc(value, expected: str) -> None:
    assert to_cron_expression(value) == (expected, "UTC")


@pytest.mark.parametrize(("value", "message"), [
    (0.5, "too short"), (0, "too short"), (1.5, "not a whole number"),
    (timedelta(milliseconds=2500), "not a whole number"),
    ("@solar noon 0 0", "unknown solar event"),
    ("@every 0s", "not an interval"),
    ("@at 2027-01-01 | runs=1", "not an instant"),
    ("@cron 0 9 * * *", "without bounds"),
    ("@cron 0 9 * * * | runs=0", "at least 1"),
    ("@every 5s | end=2027-01-01T00:00:00Z start=2026-01-01T00:00:00Z", "in that order"),
    ("@rrule FREQ=DAILY", "needs DTSTART"),
    (object(), "not supported"),
    (None, "is missing"),
    ("0 0 * * * * *", "7 fields"),
    ("@midnight", "not a supported alias"),
])
def test_unsupported_schedules_are_rejected(value, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        to_cron_expression(value)


def test_awa_cron_strings_pass_through() -> None:
    assert to_cron_expression("0 0 L * *") == ("0 0 L * *", None)
    assert to_cron_expression("30 0 9 * * 1#1") == ("30 0 9 * * 1#1", None)


# Our calendar must fire every converted crontab exactly when Celery's crontab semantics
# say it should. The oracle reads the crontab's expanded sets with Celery's rules (day of
# month AND day of week, Sunday = 0) instead of calling crontab.remaining_delta, which
# before Celery 5.7 skips a later slot on the same day (e.g. 00:01 after a run at 00:00).
_minutes = st.sets(st.integers(0, 59), min_size=1, max_size=6)
_hours = st.sets(st.integers(0, 23), min_size=1, max_size=4) | st.just(set(range(24)))
_dows = st.sets(st.integers(0, 6), min_size=1, max_size=3) | st.just(set(range(7)))
_doms = st.sets(st.integers(1, 31), min_size=1, max_size=3) | st.just(set(range(1, 32)))


def celery_next(tab: crontab, last: datetime) -> datetime | None:
    """The first minute after ``last`` (UTC) that Celery's crontab matches."""
    times = sorted((h, m) for h in tab.hour for m in tab.minute)
    day = last.date()
    for _ in range(366 * 9):
        if (day.month in tab.month_of_year and day.day in tab.day_of_month
                and day.isoweekday() % 7 in tab.day_of_week):
            for h, m in times:
                candidate = datetime(day.year, day.month, day.day, h, m, tzinfo=UTC)
                if candidate > last:
                    return candidate
        day += timedelta(days=1)
    return None


@settings(max_examples=60, deadline=None)
@given(minute=_minutes, hour=_hours, dow=_dows, dom=_doms,
       start=st.datetimes(min_value=datetime(2024, 1, 1), max_value=datetime(2027, 12, 31)))
def test_converted_crontab_fires_when_celery_would(minute, hour, dow, dom, start) -> None:
    if dow != set(range(7)) and dom != set(range(1, 32)):
        dom = set(range(8, 15))  # the only shape with both restricted that converts
    tab = crontab(minute=minute, hour=hour, day_of_week=dow, day_of_month=dom)
    expr, _ = to_cron_expression(tab)
    last = start.replace(tzinfo=UTC, second=0, microsecond=0)
    ours = calendar_for(expr, "UTC").next_from(last, inclusive=False)
    assert ours == celery_next(tab, last), expr


def _entry(**over):
    entry = {"task": "app.tasks.tick", "schedule": crontab(minute=0)}
    entry.update(over)
    return entry


def test_entry_converts_with_options_and_awa_settings() -> None:
    spec = spec_from_entry("nightly", _entry(
        schedule=crontab(minute=30, hour=2),
        args=(1, "a"), kwargs={"full": True},
        options={"queue": "reports", "exchange": "ex", "routing_key": "rk", "priority": 7,
                 "expires": timedelta(hours=1), "headers": {"h": 1},
                 "awa_beat": {"timezone": "Europe/Paris", "missed_fire_policy": "catch_up",
                              "queue": "awa_q", "priority": 3, "max_attempts": 5,
                              "tags": ["nightly"], "metadata": {"team": "data"}}},
    ), default_timezone="UTC")
    assert spec == ScheduleSpec(
        name="nightly", kind="app.tasks.tick", cron_expr="30 2 * * *", timezone="Europe/Paris",
        args=(1, "a"), kwargs={"full": True},
        options={"queue": "reports", "exchange": "ex", "routing_key": "rk", "priority": 7,
                 "expires": 3600.0, "headers": {"h": 1}},
        missed_fire_policy="catch_up", queue="awa_q", priority=3, max_attempts=5,
        tags=("nightly",), metadata={"team": "data"},
    )
    row = spec.row()
    assert row["args"] == {"args": [1, "a"], "kwargs": {"full": True}}
    assert row["metadata"] == {"team": "data",
                               "celery": {"options": dict(spec.options), "dispatch": "awa"}}


def test_dispatch_defaults_to_the_app_setting_and_entries_override_it() -> None:
    specs = specs_from_beat_schedule({
        "a": _entry(),
        "b": _entry(options={"awa_beat": {"dispatch": "awa"}}),
    }, default_dispatch="celery")
    assert [s.dispatch for s in specs] == ["celery", "awa"]
    assert specs[0].row()["metadata"]["celery"]["dispatch"] == "celery"


def test_default_timezone_applies_and_intervals_are_utc() -> None:
    specs = specs_from_beat_schedule({
        "cron": _entry(),
        "every-7s": _entry(schedule=7.0),
    }, default_timezone="America/New_York")
    assert [(s.name, s.cron_expr, s.timezone) for s in specs] == [
        ("cron", "0 * * * *", "America/New_York"), ("every-7s", "@every 7s", "UTC")]


def test_every_problem_of_every_entry_is_reported_at_once() -> None:
    beat_schedule = {
        "ok": _entry(),
        "bad-cron": _entry(schedule="61 * * * *"),
        "bad-zone": _entry(options={"awa_beat": {"timezone": "Mars/Olympus"}}),
        "lowercase-utc": _entry(options={"awa_beat": {"timezone": "utc"}}),
        "bad-policy": _entry(options={"awa_beat": {"missed_fire_policy": "sometimes"}}),
        "bad-priority": _entry(options={"awa_beat": {"priority": 9, "max_attempts": 0}}),
        "bad-args": _entry(args=[object()]),
        "nul": _entry(kwargs={"s": "a\x00b"}),
        "solar": _entry(schedule=solar("sunset", 0, 0)),  # accepted now
        "bounds": _entry(options={"awa_beat": {"max_runs": 0, "one_off": "yes",
                                               "start_time": datetime(2026, 1, 1)}}),
        "no-task": {"schedule": 10},
        "tags": _entry(options={"awa_beat": {"tags": [str(i) for i in range(21)]}}),
        "reserved": _entry(options={"awa_beat": {"metadata": {"cron_name": "x"}}}),
        "typo": _entry(options={"awa_beat": {"timezon": "UTC"}}),
        "kombu-queue": _entry(options={"queue": Queue("q")}),
        "nan": _entry(args=[float("nan")]),
        "unknown-key": _entry(scheduel=5),
        "never": _entry(schedule="0 0 30 2 *"),
        "bad-dispatch": _entry(options={"awa_beat": {"dispatch": "kafka"}}),
    }
    with pytest.raises(ValidationError) as info:
        specs_from_beat_schedule(beat_schedule)
    found = {(name, field) for name, field, _ in info.value.problems}
    assert found == {
        ("bad-cron", "schedule"),
        ("bad-zone", "options.awa_beat.timezone"),
        ("lowercase-utc", "options.awa_beat.timezone"),
        ("bad-policy", "options.awa_beat.missed_fire_policy"),
        ("bad-priority", "options.awa_beat.priority"),
        ("bad-priority", "options.awa_beat.max_attempts"),
        ("bad-args", "args"),
        ("nul", "kwargs"),
        ("bounds", "options.awa_beat.max_runs"),
        ("bounds", "options.awa_beat.one_off"),
        ("bounds", "options.awa_beat.start_time"),
        ("no-task", "task"),
        ("tags", "options.awa_beat.tags"),
        ("reserved", "options.awa_beat.metadata.cron_name"),
        ("typo", "options.awa_beat.timezon"),
        ("kombu-queue", "options.queue"),
        ("nan", "args"),
        ("unknown-key", "scheduel"),
        ("never", "schedule"),
        ("bad-dispatch", "options.awa_beat.dispatch"),
    }
    text = str(info.value)
    assert "entry 'bad-priority', field 'options.awa_beat.priority'" in text
    assert "Awa priorities are 1 (highest) to 4" in text
    assert "'sometimes' is not a policy; use 'coalesce' or 'catch_up'" in text


def test_entries_of_one_shape_convert_as_each_would_alone() -> None:
    # A generated beat_schedule: one crontab and one options dict for every entry. After
    # the first, an entry's task, schedule and options are not checked again; its name
    # and call still are, and its spec is the one it would get on its own.
    tab = crontab(minute=5, hour="9-17")
    options = {"queue": "reports", "expires": 60,
               "awa_beat": {"timezone": "Europe/Paris", "tags": ["t"], "overlap": "skip",
                            "metadata": {"team": "x"}}}
    entries = {f"tenant-{i}": {"task": "t.report", "schedule": tab, "args": [i],
                               "kwargs": {"k": i} if i % 2 else {}, "options": options}
               for i in range(5)}
    specs = specs_from_beat_schedule(entries)
    assert specs == [spec_from_entry(name, entry) for name, entry in entries.items()]
    assert specs[1].options is not specs[2].options  # each spec owns its mappings
    entries["tenant-bad"] = {"task": "t.report", "schedule": tab, "args": [object()],
                             "options": options}
    entries[""] = {"task": "t.report", "schedule": tab, "options": options}
    with pytest.raises(ValidationError) as info:
        specs_from_beat_schedule(entries)
    assert [(n, f) for n, f, _ in info.value.problems] == [("tenant-bad", "args"),
                                                           ("", "name")]
    # A bad shape is reported for every entry that has it, each checked whole.
    bad_zone = {"awa_beat": {"timezone": "Mars/Olympus"}}
    with pytest.raises(ValidationError) as info:
        specs_from_beat_schedule({n: {"task": "t", "schedule": tab, "options": bad_zone}
                                  for n in ("a", "b")})
    assert [(n, f) for n, f, _ in info.value.problems] == [
        ("a", "options.awa_beat.timezone"), ("b", "options.awa_beat.timezone")]


def test_rows_sharing_their_parts_encode_as_rows_built_alone() -> None:
    from awa_beat._beat.configuration import encode_batches
    from awa_beat._db.batches import SyncBatch

    tab = crontab(minute=5)
    entries = {f"e{i}": {"task": "t", "schedule": tab, "args": [i]} for i in range(4)}
    entries.update({
        "tagged": {"task": "t", "schedule": tab,
                   "options": {"awa_beat": {"tags": ["a"], "metadata": {"m": 1}}}},
        "other": {"task": "t", "schedule": tab,
                  "options": {"queue": "q", "awa_beat": {"tags": ["b"], "dispatch": "celery",
                                                         "overlap": "skip"}}},
    })
    specs = specs_from_beat_schedule(entries)
    [batch] = encode_batches(specs, "proj")
    alone = SyncBatch.encode([spec.row("proj") for spec in specs], "proj")
    assert batch.params == alone.params
    assert len(set(batch.params["metadata"])) == 3 and len(set(batch.params["tags"])) == 3


def test_a_configuration_is_held_packed_and_unpacks_to_what_it_encoded() -> None:
    from awa_beat._beat import configuration
    from awa_beat._db.batches import _Same

    tab = crontab(minute=5)
    entries = {f"e{i:03d}": {"task": "t", "schedule": tab, "args": [i]} for i in range(5)}
    entries["odd"] = {"task": "u", "schedule": 60, "options": {"queue": "q"}}
    specs = specs_from_beat_schedule(entries)
    encoded = configuration.encode_batches(specs, "proj")
    packed, digest = configuration.packed_configuration(specs, "proj")
    assert [p.unpack() for p in packed] == encoded
    assert digest == configuration.config_digest(encoded)
    # A column of one value stays one value; a column of several stays a list.
    [batch] = encoded
    assert isinstance(batch.columns["queues"], _Same)
    assert batch.columns["kinds"] == ["t"] * 5 + ["u"]
    assert configuration.config_digest(configuration.encode_batches(specs[:-1], "proj")) != digest
    # Equal values from entries converted apart (other schedule objects) are one value.
    apart = specs_from_beat_schedule({f"a{i}": {"task": "t", "schedule": crontab(minute=5)}
                                      for i in range(3)})
    [batch] = configuration.encode_batches(apart, "proj")
    assert isinstance(batch.columns["cron_exprs"], _Same)
    assert configuration.config_digest(configuration.encode_batches(specs, "other")) != digest


def test_bad_default_timezone_is_reported() -> None:
    with pytest.raises(ValidationError, match="timezone"):
        specs_from_beat_schedule({"ok": _entry()}, default_timezone="Nowhere/Land")


def test_a_spec_without_options_pickles_copies_and_serialises_and_stays_read_only() -> None:
    import copy
    import dataclasses
    import json
    import pickle

    spec = spec_from_entry("a", {"task": "t.a", "schedule": 60})
    other = spec_from_entry("b", {"task": "t.b", "schedule": 60})
    assert spec.kwargs is other.kwargs  # one shared empty mapping, not four dicts a spec
    assert pickle.loads(pickle.dumps(spec)) == spec and copy.deepcopy(spec) == spec
    assert json.loads(json.dumps(dataclasses.asdict(spec)))["options"] == {}
    with pytest.raises(TypeError, match="read-only"):
        spec.kwargs["x"] = 1  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        spec.options.update(queue="q")  # type: ignore[attr-defined]
    assert other.kwargs == {} and other.options == {}


# -- issue 34: refusals that were tracebacks, coercions, schedules that never fire ----------


def _problems(entry: dict[str, Any], name: str = "e", now: datetime | None = None
              ) -> list[tuple[str, str, str]]:
    with pytest.raises(ValidationError) as info:
        spec_from_entry(name, entry, now=now)
    return info.value.problems


def _nested(depth: int) -> list[Any]:
    outer: list[Any] = []
    inner = outer
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return outer


def _circular() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


@pytest.mark.parametrize(("entry", "field"), [
    ({"args": _nested(5000)}, "args"),
    ({"args": [_circular()]}, "args"),
    ({"kwargs": {"deep": _nested(5000)}}, "kwargs"),
    ({"kwargs": _circular()}, "kwargs"),
    ({"options": {"awa_beat": {"metadata": _circular()}}}, "options.awa_beat.metadata"),
    ({"options": {"headers": _circular()}}, "options.headers"),
])
def test_deep_or_circular_values_are_refused_by_name(entry: dict[str, Any],
                                                     field: str) -> None:
    [(name, got, message)] = _problems({"task": "t", "schedule": 60, **entry})
    assert (name, got) == ("e", field)
    assert "nested more than 100 levels deep (or contains itself)" in message


def test_nesting_up_to_the_limit_is_accepted() -> None:
    spec = spec_from_entry("e", {"task": "t", "schedule": 60, "args": _nested(99)})
    assert spec.args == tuple(_nested(99))


@pytest.mark.parametrize(("schedule", "message"), [
    (schedule("abc"), "an interval of 'abc' is not a number of seconds"),
    pytest.param(10**400, "an interval of more than 316224000 s", id="10**400"),
    (timedelta(days=2**20), "too long; at most 316224000 s"),
])
def test_bad_intervals_are_refused(schedule: Any, message: str) -> None:
    [(_, field, text)] = _problems({"task": "t", "schedule": schedule})
    assert field == "schedule" and message in text


def test_an_rrule_of_an_unknown_frequency_is_refused() -> None:
    from dateutil.rrule import rrule

    rule = rrule(99, dtstart=datetime(2027, 1, 1))
    [(_, field, text)] = _problems({"task": "t", "schedule": rule})
    assert field == "schedule" and "rrule frequency 99" in text


def test_a_schedule_object_that_cannot_be_read_is_named() -> None:
    from dateutil.rrule import DAILY, rrule

    broken = rrule(DAILY, dtstart=datetime(2027, 1, 1))
    broken._dtstart = "2027-01-01"  # type: ignore[assignment]
    [(_, field, text)] = _problems({"task": "t", "schedule": broken})
    assert field == "schedule" and text.startswith("cannot be read: AttributeError")


@pytest.mark.parametrize(("name", "entry", "field"), [
    ("a\udc80b", {}, "name"),
    ("e", {"task": "t\ud800"}, "task"),
    ("e", {"kwargs": {"k": "v\udfff"}}, "kwargs"),
    ("e", {"args": ["ok", {"\udc80": 1}]}, "args"),
    ("e", {"options": {"awa_beat": {"tags": ["\ud800"]}}}, "options.awa_beat.tags"),
    ("e", {"options": {"awa_beat": {"queue": "q\ud800"}}}, "options.awa_beat.queue"),
    ("e", {"options": {"awa_beat": {"metadata": {"k": "\ud800"}}}}, "options.awa_beat.metadata"),
    ("e", {"options": {"expires": 60, "routing_key": "\ud800"}}, "options.routing_key"),
])
def test_text_postgresql_cannot_store_is_refused(name: str, entry: dict[str, Any],
                                                 field: str) -> None:
    problems = _problems({"task": "t", "schedule": 60, **entry}, name=name)
    assert [(n, f) for n, f, _ in problems] == [(name, field)]
    assert "surrogate" in problems[0][2] or "not text" in problems[0][2]


def test_sizes_postgresql_would_refuse_are_refused_first() -> None:
    [(label, field, text)] = _problems({"task": "t", "schedule": 60}, name="n" * 2700)
    assert field == "name" and label.startswith("nnnn") and len(label) < 100
    assert "2700 bytes" in text and "at most 2000" in text
    # Multi-byte characters count as bytes.
    [(_, field, _)] = _problems({"task": "t", "schedule": 60}, name="é" * 1001)
    assert field == "name"
    spec_from_entry("é" * 1000, {"task": "t", "schedule": 60})
    [(_, field, text)] = _problems({"task": "t", "schedule": 60,
                                   "kwargs": {"blob": "x" * (1 << 20)}})
    assert field == "kwargs" and "at most 1048576" in text
    [(_, field, _)] = _problems({"task": "t", "schedule": 60,
                                "args": ["x" * 1000] * 1100})
    assert field == "args"


@pytest.mark.parametrize(("entry", "field", "message"), [
    ({"args": {"a": 1}}, "args", "a dict would give its keys alone"),
    ({"args": {"a", "b"}}, "args", "a set has no fixed order"),
    ({"args": frozenset({1})}, "args", "a set has no fixed order"),
    ({"options": {"awa_beat": {"tags": {"a": 1}}}}, "options.awa_beat.tags", "dict"),
    ({"options": {"awa_beat": {"tags": {"a", "b"}}}}, "options.awa_beat.tags", "set"),
    ({"task": "   "}, "task", "not blank"),
    ({"task": "\t\n"}, "task", "not blank"),
])
def test_nothing_is_silently_coerced(entry: dict[str, Any], field: str, message: str) -> None:
    [(_, got, text)] = _problems({"task": "t", "schedule": 60, **entry})
    assert got == field and message in text


def test_args_of_any_sequence_are_kept_in_order() -> None:
    assert spec_from_entry("e", {"task": "t", "schedule": 60,
                                 "args": (x for x in (3, 1, 2))}).args == (3, 1, 2)


NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("schedule", [
    "0 0 30 2 *",
    "0 0 0 31 4 *",
    "0 0 31 2,4,6,9,11 *",
])
def test_a_calendar_that_matches_no_date_is_refused_always(schedule: Any) -> None:
    for now in (None, NOW):
        [(_, field, text)] = _problems({"task": "t", "schedule": schedule}, now=now)
        assert field == "schedule" and "never fire" in text


def test_an_rrule_with_no_occurrence_is_refused_always() -> None:
    from dateutil.rrule import DAILY, rrule

    for rule in (rrule(DAILY, dtstart=datetime(2027, 1, 1), count=0),
                 rrule(DAILY, dtstart=datetime(2027, 1, 1), until=datetime(2026, 1, 1))):
        for now in (None, NOW):
            [(_, field, text)] = _problems({"task": "t", "schedule": rule}, now=now)
            assert field == "schedule" and "never fire" in text


def test_what_is_past_is_refused_for_a_write_made_now() -> None:
    from dateutil.rrule import DAILY, rrule

    past_end = {"task": "t", "schedule": 60,
                "options": {"awa_beat": {"end_time": "2026-12-01T00:00:00Z"}}}
    past_at = {"task": "t", "schedule": at(datetime(2026, 12, 1, tzinfo=UTC))}
    past_rule = {"task": "t", "schedule": rrule(DAILY, dtstart=datetime(2026, 11, 1),
                                                 count=3)}
    for entry, field, message in (
            (past_end, "options.awa_beat.end_time", "2026-12-01T00:00:00Z is past"),
            (past_at, "schedule", "at(2026-12-01T00:00:00Z) is past"),
            (past_rule, "schedule", "has no fire time after 2026-12-07T12:00:00Z")):
        [(_, got, text)] = _problems(entry, now=NOW)
        assert got == field and message in text and "never fire" in text
        # A configuration is read without a clock (beat must start however old it is):
        # doctor and the dashboard flag such rows instead.
        spec_from_entry("e", entry)
    # A new schedule's first fire may be up to a minute old (Awa's first registration).
    spec_from_entry("e", {"task": "t", "schedule": at(NOW - timedelta(seconds=30))}, now=NOW)
    spec_from_entry("e", {**past_end, "options": {"awa_beat": {
        "end_time": NOW + timedelta(hours=1)}}}, now=NOW)


def test_an_at_out_of_range_is_refused() -> None:
    for instant in (datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
                    datetime(1, 1, 2, tzinfo=UTC), datetime(1969, 12, 31, tzinfo=UTC)):
        [(_, field, text)] = _problems({"task": "t", "schedule": at(instant)})
        assert field == "schedule" and "out of range" in text


def test_bounds_out_of_range_are_refused() -> None:
    for key in ("start_time", "end_time"):
        for value in (datetime(1, 1, 1, tzinfo=UTC), "0001-01-01T00:00:00+14:00",
                      datetime(1969, 1, 1, tzinfo=UTC)):
            [(_, field, text)] = _problems({"task": "t", "schedule": 60,
                                           "options": {"awa_beat": {key: value}}})
            assert field == f"options.awa_beat.{key}" and "out of range" in text
