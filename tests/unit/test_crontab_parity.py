"""Every crontab Celery accepts is stored, and fires when Celery's own crontab object says
it is due, to the second (issue 40): Celery ANDs the day of the month with the day of the
week, cron ORs them, so what no plain Awa expression says is stored as ``@crontab``.

Celery is the judge: its crontab, in an app of the row's zone, is stepped from each fire
to the next with ``remaining_estimate`` asked at the fire, and ``is_due`` must say "not
yet" one second before each fire and "due" at it.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest
from celery.schedules import crontab
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from awa_beat._schedules.cron import CronExpression
from awa_beat._schedules.fire_times import calendar_for, fires_between
from awa_beat._schedules.markers import is_marker
from awa_beat._schedules.spec import to_cron_expression
from awa_beat._testing import celery_crontab_fires
from awa_beat.errors import InvalidCronExpression

UTC = timezone.utc
YEAR_START = datetime(2027, 1, 1, tzinfo=UTC)
YEAR_END = datetime(2028, 1, 1, tzinfo=UTC)


def celery_fires(fields: dict[str, object], zone: str, start: datetime, until: datetime,
                 limit: int) -> list[datetime]:
    return celery_crontab_fires(fields, zone, start, until, limit, check_due=True)


def ours(expr: str, zone: str, start: datetime, until: datetime, limit: int
         ) -> list[datetime]:
    return fires_between(calendar_for(expr, zone), start, until, limit)


# -- every field form Celery reads -------------------------------------------------------------

def _field(lo: int, hi: int, names: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    number = st.integers(lo, hi)
    forms = [
        st.just("*"),
        number.map(str),
        st.integers(2, max(2, (hi - lo) // 2)).map(lambda k: f"*/{k}"),
        st.tuples(number, number).map(lambda p: f"{min(p)}-{max(p)}"),
        st.tuples(number, number, st.integers(1, 5)).map(
            lambda p: f"{min(p[:2])}-{max(p[:2])}/{p[2]}"),
        st.lists(number, min_size=1, max_size=4, unique=True).map(
            lambda v: ",".join(map(str, v))),
    ]
    if names:
        name = st.sampled_from(names)
        forms += [name, st.tuples(name, name).map(lambda p: f"{p[0]}-{p[1]}"),
                  st.lists(name, min_size=1, max_size=3, unique=True).map(",".join)]
    return st.one_of(*forms)


_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
crontabs = st.fixed_dictionaries({
    "minute": _field(0, 59),
    "hour": _field(0, 23),
    "day_of_month": _field(1, 31),
    "month_of_year": _field(1, 12),
    "day_of_week": _field(0, 6, _DAYS),
})


def _accepted(fields: dict[str, str]) -> crontab:
    try:
        return crontab(**fields)  # type: ignore[arg-type]
    except ValueError:
        assume(False)  # Celery refuses it: nothing to match
        raise


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields=crontabs, zone=st.sampled_from(["UTC", "Asia/Tokyo", "Asia/Kolkata"]),
       dst=st.sampled_from(["awa", "celery"]))
def test_every_crontab_celery_accepts_fires_when_celery_does(
        fields: dict[str, str], zone: str, dst: str) -> None:
    """In zones without DST both policies are Celery's calendar, to the second."""
    expr, row_zone = to_cron_expression(_accepted(fields), dst)
    assert row_zone is None
    theirs = celery_fires(fields, zone, YEAR_START, YEAR_END, 60)
    assert ours(expr, zone, YEAR_START, YEAR_END, 60) == theirs, (fields, expr)


@settings(max_examples=150, deadline=None)
@given(fields=crontabs)
def test_plain_expressions_are_kept_and_markers_only_where_there_is_none(
        fields: dict[str, str]) -> None:
    """A crontab stores a plain Awa expression (which Awa's parser reads, so an Awa leader
    fires it too) unless both day fields are restricted and the days of the month are not
    whole weeks of the month; the marker is one Awa's parser refuses."""
    tab = _accepted(fields)
    expr, _ = to_cron_expression(tab)
    full_days = set(tab.day_of_month) >= set(range(1, 32))
    full_weekdays = set(tab.day_of_week) >= set(range(7))
    weeks = [set(range(1 + 7 * k, min(8 + 7 * k, 32))) for k in range(5)]
    whole_weeks = set(tab.day_of_month) == set().union(
        *(w for w in weeks if w <= set(tab.day_of_month)))
    if full_days or full_weekdays or whole_weeks:
        CronExpression.parse(expr)
        assert not is_marker(expr)
    else:
        assert expr.startswith("@crontab ")
        with pytest.raises(InvalidCronExpression):
            CronExpression.parse(expr)


# -- the refused ones of the issue ---------------------------------------------------------------

