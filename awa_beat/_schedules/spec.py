"""Schedule specs: what one ``beat_schedule`` entry means, checked before any I/O is done.

A :class:`ScheduleSpec` is the pure, validated form of an entry. It converts to the
``awa.cron_jobs`` row that awa-beat (and Awa, when it shares the database) evaluates.

This is where things go in an entry (a normal Celery ``beat_schedule`` entry)::

    "nightly-report": {
        "task": "reports.nightly",                  # -> kind
        "schedule": crontab(hour=2, minute=30),     # -> cron_expr (see below)
        "args": [1], "kwargs": {"full": True},      # -> args {"args": [...], "kwargs": {...}}
        "options": {                                # apply_async options, kept for the bridge
            "queue": "reports", "expires": 3600,
            "awa_beat": {                           # our per-entry settings, never sent
                "timezone": "Europe/Paris",         # default: the app's time zone
                "missed_fire_policy": "catch_up",   # or "coalesce" (default)
                "queue": "default", "priority": 2,  # Awa's job fields
                "max_attempts": 25, "tags": [], "metadata": {},
                "dispatch": "celery",               # or "awa"; default: awa_beat_dispatch
                "metrics": True,                    # series of its own (observability.md)
                "start_time": datetime(...),        # bounds, any schedule (see below)
                "end_time": "2027-01-01T00:00:00Z", "max_runs": 3, "one_off": False,
                "overlap": "skip",                  # "allow" (default), "skip", "buffer_one"
                "pause_after_failures": 3,          # pause after 3 failed runs in a row
                "max_runtime": 600,                 # s; default: a numeric expires, else 1 h
                "deadline": 900,                    # s after the fire; else never overdue late
                "at_most_once": True,               # never run one fire twice
                "catch_up_window": 300,             # s; older missed fires are skipped
                "jitter": 60,                       # s; each job runs up to 60 s late
            },
        },
    }

These are the schedules, and how each is stored:

* A ``crontab`` becomes a 5-field cron expression in the entry's time zone. Fields that
  Celery fills completely are written ``*``. Celery ANDs day-of-month with day-of-week
  where cron ORs them, so when both are restricted, the entry converts only where an
  exact equivalent exists (days 1-7 with a weekday is ``d#1``, 8-14 is ``d#2``, ...), and
  it is rejected otherwise. A stored schedule therefore never fires on a calendar other
  than the one written.
* A number, ``timedelta`` or ``celery.schedules.schedule`` (whole seconds, at least 1)
  becomes an interval on a grid anchored at the Unix epoch in UTC, so every replica
  computes the same fire times however and whenever it started (``relative`` is
  ignored). When that grid is a cron pattern (5 s, 10 min, 6 h, 1 day, ...), the row
  stores that pattern, which Awa fires identically. Otherwise it stores ``@every <N>s``,
  which Awa's parser rejects, so an Awa leader that shares the table logs it as invalid
  and never fires it on another calendar.
* A string is an Awa cron expression, used as it is (5 or 6 fields, seconds first), for
  what crontab cannot say (``L``, ``W``, ``#``, seconds).
* ``solar(event, lat, lon)`` becomes ``@solar <event> <lat> <lon>`` in UTC. It fires at
  each occurrence of the event as Celery's solar finds it with ephem (days without one
  are skipped), rounded up to the second. It needs ephem (``awa-beat[solar]``).
* ``awa_beat.at(instant)`` becomes ``@at <instant> | runs=1`` in UTC. It fires once, at
  the instant (sub-seconds are dropped), and the statement that fires it retires it. As
  for any new row, nothing before its registration fires, so an instant already past
  never does.
* An rrule (``redbeat.schedules.rrule``, or dateutil's ``rrule``) becomes
  ``@rrule DTSTART=...;FREQ=...;...`` (RFC 5545 parts). Its zone is that of ``dtstart``:
  an IANA zone goes in the row's time zone (``DTSTART`` is then wall time there), and a
  fixed offset goes into ``DTSTART``. A naive ``dtstart`` is UTC, as Celery reads naive
  times. The rule fires at ``rule.after(last fire)``, as RedBeat does.

Bounds go in ``options["awa_beat"]``, for any schedule except ``at`` (which is one run
already). A bounded schedule is stored as its marker (an Awa expression as
``@cron <expr>``) followed by `` | start=<instant> end=<instant> runs=<n>``:

* ``start_time``: no fire comes before it (an aware datetime or an ISO 8601 string with
  an offset, rounded up to the second).
* ``end_time``: no fire comes after it (rounded down to the second). It is not to be
  confused with the apply_async option ``options["expires"]``, the expiry of each
  message, which stays as given. django-celery-beat's ``PeriodicTask.expires`` means
  both, so the importer sets ``end_time`` to the second before it and
  ``options["expires"]`` to it; its ``expire_seconds`` is the message expiry only.
* ``max_runs``: at most this many runs happen in all. The statement that fires counts
  them in the database (``awa_beat.schedule_runs``), and the fire of the last run
  retires the row (paused, by ``awa-beat: retired (its last run fired)``).
* ``one_off: True`` is django-celery-beat's one_off: the schedule runs once and is then
  disabled, the same as with ``max_runs: 1``.

Two more settings go in the marker, after the bounds' instants and before ``runs``
(`` | window=<s> jitter=<s>``), because Awa honours neither, so an Awa leader that shares
the table must refuse the row:

* ``catch_up_window``: seconds (at least 1, at most three decimals). After downtime, a
  pause or a failover, a fire time older than this is not fired but recorded as skipped
  (docs/operating-time.md). Not set: every missed fire is handled by the policy, as Awa
  does.
* ``jitter``: seconds (more than 0, at most three decimals). Each job runs up to this
  long after its fire time (never at or past the next one), by a delay that every
  replica computes the same from the schedule's name and the fire time. The fire time on
  the job stays the nominal one. A ``timedelta`` is read as its seconds, for both.

Every marker starts with ``@`` and is none of Awa's aliases, so Awa's parser rejects it,
and an Awa leader that shares the table never fires such a row (see
:mod:`awa_beat._schedules.markers`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from .._bulk import collector_paused
from ..errors import ScheduleError, ValidationError, first_line
from .calendars import at
from .cron import CronExpression, load_timezone
from .fire_times import (
    POLICIES,
    calendar_for,
    can_fire_from,
    interval_expression,
    parse_iso,
)
from .markers import (
    DST_POLICIES,
    Bounds,
    at_marker,
    bounded,
    ceil_second,
    check_seconds,
    crontab_marker,
    floor_second,
    instant_text,
    is_marker,
    rrule_marker,
    solar_marker,
    split_bounds,
    with_timing,
)

#: The keys of ``options["awa_beat"]``.
AWA_BEAT_OPTION = "awa_beat"
_AWA_KEYS = {"timezone", "missed_fire_policy", "queue", "priority", "max_attempts", "tags",
             "metadata", "dispatch", "metrics", "start_time", "end_time", "max_runs",
             "one_off", "overlap", "max_runtime", "deadline", "at_most_once", "dst",
             "catch_up_window", "jitter", "pause_after_failures"}
AWA_BEAT_KEYS = frozenset(_AWA_KEYS)
#: The settings of ``options["awa_beat"]`` that are a schedule's bounds. They are stored
#: in its marker, and ``operations.beat_entry`` gives them back as these keys.
BOUND_OPTIONS = ("start_time", "end_time", "max_runs", "one_off", "catch_up_window",
                 "jitter")
#: The settings of ``options["awa_beat"]`` that the marker carries besides the bounds,
#: as (option, the marker's word): the catch-up window and the jitter, in seconds.
TIMING_OPTIONS = (("catch_up_window", "window"), ("jitter", "jitter"))
#: The apply_async options that the dispatch bridge decides itself (the publishing
#: retries are its own, and the task id is derived from the fire). An entry's values for
#: them are ignored.
BRIDGE_OWNED_OPTIONS = ("retry", "retry_policy", "task_id", "producer", "connection",
                        "publisher", "router", "add_to_parent", "result_cls")
#: The overlap policies (docs/outcomes.md): fire whatever runs, do not fire while the
#: last run has not finished, or hold one fire until it has (Temporal's BUFFER_ONE).
OVERLAPS = ("allow", "skip", "buffer_one")
#: The most consecutive failures ``pause_after_failures`` may wait for.
MAX_PAUSE_AFTER_FAILURES = 1000
#: The seconds after its start (or its fire, if it never started) after which a run that
#: never reported back stops blocking its schedule and shows as lost, unless the entry
#: gives ``max_runtime`` or a numeric ``expires``.
DEFAULT_MAX_RUNTIME = 3600.0
#: Who runs a fired job: a Celery worker (through the dispatch bridge), or an Awa worker.
DISPATCHES = ("celery", "awa")
#: The metadata keys written on every fired job. A user's value for one would be
#: overwritten.
RESERVED_METADATA = {"cron_name", "cron_fire_time", "triggered_manually", "backfilled", "celery",
                     "awa_beat"}
_ENTRY_KEYS = {"task", "schedule", "args", "kwargs", "options", "relative"}
#: The most bytes (in UTF-8) that a name may have. PostgreSQL indexes names (in the
#: primary key, and elsewhere with a time or a job id beside them), and a btree entry
#: holds at most 2704 bytes.
MAX_NAME_BYTES = 2000
#: The most bytes, as JSON, of each of args, kwargs, metadata and an option. Every fire
#: copies them into a job and a broker message (RabbitMQ 4 refuses messages over 16 MiB).
MAX_JSON_BYTES = 1 << 20
#: The deepest nesting of a JSON value, because Python's and PostgreSQL's JSON readers
#: recurse.
MAX_JSON_DEPTH = 100
#: The longest interval, about ten years. On a grid from 1970, a longer one may never fire.
MAX_INTERVAL_SECONDS = 3660 * 86400
#: How long after its instant a new schedule may still fire its first time. Awa's first
#: registration looks back one minute (:func:`~awa_beat._schedules.fire_times.due_fires`).
REGISTRATION_GRACE = timedelta(seconds=60)


class _Empty(dict[str, Any]):
    """An empty dict that refuses changes. Every spec without kwargs, options, metadata
    or outcomes shares this one (a large beat_schedule would otherwise hold four empty
    dicts per entry). It is a dict, so that it pickles, copies and serialises as one."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a ScheduleSpec's mappings are read-only")

    __setitem__ = __delitem__ = __ior__ = _refuse
    setdefault = update = pop = popitem = clear = _refuse


