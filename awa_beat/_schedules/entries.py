"""Building a ``beat_schedule`` entry (or the changes to one) from text: the options of
``awa-beat add|edit`` and the fields of the dashboard's and the Django admin's forms.

The module is pure: it uses neither click nor a database. The operations layer then
validates the entry exactly as beat validates its configuration. What cannot even be
read here (an interval that is no interval, JSON that is not JSON, an apply_async option
that awa-beat would ignore) is refused with a :class:`~awa_beat.errors.ValidationError`
that names the entry and the field, so nothing is written.

Bounds and outcome settings are fields of their own (``start``, ``end``, ``max_runs``,
``one_off``, ``overlap``, ``deadline``, ``catch_up_window``, ``jitter``,
``pause_after_failures``). On an edit, the word ``none`` removes one (the schedule then
has no such bound, or the default overlap ``allow``), and ``one_off=False`` makes a
one-off schedule recurring again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from ..errors import FieldRefused, NestedTooDeep, ScheduleError, ValidationError
from .calendars import at
from .cron import load_timezone
from .fire_times import parse_iso
from .spec import (
    AWA_BEAT_KEYS,
    AWA_BEAT_OPTION,
    BRIDGE_OWNED_OPTIONS,
    MAX_INTERVAL_SECONDS,
    OVERLAPS,
)

#: The word that removes a setting on an edit (``--max-runs none``, ``--end none``).
NONE_WORD = "none"

#: The apply_async options that an entry may carry (``--option KEY=JSON``): Celery's,
#: without those that the dispatch bridge decides itself
#: (:data:`~awa_beat._schedules.spec.BRIDGE_OWNED_OPTIONS`).
APPLY_ASYNC_OPTIONS = frozenset({
    "queue", "exchange", "routing_key", "priority", "expires", "countdown", "eta",
    "headers", "serializer", "compression", "time_limit", "soft_time_limit", "shadow",
    "ignore_result", "link", "link_error", "reply_to", "correlation_id", "delivery_mode",
    "mandatory", "content_type", "content_encoding", "argsrepr", "kwargsrepr",
    "stamped_headers",
})

#: How the command line names each field (by its flag). The forms pass their own names.
CLI_FIELDS = {
    "task": "--task", "cron": "--cron", "every": "--every", "at": "--at",
    "solar": "--solar", "schedule": "--cron/--every/--at/--solar", "args": "--args",
    "kwargs": "--kwargs", "option": "--option", "start": "--start", "end": "--end",
    "max_runs": "--max-runs", "one_off": "--one-off", "overlap": "--overlap",
    "deadline": "--deadline", "catch_up_window": "--catch-up-window", "jitter": "--jitter",
    "pause_after_failures": "--pause-after-failures",
}
#: The flag (or form field) that sets each of awa-beat's own settings. The refusal of
#: ``--option max_runs=3`` names it.
_SETTING_FIELDS = {"start_time": "start", "end_time": "end", "max_runs": "max_runs",
                   "one_off": "one_off", "overlap": "overlap", "deadline": "deadline",
                   "catch_up_window": "catch_up_window", "jitter": "jitter",
                   "timezone": "--tz", "missed_fire_policy": "--policy", "queue": "--queue",
                   "dispatch": "--dispatch", "priority": "--priority",
                   "max_attempts": "--max-attempts", "tags": "--tag",
                   "pause_after_failures": "pause_after_failures"}

# This takes ASCII digits only, because str.isdigit() and \d also take "²" and other
# scripts' digits.
_EVERY = re.compile(r"([0-9]+)\s*([smhd])", re.ASCII)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _refused(field: str, message: str) -> FieldRefused:
    """Return the refusal of one field. Its message does not repeat the field's flag,
    because the parsers name their flag first and the refusal names the field already."""
    flag = CLI_FIELDS.get(field, "")
    if flag and message.startswith(flag + " "):
        message = message[len(flag) + 1:]
    elif flag and message.startswith(flag + ": "):
        message = message[len(flag) + 2:]
    return FieldRefused(field, message)


def parse_every(text: str) -> timedelta:
    """Parse ``30s``, ``5m``, ``1h30m``, ``2d`` or a plain number of seconds."""
    value = text.strip().lower()
    if re.fullmatch(r"[0-9]+", value, re.ASCII):
        seconds = int(value)
    else:
        parts = _EVERY.findall(value)
        if not parts or _EVERY.sub("", value).strip():
            raise ScheduleError(f"--every {text!r}: give an interval such as 30s, 5m, 1h30m "
                                "or 2d")
        seconds = sum(int(n) * _UNITS[u] for n, u in parts)
    if seconds > MAX_INTERVAL_SECONDS:
        raise ScheduleError(f"--every {text!r}: at most {MAX_INTERVAL_SECONDS // 86400} days "
                            "(about ten years)")
    return timedelta(seconds=seconds)


def parse_instant(text: str, zone: str | None = None, flag: str = "--at") -> datetime:
    """Parse an ISO 8601 instant (``2026-12-24T09:00+01:00``). An instant without a UTC
    offset is read in ``zone`` (``--tz``), and it is refused when there is no zone."""
    try:
        instant = parse_iso(text.strip())
    except ValueError:
        raise ScheduleError(f"{flag} {text!r}: give an ISO 8601 instant, e.g. "
                            "2026-12-24T09:00+01:00") from None
    if instant.tzinfo is None:
        if zone is None:
            raise ScheduleError(f"{flag} {text!r} has no UTC offset; add one (e.g. +01:00) "
                                "or give --tz")
        instant = instant.replace(tzinfo=load_timezone(zone))
    try:
        instant.astimezone(timezone.utc)
    except OverflowError:
        raise ScheduleError(f"{flag} {text!r} is out of range: give an instant from 1970 to "
                            "9999") from None
    return instant


def parse_at(text: str, zone: str | None = None) -> at:
    """Parse ``--at`` with :func:`parse_instant` into a one-off ``at`` schedule."""
    return at(parse_instant(text, zone))


def parse_solar(text: str) -> Any:
    """Parse ``EVENT:LAT:LON`` (``sunset:48.85:2.35``) into Celery's ``solar`` schedule."""
    from celery.schedules import solar

    parts = text.split(":")
    try:
        if len(parts) != 3:
            raise ValueError("three parts separated by ':'")
        return solar(parts[0], float(parts[1]), float(parts[2]))
    except ValueError as exc:
        raise ScheduleError(f"--solar {text!r}: give EVENT:LAT:LON, e.g. sunset:48.85:2.35 "
                            f"({exc})") from None


