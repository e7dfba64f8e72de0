"""Moving an existing Celery schedule into ``awa.cron_jobs`` (``awa-beat import``).

Four sources, each read into a list of results, one per entry found: :class:`Imported`
(a validated :class:`~awa_beat.spec.ScheduleSpec`, the cursor, the pause) or
:class:`NotCarried` (the name and why). Nothing is ever dropped silently.

* a Celery app's ``beat_schedule`` (:func:`load_app`, :func:`from_beat_schedule`): no
  run is known, so the cursor is "now", as a normal sync;
* django-celery-beat's tables, read with plain SQL (:func:`read_django`,
  :func:`from_django`);
* RedBeat's hashes in Redis (:func:`read_redbeat`, :func:`from_redbeat`), decoded as
  celery-redbeat 2.4's ``RedBeatJSONDecoder`` does;
* a ``celerybeat-schedule`` shelve file written by Celery's ``PersistentScheduler``
  (:func:`read_schedule_file`, :func:`from_schedule_file`).

The cursor is the old scheduler's ``last_run_at`` (aware UTC, whole seconds), so the
first fire after the cutover is the next one: nothing at or before the last run fires
again, and a slot missed during the cutover fires once (``coalesce``) or each
(``catch_up``). :func:`plan` compares the results with the stored rows: what would be
new, changed (field by field), unchanged, whose cursor moves, and what is left out.

Reading is I/O; every ``from_*`` function and :func:`plan` is pure.
"""

from __future__ import annotations

import dbm
import json
import os
import re
import shelve
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any, Union
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit
from zoneinfo import ZoneInfo

from .errors import SourceError, ValidationError, first_line
from .spec import AWA_BEAT_OPTION, ScheduleSpec, specs_from_beat_schedule

UTC = timezone.utc
#: Celery's result-backend cleanup, which Celery's schedulers install by themselves.
BACKEND_CLEANUP = "celery.backend_cleanup"
BACKEND_CLEANUP_REASON = (
    "Celery's built-in result-backend cleanup, installed by the old scheduler itself: "
    "awa-beat's Scheduler registers it by itself when the app's result backend needs it "
    "(Celery's own rule), so an imported copy would only be a second, unmanaged row"
)
DJANGO_PAUSED_BY = "import: disabled in django-celery-beat"
REDBEAT_PAUSED_BY = "import: disabled in RedBeat"


