"""Source: RedBeat's entries in Redis (``awa-beat import --from-redbeat URL``).

Each entry is a hash with a ``definition`` (and a ``meta`` that holds the last run),
whose JSON is decoded as celery-redbeat 2.4's ``RedBeatJSONDecoder`` decodes it. The
redis package is imported only when Redis is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from functools import partial
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit
from zoneinfo import ZoneInfo

from ..errors import SourceError, first_line
from .common import (
    BACKEND_CLEANUP,
    BACKEND_CLEANUP_REASON,
    NotCarried,
    Result,
    convert,
    dedupe,
    guarded,
    utc_cursor,
)

#: ``paused_by`` of a row whose entry was disabled (``enabled: false``).
REDBEAT_PAUSED_BY = "import: disabled in RedBeat"


@dataclass(frozen=True)
class RedBeatRecord:
    """One RedBeat entry's hash: its key and its raw ``definition`` and ``meta`` JSON."""

    key: str
    definition: str | None
    meta: str | None
    undecodable: str | None = None
    """Which of the key, ``definition`` and ``meta`` is not UTF-8, or None. RedBeat reads
    them as text, so it cannot read such a value either."""


@dataclass(frozen=True)
class _RRule:
    """A decoded ``rrule`` schedule: the fields that RedBeat's encoder wrote."""

    fields: Mapping[str, Any]

    def rule(self) -> Any:
        """Return the dateutil rrule that RedBeat's ``rrule`` schedule builds from these
        fields. ``dtstart`` and ``until`` are read as its decoder's ``from_timestamp``
        reads them: the instant, in its recorded UTC offset."""
        from dateutil.rrule import rrule, weekday

        d = dict(self.fields)
        for key, tz_key in (("dtstart", "dtstart_tz"), ("until", "until_tz")):
            minutes = d.pop(tz_key, 0)
            if d.get(key) is not None:
                tz = timezone(timedelta(minutes=minutes)) if minutes else timezone.utc
                d[key] = datetime.fromtimestamp(d[key], tz=tz)
        if d.get("dtstart") is None:
            raise ValueError("the rrule has no dtstart")
        days = d.get("byweekday")
        if days is not None:
            d["byweekday"] = [weekday(int(w["wkday"])) if isinstance(w, Mapping) else w
                              for w in (days if isinstance(days, list) else [days])]
        freq = d.pop("freq")
        known = {"dtstart", "interval", "wkst", "count", "until", "bysetpos", "bymonth",
                 "bymonthday", "byyearday", "byeaster", "byweekno", "byweekday", "byhour",
                 "byminute", "bysecond"}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown rrule fields {sorted(unknown)}")
        if d.get("interval") is None:
            d["interval"] = 1
        return rrule(freq, **d)


class _Weekday(dict[str, Any]):
    """A decoded dateutil ``weekday`` (inside an rrule)."""


def _redbeat_object(d: dict[str, Any]) -> Any:
    """Do what celery-redbeat 2.4's ``RedBeatJSONDecoder.dict_to_object`` does, for what
    awa-beat can use. An rrule decodes to its fields (:class:`_RRule`), which
    ``_RRule.rule`` rebuilds."""
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
    """Return a Redis (or any) URL with its password replaced (in the netloc or the
    query), so that it is safe to print."""
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
    """Read every RedBeat entry under ``key_prefix``: the hashes with a ``definition``.

    RedBeat's own keys (``<prefix>:schedule``, ``<prefix>:statics``, the lock) are
    skipped, as is anything that is not a hash.
    """
    try:
        import redis
    except ImportError:  # pragma: no cover - redis comes with celery[redis]
        raise SourceError("reading RedBeat needs the redis package: pip install redis") from None
    shown = redact_url(url)
    try:
        # The values arrive as bytes and are decoded here entry by entry, so that a value
        # that is not UTF-8 is that entry's problem, not the whole read's.
        client = redis.Redis.from_url(url, decode_responses=False, socket_connect_timeout=5,
                                      socket_timeout=30)
    except (ValueError, TypeError) as exc:
        raise SourceError(f"the Redis URL {shown} is malformed: {first_line(exc)}") from None
    own = {f"{key_prefix}:{k}".encode() for k in ("schedule", "statics", "lock")}
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
                if kind != b"hash" or isinstance(values, Exception):
                    continue
                records.append(_record(key, values[0], values[1]))
    except redis.RedisError as exc:
        raise SourceError(f"cannot read RedBeat entries from Redis at {shown}: "
                          f"{first_line(exc)}") from None
    finally:
        client.close()
    return records