#: The nesting past which a value given as JSON text is refused while it is parsed. It is
#: where Python's parser up to 3.12 gives up (its recursion limit). The schedule's
#: validation refuses shallower values that are still too deep for a schedule, by field.
_PARSE_DEPTH = 1000


def _loads(text: str) -> Any:
    """Run ``json.loads``, and refuse a value nested past :data:`_PARSE_DEPTH`
    (:class:`~awa_beat.errors.NestedTooDeep`) on every Python. 3.13's parser reads far
    deeper values than its predecessors, so the depth is checked, without recursion, once
    the value is parsed."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise NestedTooDeep from None
    level = [value]
    for _ in range(_PARSE_DEPTH):
        level = [item for v in level if isinstance(v, (list, dict))
                 for item in (v.values() if isinstance(v, dict) else v)]
        if not level:
            return value
    raise NestedTooDeep


def _json_value(option: str, text: str | None, kind: type) -> Any:
    if text is None:
        return None
    try:
        value = _loads(text)
    except ValueError as exc:
        raise ScheduleError(f"{option}: not valid JSON ({exc})") from None
    except NestedTooDeep:
        raise ScheduleError(f"{option}: nested too deep") from None
    if not isinstance(value, kind):
        raise ScheduleError(f"{option}: must be a JSON {'list' if kind is list else 'object'}")
    return value


def _removal(text: str | None) -> bool:
    return text is not None and text.strip().lower() == NONE_WORD


def _bound_settings(*, start: str | None, end: str | None, max_runs: str | int | None,
                    one_off: bool | str | None, overlap: str | None,
                    deadline: str | float | None, zone: str | None,
                    catch_up_window: str | float | None = None,
                    jitter: str | float | None = None,
                    pause_after_failures: str | int | None = None) -> dict[str, Any]:
    """Return the ``options["awa_beat"]`` settings that the bound fields give, with None
    where one is removed."""
    out: dict[str, Any] = {}
    for field, key, text in (("start", "start_time", start), ("end", "end_time", end)):
        if text is None:
            continue
        if _removal(text):
            out[key] = None
            continue
        try:
            out[key] = parse_instant(text, zone, flag=f"--{field}").isoformat()
        except ScheduleError as exc:
            raise _refused(field, str(exc)) from None
    if max_runs is not None:
        if _removal(str(max_runs)):
            out["max_runs"] = None
        elif isinstance(max_runs, int) or str(max_runs).strip().isdigit():
            out["max_runs"] = int(max_runs)
        else:
            raise _refused("max_runs", f"{max_runs!r}: a whole number of runs >= 1, or "
                           f"{NONE_WORD!r} for no limit")
    if one_off is not None:
        out["one_off"] = _yes(one_off)
    if overlap is not None:
        if _removal(overlap):
            out["overlap"] = None
        elif overlap in OVERLAPS:
            out["overlap"] = overlap
        else:
            raise _refused("overlap", f"{overlap!r}: one of {', '.join(OVERLAPS)}, or "
                           f"{NONE_WORD!r} for the default (allow)")
    if deadline is not None:
        out["deadline"] = _deadline(deadline)
    for field, value, what in (
            ("catch_up_window", catch_up_window,
             "missed fires older than this many seconds are skipped (300, 5m, 1h)"),
            ("jitter", jitter, "each job runs up to this many seconds late (60, 0.5, 1m)")):
        if value is not None:
            out[field] = _seconds(field, value, what)
    if pause_after_failures is not None:
        text = str(pause_after_failures).strip()
        if _removal(text):
            out["pause_after_failures"] = None
        elif isinstance(pause_after_failures, int) or text.isdigit():
            # Its range is checked with the rest of the entry (spec.py), which names it.
            out["pause_after_failures"] = int(text)
        else:
            raise _refused("pause_after_failures",
                           f"{pause_after_failures!r}: a whole number of failures in a "
                           f"row, or {NONE_WORD!r} for never")
    return out


_DECIMAL = re.compile(r"[0-9]+(\.[0-9]+)?|\.[0-9]+", re.ASCII)


def _seconds(field: str, value: str | float, what: str) -> int | float | None:
    """Read a number of seconds (``300``, ``0.5``) or an interval (``5m``, ``1h30m``),
    or ``none`` (None). Its range is the schedule's validation's to check."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    text = str(value).strip()
    if _removal(text):
        return None
    if _DECIMAL.fullmatch(text):
        number = float(text)
        return int(number) if number.is_integer() else number
    try:
        return int(parse_every(text).total_seconds())
    except ScheduleError:
        raise _refused(field, f"{value!r}: {what}, or {NONE_WORD!r} for none") from None