_EMPTY: Mapping[str, Any] = _Empty()


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """One validated schedule. Build it with :func:`spec_from_entry` or directly."""

    name: str
    kind: str
    cron_expr: str
    timezone: str = "UTC"
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    missed_fire_policy: str = "coalesce"
    queue: str = "default"
    priority: int = 2
    max_attempts: int = 25
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    dispatch: str = "awa"
    metrics: bool = False
    """Whether the schedule has series of its own in this beat's metrics. It is not
    stored, because it is each beat's own choice."""
    outcomes: Mapping[str, Any] = field(default_factory=dict)
    """``overlap``, ``max_runtime``, ``deadline``, ``at_most_once`` and
    ``pause_after_failures`` as given. They are
    stored in ``metadata["awa_beat"]``, which the fire statement and the workers read."""

    def row(self, deployment: str | None = None,
            shared: dict[Any, Any] | None = None) -> dict[str, Any]:
        """The ``awa.cron_jobs`` columns this spec syncs to.

        Celery's args and kwargs become the job's ``args``; the entry's apply_async
        options and who dispatches the job ride in ``metadata["celery"]``, so every
        fired job carries them.

        ``shared`` is a dict that the caller keeps while it holds the specs. With it, the
        rows of specs with the same metadata, options and outcomes objects (those of a
        generated configuration share the empty ones) share one metadata dict, and specs
        with the same tags share one list, which :func:`~awa_beat._db.batches.sync_params`
        encodes once. Such rows are to be read, not changed.
        """
        key = (id(self.metadata), id(self.options), id(self.outcomes), self.dispatch,
               deployment)
        metadata = shared.get(key) if shared is not None else None
        if metadata is None:
            metadata = dict(self.metadata)
            metadata["celery"] = {"options": dict(self.options), "dispatch": self.dispatch}
            if self.outcomes:
                metadata["awa_beat"] = dict(self.outcomes)
            if deployment is not None:
                # The bridge publishes only its own deployment's jobs, and to its own broker.
                metadata["celery"]["deployment"] = deployment
            if shared is not None:
                shared[key] = metadata
        tags = shared.get(id(self.tags)) if shared is not None else None
        if tags is None:
            tags = list(self.tags)
            if shared is not None:
                shared[id(self.tags)] = tags
        return {
            "name": self.name,
            "cron_expr": self.cron_expr,
            "timezone": self.timezone,
            "kind": self.kind,
            "queue": self.queue,
            "args": {"args": list(self.args), "kwargs": dict(self.kwargs)},
            "priority": self.priority,
            "max_attempts": self.max_attempts,
            "tags": tags,
            "metadata": metadata,
            "missed_fire_policy": self.missed_fire_policy,
        }


