"""Source: django-celery-beat's tables (``awa-beat import --from-django URL``).

The tables are read with plain SQL (the named ``django_*`` queries of ``queries.sql``),
so neither Django nor django-celery-beat is needed. Each ``PeriodicTask`` converts as
django-celery-beat's ``ModelEntry`` would run it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from .._db.records import RETIRED_BY
from .._schedules.calendars import at
from .._schedules.markers import ceil_second
from .._schedules.spec import AWA_BEAT_OPTION
from ..errors import first_line
from .common import (
    BACKEND_CLEANUP,
    BACKEND_CLEANUP_REASON,
    UTC,
    NotCarried,
    Result,
    convert,
    dedupe,
    guarded,
    iso,
    utc_cursor,
)

#: ``paused_by`` of a row whose task was disabled (``enabled = false``).
DJANGO_PAUSED_BY = "import: disabled in django-celery-beat"

#: IntervalSchedule.period's choices in django-celery-beat.
_PERIODS = ("days", "hours", "minutes", "seconds", "microseconds")


@dataclass(frozen=True)
class DjangoTables:
    """django-celery-beat's rows as dicts of columns, with the schedules by id."""

    tasks: list[dict[str, Any]]
    intervals: dict[int, dict[str, Any]] = field(default_factory=dict)
    crontabs: dict[int, dict[str, Any]] = field(default_factory=dict)
    solars: dict[int, dict[str, Any]] = field(default_factory=dict)
    clocked: dict[int, dict[str, Any]] = field(default_factory=dict)


def read_django(url: str) -> DjangoTables:
    """Read django-celery-beat's tables in one read-only snapshot
    (:func:`awa_beat._db.django_beat.read_django_rows`), the tasks by name."""
    # Imported here, as the driver was before: reading the other sources needs neither.
    from .._db.django_beat import DJANGO_TABLES, read_django_rows

    rows = read_django_rows(url)
    rows["tasks"].sort(key=lambda r: r["name"])
    return DjangoTables(rows["tasks"], **{key: {r["id"]: r for r in rows[key]}
                                          for key in DJANGO_TABLES if key != "tasks"})


def from_django(tables: DjangoTables, *, now: datetime, default_timezone: str = "UTC",
                default_dispatch: str = "awa", default_dst: str = "awa") -> list[Result]:
    """Convert each ``PeriodicTask`` as django-celery-beat's ``ModelEntry`` runs it.

    The options carried over are ``queue``, ``exchange``, ``routing_key``, ``priority``
    and ``headers`` (with the ``periodic_task_name`` header that django-celery-beat adds
    to every message), and ``expires`` (the task's absolute ``expires``, else
    ``expire_seconds``) as the messages' expiry. A crontab keeps its own time zone, an
    interval fires on awa-beat's UTC grid, solar stays Celery's solar, and a clocked task
    becomes ``at(clocked_time)``. The task's ``expires`` also becomes ``end_time`` (the
    second before it, because django-celery-beat stops the task at that instant),
    ``start_time`` stays ``start_time`` and ``one_off`` stays ``one_off``. ``enabled =
    false`` imports the row paused, and a one-off that has run is imported retired.
    ``last_run_at`` is the cursor, except for a clocked task that has not run: its cursor
    is just before its time, so that it still runs once.
    """
    return dedupe(guarded(task.get("name"), partial(_django_task, task, tables, now,
                                                    default_timezone, default_dispatch,
                                                    default_dst))
                  for task in tables.tasks)


