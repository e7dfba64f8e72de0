"""Stored schedules as a ``beat_schedule`` module that a stock ``celery beat`` runs. This
is the rollback path of ``awa-beat export --format python``.

An entry becomes a Celery schedule object where Celery can run it on the calendar that
awa-beat runs it on (a crontab, an interval, a solar event). Otherwise it is left out,
with a comment that says why and shows the entry in awa-beat's form (for an Awa cron
expression that Celery's crontab cannot say, ``at``, an rrule, bounds, or a paused or
retired schedule). Task, args, kwargs and options are kept as stored, including
``options["awa_beat"]``, which Celery passes along unread and ``awa-beat import`` reads
back.

The module is pure: rows go in and text comes out, the same text for the same rows.
"""

from __future__ import annotations

import pprint
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ._db.records import ScheduleRow
from ._ops.rows import beat_entry
from ._schedules.cron import CronExpression, CronFields
from ._schedules.fire_times import every_seconds, interval_expression
from ._schedules.markers import is_marker, split_bounds
from ._schedules.spec import AWA_BEAT_OPTION, _field_text
from .errors import ScheduleError

#: Interval expressions (Awa cron patterns in UTC) by the text of their number of
#: seconds. They are the grids that
#: :func:`~awa_beat._schedules.fire_times.interval_expression` stores as cron patterns.
_GRIDS: dict[str, int] = {
    interval_expression(n): n
    for n in [*range(1, 60), *range(60, 3600, 60), *range(3600, 86400, 3600), 86400, 604800]
    if not interval_expression(n).startswith("@")
}
_ALL = {"minute": range(60), "hour": range(24), "day_of_month": range(1, 32),
        "month_of_year": range(1, 13), "day_of_week": range(7)}
_BOUND_KEYS = ("start_time", "end_time", "max_runs", "one_off")
_WIDTH = 88

_INTERVAL_NOTE = ("awa-beat fires it on a grid anchored at the Unix epoch in UTC; Celery's "
                  "interval counts from the last run (the first from beat's start)")
_ZONE_NOTE = ("Celery runs a crontab in the app's time zone and has no per-entry zone: "
              "crontab_in() pins it to {zone}")
_CRONTAB_IN = '''

def crontab_in(zone, **fields):
    """A crontab on the wall clock of ``zone``. Celery runs every crontab in the app's
    time zone and has no per-entry zone: Celery 5.7 reads a crontab's zone from its
    ``tz``, Celery 5.4 to 5.6 from the time its ``nowfun`` returns, so both are set."""
    tz = zoneinfo.ZoneInfo(zone)
    tab = crontab(**fields, nowfun=functools.partial(datetime.datetime.now, tz))
    tab.tz = tz
    return tab
'''


@dataclass(frozen=True)
class Converted:
    """A stored schedule, said in Celery's terms."""

    code: str | None
    """A Python expression that builds the Celery schedule, or None where Celery has no
    schedule that runs on the same calendar."""
    note: str | None = None
    """How Celery's runs differ (for an interval's grid), or why the entry is left out."""
    names: frozenset[str] = frozenset()
    """The names that ``code`` uses: ``crontab``, ``crontab_in``, ``schedule``, ``solar``."""
    kept: bool = True
    """Whether the entry is in the module's ``beat_schedule``. Otherwise it is a comment,
    and ``note`` says why."""


def left_out(reason: str, code: str | None = None,
             names: frozenset[str] = frozenset()) -> Converted:
    return Converted(code, reason, names, kept=False)