class _Problems:
    """Collect every problem of every entry, so that one error can list them all."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, str]] = []

    def add(self, name: str, field_: str, message: str) -> None:
        self.items.append((name, field_, message))


def specs_from_beat_schedule(
    beat_schedule: Mapping[str, Any], *, default_timezone: str = "UTC",
    default_dispatch: str = "awa", now: datetime | None = None,
    default_dst: str = "awa",
) -> list[ScheduleSpec]:
    """Validate every entry of a Celery ``beat_schedule`` and convert it.

    Raise one :class:`ValidationError` that lists every bad entry and field. Nothing is
    returned (so nothing can be written) unless every entry is valid.

    A schedule that can never fire is refused. One whose calendar has no time at all
    (``0 0 30 2 *``, an rrule with ``COUNT=0``) is always refused; with ``now`` (for a
    write made now), so is one with no fire from now on (an ``end_time`` or an ``at()``
    already past). ``default_dst`` is the DST policy of crontabs whose entry gives none
    (``awa_beat_dst``).
    """
    problems = _Problems()
    specs = []
    if not isinstance(beat_schedule, Mapping):
        raise ValidationError([("beat_schedule", "beat_schedule",
                                f"must be a dict of entries, not {type(beat_schedule).__name__}")])
    try:
        load_timezone(default_timezone)
    except ScheduleError as exc:
        problems.add("(app)", "timezone", str(exc))
    # Entries of one shape (task, schedule and options) differ only in name and call, so
    # the first of each shape is converted whole, and the others take its checked fields.
    shapes: dict[tuple[Any, ...], ScheduleSpec] = {}
    with collector_paused():
        for name, entry in beat_schedule.items():
            shape = _shape(entry)
            template = shapes.get(shape) if shape is not None else None
            if template is not None:
                spec = _like(template, name, entry, problems)
            else:
                spec = _convert(name, entry, default_timezone, default_dispatch, problems,
                                now, default_dst)
                if spec is not None and shape is not None:
                    shapes[shape] = spec
            if spec is not None:
                specs.append(spec)
    if problems.items:
        raise ValidationError(problems.items)
    return specs


def spec_from_entry(name: str, entry: Mapping[str, Any], *,
                    default_timezone: str = "UTC", now: datetime | None = None
                    ) -> ScheduleSpec:
    """Validate and convert one entry, and raise a ValidationError that lists its problems."""
    return specs_from_beat_schedule({name: entry}, default_timezone=default_timezone,
                                    now=now)[0]


def _shape(entry: Any) -> tuple[Any, ...] | None:
    """Return, as a key, what converting ``entry`` depends on besides its name, args and
    kwargs, or None where the entry is not a plain dict of known keys with a text task. A
    schedule other than text or a number, and options, are keyed by identity, because the
    beat_schedule holds them for the whole conversion, and entries built in a loop share
    them."""
    if type(entry) is not dict or not _ENTRY_KEYS.issuperset(entry):
        return None
    task = entry.get("task")
    if type(task) is not str:
        return None
    schedule = entry.get("schedule")
    options = entry.get("options")
    return (task, type(schedule),
            schedule if type(schedule) in _SHAPE_VALUES else id(schedule),
            id(options) if options else None)


_SHAPE_VALUES = (str, int, float)


def _like(template: ScheduleSpec, name: Any, entry: dict[str, Any],
          problems: _Problems) -> ScheduleSpec | None:
    """Return the spec of ``entry``, which has the same shape (:func:`_shape`) as the
    entry that gave ``template``, so only its name and call are checked."""
    before = len(problems.items)
    label = _checked_name(name, problems)
    args, kwargs = _checked_call(label, entry, problems)
    if len(problems.items) > before:
        return None
    t = template
    return ScheduleSpec(
        name=name, kind=t.kind, cron_expr=t.cron_expr, timezone=t.timezone, args=args,
        kwargs=dict(kwargs) if kwargs else _EMPTY,
        options=dict(t.options) if t.options else _EMPTY,
        missed_fire_policy=t.missed_fire_policy, queue=t.queue, priority=t.priority,
        max_attempts=t.max_attempts, tags=t.tags,
        metadata=dict(t.metadata) if t.metadata else _EMPTY, dispatch=t.dispatch,
        metrics=t.metrics, outcomes=dict(t.outcomes) if t.outcomes else _EMPTY,
    )


def _checked_name(name: Any, problems: _Problems) -> str:
    """Return the entry's label in problems, and report a bad name as one of them."""
    label = name if isinstance(name, str) else repr(name)
    if not isinstance(name, str) or not name:
        problems.add(label, "name", "must be a non-empty string")
        return label
    if len(name) <= 80 and name.isascii() and "\x00" not in name:
        return label  # Nearly every name ends here, with nothing more to check.
    if len(label) > 80:  # The label names the entry in a line of text.
        label = f"{label[:60]}... ({len(name)} characters)"
    bad = _text_problem(name, MAX_NAME_BYTES)
    if bad:
        problems.add(label, "name", bad + (" (PostgreSQL indexes names, and an index entry "
                                           "holds at most 2704 bytes)"
                                           if bad.startswith("is ") else ""))
    return label