def _record(key: bytes, definition: bytes | None, meta: bytes | None) -> RedBeatRecord:
    """Return a hash's fields as text. The first field that is not UTF-8 is named and left
    out."""
    texts: list[str | None] = []
    bad = None
    for what, raw in (("key", key), ("definition", definition), ("meta", meta)):
        try:
            texts.append(None if raw is None else raw.decode("utf-8"))
        except UnicodeDecodeError:
            bad = bad or what
            texts.append(key.decode("utf-8", "backslashreplace") if what == "key" else None)
    return RedBeatRecord(str(texts[0]), texts[1], texts[2], undecodable=bad)


def from_redbeat(records: Sequence[RedBeatRecord], *, key_prefix: str = "redbeat:",
                 default_timezone: str = "UTC", default_dispatch: str = "awa",
                 default_dst: str = "awa") -> list[Result]:
    """Convert each RedBeat entry, with interval, crontab and rrule schedules.

    A crontab runs in the beat app's time zone (``default_timezone``). An rrule steps in
    the UTC offset of its ``dtstart``, as RedBeat's does, and keeps its ``count`` and
    ``until``. ``enabled: false`` imports the entry paused. The meta's ``last_run_at`` is
    the cursor, so the next run is the rule's first occurrence after it, as RedBeat's
    ``rrule.after(last_run_at)`` gives it."""
    return dedupe(guarded(r.key, partial(_redbeat_entry, r, key_prefix, default_timezone,
                                         default_dispatch, default_dst))
                  for r in records)


def _redbeat_entry(record: RedBeatRecord, key_prefix: str, default_tz: str,
                   default_dispatch: str, default_dst: str) -> Result:
    name = record.key[len(key_prefix):] if record.key.startswith(key_prefix) else record.key
    if record.undecodable:
        return NotCarried(name, f"its {record.undecodable} is not UTF-8 text: RedBeat "
                          "cannot read it either")
    if not record.definition:
        return NotCarried(name, f"hash {record.key!r} has no 'definition' field: not a RedBeat "
                          "entry")
    try:
        definition = decode_redbeat(record.definition)
        if not isinstance(definition, dict):
            raise ValueError("not a JSON object")
    except Exception as exc:  # RedBeat's own decoder would fail on it too.
        return NotCarried(name, f"its definition cannot be decoded: {type(exc).__name__}: "
                          f"{first_line(exc)}")
    name = str(definition.get("name") or name)
    if definition.get("task") == BACKEND_CLEANUP and name == BACKEND_CLEANUP:
        return NotCarried(name, BACKEND_CLEANUP_REASON)
    schedule = definition.get("schedule")
    if isinstance(schedule, _RRule):
        try:
            schedule = schedule.rule()
        except (KeyError, TypeError, ValueError) as exc:
            return NotCarried(name, f"its rrule cannot be rebuilt as RedBeat would: "
                              f"{type(exc).__name__}: {first_line(exc)}")
    try:
        meta = decode_redbeat(record.meta) if record.meta else {}
        last_run_at = meta.get("last_run_at") if isinstance(meta, dict) else None
    except Exception as exc:
        return NotCarried(name, f"its meta (last run) cannot be decoded: "
                          f"{type(exc).__name__}: {first_line(exc)}")
    entry = {key: definition[key] for key in ("task", "args", "kwargs", "options")
             if key in definition}
    if "schedule" in definition:
        entry["schedule"] = schedule
    return convert(name, entry, cursor=utc_cursor(last_run_at),
                   paused_by=None if definition.get("enabled", True) else REDBEAT_PAUSED_BY,
                   default_timezone=default_tz, default_dispatch=default_dispatch,
                   default_dst=default_dst)

