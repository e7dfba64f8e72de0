"""Source: a ``celerybeat-schedule`` shelve file that Celery's ``PersistentScheduler``
wrote (``awa-beat import --from-file PATH``)."""

from __future__ import annotations

import dbm
import os
import shelve
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from ..errors import SourceError, first_line
from .common import (
    BACKEND_CLEANUP,
    BACKEND_CLEANUP_REASON,
    UTC,
    NotCarried,
    Result,
    convert,
    dedupe,
    utc_cursor,
)


@dataclass(frozen=True)
class ScheduleFile:
    """What a ``celerybeat-schedule`` file holds."""

    entries: Mapping[str, Any]
    """The entries: name -> ``celery.beat.ScheduleEntry``."""
    tz: str | None
    """The app's ``timezone`` when the file was written."""
    utc_enabled: bool | None
    """The app's ``enable_utc`` when the file was written."""
    version: str | None


#: The files that a shelve at PATH may be made of, by dbm module. gnu and ndbm use PATH
#: or PATH.db; dumb uses PATH.dat, PATH.dir and PATH.bak.
_SHELVE_SUFFIXES = ("", ".db", ".dat", ".dir", ".bak")


def check_owner(path: str) -> None:
    """Refuse a schedule file that neither the current user nor root owns.

    Unpickling runs the code that the file names, so a file that someone else could have
    written is code from someone else. ``--trust-file`` skips this check."""
    me = os.geteuid()
    for suffix in _SHELVE_SUFFIXES:
        try:
            owner = os.stat(path + suffix).st_uid
        except OSError:
            continue
        if owner not in (me, 0):
            raise SourceError(
                f"{path + suffix} belongs to user id {owner}, not to you or root: a "
                "celerybeat-schedule file is a pickle, and unpickling it runs the code it "
                "names; import it only if you trust who wrote it (--trust-file)")


def read_schedule_file(path: str, *, trust: bool = False) -> ScheduleFile:
    """Open a PersistentScheduler shelve read-only and unpickle its entries.

    Unpickling imports what the entries reference, and it can run any code that the file
    names, so read only files you trust. A file that neither you nor root owns is refused
    unless ``trust`` is given. When the entries reference the app's own code, load the
    app first (``-A``) or run from its directory.
    """
    if os.path.isdir(path):
        raise SourceError(f"{path} is a directory, not a celerybeat-schedule file")
    kind = dbm.whichdb(path)
    if kind is None:
        raise SourceError(f"no celerybeat-schedule file at {path} (or it cannot be read)")
    if kind == "":
        raise SourceError(f"{path} is not a shelve database (a celerybeat-schedule file)")
    if not trust:
        check_owner(path)
    try:
        with shelve.open(path, flag="r") as store:
            entries = _unpickle_entries(store, path)
            tz, utc, version = (store.get("tz"), store.get("utc_enabled"),
                                store.get("__version__"))
    except SourceError:
        raise
    except Exception as exc:  # dbm and pickle raise errors of every kind.
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
    except Exception as exc:  # Unpickling may raise anything.
        raise SourceError(
            f"cannot unpickle the entries of {path}: {type(exc).__name__}: "
            f"{first_line(exc)} (pass -A with the app whose beat wrote it, and run from "
            "its directory)") from None


def naive_zone(tz: str | None, utc_enabled: bool | None) -> tzinfo:
    """Return the zone in which Celery reads a naive ``last_run_at`` of a file written
    with these settings: UTC when ``enable_utc`` was on (Celery's default, and
    ``maybe_make_aware``'s rule), else local time in the app's ``timezone``, else in the
    system's zone (``app.timezone`` without ``enable_utc``)."""
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
                       default_dispatch: str = "awa", default_dst: str = "awa"
                       ) -> list[Result]:
    """Convert each entry of a PersistentScheduler file. Its ``last_run_at`` is the cursor.

    A crontab runs in the app's time zone, which Celery recorded in the file (``tz``;
    Celery resets the file when the zone changes). That zone is the default unless one is
    given.
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
                               default_timezone=default_tz, default_dispatch=default_dispatch,
                               default_dst=default_dst))
    return dedupe(results)