@dataclass(frozen=True)
class Imported:
    """An entry carried over: its schedule, its cursor and whether it starts paused."""

    spec: ScheduleSpec
    cursor: datetime | None
    """The old scheduler's last run (aware UTC, whole seconds); None when none is known."""
    paused_by: str | None = None
    """Why the row starts paused (the source had it disabled); None: active."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def paused(self) -> bool:
        return self.paused_by is not None


@dataclass(frozen=True)
class NotCarried:
    """An entry left out of the import, and why."""

    name: str
    reason: str


Result = Union[Imported, NotCarried]  # noqa: UP007 - a runtime alias, Python 3.10


# -- shared -----------------------------------------------------------------------------------


def convert(name: str, entry: Mapping[str, Any], *, cursor: datetime | None = None,
            paused_by: str | None = None, default_timezone: str = "UTC",
            default_dispatch: str = "awa") -> Result:
    """One Celery-style entry, validated exactly as beat validates ``beat_schedule``."""
    try:
        [spec] = specs_from_beat_schedule({name: entry}, default_timezone=default_timezone,
                                          default_dispatch=default_dispatch)
    except ValidationError as exc:
        return NotCarried(name, "; ".join(f"{f}: {m}" if f != "schedule" else m
                                          for _, f, m in exc.problems))
    return Imported(spec, cursor, paused_by)


def utc_cursor(value: Any, naive_zone: tzinfo = UTC) -> datetime | None:
    """A last-run time as an aware UTC cursor in whole seconds (rounded down, which can
    never let a fire time at or before the run through: fire times are whole seconds)."""
    if not isinstance(value, datetime):
        return None
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        from celery.utils.time import make_aware  # Celery's rule for ambiguous times

        value = make_aware(value, naive_zone)
    return value.astimezone(UTC).replace(microsecond=0)


def _dedupe(results: Iterable[Result]) -> list[Result]:
    seen: set[str] = set()
    out: list[Result] = []
    for result in results:
        if isinstance(result, Imported):
            if result.name in seen:
                out.append(NotCarried(result.name, "another entry of the source has this name; "
                                      "the first one is imported"))
                continue
            seen.add(result.name)
        out.append(result)
    return out


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


# -- a Celery app's beat_schedule -------------------------------------------------------------


def load_app(spec: str) -> Any:
    """The Celery app named like ``celery -A`` does (``module:app``, ``module.app`` or a
    module holding ``app``/``celery``), imported from the working directory."""
    from celery import Celery
    from celery.app.utils import find_app

    try:
        app = find_app(spec)
    except Exception as exc:  # the user's module may raise anything at import time
        raise SourceError(f"cannot load the Celery app {spec!r}: "
                          f"{type(exc).__name__}: {first_line(exc)}") from None
    if not isinstance(app, Celery):
        raise SourceError(f"{spec!r} is a {type(app).__name__}, not a Celery app")
    return app


def from_beat_schedule(beat_schedule: Mapping[str, Any], *, default_timezone: str = "UTC",
                       default_dispatch: str = "awa") -> list[Result]:
    """Every entry of a ``beat_schedule``; no run is known, so the cursor is now."""
    if not isinstance(beat_schedule, Mapping):
        raise SourceError(f"beat_schedule must be a dict of entries, not "
                          f"{type(beat_schedule).__name__}")
    return _dedupe(
        convert(str(name), entry, default_timezone=default_timezone,
                default_dispatch=default_dispatch)
        if isinstance(entry, Mapping) else
        NotCarried(str(name), f"entry must be a dict, not {type(entry).__name__}")
        for name, entry in beat_schedule.items())


# -- django-celery-beat -----------------------------------------------------------------------

DJANGO_TABLES = {
    "tasks": "django_celery_beat_periodictask",
    "intervals": "django_celery_beat_intervalschedule",
    "crontabs": "django_celery_beat_crontabschedule",
    "solars": "django_celery_beat_solarschedule",
    "clocked": "django_celery_beat_clockedschedule",
}


@dataclass(frozen=True)
class DjangoTables:
    """django-celery-beat's rows, as dicts of columns (schedules by id)."""

    tasks: list[dict[str, Any]]
    intervals: dict[int, dict[str, Any]] = field(default_factory=dict)
    crontabs: dict[int, dict[str, Any]] = field(default_factory=dict)
    solars: dict[int, dict[str, Any]] = field(default_factory=dict)
    clocked: dict[int, dict[str, Any]] = field(default_factory=dict)