def celery_schedule(expr: str, zone: str, *, app_timezone: str | None = None) -> Converted:
    """Return the Celery schedule of a stored ``cron_expr`` in ``zone``. ``app_timezone``
    is the time zone of the app that will run it; a crontab in another zone is pinned to
    its own zone.
    """
    seconds = every_seconds(expr)
    if seconds is None and zone == "UTC":
        seconds = _GRIDS.get(expr)
    if seconds is not None:
        return Converted(f"schedule({_timedelta_code(seconds)})", _INTERVAL_NOTE,
                         frozenset({"schedule"}))
    tab: dict[str, str] | str | None = _crontab_marker_args(expr)
    if tab is None and is_marker(expr):
        return _marker_schedule(expr)
    if tab is None:
        try:
            parsed = CronExpression.parse(expr)
        except ScheduleError as exc:
            return left_out(f"its expression {expr!r} is not valid: {exc}")
        if parsed.never_fires:  # Celery 5.7 refuses such a crontab at import time.
            return left_out(f"the Awa cron expression {expr!r} never fires: no day matches it")
        tab = crontab_fields(parsed.fields())
    if isinstance(tab, str):
        return left_out(f"the Awa cron expression {expr!r} {tab}")
    args = ", ".join(f"{key}={value!r}" for key, value in tab.items())
    if zone == app_timezone:
        return Converted(f"crontab({args})", None, frozenset({"crontab"}))
    return Converted(f"crontab_in({zone!r}{', ' if args else ''}{args})",
                     _ZONE_NOTE.format(zone=zone), frozenset({"crontab", "crontab_in"}))


def _marker_schedule(expr: str) -> Converted:
    head, bounds = split_bounds(expr)
    kind, _, rest = head.partition(" ")
    if kind == "@at":
        return left_out(f"it fires once, at {rest}; stock Celery has no one-off schedule "
                        "(django-celery-beat's clocked needs its own scheduler)")
    if bounds:
        return left_out(f"awa-beat bounds it ({bounds.text()}); a Celery schedule has no "
                        "start, end or number of runs, so Celery would run it outside them")
    if kind == "@solar":
        event, lat, lon = rest.split(" ")
        return Converted(f"solar({event!r}, {float(lat)!r}, {float(lon)!r})", None,
                         frozenset({"solar"}))
    if kind == "@rrule":
        return left_out("it is an rrule, which stock Celery does not have (RedBeat's "
                        "redbeat.schedules.rrule runs it, under RedBeat's scheduler)")
    return left_out(f"{expr!r} is no schedule Celery has")


def _crontab_marker_args(expr: str) -> dict[str, str] | None:
    """Return the crontab arguments of ``@crontab <fields>[ dst=celery]`` (without bounds),
    which is Celery's own crontab as stored, or None for another expression."""
    if not expr.startswith("@crontab ") or " | " in expr:
        return None
    words = expr.split(" ")[1:6]
    names = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
    return {key: value for key, value in zip(names, words, strict=True) if value != "*"}


def crontab_fields(fields: CronFields) -> dict[str, str] | str:
    """Return the arguments of a Celery ``crontab`` that matches exactly the instants that
    ``fields`` match (leaving out the fields that Celery's default ``*`` covers), or the
    reason why there is none.

    Celery ANDs day_of_month with day_of_week, while cron ORs them when both are
    restricted, so such an expression converts only where one of them matches every day.
    ``d#n`` (the nth weekday of the month) means days 7n-6 to 7n of that weekday, so a set
    of them that holds every listed weekday in every listed week converts (``1#1,1#2``
    means Mondays on days 1-14)."""
    if fields.seconds != (0,):
        return ("has a seconds field; Celery's crontab fires on whole minutes (an interval "
                "on the epoch grid would be a number of seconds)")
    if fields.last_day or fields.nearest_weekdays or fields.last_weekdays:
        return ("uses L or W (the last day, the nearest weekday), which Celery's crontab "
                "cannot say")
    days = _days(fields)
    if isinstance(days, str):
        return days
    values = {"minute": fields.minutes, "hour": fields.hours, "day_of_month": days[0],
              "month_of_year": fields.months, "day_of_week": days[1]}
    out = {}
    for key, matched in values.items():
        text = _field_text(set(matched), set(_ALL[key]))
        if text != "*":
            out[key] = text
    return out