def _text_problem(text: str, max_bytes: int | None = None) -> str | None:
    """Return why PostgreSQL would refuse ``text`` (or why we do, past ``max_bytes``), or
    None."""
    if "\x00" in text:
        return "must not contain NUL characters"
    if text.isascii():
        size = len(text)
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            return (f"has {text[exc.start]!r} at position {exc.start}, which is not text "
                    "(a lone surrogate): PostgreSQL stores UTF-8 only")
    if max_bytes is not None and size > max_bytes:
        return f"is {size} bytes long in UTF-8; at most {max_bytes}"
    return None


#: Iterables that are not a sequence of arguments: a dict gives its keys, and a set has
#: no fixed order.
_NOT_SEQUENCES = (str, bytes, Mapping, set, frozenset)


def _why_not_sequence(value: Any) -> str:
    if isinstance(value, Mapping):
        return " (a dict would give its keys alone)"
    if isinstance(value, (set, frozenset)):
        return " (a set has no fixed order)"
    return ""


def _checked_call(label: str, entry: Mapping[str, Any], problems: _Problems,
                  ) -> tuple[tuple[Any, ...], Mapping[str, Any]]:
    """Return the entry's args and kwargs, checked (each is empty where it is bad)."""
    args = entry.get("args") or ()
    if type(args) not in (list, tuple) and (
            isinstance(args, _NOT_SEQUENCES) or not isinstance(args, Iterable)):
        problems.add(label, "args", "must be a list or tuple" + _why_not_sequence(args))
        args = ()
    args = tuple(args)
    _check_json(label, "args", list(args), problems)
    return args, _checked_mapping(label, "kwargs", entry.get("kwargs"), problems)


def _checked_mapping(label: str, field_: str, value: Any, problems: _Problems,
                     ) -> Mapping[str, Any]:
    """Return ``value`` if it is a mapping of plain JSON (None counts as empty), else an
    empty mapping."""
    value = value or {}
    if type(value) is not dict and not isinstance(value, Mapping):
        problems.add(label, field_, "must be a dict")
        return {}
    if value:
        _check_json(label, field_, dict(value), problems)
    return value