ISSUE = [
    ({"day_of_month": "1", "day_of_week": "mon"}, "@crontab 0 0 1 * 1"),
    ({"day_of_month": "1,8,15,22", "day_of_week": "mon"}, "@crontab 0 0 1,8,15,22 * 1"),
    ({"day_of_month": "*/3", "day_of_week": "mon"}, None),
    ({"day_of_month": "13", "day_of_week": "mon-fri"}, "@crontab 0 0 13 * 1-5"),
    ({"day_of_month": "25-31", "day_of_week": "mon"}, "@crontab 0 0 25-31 * 1"),
    ({"day_of_month": "13", "day_of_week": "fri"}, "@crontab 0 0 13 * 5"),
    # Unions of whole weeks of the month are the nth weekdays: plain Awa expressions.
    ({"day_of_month": "1-14", "day_of_week": "mon"}, "0 0 * * 1#1,1#2"),
    ({"day_of_month": "29-31", "day_of_week": "fri"}, "0 0 * * 5#5"),
    ({"day_of_month": "1-7,22-31", "day_of_week": "sat,sun"},
     "0 0 * * 0#1,0#4,0#5,6#1,6#4,6#5"),
    ({"day_of_month": "8-14", "day_of_week": "mon,wed"}, "0 0 * * 1#2,3#2"),
]


@pytest.mark.parametrize(("days", "stored"), ISSUE)
def test_the_issues_crontabs_are_stored_and_fire_as_celerys(
        days: dict[str, str], stored: str | None) -> None:
    fields = {"minute": "0", "hour": "0", **days}
    expr, _ = to_cron_expression(crontab(**fields))  # type: ignore[arg-type]
    if stored is not None:
        assert expr == stored
    # Midnight in Paris is never skipped nor repeated: Awa's rule and Celery's agree.
    assert ours(expr, "Europe/Paris", YEAR_START, YEAR_END, 400) == \
        celery_fires(fields, "Europe/Paris", YEAR_START, YEAR_END, 400)


def test_a_marker_bounds_and_reads_back() -> None:
    expr, _ = to_cron_expression(crontab(minute=0, hour=9, day_of_month=13, day_of_week=5))
    assert calendar_for(expr + " | runs=3", "UTC").next_from(YEAR_START) == \
        datetime(2027, 8, 13, 9, tzinfo=UTC)
    for bad in ("@crontab 0 9 13 * 5 dst=maybe", "@crontab 0 9 13 *", "@crontab 0 9 1L * 5"):
        with pytest.raises(InvalidCronExpression):
            calendar_for(bad, "UTC")


@pytest.mark.parametrize("dst", ["awa", "celery"])
def test_export_gives_the_stored_crontab_back(dst: str) -> None:
    from awa_beat._exporting import celery_schedule

    tab = crontab(minute=0, hour=9, day_of_month="13", day_of_week="fri")
    expr, _ = to_cron_expression(tab, dst)
    code = celery_schedule(expr, "UTC", app_timezone="UTC").code
    back = eval(str(code), {"crontab": crontab})
    for name in ("minute", "hour", "day_of_month", "month_of_year", "day_of_week"):
        assert getattr(back, name) == getattr(tab, name)


# -- DST: Awa's rule (the default) and Celery's (dst=celery) -----------------------------------

DST_ZONES = [("Europe/London", 2027), ("America/New_York", 2027),
             ("Australia/Lord_Howe", 2027),  # a half-hour shift
             ("Pacific/Apia", 2011)]  # 2011-12-30 did not happen there
DST_CRONTABS = [
    {"minute": "17"}, {"minute": "30", "hour": "2"}, {"minute": "*/20", "hour": "1-3"},
    {"minute": "45", "hour": "1"}, {"minute": "0", "hour": "9"}, {"minute": "15", "hour": "2"},
    {"minute": "30", "hour": "2", "day_of_month": "1-7", "day_of_week": "sun"},
    {"minute": "0", "hour": "2,3", "day_of_month": "*/2", "day_of_week": "sun,fri,sat"},
]


def transitions(zone: str, year: int) -> list[datetime]:
    """The instants (UTC, to the hour before) at which ``zone``'s offset changes."""
    from zoneinfo import ZoneInfo

    tz = ZoneInfo(zone)
    t = datetime(year, 1, 1, tzinfo=UTC)
    found, offset = [], t.astimezone(tz).utcoffset()
    while t.year == year:
        t += timedelta(minutes=30)
        now = t.astimezone(tz).utcoffset()
        if now != offset:
            found.append(t - timedelta(hours=1))
            offset = now
    return found


def _around(zone: str, year: int) -> list[tuple[datetime, datetime]]:
    found = transitions(zone, year)
    assert found, zone
    return [(t - timedelta(days=2), t + timedelta(days=2)) for t in found]


@pytest.mark.parametrize(("zone", "year"), DST_ZONES)
@pytest.mark.parametrize("fields", DST_CRONTABS, ids=str)
def test_dst_celery_fires_as_celery_in_gaps_and_folds(zone: str, year: int,
                                                      fields: dict[str, str]) -> None:
    expr, _ = to_cron_expression(crontab(**fields), "celery")  # type: ignore[arg-type]
    assert expr.endswith(" dst=celery")
    for start, until in _around(zone, year):
        assert ours(expr, zone, start, until, 500) == \
            celery_fires(fields, zone, start, until, 500), (zone, fields, start)