def _days(fields: CronFields) -> tuple[tuple[int, ...], tuple[int, ...]] | str:
    """Return (day_of_month, day_of_week) for Celery, which ANDs them."""
    every_day, every_weekday = tuple(_ALL["day_of_month"]), tuple(_ALL["day_of_week"])
    pairs = {(w, n) for w in fields.weekdays for n in range(1, 6)} | fields.nth_weekdays
    if fields.any_day and fields.any_weekday:
        return every_day, every_weekday
    if fields.any_weekday:
        return fields.days, every_weekday
    weekdays = sorted({w for w, _ in pairs})
    weeks = sorted({n for _, n in pairs})
    if fields.any_day:
        if pairs != {(w, n) for w in weekdays for n in weeks}:
            return ("names different weeks of the month for different weekdays (d#n), "
                    "which one Celery crontab cannot say")
        return tuple(d for d in every_day if (d - 1) // 7 + 1 in weeks), tuple(weekdays)
    if set(fields.days) >= set(every_day) or len(pairs) == 35:
        return every_day, every_weekday  # One side matches every day, so "either" does too.
    return ("restricts both the day of the month and the day of the week: cron (Awa) fires "
            "when either matches, Celery's crontab only when both do")


def _timedelta_code(seconds: int) -> str:
    for unit, size in (("weeks", 604800), ("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds % size == 0:
            return f"datetime.timedelta({unit}={seconds // size})"
    return f"datetime.timedelta(seconds={seconds})"


# -- the module ------------------------------------------------------------------------------


def _bounds_of(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Return the bounds that an entry gives in ``options["awa_beat"]`` (rather than in
    its marker)."""
    awa = (entry.get("options") or {}).get(AWA_BEAT_OPTION) or {}
    return {k: awa[k] for k in _BOUND_KEYS if awa.get(k) not in (None, False)}


def _timing_of(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Return the catch-up window and the jitter that an entry gives."""
    awa = (entry.get("options") or {}).get(AWA_BEAT_OPTION) or {}
    return {k: awa[k] for k in ("catch_up_window", "jitter") if awa.get(k) is not None}


def convert_row(row: ScheduleRow, entry: Mapping[str, Any], *,
                app_timezone: str | None = None) -> Converted:
    """Return the Celery schedule of a stored row whose ``beat_schedule`` entry is ``entry``."""
    schedule = entry["schedule"]
    expr = f"@every {schedule}s" if isinstance(schedule, int) else str(schedule)
    zone = ((entry.get("options") or {}).get(AWA_BEAT_OPTION) or {}).get(
        "timezone", row.timezone)
    converted = celery_schedule(expr, zone, app_timezone=app_timezone)
    bounds = _bounds_of(entry)
    if bounds and converted.code is not None:
        text = ", ".join(f"{k}={v}" for k, v in bounds.items())
        converted = left_out(f"awa-beat bounds it ({text}); a Celery schedule has no start, "
                             "end or number of runs, so Celery would run it outside them")
    timing = _timing_of(entry)
    if timing and converted.kept and converted.code is not None:
        # Celery fires on the same calendar, so the entry is kept; what it lacks is said,
        # and options["awa_beat"] keeps the settings for an import back.
        text = " and ".join(f"{k}={v}" for k, v in timing.items())
        note = (f"Celery has no {text}: it fires a missed time late and every job at its "
                "fire time")
        converted = Converted(converted.code,
                              f"{converted.note}; {note}" if converted.note else note,
                              converted.names)
    if row.retired:
        return left_out("its last allowed run fired (awa-beat retired it)", converted.code,
                        converted.names)
    if row.paused_at is not None and converted.kept:
        return left_out(f"paused in awa-beat by {row.paused_by!r}, so left out to stay "
                        "stopped; uncomment it to run it", converted.code, converted.names)
    if row.paused_at is not None:
        return left_out(f"paused in awa-beat by {row.paused_by!r}; and {converted.note}")
    return converted


def python_module(rows: Iterable[ScheduleRow], *, app_timezone: str | None = None) -> str:
    """Return the rows as a ``beat_schedule`` module for a stock ``celery beat``."""
    body: list[str] = []
    names: set[str] = set()
    kept = dropped = 0
    for row in rows:
        entry = beat_entry(row)
        converted = convert_row(row, entry, app_timezone=app_timezone)
        if converted.code is not None and row.cron_expr.partition(" | ")[0].endswith(
                " dst=celery"):
            # The crontab object alone would import back under Awa's DST rule, so the
            # entry's options keep dst=celery.
            options = dict(entry.get("options") or {})
            options[AWA_BEAT_OPTION] = {**options.get(AWA_BEAT_OPTION, {}), "dst": "celery"}
            entry = {**entry, "options": options}
        names |= converted.names  # A commented-out entry can be uncommented.
        if converted.kept:
            kept += 1
        else:
            dropped += 1
        body.extend(_entry_lines(row.name, entry, converted))
    return _header(kept, dropped, names, app_timezone) + "beat_schedule = {\n" + \
        "".join(line + "\n" for line in body) + "}\n"


def _entry_lines(name: str, entry: Mapping[str, Any], converted: Converted) -> list[str]:
    prefix = "    " if converted.kept else "    # "
    lines = []
    if converted.note:
        intro = "" if converted.kept else f"Left out: {name!r}: "
        lines += ["    # " + line for line in textwrap.wrap(intro + converted.note + ".",
                                                          _WIDTH - 6, break_on_hyphens=False)]
    schedule = converted.code if converted.code is not None else repr(entry["schedule"])
    fields = [("task", repr(entry["task"])), ("schedule", schedule),
              ("args", _value(entry.get("args", []))),
              ("kwargs", _value(entry.get("kwargs", {}))),
              ("options", _value(entry.get("options", {})))]
    lines.append(f"{prefix}{name!r}: {{")
    for key, text in fields:
        label = f"{key!r}: "
        text = label + text.replace("\n", "\n" + " " * len(label)) + ","
        if key == "schedule" and converted.code is None:
            text += "  # awa-beat's form"
        lines += [f"{prefix}    {line}" for line in text.split("\n")]
    lines.append(f"{prefix}}},")
    return lines


def _value(value: Any) -> str:
    return pprint.pformat(value, width=_WIDTH - 24, sort_dicts=False)


def _header(kept: int, dropped: int, names: set[str], app_timezone: str | None) -> str:
    zone = (f"Crontabs in {app_timezone} are plain crontabs: load this module in an app "
            f"whose timezone is {app_timezone}; those of other zones are pinned to theirs."
            if app_timezone else
            "Every crontab is pinned to its own time zone (crontab_in), whatever the app's.")
    paragraphs = [
        f"beat_schedule exported by awa-beat: {kept} entries Celery runs, {dropped} left out.",
        "For a stock celery beat: app.conf.beat_schedule = beat_schedule. Each entry left "
        "out is a comment saying why. Celery's crontabs follow Celery's DST rules, not "
        "Awa's, in the hours a clock change skips or repeats. " + zone,
        "options['awa_beat'] holds awa-beat's own settings: Celery passes them along "
        "unread, and `awa-beat import -A` reads them back.",
    ]
    text = "\n\n".join(textwrap.fill(p, _WIDTH, break_on_hyphens=False) for p in paragraphs)
    doc = f'"""{text}\n"""\n\n'
    imports = []
    if names & {"schedule", "crontab_in"}:
        imports.append("import datetime")
    if "crontab_in" in names:
        imports += ["import functools", "import zoneinfo"]
    celery = sorted(names & {"crontab", "schedule", "solar"})
    text = doc + "".join(line + "\n" for line in imports)
    if celery:
        text += ("\n" if imports else "") + \
            f"from celery.schedules import {', '.join(celery)}\n"
    if "crontab_in" in names:
        text += _CRONTAB_IN
    return text + ("\n\n" if imports or celery else "")