def _django_task(t: Mapping[str, Any], tables: DjangoTables, now: datetime,
                 default_tz: str, default_dispatch: str, default_dst: str) -> Result:
    name = str(t["name"])
    if name == BACKEND_CLEANUP and t.get("task") == BACKEND_CLEANUP:
        return NotCarried(name, BACKEND_CLEANUP_REASON)
    reasons: list[str] = []
    schedule: Any = None
    awa: dict[str, Any] = {}
    cursor = utc_cursor(t.get("last_run_at"))
    paused_by = None if t.get("enabled", True) else DJANGO_PAUSED_BY
    ran = bool(t.get("total_run_count"))
    if t.get("solar_id") is not None:
        schedule, problem = _django_solar(tables.solars.get(t["solar_id"]))
        if problem:
            reasons.append(problem)
    elif t.get("clocked_id") is not None:
        clocked = tables.clocked.get(t["clocked_id"], {}).get("clocked_time")
        if not isinstance(clocked, datetime):
            reasons.append("the clocked row is missing")
        elif not _in_range(clocked):
            reasons.append(f"clocked_time {clocked.isoformat()} is out of range: awa-beat "
                           "takes instants from 1970 to 9999")
        else:
            instant = utc_cursor(clocked, UTC)
            assert instant is not None
            schedule = at(instant)
            # django-celery-beat runs a clocked task whenever it is enabled and has not
            # run (its run count is reset when it is disabled), however late. A clocked
            # time that has already passed therefore still fires once, unless the task
            # has run.
            if ran and paused_by is None:
                cursor = instant
            elif instant <= now:
                cursor = instant - timedelta(seconds=1)
            else:
                cursor = None
    elif t.get("crontab_id") is not None:
        schedule, tz, problem = _django_crontab(tables.crontabs.get(t["crontab_id"]))
        if problem:
            reasons.append(problem)
        if tz:
            awa["timezone"] = tz
    elif t.get("interval_id") is not None:
        interval = tables.intervals.get(t["interval_id"])
        try:
            if interval is None:
                raise LookupError("the interval row is missing")
            period = str(interval["period"])
            if period not in _PERIODS:
                # Python's own message for a bad timedelta keyword differs by version.
                raise ValueError(f"unknown period {period!r} (django-celery-beat's are "
                                 f"{', '.join(_PERIODS)})")
            schedule = timedelta(**{period: int(interval["every"])})
        except (LookupError, TypeError, ValueError, OverflowError) as exc:
            reasons.append(f"unusable interval: {exc}")
    else:
        reasons.append("no schedule (none of interval, crontab, solar, clocked is set)")
    if t.get("one_off") or t.get("clocked_id") is not None:
        if t.get("clocked_id") is None:
            awa["one_off"] = True  # at() already makes one run.
        if ran and paused_by is None:
            # It ran, so django-celery-beat disables it at its next look (and resets the
            # count). Here it is retired, so that no resume runs it again by surprise.
            paused_by = RETIRED_BY
    start = t.get("start_time")
    if isinstance(start, datetime) and t.get("clocked_id") is None:
        awa["start_time"] = utc_cursor(start, UTC)
    expires = t.get("expires")
    if isinstance(expires, datetime):
        # PeriodicTask.expires stops the task at that instant (is_due disables it when
        # now >= expires), so its last fire is the second before. It is also every
        # message's expiry (ModelEntry passes expires_ = expires or expire_seconds).
        last = ceil_second(expires.astimezone(UTC)) - timedelta(seconds=1)
        if t.get("clocked_id") is not None:
            if isinstance(schedule, at) and schedule.instant > last:
                reasons.append(f"expires at {iso(expires)}, before its clocked time: "
                               "django-celery-beat never runs it")
        elif isinstance(start, datetime) and ceil_second(start.astimezone(UTC)) > last:
            reasons.append(f"expires at {iso(expires)}, before its start_time "
                           f"{iso(start)}: django-celery-beat never runs it")
        else:
            awa["end_time"] = last
    args = _json_column(t.get("args"), "args", list, reasons, "[]")
    kwargs = _json_column(t.get("kwargs"), "kwargs", dict, reasons, "{}")
    headers = _json_column(t.get("headers"), "headers", dict, reasons, "{}")
    if reasons:
        return NotCarried(name, "; ".join(reasons))
    options: dict[str, Any] = {}
    for key in ("queue", "exchange", "routing_key", "priority"):
        value = t.get(key)
        if value is not None and value != "":
            options[key] = value
    if isinstance(expires, datetime):
        options["expires"] = expires
    elif t.get("expire_seconds"):
        options["expires"] = t["expire_seconds"]
    options["headers"] = {**(headers or {}), "periodic_task_name": name}
    if awa:
        options[AWA_BEAT_OPTION] = awa
    entry = {"task": t.get("task"), "schedule": schedule, "args": args, "kwargs": kwargs,
             "options": options}
    return convert(name, entry, cursor=cursor, paused_by=paused_by,
                   default_timezone=default_tz, default_dispatch=default_dispatch,
                   default_dst=default_dst)


def _in_range(t: datetime) -> bool:
    try:
        return 1970 <= (utc_cursor(t, UTC) or t).year <= 9999
    except OverflowError:  # Year 1 with a positive offset falls before year 1 in UTC.
        return False


def _django_solar(row: Mapping[str, Any] | None) -> tuple[Any, str | None]:
    """Return (celery solar, problem), built as SolarSchedule.schedule builds it."""
    if row is None:
        return None, "the solar row is missing"
    try:
        from celery.schedules import solar

        return solar(str(row["event"]), float(row["latitude"]), float(row["longitude"])), None
    except (KeyError, TypeError, ValueError) as exc:
        return None, f"invalid solar schedule ({exc}): Celery rejects it"
    except Exception as exc:  # Celery raises ImproperlyConfigured without ephem.
        return None, f"solar schedule: {first_line(exc)}"


_SEVEN = re.compile(r"(?<![0-9])7(?![0-9])")


def _django_crontab(row: Mapping[str, Any] | None) -> tuple[Any, str | None, str | None]:
    """Return (celery crontab, time zone name, problem)."""
    from celery.schedules import crontab

    if row is None:
        return None, None, "the crontab row is missing"
    # This builds the crontab as django-celery-beat does: the columns go to Celery's
    # crontab as they are.
    fields = {key: "*" if row.get(key) is None else str(row[key])
              for key in ("minute", "hour", "day_of_week", "day_of_month", "month_of_year")}
    tz = row.get("timezone")
    tz = str(getattr(tz, "key", tz)) if tz else None
    try:
        return crontab(**fields), tz, None
    except ValueError as exc:
        if _SEVEN.search(fields["day_of_week"].split("/")[0]):
            return None, tz, (
                f"day_of_week {fields['day_of_week']!r} has a 7: Celery's crontab rejects it "
                "(days are 0-6, Sunday is 0), so django-celery-beat never ran this task; "
                "write 0 there if Sunday is meant, then import again")
        return None, tz, (f"invalid crontab ({exc}): Celery rejects it, so django-celery-beat "
                          "never ran this task")


def _json_column(text: Any, column: str, kind: type, reasons: list[str], empty: str) -> Any:
    try:
        value = json.loads(text or empty)
    except (TypeError, ValueError) as exc:
        reasons.append(f"{column} is not valid JSON ({exc})")
        return None
    if not isinstance(value, kind):
        reasons.append(f"{column} must be a JSON {'array' if kind is list else 'object'}")
        return None
    return value

