"""The importers' pure parts: each source's conversion, the cursor rule and the plan
(no database, no Redis, no file)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from celery.beat import ScheduleEntry
from celery.schedules import crontab, schedule

from awa_beat._db.records import RETIRED_BY, ScheduleRow
from awa_beat._importers.common import (
    BACKEND_CLEANUP,
    BACKEND_CLEANUP_REASON,
    Imported,
    NotCarried,
    Result,
    convert,
    dedupe,
    utc_cursor,
)
from awa_beat._importers.django import DJANGO_PAUSED_BY, DjangoTables, from_django
from awa_beat._importers.planning import ABSENT, plan
from awa_beat._importers.redbeat import (
    REDBEAT_PAUSED_BY,
    RedBeatRecord,
    decode_redbeat,
    from_redbeat,
    redact_url,
)
from awa_beat._importers.schedule_file import ScheduleFile, from_schedule_file, naive_zone
from awa_beat._schedules.fire_times import calendar_for, next_fire_after
from awa_beat.errors import SourceError
from tests.apps import celery_app

UTC = timezone.utc
NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
PARIS = ZoneInfo("Europe/Paris")


def by_name(results: list[Result]) -> dict[str, Result]:
    return {r.name: r for r in results}


def carried(result: Result) -> Imported:
    assert isinstance(result, Imported), result
    return result


def reason(result: Result) -> str:
    assert isinstance(result, NotCarried), result
    return result.reason


# -- common -----------------------------------------------------------------------------------


def test_utc_cursor_is_aware_utc_in_whole_seconds_rounded_down() -> None:
    assert utc_cursor(datetime(2026, 1, 5, 13, 0, 0, 999999, tzinfo=PARIS)) == \
        datetime(2026, 1, 5, 12, 0, 0, tzinfo=UTC)
    # A naive time is in the given zone (UTC unless told), as Celery reads it.
    assert utc_cursor(datetime(2026, 1, 5, 12, 0, 7, 5)) == datetime(2026, 1, 5, 12, 0, 7,
                                                                     tzinfo=UTC)
    assert utc_cursor(datetime(2026, 7, 5, 12, 0), PARIS) == datetime(2026, 7, 5, 10, 0,
                                                                     tzinfo=UTC)
    assert utc_cursor(datetime(2026, 1, 5, 12, 0), PARIS) == datetime(2026, 1, 5, 11, 0,
                                                                     tzinfo=UTC)
    assert utc_cursor(None) is None
    assert utc_cursor("2026-01-05T12:00:00Z") is None


def test_convert_validates_as_beat_does() -> None:
    ok = carried(convert("a", {"task": "t.a", "schedule": 30}, cursor=NOW, paused_by="x"))
    assert (ok.spec.cron_expr, ok.cursor, ok.paused, ok.paused_by) == \
        ("*/30 * * * * *", NOW, True, "x")
    assert not carried(convert("a", {"task": "t.a", "schedule": 30})).paused
    # The schedule's problem is said as it is; any other field's is named.
    assert reason(convert("b", {"task": "t.b", "schedule": 0})) == \
        "an interval of 0 s is too short; the minimum is 1 second"
    assert reason(convert("c", {"task": "t.c", "schedule": 30, "args": 5})) == \
        "args: must be a list or tuple"
    assert reason(convert("d", {"schedule": 0})) == (
        "task: must be the task's name, a non-empty string; an interval of 0 s is too "
        "short; the minimum is 1 second")


def test_dedupe_keeps_the_first_of_a_name_and_says_so_for_the_others() -> None:
    first = carried(convert("a", {"task": "t.first", "schedule": 30}))
    second = carried(convert("a", {"task": "t.second", "schedule": 60}))
    left_out = NotCarried("a", "for its own reason")
    other = carried(convert("b", {"task": "t.b", "schedule": 30}))
    out = dedupe([left_out, first, second, other])
    assert out[:2] == [left_out, first] and out[3] == other
    assert out[2] == NotCarried("a", "another entry of the source has this name; the first "
                                "one is imported")
    # A not-carried entry does not claim the name.
    assert dedupe([left_out, second]) == [left_out, second]


# -- django-celery-beat -----------------------------------------------------------------------


def django(task: dict[str, Any], **tables: Any) -> Result:
    [result] = from_django(DjangoTables([{"name": "t", "task": "app.t", **task}], **tables),
                           now=NOW, default_timezone="Asia/Tokyo")
    return result


def tab(day_of_week: str = "*", tz: Any = "Europe/Paris", **fields: Any) -> dict[int, Any]:
    row = {"minute": "0", "hour": "9", "day_of_week": day_of_week, "day_of_month": "*",
           "month_of_year": "*", "timezone": tz, **fields}
    return {1: row}


@pytest.mark.parametrize(("day_of_week", "expected"), [
    ("1-5", "0 9 * * 1-5"),
    ("mon-fri", "0 9 * * 1-5"),
    ("0", "0 9 * * 0"),
    ("*/2", "0 9 * * 0,2,4,6"),
    ("*/7", "0 9 * * 0"),  # a step of 7 is not a day 7
    ("*", "0 9 * * *"),
])
def test_django_crontab_converts_as_celery_reads_it(day_of_week: str, expected: str) -> None:
    spec = carried(django({"crontab_id": 1}, crontabs=tab(day_of_week))).spec
    assert (spec.cron_expr, spec.timezone) == (expected, "Europe/Paris")


@pytest.mark.parametrize("day_of_week", ["7", "5-7", "0,7", "7/2", "mon,7"])
def test_django_crontab_with_a_day_7_is_not_carried_and_says_why(day_of_week: str) -> None:
    why = reason(django({"crontab_id": 1}, crontabs=tab(day_of_week)))
    assert why.startswith(f"day_of_week {day_of_week!r} has a 7: Celery's crontab rejects "
                          "it (days are 0-6, Sunday is 0)"), why
    assert "write 0 there if Sunday is meant" in why


def test_django_crontab_out_of_range_is_an_invalid_crontab_not_a_day_7() -> None:
    why = reason(django({"crontab_id": 1}, crontabs=tab("17")))
    assert why.startswith("invalid crontab (") and "17 > 6" in why, why
    assert reason(django({"crontab_id": 1}, crontabs=tab(minute="61"))).startswith(
        "invalid crontab (")
    assert reason(django({"crontab_id": 2}, crontabs=tab())) == "the crontab row is missing"


def test_django_crontab_time_zone_is_its_own_else_the_default() -> None:
    assert carried(django({"crontab_id": 1}, crontabs=tab(tz=None))).spec.timezone == \
        "Asia/Tokyo"
    # Django hands a zoneinfo object where the column is a timezone field.
    assert carried(django({"crontab_id": 1}, crontabs=tab(tz=PARIS))).spec.timezone == \
        "Europe/Paris"
    # An unset field is Celery's "*".
    spec = carried(django({"crontab_id": 1}, crontabs=tab(hour=None))).spec
    assert spec.cron_expr == "0 * * * *"


@pytest.mark.parametrize(("interval", "expected"), [
    ({"period": "seconds", "every": 10}, "*/10 * * * * *"),
    ({"period": "minutes", "every": "15"}, "0 */15 * * * *"),
    ({"period": "hours", "every": 1}, "0 0 * * * *"),
])
def test_django_interval(interval: dict[str, Any], expected: str) -> None:
    spec = carried(django({"interval_id": 1}, intervals={1: interval})).spec
    assert (spec.cron_expr, spec.timezone) == (expected, "UTC")


@pytest.mark.parametrize(("interval", "why"), [
    (None, "unusable interval: the interval row is missing"),
    ({"period": "fortnights", "every": 1}, "unusable interval: unknown period 'fortnights'"),
    ({"period": "seconds", "every": "x"}, "unusable interval: invalid literal for int()"),
    ({"every": 1}, "unusable interval: 'period'"),
])
def test_django_unusable_interval(interval: dict[str, Any] | None, why: str) -> None:
    intervals = {} if interval is None else {1: interval}
    assert reason(django({"interval_id": 1}, intervals=intervals)).startswith(why)


def test_django_entry_options_cursor_and_pause() -> None:
    last = datetime(2026, 1, 5, 8, 0, 0, 500000, tzinfo=UTC)
    result = carried(django({
        "interval_id": 1, "args": "[1, \"x\"]", "kwargs": "{\"k\": 2}",
        "headers": "{\"h\": \"v\"}", "queue": "q", "exchange": "", "routing_key": None,
        "priority": 0, "expire_seconds": 30, "enabled": False, "last_run_at": last,
        "start_time": NOW - timedelta(days=1)}, intervals={1: {"period": "seconds", "every": 10}}))
    assert (result.cursor, result.paused_by) == (last.replace(microsecond=0), DJANGO_PAUSED_BY)
    assert result.spec.args == (1, "x") and dict(result.spec.kwargs) == {"k": 2}
    # Empty and NULL options are left out; priority 0 is a value.
    assert dict(result.spec.options) == {
        "queue": "q", "priority": 0, "expires": 30,
        "headers": {"h": "v", "periodic_task_name": "t"}}
    active = carried(django({"interval_id": 1, "enabled": True},
                            intervals={1: {"period": "seconds", "every": 10}}))
    assert active.paused_by is None and active.cursor is None
    assert active.spec.args == () and dict(active.spec.kwargs) == {}


@pytest.mark.parametrize(("columns", "why"), [
    ({"args": "[1"}, "args is not valid JSON (Expecting"),
    ({"args": "{}"}, "args must be a JSON array"),
    ({"kwargs": "not json"}, "kwargs is not valid JSON ("),
    ({"kwargs": "[]"}, "kwargs must be a JSON object"),
    ({"headers": "\"x\""}, "headers must be a JSON object"),
    ({"args": 5}, "args is not valid JSON (the JSON object must be str"),
])
def test_django_json_columns_that_are_not_usable_give_a_reason(columns: dict[str, Any],
                                                               why: str) -> None:
    result = django({"interval_id": 1, **columns},
                    intervals={1: {"period": "seconds", "every": 10}})
    assert reason(result).startswith(why), reason(result)


def test_django_every_reason_is_given_at_once() -> None:
    why = reason(django({"crontab_id": 1, "one_off": True, "args": "[", "kwargs": "[]"},
                        crontabs=tab("7")))
    starts = [why.find(part) for part in ("day_of_week '7' has a 7",
                                          "; args is not valid JSON",
                                          "; kwargs must be a JSON object")]
    assert starts[0] == 0 and starts == sorted(starts) and -1 not in starts, why


@pytest.mark.parametrize(("task", "tables", "why"), [
    ({}, {}, "no schedule (none of interval, crontab, solar, clocked is set)"),
    ({"solar_id": 1}, {}, "the solar row is missing"),
    ({"solar_id": 1}, {"solars": {1: {"event": "noon", "latitude": 1, "longitude": 2}}},
     "invalid solar schedule (Argument event \"noon\" is invalid"),
    ({"clocked_id": 1}, {}, "the clocked row is missing"),
    ({"clocked_id": 1, "one_off": True, "expires": NOW + timedelta(days=1)},
     {"clocked": {1: {"clocked_time": NOW + timedelta(days=2)}}},
     "expires at 2026-01-06T12:00:00+00:00, before its clocked time"),
    ({"interval_id": 1, "start_time": NOW + timedelta(hours=2), "expires": NOW},
     {"intervals": {1: {"period": "seconds", "every": 10}}}, "expires at 2026-01-05T12:00:00"
     "+00:00, before its start_time 2026-01-05T14:00:00+00:00: django-celery-beat never"),
])
def test_django_what_awa_beat_cannot_run(task: dict[str, Any], tables: dict[str, Any],
                                         why: str) -> None:
    assert reason(django(task, **tables)).startswith(why), reason(django(task, **tables))


EVERY_10S = {"intervals": {1: {"period": "seconds", "every": 10}}}


def test_django_solar_is_celerys_solar() -> None:
    result = carried(django({"solar_id": 1, "last_run_at": NOW}, solars={
        1: {"event": "sunset", "latitude": Decimal("48.800000"),
            "longitude": Decimal("2.300000")}}))
    assert (result.spec.cron_expr, result.spec.timezone) == ("@solar sunset 48.8 2.3", "UTC")
    assert result.cursor == NOW and result.paused_by is None


@pytest.mark.parametrize(("columns", "clocked", "cursor", "paused_by"), [
    # Not run yet, its time still to come: it fires at that time.
    ({}, NOW + timedelta(hours=1), None, None),
    # Not run and its time passed (the old beat was behind or down): it still runs once.
    ({}, NOW - timedelta(hours=1), NOW - timedelta(hours=1, seconds=1), None),
    # It ran, and django-celery-beat was about to disable it: retired, past its one fire.
    ({"total_run_count": 1, "last_run_at": NOW - timedelta(minutes=59)},
     NOW - timedelta(hours=1), NOW - timedelta(hours=1), RETIRED_BY),
    # Disabled (which resets the count): paused; a resume runs it once, as an enable would.
    ({"enabled": False}, NOW - timedelta(hours=1), NOW - timedelta(hours=1, seconds=1),
     DJANGO_PAUSED_BY),
])
def test_django_clocked_runs_once_with_no_double_and_no_missed_run(
        columns: dict[str, Any], clocked: datetime, cursor: datetime | None,
        paused_by: str | None) -> None:
    result = carried(django({"clocked_id": 1, "one_off": True, **columns},
                            clocked={1: {"clocked_time": clocked.astimezone(PARIS)}}))
    assert result.spec.cron_expr == f"@at {clocked:%Y-%m-%dT%H:%M:%SZ} | runs=1"
    assert (result.cursor, result.paused_by) == (cursor, paused_by)


def test_django_one_off_start_time_and_expires() -> None:
    expires = datetime(2026, 3, 1, 8, 0, 0, 250000, tzinfo=PARIS)
    result = carried(django({
        "interval_id": 1, "one_off": True, "start_time": datetime(2026, 2, 1, 9, tzinfo=PARIS),
        "expires": expires, "expire_seconds": 30}, **EVERY_10S))
    assert result.spec.cron_expr == ("@cron */10 * * * * * | start=2026-02-01T08:00:00Z "
                                     "end=2026-03-01T07:00:00Z runs=1")
    # The absolute expiry is also every message's (ModelEntry's expires_ wins over seconds).
    assert result.spec.options["expires"] == expires.isoformat()
    ran = carried(django({"interval_id": 1, "one_off": True, "total_run_count": 1,
                          "last_run_at": NOW}, **EVERY_10S))
    assert ran.paused_by == RETIRED_BY and ran.cursor == NOW
    disabled = carried(django({"interval_id": 1, "one_off": True, "enabled": False},
                              **EVERY_10S))
    assert disabled.paused_by == DJANGO_PAUSED_BY
    relative = carried(django({"interval_id": 1, "expire_seconds": 30}, **EVERY_10S))
    assert relative.spec.options["expires"] == 30 and relative.spec.cron_expr == \
        "*/10 * * * * *"


def test_django_backend_cleanup_is_left_to_the_scheduler() -> None:
    [result] = from_django(DjangoTables([{"name": BACKEND_CLEANUP, "task": BACKEND_CLEANUP,
                                          "crontab_id": 1}], crontabs=tab()), now=NOW)
    assert result == NotCarried(BACKEND_CLEANUP, BACKEND_CLEANUP_REASON)


# -- RedBeat ----------------------------------------------------------------------------------


def test_redbeat_datetimes_decode_with_their_zone() -> None:
    fields = "\"year\": 2026, \"month\": 1, \"day\": 5, \"hour\": 12, \"minute\": 0, " \
             "\"second\": 1, \"microsecond\": 500"
    named = decode_redbeat(f'{{"__type__": "datetime", {fields}, "timezone": "Europe/Paris"}}')
    assert named == datetime(2026, 1, 5, 12, 0, 1, 500, tzinfo=PARIS)
    assert named.tzinfo == PARIS
    offset = decode_redbeat(f'{{"__type__": "datetime", {fields}, "timezone": -19800.0}}')
    assert offset.utcoffset() == -timedelta(hours=5, minutes=30)
    default = decode_redbeat(f'{{"__type__": "datetime", {fields}}}')
    assert default.tzinfo == ZoneInfo("UTC")


def test_redbeat_schedules_decode_to_celerys() -> None:
    decoded = decode_redbeat(
        '{"s": {"__type__": "interval", "every": 90.0, "relative": true},'
        ' "c": {"__type__": "crontab", "minute": "*/5", "hour": "*", "day_of_week": "mon-fri",'
        ' "day_of_month": "*", "month_of_year": "*"},'
        ' "other": {"__type__": "something", "x": 1}, "plain": {"a": [1]}}')
    assert decoded["s"] == schedule(timedelta(seconds=90), relative=True)
    assert decoded["c"] == crontab(minute="*/5", day_of_week="mon-fri")
    # Types RedBeat does not know are left as they are, marker included.
    assert decoded["other"] == {"__type__": "something", "x": 1}
    assert decoded["plain"] == {"a": [1]}


RRULE = ('{"__type__": "rrule", "freq": 2, "interval": 1, "byweekday": '
         '[{"__type__": "weekday", "wkday": 0}], "dtstart": 1767571200, "dtstart_tz": 0}')


def test_redbeat_rrule_and_weekday_decode_to_markers() -> None:
    from awa_beat._importers.redbeat import _RRule, _Weekday

    decoded = decode_redbeat(RRULE)
    assert isinstance(decoded, _RRule) and decoded.fields["freq"] == 2
    [weekday] = decoded.fields["byweekday"]
    assert isinstance(weekday, _Weekday) and weekday == {"wkday": 0}


def test_redbeat_rrule_is_carried_with_its_offset_count_and_cursor() -> None:
    from redbeat.decoder import RedBeatJSONDecoder, RedBeatJSONEncoder
    from redbeat.schedules import rrule

    rule = rrule("HOURLY", dtstart=datetime(2026, 1, 5, 9, 30, tzinfo=timezone(
        timedelta(hours=-5))), count=5, byminute=[30])
    text = json.dumps(rule, cls=RedBeatJSONEncoder)  # as RedBeat stores it
    [result] = from_redbeat([RedBeatRecord("redbeat:e", definition(
        schedule=json.loads(text)), meta(LAST_RUN))])
    entry = carried(result)
    assert (entry.spec.cron_expr, entry.spec.timezone) == (
        "@rrule DTSTART=20260105T093000-0500;FREQ=HOURLY;COUNT=5;BYMINUTE=30", "UTC")
    # RedBeat's own rule, decoded by RedBeat, fires what ours does after the last run.
    theirs = json.loads(text, cls=RedBeatJSONDecoder).rrule
    calendar = calendar_for(entry.spec.cron_expr, entry.spec.timezone)
    assert entry.cursor is not None
    assert next_fire_after(calendar, entry.cursor) == theirs.after(entry.cursor)


def definition(**fields: Any) -> str:
    return json.dumps({"name": "e", "task": "app.e",
                       "schedule": {"__type__": "interval", "every": 30.0}, **fields})


def meta(when: str) -> str:
    return json.dumps({"last_run_at": json.loads(when), "total_run_count": 3})


LAST_RUN = ('{"__type__": "datetime", "year": 2026, "month": 1, "day": 5, "hour": 13, '
            '"minute": 0, "second": 0, "microsecond": 400000, "timezone": "Europe/Paris"}')


def test_redbeat_entry_conversion() -> None:
    results = by_name(from_redbeat([
        RedBeatRecord("redbeat:e", definition(args=[1], kwargs={"k": 2},
                                              options={"queue": "q"}), meta(LAST_RUN)),
        RedBeatRecord("redbeat:tab", definition(
            name="tab", enabled=False, schedule={"__type__": "crontab", "minute": "0",
                                                 "hour": "9"}), None),
    ], default_timezone="Asia/Tokyo"))
    entry = carried(results["e"])
    assert (entry.spec.kind, entry.spec.cron_expr, entry.spec.timezone) == \
        ("app.e", "*/30 * * * * *", "UTC")
    assert entry.spec.args == (1,) and dict(entry.spec.kwargs) == {"k": 2}
    assert dict(entry.spec.options) == {"queue": "q"}
    assert entry.cursor == datetime(2026, 1, 5, 12, 0, tzinfo=UTC) and entry.paused_by is None
    tab_entry = carried(results["tab"])  # a crontab runs in the beat app's time zone
    assert (tab_entry.spec.cron_expr, tab_entry.spec.timezone) == ("0 9 * * *", "Asia/Tokyo")
    assert tab_entry.paused_by == REDBEAT_PAUSED_BY and tab_entry.cursor is None


def test_django_and_redbeat_crontabs_follow_the_default_dst_policy() -> None:
    [row] = from_django(DjangoTables([{"name": "t", "task": "app.t", "crontab_id": 1}],
                                     crontabs=tab()), now=NOW, default_dst="celery")
    assert carried(row).spec.cron_expr == "@crontab 0 9 * * * dst=celery"
    [entry] = from_redbeat([RedBeatRecord("redbeat:e", definition(
        schedule={"__type__": "crontab", "minute": "0", "hour": "9"}), None)],
        default_dst="celery")
    assert carried(entry).spec.cron_expr == "@crontab 0 9 * * * dst=celery"


def test_redbeat_name_is_the_definitions_else_the_key_without_the_prefix() -> None:
    [result] = from_redbeat([RedBeatRecord("app:x", definition(name=None), None)],
                            key_prefix="app:")
    assert result.name == "x"
    [result] = from_redbeat([RedBeatRecord("other:x", definition(name=None), None)],
                            key_prefix="app:")
    assert result.name == "other:x"


@pytest.mark.parametrize(("record", "why"), [
    (RedBeatRecord("redbeat:x", None, None),
     "hash 'redbeat:x' has no 'definition' field: not a RedBeat entry"),
    (RedBeatRecord("redbeat:x", "{not json", None),
     "its definition cannot be decoded: JSONDecodeError: "),
    (RedBeatRecord("redbeat:x", "[1]", None),
     "its definition cannot be decoded: ValueError: not a JSON object"),
    (RedBeatRecord("redbeat:x", definition(schedule={"__type__": "rrule", "freq": 3}), None),
     "its rrule cannot be rebuilt as RedBeat would: ValueError: the rrule has no dtstart"),
    (RedBeatRecord("redbeat:x", definition(), "{bad"),
     "its meta (last run) cannot be decoded: JSONDecodeError: "),
    (RedBeatRecord("redbeat:x", definition(schedule=0), None),
     "an interval of 0 s is too short"),
])
def test_redbeat_entries_not_carried(record: RedBeatRecord, why: str) -> None:
    [result] = from_redbeat([record])
    assert reason(result).startswith(why), reason(result)


def test_redbeat_backend_cleanup_and_duplicates() -> None:
    results = from_redbeat([
        RedBeatRecord(f"redbeat:{BACKEND_CLEANUP}",
                      definition(name=BACKEND_CLEANUP, task=BACKEND_CLEANUP), None),
        RedBeatRecord("redbeat:a", definition(name="same"), None),
        RedBeatRecord("redbeat:b", definition(name="same", task="app.other"), None)])
    assert results[0] == NotCarried(BACKEND_CLEANUP, BACKEND_CLEANUP_REASON)
    assert carried(results[1]).spec.kind == "app.e"
    assert reason(results[2]).startswith("another entry of the source has this name")


@pytest.mark.parametrize(("url", "shown"), [
    ("redis://:s3cret@host:6379/0", "redis://:***@host:6379/0"),
    ("redis://user:s3cret@[::1]:6379/0", "redis://user:***@[::1]:6379/0"),
    ("redis://host/0?password=s3cret&db=1", "redis://host/0?password=***&db=1"),
    ("redis://host:6379/0", "redis://host:6379/0"),
])
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


# -- celerybeat-schedule ----------------------------------------------------------------------


def test_naive_zone_is_celerys_reading_of_the_file() -> None:
    assert naive_zone(None, None) is UTC
    assert naive_zone("Europe/Paris", True) is UTC
    assert naive_zone("Europe/Paris", False) == PARIS
    from celery.utils.time import timezone as celery_timezone

    assert naive_zone(None, False) is celery_timezone.local
    with pytest.raises(SourceError, match="the file's time zone 'Nowhere/Else' is unknown"):
        naive_zone("Nowhere/Else", False)


def entry(name: str, task: str, sched: Any, last_run_at: datetime | None,
          **fields: Any) -> ScheduleEntry:
    return ScheduleEntry(name=name, task=task, schedule=sched, last_run_at=last_run_at,
                         app=celery_app("file"), **fields)


def test_from_schedule_file() -> None:
    naive = datetime(2026, 7, 5, 12, 0, 0, 400000)
    schedule_file = ScheduleFile({
        "every": entry("every", "app.every", schedule(timedelta(seconds=30)), naive,
                       args=(1,), kwargs={"k": 2}, options={"queue": "q"}),
        "tab": entry("tab", "app.tab", crontab(minute="0", hour="9"), naive),
        BACKEND_CLEANUP: entry(BACKEND_CLEANUP, BACKEND_CLEANUP, crontab(minute="0", hour="4"),
                               naive),
        "junk": {"not": "an entry"},
    }, tz="Europe/Paris", utc_enabled=False, version="5.7.0")
    results = by_name(from_schedule_file(schedule_file))
    every = carried(results["every"])
    # Naive times are local in the file's zone, since enable_utc was off.
    assert every.cursor == datetime(2026, 7, 5, 10, 0, tzinfo=UTC)
    assert every.spec.args == (1,) and dict(every.spec.kwargs) == {"k": 2}
    assert dict(every.spec.options) == {"queue": "q"} and every.paused_by is None
    tab_entry = carried(results["tab"])  # a crontab runs in the file's time zone
    assert (tab_entry.spec.cron_expr, tab_entry.spec.timezone) == ("0 9 * * *", "Europe/Paris")
    assert results[BACKEND_CLEANUP] == NotCarried(BACKEND_CLEANUP, BACKEND_CLEANUP_REASON)
    assert reason(results["junk"]) == "a dict, not a Celery ScheduleEntry"
    given = by_name(from_schedule_file(schedule_file, default_timezone="Asia/Tokyo"))
    assert carried(given["tab"]).spec.timezone == "Asia/Tokyo"


def test_from_schedule_file_utc_enabled_and_the_name_of_the_entry() -> None:
    naive = datetime(2026, 7, 5, 12, 0)
    schedule_file = ScheduleFile({
        "key": entry("renamed", "app.a", schedule(timedelta(seconds=30)), naive),
        "unnamed": SimpleNamespace(name=None, task="app.b", schedule=30,
                                   last_run_at=datetime(2026, 1, 5, 12, tzinfo=PARIS)),
    }, tz="Europe/Paris", utc_enabled=True, version=None)
    results = by_name(from_schedule_file(schedule_file))
    assert carried(results["renamed"]).cursor == datetime(2026, 7, 5, 12, 0, tzinfo=UTC)
    unnamed = carried(results["unnamed"])
    assert unnamed.cursor == datetime(2026, 1, 5, 11, 0, tzinfo=UTC)
    assert unnamed.spec.args == () and dict(unnamed.spec.options) == {}


# -- the plan ---------------------------------------------------------------------------------


def imported(name: str = "a", *, cursor: datetime | None = None, paused_by: str | None = None,
             **entry: Any) -> Imported:
    return carried(convert(name, {"task": f"app.{name}", "schedule": 30, **entry},
                           cursor=cursor, paused_by=paused_by))


def stored(result: Imported, *, deployment: str = "prod", cursor: datetime | None = None,
           paused_by: str | None = None, **changes: Any) -> ScheduleRow:
    row = {**result.spec.row(deployment), **changes}
    return ScheduleRow(**row, last_enqueued_at=cursor, created_at=NOW, updated_at=NOW,
                       paused_at=NOW if paused_by else None, paused_by=paused_by,
                       deployment=deployment)


def test_plan_new_unchanged_and_not_carried() -> None:
    new, same, left_out = imported("new"), imported("same"), NotCarried("x", "why")
    out = plan([new, same, left_out], {"same": stored(same)}, "prod")
    assert out.new == [new] and out.unchanged == ["same"] and out.not_carried == [left_out]
    assert out.changed == [] and out.cursor_moves == [] and out.notes == []


def test_plan_changed_lists_each_field_by_path() -> None:
    result = imported(options={"queue": "q", "expires": 30}, args=(1,))
    row = stored(result, deployment="old", cron_expr="0 * * * * *",
                 args={"args": [2], "kwargs": {}},
                 metadata={"celery": {"options": {"queue": "other", "gone": 1},
                                      "dispatch": "awa", "deployment": "old"}})
    out = plan([result], {"a": row}, "prod")
    [(name, fields)] = out.changed
    assert name == "a" and out.unchanged == []
    assert fields == {
        "cron_expr": ("0 * * * * *", "*/30 * * * * *"),
        "args.args": ([2], [1]),
        "metadata.celery.options.queue": ("other", "q"),
        "metadata.celery.options.gone": (1, ABSENT),
        "metadata.celery.options.expires": (ABSENT, 30),
        "metadata.celery.deployment": ("old", "prod"),
        "deployment": ("old", "prod"),
    }
    assert out.to_json()["changed"][0]["fields"]["metadata.celery.options.gone"] == \
        {"stored": 1}


def test_plan_compares_as_jsonb_does() -> None:
    result = imported(args=(1, 2))
    row = stored(result, args={"args": [1.0, 2], "kwargs": {}}, tags=())
    assert plan([result], {"a": row}, "prod").unchanged == ["a"]


def test_plan_cursor_only_moves_forward() -> None:
    earlier, later = NOW - timedelta(hours=1), NOW
    forward, back, none, same, unknown = (imported(n, cursor=c) for n, c in
                                          [("forward", later), ("back", earlier),
                                           ("none", later), ("same", later),
                                           ("unknown", None)])
    out = plan([forward, back, none, same, unknown], {
        "forward": stored(forward, cursor=earlier), "back": stored(back, cursor=later),
        "none": stored(none, cursor=None), "same": stored(same, cursor=later),
        "unknown": stored(unknown, cursor=later)}, "prod")
    assert out.cursor_moves == [("forward", earlier, later), ("none", None, later)]
    assert out.cursor_kept == [("back", later, earlier)]
    # Kept or equal or unknown: nothing to write for these.
    assert out.unchanged == ["back", "same", "unknown"]


def test_plan_notes_a_future_cursor_and_pause_differences() -> None:
    ahead = imported("ahead", cursor=NOW + timedelta(minutes=5))
    disabled = imported("disabled", paused_by=DJANGO_PAUSED_BY)
    enabled = imported("enabled")
    out = plan([ahead, disabled, enabled], {
        "disabled": stored(disabled), "enabled": stored(enabled, paused_by="ops")},
        "prod", now=NOW)
    assert out.notes == [
        "ahead: its last run, 2026-01-05T12:05:00+00:00, is in the future (was the old "
        "scheduler's clock ahead?); no fire before it will happen",
        "disabled: disabled in the source but active here; left active (`awa-beat pause "
        "disabled` to pause it)",
        "enabled: paused here (by ops) but enabled in the source; left paused (`awa-beat "
        "resume enabled` to resume it)"]
    assert plan([ahead], {}, "prod").notes == []  # no clock given, no judgement


# -- the run ----------------------------------------------------------------------------------


def test_written_counts_what_the_statement_reported() -> None:
    from awa_beat._importers.run import written

    earlier = NOW - timedelta(hours=1)
    rows = [
        {"inserted": True, "changed": False, "cursor_before": None, "cursor_after": NOW},
        {"inserted": False, "changed": True, "cursor_before": earlier, "cursor_after": NOW},
        {"inserted": False, "changed": True, "cursor_before": NOW, "cursor_after": NOW},
        {"inserted": False, "changed": False, "cursor_before": earlier, "cursor_after": NOW},
        {"inserted": False, "changed": False, "cursor_before": NOW, "cursor_after": NOW},
    ]
    assert written(rows) == {"inserted": 1, "changed": 2, "cursors_moved": 2, "unchanged": 1}
    assert written([]) == {"inserted": 0, "changed": 0, "cursors_moved": 0, "unchanged": 0}


# -- issue 34: one odd row is reported, named, and the rest of the import goes on -----------


def test_django_odd_rows_are_not_carried_and_the_others_are() -> None:
    year_one = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))
    tables = DjangoTables(
        [{"name": "clocked-year-1", "task": "app.t", "clocked_id": 1, "one_off": True},
         {"name": "clocked-year-1-utc", "task": "app.t", "clocked_id": 2, "one_off": True},
         {"name": "huge-interval", "task": "app.t", "interval_id": 2},
         {"name": "start-year-1", "task": "app.t", "interval_id": 1,
          "start_time": datetime(1, 1, 1)},
         {"name": "broken-row", "task": "app.t", "clocked_id": 3},
         {"name": "fine", "task": "app.t", "interval_id": 1}],
        intervals={1: {"every": 10, "period": "seconds"},
                   2: {"every": 2**31, "period": "days"}},
        clocked={1: {"clocked_time": year_one},
                 2: {"clocked_time": datetime(1, 1, 1, tzinfo=UTC)},
                 3: "a row that is not a row"})  # type: ignore[dict-item]
    results = {r.name: r for r in from_django(tables, now=NOW)}
    assert "clocked_time 0001-01-01T00:00:00+14:00 is out of range" in \
        reason(results["clocked-year-1"])
    assert "out of range" in reason(results["clocked-year-1-utc"])
    assert reason(results["huge-interval"]).startswith("unusable interval: ")
    assert "options.awa_beat.start_time" in reason(results["start-year-1"])
    assert "out of range" in reason(results["start-year-1"])
    assert reason(results["broken-row"]).startswith("cannot be read: AttributeError")
    assert carried(results["fine"]).spec.cron_expr == "*/10 * * * * *"


def test_redbeat_odd_rows_are_not_carried_and_the_others_are() -> None:
    from awa_beat._importers.redbeat import _record

    rule = {"__type__": "rrule", "freq": 99, "dtstart": 1767600000}
    results = from_redbeat([
        RedBeatRecord("redbeat:freq-99", definition(name="freq-99", schedule=rule), None),
        _record(b"redbeat:bad-definition", b'{"name": "\xff"}', None),
        _record(b"redbeat:bad-meta", definition(name="bad-meta").encode(), b"\xfe"),
        _record(b"redbeat:\xffkey", definition(name="k").encode(), None),
        RedBeatRecord("redbeat:count-0", definition(name="count-0", schedule={
            **rule, "freq": 3, "count": 0}), None),
        RedBeatRecord("redbeat:fine", definition(name="fine"), None)])
    by_name = {r.name: r for r in results}
    assert "rrule frequency 99" in reason(by_name["freq-99"])
    assert reason(by_name["bad-definition"]) == \
        "its definition is not UTF-8 text: RedBeat cannot read it either"
    assert reason(by_name["bad-meta"]).startswith("its meta is not UTF-8")
    assert reason(by_name["\\xffkey"]).startswith("its key is not UTF-8")
    assert "never fire" in reason(by_name["count-0"])
    assert carried(by_name["fine"]).spec.kind == "app.e"
