"""Source: django-celery-beat's tables (``awa-beat import --from-django URL``).

Read with plain SQL (the named ``django_*`` queries of ``queries.sql``), so neither
Django nor django-celery-beat is needed; each ``PeriodicTask`` converts as
django-celery-beat's ``ModelEntry`` would run it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..errors import SourceError, first_line
from ..spec import AWA_BEAT_OPTION
from .common import (
    BACKEND_CLEANUP,
    BACKEND_CLEANUP_REASON,
    UTC,
    NotCarried,
    Result,
    convert,
    dedupe,
    iso,
    utc_cursor,
)

#: ``paused_by`` of a row whose task was disabled (``enabled = false``).
DJANGO_PAUSED_BY = "import: disabled in django-celery-beat"

#: Each of django-celery-beat's tables by its field of :class:`DjangoTables`, with the
#: named query of ``queries.sql`` that reads it.
_SOURCES = {
    "tasks": ("django_celery_beat_periodictask", "django_tasks"),
    "intervals": ("django_celery_beat_intervalschedule", "django_intervals"),
    "crontabs": ("django_celery_beat_crontabschedule", "django_crontabs"),
    "solars": ("django_celery_beat_solarschedule", "django_solars"),
    "clocked": ("django_celery_beat_clockedschedule", "django_clocked"),
}
DJANGO_TABLES = {key: table for key, (table, _) in _SOURCES.items()}
#: IntervalSchedule.period's choices in django-celery-beat.
_PERIODS = ("days", "hours", "minutes", "seconds", "microseconds")


@dataclass(frozen=True)
class DjangoTables:
    """django-celery-beat's rows, as dicts of columns (schedules by id)."""

    tasks: list[dict[str, Any]]
    intervals: dict[int, dict[str, Any]] = field(default_factory=dict)
    crontabs: dict[int, dict[str, Any]] = field(default_factory=dict)
    solars: dict[int, dict[str, Any]] = field(default_factory=dict)
    clocked: dict[int, dict[str, Any]] = field(default_factory=dict)


def read_django(url: str) -> DjangoTables:
    """Read django-celery-beat's tables with plain SQL (the ``django_*`` queries), in one
    read-only snapshot.

    ``SELECT *`` keeps older django-celery-beat schemas readable (a column it lacks reads
    as missing); a schedule table that does not exist reads as empty.
    """
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.rows import dict_row

    from ..config import redact
    from ..sql import queries
    from ..store import connect

    try:
        conninfo_to_dict(url)
    except Exception:
        raise SourceError("the django-celery-beat database URL is malformed; expected e.g. "
                          "postgresql://user:password@host:5432/dbname") from None
    conn = connect(url, connect_timeout=10)  # StoreError, password redacted
    try:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        with conn.transaction():
            cur = conn.cursor(row_factory=dict_row)
            present = {r["table_name"] for r in cur.execute(
                queries["django_tables_present"], {"tables": list(DJANGO_TABLES.values())})
                if r["present"]}
            if DJANGO_TABLES["tasks"] not in present:
                raise SourceError(
                    f"no django-celery-beat tables in {redact(url)} "
                    f"({DJANGO_TABLES['tasks']} not found; wrong database or search_path?)")
            rows = {key: cur.execute(queries[query]).fetchall() if table in present else []
                    for key, (table, query) in _SOURCES.items()}
    except psycopg.Error as exc:
        raise SourceError(f"reading django-celery-beat's tables in {redact(url)} failed: "
                          f"{first_line(exc)}") from None
    finally:
        conn.close()
    rows["tasks"].sort(key=lambda r: r["name"])
    return DjangoTables(rows["tasks"], **{key: {r["id"]: r for r in rows[key]}
                                          for key in DJANGO_TABLES if key != "tasks"})


def from_django(tables: DjangoTables, *, now: datetime, default_timezone: str = "UTC",
                default_dispatch: str = "awa") -> list[Result]:
    """Each ``PeriodicTask`` as django-celery-beat's ``ModelEntry`` runs it.

    Options: ``queue``, ``exchange``, ``routing_key``, ``priority`` and ``headers`` (with
    the ``periodic_task_name`` header django-celery-beat adds to every message), and
    ``expire_seconds`` as ``expires``. A crontab keeps its own time zone; an interval
    fires on awa-beat's UTC grid. ``enabled = false`` imports the row paused;
    ``last_run_at`` is the cursor.
    """
    return dedupe(_django_task(task, tables, now, default_timezone, default_dispatch)
                   for task in tables.tasks)


def _django_task(t: Mapping[str, Any], tables: DjangoTables, now: datetime,
                 default_tz: str, default_dispatch: str) -> Result:
    name = str(t["name"])
    if name == BACKEND_CLEANUP and t.get("task") == BACKEND_CLEANUP:
        return NotCarried(name, BACKEND_CLEANUP_REASON)
    reasons: list[str] = []
    schedule: Any = None
    awa: dict[str, Any] = {}
    if t.get("solar_id") is not None:
        solar = tables.solars.get(t["solar_id"], {})
        reasons.append(
            f"solar schedule ({solar.get('event', '?')} at {solar.get('latitude', '?')}, "
            f"{solar.get('longitude', '?')}): Awa cannot evaluate solar events, so replicas "
            "and Awa sharing the table could not agree on fire times; use a crontab in the "
            "place's time zone")
    elif t.get("clocked_id") is not None:
        clocked = tables.clocked.get(t["clocked_id"], {})
        reasons.append(f"clocked schedule (once, at {iso(clocked.get('clocked_time'))}): a "
                       "single run at a given time, not a recurring schedule")
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
        except (LookupError, TypeError, ValueError) as exc:
            reasons.append(f"unusable interval: {exc}")
    else:
        reasons.append("no schedule (none of interval, crontab, solar, clocked is set)")
    if t.get("one_off"):
        reasons.append("one_off: runs once and is then disabled by django-celery-beat; "
                       "awa-beat schedules repeat")
    start = t.get("start_time")
    if isinstance(start, datetime) and utc_cursor(start, UTC) > now:
        reasons.append(f"start_time {iso(start)} is in the future: awa-beat schedules have "
                       "no start date; import it after that time")
    if t.get("expires") is not None:
        reasons.append(f"expires at {iso(t['expires'])}, an absolute date: awa-beat "
                       "schedules have no end date, and a fixed expiry would make every "
                       "message after it expire; use expire_seconds (relative) instead")
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
    if t.get("expire_seconds"):
        options["expires"] = t["expire_seconds"]
    options["headers"] = {**(headers or {}), "periodic_task_name": name}
    if awa:
        options[AWA_BEAT_OPTION] = awa
    entry = {"task": t.get("task"), "schedule": schedule, "args": args, "kwargs": kwargs,
             "options": options}
    return convert(name, entry, cursor=utc_cursor(t.get("last_run_at")),
                   paused_by=None if t.get("enabled", True) else DJANGO_PAUSED_BY,
                   default_timezone=default_tz, default_dispatch=default_dispatch)


_SEVEN = re.compile(r"(?<![0-9])7(?![0-9])")


def _django_crontab(row: Mapping[str, Any] | None) -> tuple[Any, str | None, str | None]:
    """(celery crontab, time zone name, problem)."""
    from celery.schedules import crontab

    if row is None:
        return None, None, "the crontab row is missing"
    # As django-celery-beat builds it: the columns go to Celery's crontab as they are.
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