def _convert(name: Any, entry: Any, default_tz: str, default_dispatch: str,
             problems: _Problems, now: datetime | None = None,
             default_dst: str = "awa") -> ScheduleSpec | None:
    before = len(problems.items)
    label = _checked_name(name, problems)
    # type() is checked first, because a large beat_schedule is plain dicts and lists, and
    # an isinstance check against an abstract class costs more than the rest of the line.
    if type(entry) is not dict and not isinstance(entry, Mapping):
        problems.add(label, "entry", f"must be a dict, not {type(entry).__name__}")
        return None
    if not _ENTRY_KEYS.issuperset(entry):
        for key in sorted(set(entry) - _ENTRY_KEYS, key=str):
            problems.add(label, str(key),
                         f"unknown key; an entry has {', '.join(sorted(_ENTRY_KEYS))}")

    task = entry.get("task")
    if not isinstance(task, str) or not task:
        problems.add(label, "task", "must be the task's name, a non-empty string")
    elif not task.strip():
        problems.add(label, "task", "must be the task's name, not blank")
    elif len(task) > 200:
        problems.add(label, "task", "must be at most 200 characters (Awa's limit on kind)")
    else:
        bad = _text_problem(task)
        if bad:
            problems.add(label, "task", bad)

    args, kwargs = _checked_call(label, entry, problems)

    options = entry.get("options") or {}
    if type(options) is not dict and not isinstance(options, Mapping):
        problems.add(label, "options", "must be a dict of apply_async options")
        options = {}
    options = dict(options)
    awa = options.pop(AWA_BEAT_OPTION, None) or {}
    if type(awa) is not dict and not isinstance(awa, Mapping):
        problems.add(label, "options.awa_beat", "must be a dict")
        awa = {}
    options = _json_options(label, options, problems) if options else {}
    if not _AWA_KEYS.issuperset(awa):
        for key in sorted(set(awa) - _AWA_KEYS, key=str):
            problems.add(label, f"options.awa_beat.{key}",
                         f"unknown setting; allowed: {', '.join(sorted(_AWA_KEYS))}")

    tz = awa.get("timezone", default_tz)
    if not isinstance(tz, str):
        problems.add(label, "options.awa_beat.timezone", "must be an IANA time zone name")
    else:
        try:
            load_timezone(tz)
        except ScheduleError as exc:
            problems.add(label, "options.awa_beat.timezone", str(exc))

    cron_expr = None
    schedule = entry.get("schedule")
    bounds = _bounds(label, awa, schedule, problems)
    dst = _dst(label, awa, schedule, default_dst, problems)
    try:
        cron_expr, zone = to_cron_expression(schedule, dst)
        if zone is not None:
            tz = zone
        if not is_at(schedule):
            cron_expr = bounded(cron_expr, bounds)
        elif bounds.window is not None or bounds.jitter is not None:
            # at() carries its one run already; a window or a jitter joins it, beside
            # those that an ``@at`` marker string says itself.
            own = split_bounds(cron_expr)[1]
            cron_expr = with_timing(
                cron_expr, own.window if bounds.window is None else bounds.window,
                own.jitter if bounds.jitter is None else bounds.jitter)
        if is_marker(cron_expr):
            calendar_for(cron_expr, "UTC")  # A zone's problem is reported as the zone's.
    except ScheduleError as exc:
        problems.add(label, "schedule", str(exc))
        cron_expr = None
    except (ValueError, TypeError, ArithmeticError, LookupError, AttributeError) as exc:
        # A user's schedule object that its own class cannot make sense of (celery's
        # schedule("abc"), dateutil's rrule(99)) is named in a problem, not a traceback.
        problems.add(label, "schedule", f"cannot be read: {type(exc).__name__}: "
                                        f"{first_line(exc)}")
        cron_expr = None
    if cron_expr is not None and isinstance(tz, str) and len(problems.items) == before:
        never = _never_fires(cron_expr, tz, bounds, schedule, now)
        if never is not None:
            problems.add(label, *never)

    dispatch = awa.get("dispatch", default_dispatch)
    if dispatch not in DISPATCHES:
        problems.add(label, "options.awa_beat.dispatch",
                     f"{dispatch!r} is not a dispatch; use 'celery' or 'awa'")
    metrics = awa.get("metrics", False)
    if not isinstance(metrics, bool):
        problems.add(label, "options.awa_beat.metrics", "must be True or False")
    policy = awa.get("missed_fire_policy", "coalesce")
    if policy not in POLICIES:
        problems.add(label, "options.awa_beat.missed_fire_policy",
                     f"{policy!r} is not a policy; use 'coalesce' or 'catch_up'")
    queue = awa.get("queue", "default")
    if not isinstance(queue, str) or not queue or len(queue) > 200 or "\x00" in queue:
        problems.add(label, "options.awa_beat.queue",
                     "must be a non-empty string of at most 200 characters")
    elif not queue.isascii() and _text_problem(queue):
        problems.add(label, "options.awa_beat.queue", str(_text_problem(queue)))
    priority = awa.get("priority", 2)
    if not _int_in(priority, 1, 4):
        problems.add(label, "options.awa_beat.priority",
                     f"{priority!r} is out of range; Awa priorities are 1 (highest) to 4")
    max_attempts = awa.get("max_attempts", 25)
    if not _int_in(max_attempts, 1, 1000):
        problems.add(label, "options.awa_beat.max_attempts",
                     f"{max_attempts!r} is out of range; allowed 1 to 1000")
    tags = awa.get("tags") or ()
    if (type(tags) not in (list, tuple) and (
            isinstance(tags, _NOT_SEQUENCES) or not isinstance(tags, Iterable))) or not all(
        isinstance(t, str) and ((t.isascii() and "\x00" not in t) or not _text_problem(t))
        for t in tags
    ):
        problems.add(label, "options.awa_beat.tags", "must be a list of strings (text "
                     "without NUL characters or lone surrogates)" + _why_not_sequence(tags))
        tags = ()
    elif len(tuple(tags)) > 20:
        problems.add(label, "options.awa_beat.tags", "at most 20 tags (Awa's limit)")
    metadata = _checked_mapping(label, "options.awa_beat.metadata", awa.get("metadata"),
                                problems)
    for key in sorted(RESERVED_METADATA & set(metadata)):
        problems.add(label, f"options.awa_beat.metadata.{key}",
                     "is reserved: awa-beat writes it on every fired job")

    outcomes = _outcome_options(label, awa, options, problems)
    if "pause_after_failures" in outcomes and dispatch == "awa":
        # Awa workers report nothing to awa-beat: their outcomes are awa.jobs states, and
        # no statement of awa-beat's sees a job fail, so the pause could never happen.
        problems.add(label, "options.awa_beat.pause_after_failures",
                     "needs Celery dispatch with outcome tracking; a schedule dispatched "
                     "to Awa workers cannot be paused on failure (set "
                     "options.awa_beat.dispatch = 'celery', or remove the option)")

    if len(problems.items) > before or cron_expr is None or not isinstance(task, str):
        return None
    return ScheduleSpec(
        name=name, kind=task, cron_expr=cron_expr, timezone=tz, args=args,
        kwargs=dict(kwargs) if kwargs else _EMPTY, options=options or _EMPTY,
        missed_fire_policy=policy, queue=queue, priority=int(priority),
        max_attempts=int(max_attempts), tags=tuple(tags),
        metadata=dict(metadata) if metadata else _EMPTY, dispatch=dispatch, metrics=metrics,
        outcomes=outcomes or _EMPTY,
    )


def _dst(label: str, awa: Mapping[str, Any], schedule: Any, default: str,
         problems: _Problems) -> str:
    """Return ``options["awa_beat"]["dst"]``, else ``default``: whose rule a crontab
    follows in a skipped or repeated wall hour (only a crontab has one of Celery's)."""
    dst = awa.get("dst", default)
    if dst not in DST_POLICIES:
        problems.add(label, "options.awa_beat.dst",
                     f"{dst!r} is not a DST policy; use 'awa' (Awa's rule) or 'celery'")
        return "awa"
    if "dst" in awa and dst == "celery" and not _is_crontab(schedule):
        problems.add(label, "options.awa_beat.dst",
                     "'celery' applies to a crontab schedule only (other schedules follow "
                     "their own rule)")
    return str(dst)


def _is_crontab(schedule: Any) -> bool:
    if isinstance(schedule, str):
        return schedule.startswith("@crontab ")
    from celery import schedules as cs

    return isinstance(schedule, cs.crontab)