def read_django(url: str) -> DjangoTables:
    """Read django-celery-beat's tables with plain SQL, in one read-only snapshot.

    ``SELECT *`` keeps older django-celery-beat schemas readable (a column it lacks reads
    as missing); a schedule table that does not exist reads as empty.
    """
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.rows import dict_row

    from .config import redact
    from .store import connect

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
            present = {key: cur.execute("SELECT to_regclass(%s) IS NOT NULL AS ok",
                                        (table,)).fetchone()["ok"]
                       for key, table in DJANGO_TABLES.items()}
            if not present["tasks"]:
                raise SourceError(
                    f"no django-celery-beat tables in {redact(url)} "
                    f"({DJANGO_TABLES['tasks']} not found; wrong database or search_path?)")
            rows = {}
            for key, table in DJANGO_TABLES.items():
                if present[key]:
                    query = sql.SQL("SELECT * FROM {} ORDER BY 1").format(sql.Identifier(table))
                    rows[key] = cur.execute(query).fetchall()
                else:
                    rows[key] = []
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
    return _dedupe(_django_task(task, tables, now, default_timezone, default_dispatch)
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
        reasons.append(f"clocked schedule (once, at {_iso(clocked.get('clocked_time'))}): a "
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
            assert interval is not None, "the interval row is missing"
            schedule = timedelta(**{str(interval["period"]): int(interval["every"])})
        except (AssertionError, TypeError, ValueError, KeyError) as exc:
            reasons.append(f"unusable interval: {exc}")
    else:
        reasons.append("no schedule (none of interval, crontab, solar, clocked is set)")
    if t.get("one_off"):
        reasons.append("one_off: runs once and is then disabled by django-celery-beat; "
                       "awa-beat schedules repeat")
    start = t.get("start_time")
    if isinstance(start, datetime) and utc_cursor(start, UTC) > now:
        reasons.append(f"start_time {_iso(start)} is in the future: awa-beat schedules have "
                       "no start date; import it after that time")
    if t.get("expires") is not None:
        reasons.append(f"expires at {_iso(t['expires'])}, an absolute date: awa-beat "
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


# -- RedBeat ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RedBeatRecord:
    """One RedBeat entry's hash: its key and the raw ``definition`` and ``meta`` JSON."""

    key: str
    definition: str | None
    meta: str | None


@dataclass(frozen=True)
class _RRule:
    """A decoded ``rrule`` schedule: kept only to say why it is not carried over."""

    fields: Mapping[str, Any]


class _Weekday(dict):  # type: ignore[type-arg]
    """A decoded dateutil ``weekday`` (inside an rrule)."""


def _redbeat_object(d: dict[str, Any]) -> Any:
    """celery-redbeat 2.4's ``RedBeatJSONDecoder.dict_to_object``, for what awa-beat can use
    (an rrule decodes to a marker: it is not supported)."""
    if "__type__" not in d:
        return d
    objtype = d.pop("__type__")
    if objtype == "datetime":
        zone = d.pop("timezone", "UTC")
        try:
            tz: tzinfo = timezone(timedelta(minutes=(zone / 60)))
        except TypeError:
            tz = ZoneInfo(zone)
        return datetime(tzinfo=tz, **d)
    if objtype == "interval":
        from celery.schedules import schedule

        return schedule(run_every=d["every"], relative=d.get("relative", False))
    if objtype == "crontab":
        from celery.schedules import crontab

        return crontab(**d)
    if objtype == "weekday":
        return _Weekday(d)
    if objtype == "rrule":
        return _RRule(d)
    d["__type__"] = objtype
    return d


def decode_redbeat(text: str) -> Any:
    """Decode RedBeat's JSON (``definition`` or ``meta``) as RedBeat itself does."""
    return json.loads(text, object_hook=_redbeat_object)


def redact_url(url: str) -> str:
    """A Redis (or any) URL with its password replaced (in the netloc or the query),
    safe to print."""
    try:
        parts = urlsplit(url)
        if parts.password is not None:
            host = parts.hostname or ""
            host = f"[{host}]" if ":" in host else host
            if parts.port is not None:
                host = f"{host}:{parts.port}"
            parts = parts._replace(netloc=f"{parts.username or ''}:***@{host}")
        if "password=" in parts.query:
            parts = parts._replace(query=urlencode(
                [(k, "***" if k == "password" else v)
                 for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe="*"))
        return url if parts == urlsplit(url) else urlunsplit(parts)
    except ValueError:
        return "<unparseable URL>"


def read_redbeat(url: str, key_prefix: str = "redbeat:") -> list[RedBeatRecord]:
    """Every RedBeat entry under ``key_prefix``: the hashes with a ``definition``.

    RedBeat's own keys (``<prefix>:schedule``, ``<prefix>:statics``, the lock) are
    skipped, as is anything that is not a hash.
    """
    try:
        import redis
    except ImportError:  # pragma: no cover - redis comes with celery[redis]
        raise SourceError("reading RedBeat needs the redis package: pip install redis") from None
    shown = redact_url(url)
    try:
        client = redis.Redis.from_url(url, decode_responses=True, socket_connect_timeout=5,
                                      socket_timeout=30)
    except (ValueError, TypeError) as exc:
        raise SourceError(f"the Redis URL {shown} is malformed: {first_line(exc)}") from None
    own = {f"{key_prefix}:schedule", f"{key_prefix}:statics", f"{key_prefix}:lock"}
    pattern = re.sub(r"([*?\[\]\\])", r"\\\1", key_prefix) + "*"
    try:
        keys = sorted(k for k in client.scan_iter(match=pattern, count=1000) if k not in own)
        records = []
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            with client.pipeline(transaction=False) as pipe:
                for key in chunk:
                    pipe.type(key)
                    pipe.hmget(key, "definition", "meta")
                replies = pipe.execute(raise_on_error=False)
            for key, kind, values in zip(chunk, replies[::2], replies[1::2], strict=True):
                if kind != "hash" or isinstance(values, Exception):
                    continue
                records.append(RedBeatRecord(key, values[0], values[1]))
    except redis.RedisError as exc:
        raise SourceError(f"cannot read RedBeat entries from Redis at {shown}: "
                          f"{first_line(exc)}") from None
    finally:
        client.close()
    return records


def from_redbeat(records: Sequence[RedBeatRecord], *, key_prefix: str = "redbeat:",
                 default_timezone: str = "UTC", default_dispatch: str = "awa") -> list[Result]:
    """Each RedBeat entry: interval and crontab schedules (a crontab runs in the beat app's
    time zone: ``default_timezone``); ``enabled: false`` imports it paused; the meta's
    ``last_run_at`` is the cursor."""
    return _dedupe(_redbeat_entry(r, key_prefix, default_timezone, default_dispatch)
                   for r in records)


def _redbeat_entry(record: RedBeatRecord, key_prefix: str, default_tz: str,
                   default_dispatch: str) -> Result:
    name = record.key[len(key_prefix):] if record.key.startswith(key_prefix) else record.key
    if not record.definition:
        return NotCarried(name, f"hash {record.key!r} has no 'definition' field: not a RedBeat "
                          "entry")
    try:
        definition = decode_redbeat(record.definition)
        if not isinstance(definition, dict):
            raise ValueError("not a JSON object")
    except Exception as exc:  # RedBeat's own decoder would fail on it too
        return NotCarried(name, f"its definition cannot be decoded: {type(exc).__name__}: "
                          f"{first_line(exc)}")
    name = str(definition.get("name") or name)
    if definition.get("task") == BACKEND_CLEANUP and name == BACKEND_CLEANUP:
        return NotCarried(name, BACKEND_CLEANUP_REASON)
    schedule = definition.get("schedule")
    if isinstance(schedule, _RRule):
        return NotCarried(name, "rrule schedules are not supported: Awa cannot evaluate them, "
                          "so replicas and Awa sharing the table could not agree on fire "
                          "times; use a crontab or an Awa cron expression")
    try:
        meta = decode_redbeat(record.meta) if record.meta else {}
        last_run_at = meta.get("last_run_at") if isinstance(meta, dict) else None
    except Exception as exc:
        return NotCarried(name, f"its meta (last run) cannot be decoded: "
                          f"{type(exc).__name__}: {first_line(exc)}")
    entry = {key: definition[key] for key in ("task", "schedule", "args", "kwargs", "options")
             if key in definition}
    return convert(name, entry, cursor=utc_cursor(last_run_at),
                   paused_by=None if definition.get("enabled", True) else REDBEAT_PAUSED_BY,
                   default_timezone=default_tz, default_dispatch=default_dispatch)


# -- celerybeat-schedule (PersistentScheduler's shelve) ---------------------------------------


@dataclass(frozen=True)
class ScheduleFile:
    """What a ``celerybeat-schedule`` file holds."""

    entries: Mapping[str, Any]
    """name -> ``celery.beat.ScheduleEntry``."""
    tz: str | None
    """The app's ``timezone`` when the file was written."""
    utc_enabled: bool | None
    """The app's ``enable_utc`` when the file was written."""
    version: str | None


def read_schedule_file(path: str) -> ScheduleFile:
    """Open a PersistentScheduler shelve read-only and unpickle its entries.

    Unpickling imports what the entries reference; when that is the app's own code,
    load the app first (``-A``) or run from its directory.
    """
    if os.path.isdir(path):
        raise SourceError(f"{path} is a directory, not a celerybeat-schedule file")
    kind = dbm.whichdb(path)
    if kind is None:
        raise SourceError(f"no celerybeat-schedule file at {path} (or it cannot be read)")
    if kind == "":
        raise SourceError(f"{path} is not a shelve database (a celerybeat-schedule file)")
    try:
        with shelve.open(path, flag="r") as store:
            entries = _unpickle_entries(store, path)
            tz, utc, version = (store.get("tz"), store.get("utc_enabled"),
                                store.get("__version__"))
    except SourceError:
        raise
    except Exception as exc:  # dbm and pickle errors of every kind
        raise SourceError(f"cannot read {path}: {type(exc).__name__}: "
                          f"{first_line(exc)}") from None
    if not isinstance(entries, Mapping):
        raise SourceError(f"{path}: 'entries' is a {type(entries).__name__}, not a dict")
    return ScheduleFile(dict(entries), tz if isinstance(tz, str) else None,
                        utc if isinstance(utc, bool) else None,
                        version if isinstance(version, str) else None)


def _unpickle_entries(store: Any, path: str) -> Any:
    try:
        return store["entries"]
    except KeyError:
        raise SourceError(f"{path} has no 'entries': not a celerybeat-schedule file") from None
    except Exception as exc:  # anything unpickling may raise
        raise SourceError(
            f"cannot unpickle the entries of {path}: {type(exc).__name__}: "
            f"{first_line(exc)} (pass -A with the app whose beat wrote it, and run from "
            "its directory)") from None


def naive_zone(tz: str | None, utc_enabled: bool | None) -> tzinfo:
    """How Celery reads a naive ``last_run_at`` of a file written with these settings:
    UTC when ``enable_utc`` was on (Celery's default, and ``maybe_make_aware``'s rule),
    else local time in the app's ``timezone``, else in the system's zone (``app.timezone``
    without ``enable_utc``)."""
    if utc_enabled is None or utc_enabled:
        return UTC
    if tz:
        try:
            return ZoneInfo(tz)
        except Exception:
            raise SourceError(f"the file's time zone {tz!r} is unknown") from None
    from celery.utils.time import timezone as celery_timezone

    return celery_timezone.local


def from_schedule_file(schedule_file: ScheduleFile, *, default_timezone: str | None = None,
                       default_dispatch: str = "awa") -> list[Result]:
    """Each entry of a PersistentScheduler file; its ``last_run_at`` is the cursor.

    A crontab runs in the app's time zone, which Celery recorded in the file (``tz``;
    Celery resets the file when it changes): that is the default unless one is given.
    """
    default_tz = default_timezone or schedule_file.tz or "UTC"
    zone = naive_zone(schedule_file.tz, schedule_file.utc_enabled)
    results: list[Result] = []
    for key, entry in schedule_file.entries.items():
        name = str(getattr(entry, "name", None) or key)
        if not hasattr(entry, "schedule") or not hasattr(entry, "task"):
            results.append(NotCarried(name, f"a {type(entry).__name__}, not a Celery "
                                      "ScheduleEntry"))
            continue
        if name == BACKEND_CLEANUP and entry.task == BACKEND_CLEANUP:
            results.append(NotCarried(name, BACKEND_CLEANUP_REASON))
            continue
        fields = {"task": entry.task, "schedule": entry.schedule,
                  "args": getattr(entry, "args", ()) or (),
                  "kwargs": getattr(entry, "kwargs", {}) or {},
                  "options": getattr(entry, "options", {}) or {}}
        results.append(convert(name, fields, cursor=utc_cursor(entry.last_run_at, zone),
                               default_timezone=default_tz, default_dispatch=default_dispatch))
    return _dedupe(results)


# -- the plan: what an import changes ---------------------------------------------------------

#: The ``awa.cron_jobs`` columns a definition sets (what a sync compares).
DEFINITION = ("cron_expr", "timezone", "kind", "queue", "args", "priority", "max_attempts",
              "tags", "metadata", "missed_fire_policy")


@dataclass
class Plan:
    """What importing ``results`` does to the stored rows (computed, nothing written)."""

    new: list[Imported] = field(default_factory=list)
    changed: list[tuple[str, dict[str, tuple[Any, Any]]]] = field(default_factory=list)
    """(name, {field: (stored, imported)}) for existing rows whose definition changes."""
    cursor_moves: list[tuple[str, datetime | None, datetime]] = field(default_factory=list)
    """(name, stored, imported): the cursor moves forward to the source's last run."""
    cursor_kept: list[tuple[str, datetime, datetime]] = field(default_factory=list)
    """(name, stored, imported): the source's last run is older; the cursor stays."""
    unchanged: list[str] = field(default_factory=list)
    not_carried: list[NotCarried] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "new": [{"name": i.name, "schedule": i.spec.cron_expr, "timezone": i.spec.timezone,
                     "task": i.spec.kind, "cursor": _iso(i.cursor), "paused_by": i.paused_by}
                    for i in self.new],
            "changed": [{"name": n, "fields": {k: {side: _jsonable(v) for side, v in
                                                   (("stored", a), ("imported", b))
                                                   if v is not ABSENT}
                                               for k, (a, b) in f.items()}}
                        for n, f in self.changed],
            "cursor_moves": [{"name": n, "stored": _iso(a), "imported": _iso(b)}
                             for n, a, b in self.cursor_moves],
            "cursor_kept": [{"name": n, "stored": _iso(a), "imported": _iso(b)}
                            for n, a, b in self.cursor_kept],
            "unchanged": list(self.unchanged),
            "not_carried_over": [{"name": r.name, "reason": r.reason} for r in self.not_carried],
            "notes": list(self.notes),
        }


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def plan(results: Sequence[Result], existing: Mapping[str, Any], deployment: str, *,
         now: datetime | None = None) -> Plan:
    """Compare ``results`` with the stored rows (``ScheduleRow`` by name).

    With ``now``, a cursor in the future (the old scheduler's clock was ahead) gets a note:
    it is kept as it is, since moving it back could fire a run twice.
    """
    out = Plan()
    for result in results:
        if isinstance(result, NotCarried):
            out.not_carried.append(result)
            continue
        if now is not None and result.cursor is not None and result.cursor > now:
            out.notes.append(f"{result.name}: its last run, {_iso(result.cursor)}, is in the "
                             "future (was the old scheduler's clock ahead?); no fire before "
                             "it will happen")
        row = existing.get(result.name)
        if row is None:
            out.new.append(result)
            continue
        wanted = result.spec.row(deployment)
        fields: dict[str, tuple[Any, Any]] = {}
        for key in DEFINITION:
            _diff(key, _normal(getattr(row, key)), _normal(wanted[key]), fields)
        if row.deployment != deployment:
            fields["deployment"] = (row.deployment, deployment)
        if fields:
            out.changed.append((result.name, fields))
        stored, imported = row.last_enqueued_at, result.cursor
        moves = imported is not None and (stored is None or imported > stored)
        if moves:
            out.cursor_moves.append((result.name, stored, imported))
        elif imported is not None and stored is not None and imported < stored:
            out.cursor_kept.append((result.name, stored, imported))
        if not fields and not moves:
            out.unchanged.append(result.name)
        if result.paused and row.paused_at is None:
            out.notes.append(f"{result.name}: disabled in the source but active here; left "
                             f"active (`awa-beat pause {result.name}` to pause it)")
        elif not result.paused and row.paused_at is not None:
            out.notes.append(f"{result.name}: paused here (by {row.paused_by or '?'}) but "
                             f"enabled in the source; left paused (`awa-beat resume "
                             f"{result.name}` to resume it)")
    return out


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


#: In a :attr:`Plan.changed` pair: the key is not there on that side.
ABSENT: Any = _Absent()


def _diff(path: str, old: Any, new: Any, out: dict[str, tuple[Any, Any]]) -> None:
    """The differing leaves of two JSON values, by dotted path (dicts are walked into)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*old, *(k for k in new if k not in old)]:
            _diff(f"{path}.{key}", old.get(key, ABSENT), new.get(key, ABSENT), out)
    elif old != new:
        out[path] = (old, new)


def _normal(value: Any) -> Any:
    """Values as JSONB would compare them (tuples are lists; 1 and 1.0 are equal)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))
