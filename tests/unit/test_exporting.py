"""The export's conversion of stored schedules to Celery schedule objects (pure): every
crontab it writes fires on exactly the days, hours and minutes Awa fires the expression
(Celery's own crontab object is the judge), and what Celery cannot say is left out
with the reason."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest
from celery.schedules import crontab
from hypothesis import given, settings
from hypothesis import strategies as st

from awa_beat._db.records import RETIRED_BY, ScheduleRow
from awa_beat._exporting import celery_schedule, crontab_fields, python_module
from awa_beat._schedules.cron import CronExpression

UTC = timezone.utc
DAYS = [date(2027, 1, 1) + timedelta(days=n) for n in range(2 * 366)]


def assert_same_instants(expr: str) -> None:
    """Celery's crontab of ``expr``'s conversion matches exactly the minutes Awa's
    expression matches, over two years of days."""
    fields = CronExpression.parse(expr).fields()
    args = crontab_fields(fields)
    assert isinstance(args, dict), (expr, args)
    tab = crontab(**args)
    assert (set(tab.minute), set(tab.hour)) == (set(fields.minutes), set(fields.hours)), expr
    parsed = CronExpression.parse(expr)
    for day in DAYS:
        awa = parsed.matches(datetime(day.year, day.month, day.day, fields.hours[0],
                                      fields.minutes[0]))
        celery = (day.month in tab.month_of_year and day.day in tab.day_of_month
                  and day.isoweekday() % 7 in tab.day_of_week)
        assert awa == celery, (expr, args, day)


@pytest.mark.parametrize("expr", [
    "30 7 * * *", "*/15 9-17 * * 1-5", "0 0 1 * *", "0 0 */2 * *", "0 0 15 2,8 *",
    "0 12 * * 1#1", "0 12 * * 1#1,1#2", "0 12 * * 2#5", "0 12 * * 1#1,3#1,1#3,3#3",
    "0 12 * * mon#2,fri#2", "0 0 1-31 * 1", "0 0 * * 0-6", "0 0 5 * 0,1,2,3,4,5,6",
    "0 0 0 * * *", "@weekly", "@monthly", "@yearly", "0 0 * feb sun", "5 4 * * 7",
    "0 0 ? * 1",
])
def test_each_expression_converts_to_a_crontab_firing_at_the_same_instants(expr: str) -> None:
    assert_same_instants(expr)


_DOM = st.one_of(st.just("*"), st.lists(st.integers(1, 31), min_size=1, max_size=4).map(
    lambda v: ",".join(map(str, v))), st.builds("{}-{}".format, st.integers(1, 15),
                                                st.integers(15, 31)))
_DOW = st.one_of(
    st.just("*"),
    st.lists(st.integers(0, 7), min_size=1, max_size=3).map(lambda v: ",".join(map(str, v))),
    st.lists(st.builds("{}#{}".format, st.integers(0, 6), st.integers(1, 5)), min_size=1,
             max_size=4).map(",".join),
)


@settings(max_examples=60, deadline=None)
@given(dom=_DOM, dow=_DOW, month=st.sampled_from(["*", "2", "1-6", "*/3"]))
def test_every_converted_day_rule_is_celerys_and_of_awas_or(dom: str, dow: str,
                                                            month: str) -> None:
    expr = f"0 12 {dom} {month} {dow}"
    converted = celery_schedule(expr, "UTC")
    if converted.kept:
        assert_same_instants(expr)
        code = celery_schedule(expr, "UTC", app_timezone="UTC").code
        assert isinstance(eval(str(code), {"crontab": crontab}), crontab)  # Celery takes it


@pytest.mark.parametrize(("expr", "why"), [
    ("0 0 1 * 1", "restricts both the day of the month and the day of the week"),
    ("0 0 1,15 * 1-5", "restricts both"),
    ("0 0 L * *", "uses L or W"),
    ("0 0 15W * *", "uses L or W"),
    ("0 0 * * 5L", "uses L or W"),
    ("0 12 * * 1#1,3#2", "different weeks of the month for different weekdays"),
    ("0 12 * * 1,3#2", "different weeks"),
    ("*/10 * * * * *", "has a seconds field"),  # not an interval in Paris: a cron
    ("30 0 0 * * *", "has a seconds field"),
    ("0 0 30 2 *", "never fires"),  # Celery would refuse the crontab, failing the import
])
def test_what_a_crontab_cannot_say_is_left_out_with_the_reason(expr: str, why: str) -> None:
    converted = celery_schedule(expr, "Europe/Paris")
    assert converted.code is None and not converted.kept
    assert converted.note is not None and why in converted.note
    assert repr(expr) in converted.note


@pytest.mark.parametrize(("expr", "zone", "code"), [
    ("*/10 * * * * *", "UTC", "schedule(datetime.timedelta(seconds=10))"),
    ("0 */10 * * * *", "UTC", "schedule(datetime.timedelta(minutes=10))"),
    ("0 0 */6 * * *", "UTC", "schedule(datetime.timedelta(hours=6))"),
    ("0 0 0 * * *", "UTC", "schedule(datetime.timedelta(days=1))"),
    ("0 0 0 * * 4", "UTC", "schedule(datetime.timedelta(weeks=1))"),
    ("@every 7s", "UTC", "schedule(datetime.timedelta(seconds=7))"),
    ("@every 5400s", "UTC", "schedule(datetime.timedelta(minutes=90))"),
    ("0 0 0 * * *", "Europe/Paris", "crontab_in('Europe/Paris', minute='0', hour='0')"),
    ("@daily", "UTC", "crontab_in('UTC', minute='0', hour='0')"),
    ("0 12 * * 1#1,1#2", "UTC",
     "crontab_in('UTC', hour='12', minute='0', day_of_month='1-14', day_of_week='1')"),
    ("@solar sunrise 48.8566 2.3522", "UTC", "solar('sunrise', 48.8566, 2.3522)"),
])
def test_celery_objects(expr: str, zone: str, code: str) -> None:
    converted = celery_schedule(expr, zone)
    assert converted.kept
    assert sorted(str(converted.code).split(", ")) == sorted(code.split(", "))
    if code.startswith("schedule("):
        assert converted.note is not None and "grid anchored at the Unix epoch" in \
            converted.note and "counts from the last run" in converted.note


def test_a_crontab_in_the_apps_zone_is_plain() -> None:
    assert celery_schedule("30 7 * * *", "Asia/Tokyo", app_timezone="Asia/Tokyo").code == \
        "crontab(minute='30', hour='7')"


@pytest.mark.parametrize(("expr", "why"), [
    ("@at 2031-01-01T09:00:00Z | runs=1", "no one-off schedule"),
    ("@rrule DTSTART=20260105T090000;FREQ=WEEKLY;BYDAY=MO,WE", "an rrule"),
    ("@cron 0 * * * * | start=2030-06-01T00:00:00Z", "start=2030-06-01T00:00:00Z"),
    ("@every 7s | runs=3", "runs=3"),
    ("@solar sunset 0 0 | end=2035-01-01T00:00:00Z", "no start, end or number of runs"),
])
def test_markers_celery_has_no_schedule_for(expr: str, why: str) -> None:
    converted = celery_schedule(expr, "UTC")
    assert not converted.kept and converted.note is not None and why in converted.note


def row(name: str, cron_expr: str, **changes: Any) -> ScheduleRow:
    now = datetime(2027, 1, 1, tzinfo=UTC)
    fields: dict[str, Any] = dict(
        name=name, cron_expr=cron_expr, timezone="UTC", kind="t.task", queue="default",
        args={"args": [1, "two", None], "kwargs": {"k": {"nested": [1.5, True]}}},
        priority=2, max_attempts=25, tags=[],
        metadata={"celery": {"options": {"queue": "reports", "expires": 60}}},
        missed_fire_policy="coalesce", last_enqueued_at=now, created_at=now, updated_at=now,
        paused_at=None, paused_by=None)
    fields.update(changes)
    return ScheduleRow(**fields)


def test_the_module_is_python_with_every_entry_kept_or_a_comment() -> None:
    rows = [
        row("nightly", "0 3 * * *", timezone="Europe/Paris"),
        row("it's \"odd\"\nname", "*/5 * * * * *"),
        row("held", "0 4 * * *", paused_at=datetime(2027, 1, 1, tzinfo=UTC),
            paused_by="ops\n# not a comment"),
        row("done", "@cron 0 5 * * * | runs=2", paused_at=datetime(2027, 1, 1, tzinfo=UTC),
            paused_by=RETIRED_BY),
        row("lastday", "0 0 L * *"),
    ]
    module = python_module(rows)
    assert python_module(rows) == module
    namespace: dict[str, Any] = {}
    exec(compile(module, "exported.py", "exec"), namespace)
    beat = namespace["beat_schedule"]
    assert list(beat) == ["nightly", "it's \"odd\"\nname"]
    nightly = beat["nightly"]
    assert isinstance(nightly["schedule"], crontab)
    assert str(nightly["schedule"].tz) == "Europe/Paris"
    assert (nightly["task"], nightly["args"], nightly["kwargs"]) == (
        "t.task", [1, "two", None], {"k": {"nested": [1.5, True]}})
    assert nightly["options"]["queue"] == "reports" and nightly["options"]["expires"] == 60
    assert nightly["options"]["awa_beat"]["timezone"] == "Europe/Paris"
    for name in ("held", "done", "lastday"):
        assert f"# Left out: {name!r}: " in module
    # A paused entry's commented Celery form runs once uncommented.
    held = [line.removeprefix("    # ").strip() for line in module.splitlines()
            if line.startswith("    # ") and not line.startswith("    # Left out")]
    assert "'schedule': crontab_in('UTC', minute='0', hour='4')," in held
    assert "2 entries Celery runs, 3 left out" in module