def _outcome_options(label: str, awa: Mapping[str, Any], options: Mapping[str, Any],
                     problems: _Problems) -> dict[str, Any]:
    """Return the entry's outcome settings, validated. ``max_runtime`` is resolved
    whenever an overlap policy needs it (from ``expires`` if it is numeric, else from the
    default)."""
    out: dict[str, Any] = {}
    overlap = awa.get("overlap", "allow")
    if overlap not in OVERLAPS:
        problems.add(label, "options.awa_beat.overlap",
                     f"{overlap!r} is not an overlap policy; use 'allow', 'skip' or "
                     "'buffer_one'")
    elif overlap != "allow":
        out["overlap"] = overlap
    for key in ("max_runtime", "deadline"):
        value = awa.get(key)
        if value is None:
            continue
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not math.isfinite(value) or value <= 0):
            problems.add(label, f"options.awa_beat.{key}",
                         f"{value!r} must be a positive number of seconds")
        else:
            out[key] = float(value)
    failures = awa.get("pause_after_failures")
    if failures is not None:
        if not _int_in(failures, 1, MAX_PAUSE_AFTER_FAILURES):
            problems.add(label, "options.awa_beat.pause_after_failures",
                         f"{failures!r} must be a whole number of failures from 1 to "
                         f"{MAX_PAUSE_AFTER_FAILURES}")
        else:
            out["pause_after_failures"] = int(failures)
    once = awa.get("at_most_once")
    if once is not None:
        if not isinstance(once, bool):
            problems.add(label, "options.awa_beat.at_most_once",
                         f"{once!r} must be True or False")
        elif once:
            out["at_most_once"] = True
    if "max_runtime" not in out and ("overlap" in out or "deadline" in out):
        expires = options.get("expires")
        if isinstance(expires, (int, float)) and not isinstance(expires, bool) and expires > 0:
            out["max_runtime"] = float(expires)
        else:
            out["max_runtime"] = DEFAULT_MAX_RUNTIME
    return out


def check_outcome_tracking(specs: Iterable[ScheduleSpec], track_outcomes: bool) -> None:
    """Refuse (:class:`ValidationError`, every entry named) Celery-dispatched specs with
    ``pause_after_failures`` when ``awa_beat_track_outcomes`` is off here: without the
    workers' reports no failure is ever seen, so the schedule would never pause."""
    if track_outcomes:
        return
    problems = [(s.name, "options.awa_beat.pause_after_failures",
                 "needs outcome tracking: set awa_beat_track_outcomes = True (or "
                 "AWA_BEAT_TRACK_OUTCOMES=1) for the app, on its workers and here, or "
                 "remove the option")
                for s in specs if "pause_after_failures" in s.outcomes]
    if problems:
        raise ValidationError(problems)