@pytest.mark.parametrize(("zone", "year"), DST_ZONES)
@pytest.mark.parametrize("fields", DST_CRONTABS, ids=str)
def test_dst_awa_is_awas_rule_and_differs_from_celery_only_at_transitions(
        zone: str, year: int, fields: dict[str, str]) -> None:
    """The default: a plain expression is Awa's own evaluator; an @crontab steps by the
    same rule, on the days both day fields match."""
    expr, _ = to_cron_expression(crontab(**fields))  # type: ignore[arg-type]
    tab = crontab(**fields)  # type: ignore[arg-type]
    plain = " ".join([fields.get("minute", "*"), fields.get("hour", "*"),
                      fields.get("day_of_month", "*"), "*", "*"])
    for start, until in _around(zone, year):
        awa = ours(expr, zone, start, until, 500)
        if is_marker(expr):
            from zoneinfo import ZoneInfo

            evaluator = [f for f in ours(plain, zone, start, until, 500)
                         if f.astimezone(ZoneInfo(zone)).isoweekday() % 7 in tab.day_of_week]
            assert awa == evaluator
        else:
            CronExpression.parse(expr)  # Awa's own: what an Awa leader fires, too
        theirs = celery_fires(fields, zone, start, until, 500)
        changes = transitions(zone, year)
        for fire in set(awa) ^ set(theirs):
            if zone == "Pacific/Apia" and fire.date() >= date(2011, 12, 30) and \
                    fire not in awa and (not awa or max(awa) < fire):
                # A skipped wall time more than an hour from the end of its gap ends
                # Awa's search: a schedule due in the lost day stalls, as Awa's does.
                continue
            assert min(abs(fire - c) for c in changes) <= timedelta(hours=3), (zone, fire)


@pytest.mark.parametrize(("zone", "fields", "start", "awa", "celery"), [
    # Clocks go 01:00 -> 02:00: Awa fires the skipped 01:17 at the end of the gap too.
    ("Europe/London", {"minute": "17"}, datetime(2027, 3, 28, 0, 30),
     ["01:00", "01:17", "02:17"], ["01:17", "02:17", "03:17"]),
    # 02:00 EST -> 03:00 EDT: the skipped 02:30 is at 03:00 EDT for Awa, 03:30 for Celery.
    ("America/New_York", {"minute": "30", "hour": "2"}, datetime(2027, 3, 14, 0, 0),
     ["07:00"], ["07:30"]),
    # 02:00 -> 02:30 (+10:30 -> +11): the skipped 02:15 is 02:30 for Awa, 02:45 for Celery.
    ("Australia/Lord_Howe", {"minute": "15", "hour": "2"}, datetime(2027, 10, 2, 12, 0),
     ["15:30"], ["15:45"]),
])
def test_the_readmes_examples(zone: str, fields: dict[str, str], start: datetime,
                              awa: list[str], celery: list[str]) -> None:
    start = start.replace(tzinfo=UTC)
    for dst, expected in (("awa", awa), ("celery", celery)):
        expr, _ = to_cron_expression(crontab(**fields), dst)  # type: ignore[arg-type]
        got = ours(expr, zone, start, start + timedelta(hours=12), len(expected))
        assert [f.strftime("%H:%M") for f in got] == expected, (zone, dst)


def test_the_dst_setting_and_the_entrys_option() -> None:
    from awa_beat._schedules.spec import specs_from_beat_schedule
    from awa_beat.errors import ValidationError

    hourly = crontab(minute=17)
    entries = {"default": {"task": "t", "schedule": hourly},
               "own": {"task": "t", "schedule": hourly,
                       "options": {"awa_beat": {"dst": "celery"}}},
               "back": {"task": "t", "schedule": hourly,
                        "options": {"awa_beat": {"dst": "awa"}}}}
    stored = {s.name: s.cron_expr for s in specs_from_beat_schedule(entries)}
    assert stored == {"default": "17 * * * *", "own": "@crontab 17 * * * * dst=celery",
                      "back": "17 * * * *"}
    stored = {s.name: s.cron_expr
              for s in specs_from_beat_schedule(entries, default_dst="celery")}
    assert stored == {"default": "@crontab 17 * * * * dst=celery",
                      "own": "@crontab 17 * * * * dst=celery", "back": "17 * * * *"}
    with pytest.raises(ValidationError) as info:
        specs_from_beat_schedule({
            "interval": {"task": "t", "schedule": 60,
                         "options": {"awa_beat": {"dst": "celery"}}},
            "typo": {"task": "t", "schedule": hourly, "options": {"awa_beat": {"dst": "Celery"}}},
        })
    assert {(name, f) for name, f, _ in info.value.problems} == {
        ("interval", "options.awa_beat.dst"), ("typo", "options.awa_beat.dst")}