def _yes(value: bool | str) -> bool:
    if isinstance(value, bool):
        return value
    word = value.strip().lower()
    if word in ("yes", "true", "on", "1"):
        return True
    if word in ("", "no", "false", "off", "0", NONE_WORD):
        return False
    raise _refused("one_off", f"{value!r}: yes or no")


def _deadline(value: str | float) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value)
    if _removal(text):
        return None
    try:
        return float(parse_every(text).total_seconds())
    except ScheduleError:
        raise _refused("deadline", f"{value!r}: seconds after the fire (900, 15m, 1h), or "
                       f"{NONE_WORD!r} for none") from None


def _options(items: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Parse ``--option KEY=JSON`` items into (apply_async options, the ``awa_beat`` dict
    given as ``--option 'awa_beat={...}'``). An option that awa-beat would not use is
    refused."""
    options: dict[str, Any] = {}
    awa: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise _refused("option", f"{item!r}: give KEY=JSON, e.g. expires=3600")
        try:
            value = _loads(text)
        except ValueError:
            value = text  # A bare word is a string.
        except NestedTooDeep:
            raise _refused("option", f"{key}: nested too deep") from None
        if key == AWA_BEAT_OPTION:
            if not isinstance(value, dict):
                raise _refused("option", f"{item!r}: awa_beat takes a JSON object")
            awa.update(value)
        elif key in AWA_BEAT_KEYS:
            flag = _SETTING_FIELDS.get(key)
            how = (CLI_FIELDS.get(flag, flag) if flag else
                   f"--option 'awa_beat={{\"{key}\": ...}}'")
            raise _refused("option", f"{key} is awa-beat's own setting, not an apply_async "
                           f"option: use {how}")
        elif key in BRIDGE_OWNED_OPTIONS:
            raise _refused("option", f"{key}: awa-beat's dispatch bridge decides it; a value "
                           "given here would be ignored")
        elif key not in APPLY_ASYNC_OPTIONS:
            raise _refused("option", f"{key}: not an apply_async option awa-beat passes on; "
                           f"known: {', '.join(sorted(APPLY_ASYNC_OPTIONS))}")
        else:
            options[key] = value
    return options, awa


def _merge_settings(given: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """Merge the ``awa_beat`` dict of ``--option 'awa_beat={...}'`` with the other flags'
    settings. A setting given both ways with different values is refused."""
    for key, value in fields.items():
        if key in given and given[key] != value:
            field = _SETTING_FIELDS.get(key, key)
            raise _refused("option", f"awa_beat.{key} is {given[key]!r} there but "
                           f"{value!r} in {CLI_FIELDS.get(field, field)}; give it once")
        given[key] = value
    return given


def entry_from_options(name: str = "(entry)", *, task: str | None = None,
                       cron: str | None = None, every: str | None = None,
                       at_: str | None = None, solar: str | None = None,
                       args: str | None = None, kwargs: str | None = None,
                       queue: str | None = None, tz: str | None = None,
                       policy: str | None = None, dispatch: str | None = None,
                       priority: int | None = None, max_attempts: int | None = None,
                       tags: tuple[str, ...] = (), option: tuple[str, ...] = (),
                       start: str | None = None, end: str | None = None,
                       max_runs: str | int | None = None, one_off: bool | str | None = None,
                       overlap: str | None = None, deadline: str | float | None = None,
                       catch_up_window: str | float | None = None,
                       jitter: str | float | None = None,
                       pause_after_failures: str | int | None = None,
                       edit: bool = False, fields: Mapping[str, str] | None = None
                       ) -> dict[str, Any]:
    """Return the parts of ``name``'s beat_schedule entry that the options give, and only
    those, because an edit changes exactly these. ``--queue`` sets both Celery's ``queue``
    option and Awa's queue, so the task runs on that queue whichever worker runs it.

    With ``edit``, a setting given as ``none`` becomes None in ``options["awa_beat"]``,
    which removes it (:func:`awa_beat._ops.operations.merge_entry`); otherwise the setting
    is left out. ``fields`` names the fields in refusals (by default, the command line's
    flags). A refusal raises :class:`ValidationError`, naming ``name`` and the field.
    """
    labels = CLI_FIELDS if fields is None else fields
    try:
        return _entry(task=task, cron=cron, every=every, at_=at_, solar=solar, args=args,
                      kwargs=kwargs, queue=queue, tz=tz, policy=policy, dispatch=dispatch,
                      priority=priority, max_attempts=max_attempts, tags=tags,
                      option=option, edit=edit,
                      bounds=dict(start=start, end=end, max_runs=max_runs, one_off=one_off,
                                  overlap=overlap, deadline=deadline,
                                  catch_up_window=catch_up_window, jitter=jitter,
                                  pause_after_failures=pause_after_failures))
    except FieldRefused as exc:
        raise ValidationError([(name, labels.get(exc.field, exc.field), exc.message)]
                              ) from None


def _schedule(*, cron: str | None, every: str | None, at_: str | None,
              solar: str | None, tz: str | None) -> Any:
    given = [(field, value) for field, value in (("cron", cron), ("every", every),
                                                 ("at", at_), ("solar", solar))
             if value is not None]
    if len(given) > 1:
        raise _refused("schedule", "give one schedule, not "
                       f"{' and '.join(CLI_FIELDS[f] for f, _ in given)}")
    if not given:
        return None
    ((field, text),) = given
    try:
        if field == "cron":
            return text
        if field == "every":
            return parse_every(text)
        if field == "at":
            return parse_at(text, tz)
        return parse_solar(text)
    except ScheduleError as exc:
        raise _refused(field, str(exc)) from None


def _entry(*, task: str | None, cron: str | None, every: str | None, at_: str | None,
           solar: str | None, args: str | None, kwargs: str | None, queue: str | None,
           tz: str | None, policy: str | None, dispatch: str | None, priority: int | None,
           max_attempts: int | None, tags: tuple[str, ...], option: tuple[str, ...],
           edit: bool, bounds: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if task is not None:
        entry["task"] = task
    schedule = _schedule(cron=cron, every=every, at_=at_, solar=solar, tz=tz)
    if schedule is not None:
        entry["schedule"] = schedule
    for field, text, kind in (("args", args, list), ("kwargs", kwargs, dict)):
        try:
            value = _json_value(CLI_FIELDS[field], text, kind)
        except ScheduleError as exc:
            raise _refused(field, str(exc)) from None
        if value is not None:
            entry[field] = value
    options, given = _options(option)
    settings: dict[str, Any] = {}
    if queue is not None:
        options["queue"] = settings["queue"] = queue
    for key, setting in (("timezone", tz), ("missed_fire_policy", policy),
                         ("dispatch", dispatch), ("priority", priority),
                         ("max_attempts", max_attempts)):
        if setting is not None:
            settings[key] = setting
    if tags:
        settings["tags"] = list(tags)
    settings.update(_bound_settings(**bounds, zone=tz))
    awa = _merge_settings(given, settings)
    if not edit:
        awa = {k: v for k, v in awa.items() if v is not None}
    if awa:
        options[AWA_BEAT_OPTION] = awa
    if options:
        entry["options"] = options
    return entry