def _int_in(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _check_json(name: str, field_: str, value: Any, problems: _Problems) -> None:
    """Check that values survive a trip through JSONB unchanged: plain JSON, with no NUL,
    no NaN and no lone surrogate, at most :data:`MAX_JSON_DEPTH` levels deep and at most
    :data:`MAX_JSON_BYTES` long."""
    bad = _json_problem(value)
    if bad:
        problems.add(name, field_, bad)


def _json_problem(value: Any) -> str | None:
    size = [0]
    found = _json_walk(value, 0, size)
    if found is not None:
        what, parts = found
        path = "".join(reversed(parts)).lstrip(".")
        if len(path) > 40:
            path = f"{path[:30]}...{path[-6:]}"
        return f"{path or 'value'} {what}"
    if size[0] > MAX_JSON_BYTES:
        return (f"takes about {size[0]} bytes as JSON; at most {MAX_JSON_BYTES} "
                f"({MAX_JSON_BYTES >> 20} MiB): every fire copies it into a job and a "
                "message")
    return None


def _json_walk(value: Any, depth: int, size: list[int]) -> tuple[str, list[str]] | None:
    """Return what makes ``value`` other than plain JSON that PostgreSQL stores as given,
    with the path to it (innermost part first), or None. ``size`` accumulates its
    approximate size in bytes. Exact types are tested first, because nearly every value
    has one."""
    kind = type(value)
    if kind is str:
        if value.isascii():
            size[0] += len(value)
            return ("contains a NUL character", []) if "\x00" in value else None
        bad = _text_problem(value)
        size[0] += 2 * len(value)
        return None if bad is None else (bad, [])
    if value is None or kind is int or kind is bool:
        return None
    if kind is list or kind is tuple or kind is dict:
        if depth >= MAX_JSON_DEPTH:
            return (f"is nested more than {MAX_JSON_DEPTH} levels deep (or contains "
                    "itself)", [])
        size[0] += len(value)
        if kind is dict:
            return _json_walk_items(value, depth, size)
        for i, item in enumerate(value):
            t = type(item)
            if t is int or t is bool or item is None:
                continue
            found = _json_walk(item, depth + 1, size)
            if found:
                found[1].append(f"[{i}]")
                return found
        return None
    return _json_walk_other(value, depth, size)


def _json_walk_items(value: Mapping[Any, Any], depth: int, size: list[int]
                     ) -> tuple[str, list[str]] | None:
    for key, item in value.items():
        if type(key) is not str and not isinstance(key, str):
            return f"has a non-string key {key!r}; JSON keys are strings", []
        if "\x00" in key or (not key.isascii() and _text_problem(key)):
            return "has a key that is not text PostgreSQL stores", []
        size[0] += len(key)
        t = type(item)
        if t is int or t is bool or item is None:
            continue
        found = _json_walk(item, depth + 1, size)
        if found:
            found[1].append(f".{key}")
            return found
    return None


def _json_walk_other(value: Any, depth: int, size: list[int]
                     ) -> tuple[str, list[str]] | None:
    """Do what :func:`_json_walk` does for subclasses of the JSON types, floats and the
    rest."""
    if isinstance(value, (bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else (f"is {value}, not valid JSON", [])
    if isinstance(value, str):
        return _json_walk(str(value), depth, size)
    if isinstance(value, (list, tuple)):
        return _json_walk(list(value), depth, size)
    if isinstance(value, Mapping):
        return _json_walk(dict(value), depth, size)
    return (f"is a {type(value).__name__}, which is not JSON-serialisable; use str, int, "
            "float, bool, None, list or dict", [])


def _json_options(name: str, options: dict[str, Any], problems: _Problems) -> dict[str, Any]:
    """Return apply_async options as JSON, with Celery's usual non-JSON forms made
    portable."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if not isinstance(key, str) or _text_problem(key):
            problems.add(name, f"options.{key!r}", "an option's name must be text")
            continue
        if isinstance(value, timedelta):
            value = value.total_seconds()
        elif hasattr(value, "isoformat") and key in ("eta", "expires"):
            value = value.isoformat()
        elif key in ("queue", "exchange") and hasattr(value, "name") and not isinstance(value, str):
            problems.add(name, f"options.{key}",
                         f"give the {key} by name (a string), not a {type(value).__name__}")
            continue
        found = _json_problem(value)
        if found:
            problems.add(name, f"options.{key}", found)
            continue
        out[key] = value
    try:
        json.dumps(out, allow_nan=False)
    except (TypeError, ValueError) as exc:  # pragma: no cover - _json_problem covers these.
        problems.add(name, "options", str(exc))
    return out


# -- Celery schedules -> cron ----------------------------------------------------------------

_FULL = {
    "minute": set(range(60)),
    "hour": set(range(24)),
    "day_of_month": set(range(1, 32)),
    "month_of_year": set(range(1, 13)),
    "day_of_week": set(range(7)),
}
_WEEKS = {k + 1: frozenset(range(1 + 7 * k, min(8 + 7 * k, 32))) for k in range(5)}


def to_cron_expression(schedule: Any, dst: str = "awa") -> tuple[str, str | None]:
    """Convert a schedule to an expression for ``awa.cron_jobs.cron_expr``.

    Return ``(expression, zone)``. ``zone`` is the time zone that the row must have
    whatever the entry says (``UTC`` for intervals, solar and ``at``, and the zone of an
    rrule's start), or None for the entry's own zone. Raise ScheduleError for what cannot
    be stored without changing its calendar. ``dst`` is a crontab's DST policy (``awa`` or
    ``celery``; see :func:`crontab_to_cron`).
    """
    if isinstance(schedule, str):
        if is_marker(schedule):
            calendar_for(schedule, "UTC")  # This is one of our own markers, e.g. from `export`.
            return schedule, None
        _matching(CronExpression.parse(schedule), schedule)
        return schedule, None
    from celery import schedules as cs  # Celery is optional for the pure parts' users.

    if schedule is None:
        raise ScheduleError("is missing; give a crontab, a number of seconds or a timedelta")
    if isinstance(schedule, at):
        return at_marker(schedule.instant), "UTC"
    if isinstance(schedule, cs.solar):
        return solar_marker(schedule.event, schedule.lat, schedule.lon), "UTC"
    if _is_rrule(schedule):
        marker, zone = rrule_marker(schedule)
        return marker, zone or "UTC"
    if isinstance(schedule, cs.crontab):
        expr = crontab_to_cron(schedule, dst)
        # A conversion that we cannot store must fail here, not later.
        if is_marker(expr):
            if not can_fire_from(calendar_for(expr, "UTC"), _EPOCH):
                raise ScheduleError(f"{schedule!r} matches no date (such as 30 February): "
                                    "it would never fire")
        else:
            _matching(CronExpression.parse(expr), expr)
        return expr, None
    if isinstance(schedule, cs.schedule) and type(schedule) is cs.schedule:
        return interval_expression(_interval_seconds(schedule.run_every)), "UTC"
    if isinstance(schedule, (int, float, timedelta)) and not isinstance(schedule, bool):
        return interval_expression(_interval_seconds(schedule)), "UTC"
    raise ScheduleError(
        f"a {type(schedule).__name__} schedule is not supported; use crontab, a number of "
        "seconds, a timedelta, celery.schedules.schedule, solar, awa_beat.at, "
        "an rrule (RedBeat's or dateutil's) or an Awa cron expression string"
    )


def _matching(parsed: CronExpression, expr: str) -> None:
    if parsed.never_fires:
        raise ScheduleError(f"{expr!r} matches no date (such as 30 February): it would "
                            "never fire")


def _is_rrule(schedule: Any) -> bool:
    try:
        from dateutil.rrule import rrule
    except ImportError:  # pragma: no cover - dateutil comes with Celery.
        return False
    return isinstance(schedule, rrule) or isinstance(getattr(schedule, "rrule", None), rrule)


def is_at(schedule: Any) -> bool:
    """Return whether ``schedule`` is ``at(instant)`` or its stored marker
    (``@at ... | runs=1``, as ``export`` and ``operations.beat_entry`` give it back)."""
    return isinstance(schedule, at) or (isinstance(schedule, str)
                                        and schedule.startswith("@at "))


def carries_bounds(schedule: Any) -> bool:
    """Return whether ``schedule`` says its own bounds: ``at()`` (one run, at its
    instant), or a marker string that ends in bounds (``@cron 0 3 * * * | runs=3``). A
    change to such a schedule replaces the bounds of the old one instead of keeping them."""
    if is_at(schedule):
        return True
    if not isinstance(schedule, str) or not is_marker(schedule):
        return False
    try:
        return bool(split_bounds(schedule)[1])
    except ScheduleError:
        return False  # The conversion reports it, with the entry's name.


def _bounds(label: str, awa: Mapping[str, Any], schedule: Any,
            problems: _Problems) -> Bounds:
    """Read ``start_time``, ``end_time``, ``max_runs`` and ``one_off`` from
    ``options["awa_beat"]``."""
    field_ = "options.awa_beat."
    values: dict[str, Any] = {}
    for key, name in (("start_time", "start"), ("end_time", "end")):
        value = awa.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            try:
                value = parse_iso(value)
            except ValueError:
                problems.add(label, field_ + key, f"{value!r} is not an ISO 8601 instant")
                continue
        if not isinstance(value, datetime) or value.tzinfo is None \
                or value.utcoffset() is None:
            problems.add(label, field_ + key, "must be an aware datetime (with a time zone) or "
                         "an ISO 8601 string with an offset")
            continue
        try:
            utc = value.astimezone(timezone.utc)
        except OverflowError:
            utc = None
        if utc is None or not 1970 <= utc.year <= 9999:
            problems.add(label, field_ + key, f"{value.isoformat()} is out of range: an "
                         "instant from 1970 to 9999 (UTC)")
            continue
        values[name] = ceil_second(value) if name == "start" else floor_second(value)
    runs = awa.get("max_runs")
    if runs is not None and not _int_in(runs, 1, 2**31 - 1):
        problems.add(label, field_ + "max_runs", f"{runs!r} is not a whole number >= 1")
        runs = None
    one_off = awa.get("one_off", False)
    if not isinstance(one_off, bool):
        problems.add(label, field_ + "one_off", "must be True or False")
    elif one_off:
        if runs not in (None, 1):
            problems.add(label, field_ + "one_off", f"one_off runs once; max_runs={runs} "
                         "contradicts it")
        runs = 1
    for key, word in TIMING_OPTIONS:
        value = awa.get(key)
        if value is None:
            continue
        try:
            values[word] = check_seconds(word, value)
        except ScheduleError as exc:
            problems.add(label, field_ + key, str(exc))
    if is_at(schedule) and ("start" in values or "end" in values
                            or awa.get("max_runs") not in (None, 1)):
        problems.add(label, field_ + ("start_time" if "start" in values else
                                      "end_time" if "end" in values else "max_runs"),
                     "at() fires once, at its instant; start_time, end_time and max_runs "
                     "do not apply")
        return Bounds()
    if runs is not None:
        values["runs"] = runs
    try:
        return Bounds(**values)
    except ScheduleError as exc:
        problems.add(label, field_ + "end_time", str(exc))
        return Bounds()


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _never_fires(cron_expr: str, tz: str, bounds: Bounds, schedule: Any,
                 now: datetime | None) -> tuple[str, str] | None:
    """Return ``(field, reason)`` when the schedule can never fire: from 1970 on, or, with
    ``now``, from now on (a new row's first fire may be up to a minute old)."""
    if now is None and not is_marker(cron_expr):
        return None  # to_cron_expression refused a cron expression that matches no time.
    try:
        start = _EPOCH if now is None else now - REGISTRATION_GRACE
        if can_fire_from(calendar_for(cron_expr, tz), start):
            return None
    except ScheduleError:
        return None  # It is already reported as the zone's or the schedule's problem.
    if now is not None and bounds.end is not None and bounds.end < now - REGISTRATION_GRACE:
        return ("options.awa_beat.end_time",
                f"{instant_text(bounds.end)} is past: the schedule would never fire")
    if now is not None and isinstance(schedule, at):
        return "schedule", (f"at({instant_text(schedule.instant)}) is past: it would "
                            "never fire")
    after = "" if now is None else f" after {instant_text(now)}"
    return "schedule", f"{cron_expr!r} has no fire time{after}: it would never fire"


def _interval_seconds(run_every: Any) -> int:
    if isinstance(run_every, timedelta):
        seconds = run_every.total_seconds()
    elif isinstance(run_every, (int, float)) and not isinstance(run_every, bool):
        if run_every > MAX_INTERVAL_SECONDS:  # An int may be too large for float().
            raise ScheduleError(f"an interval of more than {MAX_INTERVAL_SECONDS} s "
                                "(about ten years) is too long")
        seconds = float(run_every)
    else:
        raise ScheduleError(f"an interval of {run_every!r} is not a number of seconds or a "
                            "timedelta")
    if seconds > MAX_INTERVAL_SECONDS:
        raise ScheduleError(f"an interval of {seconds:g} s is too long; at most "
                            f"{MAX_INTERVAL_SECONDS} s (about ten years)")
    if not math.isfinite(seconds) or seconds < 1:
        raise ScheduleError(f"an interval of {seconds:g} s is too short; the minimum is 1 second")
    if seconds != int(seconds):
        raise ScheduleError(f"an interval of {seconds:g} s is not a whole number of seconds")
    return int(seconds)


def crontab_to_cron(tab: Any, dst: str = "awa") -> str:
    """Return what ``cron_expr`` stores for a Celery ``crontab``: a 5-field Awa cron
    expression with the same calendar where there is one (Awa fires it too), and
    otherwise the marker ``@crontab <fields>`` (see :mod:`awa_beat._schedules.markers`),
    which only awa-beat fires. ``dst="celery"`` always gives the marker, with
    ``dst=celery``: Celery's rule for skipped and repeated wall times, which Awa's
    evaluator does not follow."""
    fields = {name: set(getattr(tab, name)) for name in _FULL}
    text = {name: _field_text(values, _FULL[name]) for name, values in fields.items()}
    order = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
    if dst == "celery":
        return crontab_marker(tuple(text[name] for name in order), "celery")  # type: ignore[arg-type]
    if text["day_of_month"] != "*" and text["day_of_week"] != "*":
        weeks = _weeks_of(fields["day_of_month"])
        if weeks is None:
            # Celery requires both the day of the month and the weekday, and cron either.
            return crontab_marker(tuple(text[name] for name in order))  # type: ignore[arg-type]
        text["day_of_month"] = "*"
        text["day_of_week"] = ",".join(f"{d}#{week}" for d in sorted(fields["day_of_week"])
                                       for week in weeks)
    return " ".join(text[name] for name in order)


def _weeks_of(days: set[int]) -> list[int] | None:
    """Return the ``n`` of each ``d#n`` (the nth weekday d of the month: days 7n-6 to 7n,
    and for the 5th, the 29th to the 31st) whose blocks of days together are exactly
    ``days``, or None."""
    weeks = [n for n, block in _WEEKS.items() if block <= days]
    covered = set().union(*(_WEEKS[n] for n in weeks)) if weeks else set()
    return weeks if covered == days else None


def _field_text(values: set[int], full: set[int]) -> str:
    if values >= full:
        return "*"
    if not values:
        raise ScheduleError("a crontab field matches nothing")
    ordered = sorted(values)
    parts = []
    start = prev = ordered[0]
    for value in [*ordered[1:], None]:
        if value is not None and value == prev + 1:
            prev = value
            continue
        parts.append(str(start) if start == prev else
                     f"{start},{prev}" if prev == start + 1 else f"{start}-{prev}")
        if value is not None:
            start = prev = value
    return ",".join(parts)
