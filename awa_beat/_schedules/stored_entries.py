"""A stored schedule read back as a ``beat_schedule`` entry, and changes merged into an
entry.

:mod:`awa_beat._schedules.spec` writes an entry's bounds into the stored expression (a
marker such as ``@cron 0 9 * * * | start=...``). This module is the way back: it splits a
stored expression into the schedule an entry gives and the bounds an entry gives in
``options["awa_beat"]``, so that an export or an edit hands back what was written. Pure:
no database, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import AwaBeatError
from .markers import Bounds, is_marker, split_bounds, with_timing
from .spec import AWA_BEAT_OPTION, BOUND_OPTIONS, TIMING_OPTIONS, carries_bounds, is_at


def split_schedule(cron_expr: str) -> tuple[str, Bounds]:
    """A stored expression as the schedule an entry gives (an Awa expression for
    ``@cron``) and its bounds, which an entry gives in ``options["awa_beat"]``. ``at()``
    keeps its one run, because that run is part of what ``at`` means, not a bound of its
    own (its catch-up window and jitter are settings, as for any schedule)."""
    if not is_marker(cron_expr):
        return cron_expr, Bounds()
    try:
        base, bounds = split_bounds(cron_expr)
    except AwaBeatError:
        return cron_expr, Bounds()  # an invalid row stays as stored
    if cron_expr.startswith("@at "):
        return with_timing(cron_expr, None, None), Bounds(window=bounds.window,
                                                         jitter=bounds.jitter)
    if base.startswith("@cron "):
        base = base[len("@cron "):]
    return base, bounds


def bound_options(bounds: Bounds) -> dict[str, Any]:
    """``bounds`` as ``options["awa_beat"]`` settings: instants in ISO 8601, one run as
    ``one_off`` (the two say the same thing), and the window and the jitter as
    ``catch_up_window`` and ``jitter`` (seconds; an int when whole)."""
    out: dict[str, Any] = {}
    if bounds.start is not None:
        out["start_time"] = bounds.start.isoformat()
    if bounds.end is not None:
        out["end_time"] = bounds.end.isoformat()
    if bounds.runs == 1:
        out["one_off"] = True
    elif bounds.runs is not None:
        out["max_runs"] = bounds.runs
    for key, word in TIMING_OPTIONS:
        value = getattr(bounds, word)
        if value is not None:
            out[key] = int(value) if value.is_integer() else value
    return out


def merge_entry(entry: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``entry`` (a beat_schedule entry) with ``changes`` applied: the keys given replace
    the entry's, except ``options`` and its ``awa_beat`` dict, which are merged key by
    key, a value of None removing the key.

    ``max_runs`` and ``one_off`` are one setting, the run limit, said two ways: a
    ``max_runs`` given replaces ``one_off``, and ``one_off=True`` replaces ``max_runs``.
    A schedule given that says its own bounds (``at()``, a marker ending in bounds)
    replaces the entry's bounds, unless the changes give them too."""
    merged = dict(entry)
    schedule = changes.get("schedule")
    if carries_bounds(schedule):
        # at() says its one run, not a catch-up window or a jitter, so those stay, unless
        # the schedule is a marker that says them.
        dropped = BOUND_OPTIONS if not is_at(schedule) or _timed(schedule) else \
            tuple(k for k in BOUND_OPTIONS if k not in dict(TIMING_OPTIONS))
        options = dict(merged.get("options") or {})
        awa = {k: v for k, v in (options.get(AWA_BEAT_OPTION) or {}).items()
               if k not in dropped}
        merged["options"] = {**options, AWA_BEAT_OPTION: awa}
    for key, value in changes.items():
        if key != "options" or not isinstance(value, Mapping):
            merged[key] = value
            continue
        options = dict(merged.get("options") or {})
        for option, setting in value.items():
            if option == AWA_BEAT_OPTION and isinstance(setting, Mapping):
                awa = dict(options.get(AWA_BEAT_OPTION) or {})
                if "max_runs" in setting:
                    awa.pop("one_off", None)
                if setting.get("one_off"):
                    awa.pop("max_runs", None)
                awa.update(setting)
                options[AWA_BEAT_OPTION] = {k: v for k, v in awa.items() if v is not None}
            elif setting is None:
                options.pop(option, None)
            else:
                options[option] = setting
        merged["options"] = options
    return merged


def _timed(schedule: Any) -> bool:
    """Return whether ``schedule`` is a marker string with a catch-up window or a jitter."""
    if not isinstance(schedule, str) or not is_marker(schedule):
        return False
    try:
        bounds = split_bounds(schedule)[1]
    except AwaBeatError:
        return False
    return bounds.window is not None or bounds.jitter is not None
