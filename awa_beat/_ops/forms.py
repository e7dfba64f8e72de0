"""The add and edit form of a runtime schedule, as text fields, and the beat_schedule
entry it says: shared by the dashboard and the Django admin (no Jinja2 needed). The
entry is built as ``awa-beat add|edit`` builds it (:mod:`awa_beat._schedules.entries`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._db.records import ScheduleRow
from .._schedules.entries import NONE_WORD, entry_from_options
from .._schedules.fire_times import every_seconds
from .._schedules.markers import seconds_text
from .records import ScheduleBounds
from .rows import beat_entry

#: The bounds and outcome settings, each a field of its own (empty: none, or the default).
BOUND_FIELDS = ("start_time", "end_time", "max_runs", "one_off", "overlap", "deadline",
                "catch_up_window", "jitter", "pause_after_failures")
#: The form's fields, each a text input or a select (``kind`` picks how ``schedule`` is
#: read).
FORM_FIELDS = ("task", "kind", "schedule", "args", "kwargs", "queue", "timezone", "policy",
               "dispatch", *BOUND_FIELDS)
KINDS = {"cron": "cron expression", "every": "every N seconds", "at": "at an instant (ISO 8601)",
         "solar": "solar event (EVENT:LAT:LON)"}
#: The choices of the ``overlap`` select (value, text); ``one_off`` is a checkbox, sent
#: as ``yes`` (or empty, by a hidden field before it, when it is not checked).
OVERLAP_CHOICES = (("", "default (allow)"), ("allow", "allow"),
                   ("skip", "skip while the last run has not finished"),
                   ("buffer_one", "buffer one fire until the last run has finished"))
FIELD_LIMIT = 4000
#: The form's name of each field of :func:`awa_beat._schedules.entries.entry_from_options`, for
#: the problems shown next to the fields.
FORM_NAMES = {"task": "task", "cron": "schedule", "every": "schedule", "at": "schedule",
              "solar": "schedule", "schedule": "schedule", "args": "args",
              "kwargs": "kwargs", "start": "start_time", "end": "end_time",
              "max_runs": "max_runs", "one_off": "one_off", "overlap": "overlap",
              "deadline": "deadline", "catch_up_window": "catch_up_window",
              "jitter": "jitter", "pause_after_failures": "pause_after_failures"}


def form_values(row: ScheduleRow) -> dict[str, str]:
    """The edit form of ``row``, filled in as it is stored: the schedule without its
    bounds, which have fields of their own."""
    entry = beat_entry(row)
    celery = (row.metadata or {}).get("celery") or {}
    return {"task": row.kind, **_schedule_fields(row.cron_expr, entry["schedule"]),
            "args": json.dumps(entry["args"]), "kwargs": json.dumps(entry["kwargs"]),
            "queue": row.queue, "timezone": row.timezone, "policy": row.missed_fire_policy,
            "dispatch": celery.get("dispatch") or "",
            **bound_values(ScheduleBounds.of(row))}


def _schedule_fields(cron_expr: str, schedule: Any) -> dict[str, str]:
    if isinstance(schedule, int):
        return {"kind": "every", "schedule": str(schedule)}
    if cron_expr.startswith("@at "):
        return {"kind": "at", "schedule": cron_expr[4:].partition(" ")[0]}
    if isinstance(schedule, str) and schedule.startswith("@solar "):
        words = schedule.split(" ")
        if len(words) == 4:
            return {"kind": "solar", "schedule": ":".join(words[1:])}
    if every_seconds(str(schedule)) is not None:  # pragma: no cover - beat_entry's int
        return {"kind": "every", "schedule": str(every_seconds(str(schedule)))}
    return {"kind": "cron", "schedule": str(schedule)}


def bound_values(bounds: ScheduleBounds) -> dict[str, str]:
    """The bound fields of a stored schedule: one run shows as one-off (``at`` too),
    more as a number of runs."""
    def instant(t: Any) -> str:
        return t.isoformat() if t is not None else ""

    def seconds(value: float | None) -> str:
        return "" if value is None else seconds_text(value)

    deadline = bounds.deadline
    return {"start_time": instant(bounds.start_time), "end_time": instant(bounds.end_time),
            "max_runs": str(bounds.max_runs) if bounds.max_runs not in (None, 1) else "",
            "one_off": "yes" if bounds.one_off else "",
            "overlap": "" if bounds.overlap == "allow" else bounds.overlap,
            "deadline": "" if deadline is None else f"{deadline:g}",
            "catch_up_window": seconds(bounds.catch_up_window),
            "jitter": seconds(bounds.jitter),
            "pause_after_failures": ("" if bounds.pause_after_failures is None
                                     else str(bounds.pause_after_failures))}


def entry_from_form(values: Mapping[str, str], given: Mapping[str, str] | None = None,
                    name: str = "(new)") -> dict[str, Any]:
    """The beat_schedule entry (or, with ``given`` the form as it was shown, the changes)
    the form says, read as `awa-beat add|edit` reads its options. A bound field emptied
    on an edit removes that bound."""
    def changed(*fields: str) -> bool:
        return given is None or any(values.get(f, "") != given.get(f, "") for f in fields)

    def value(field: str) -> str | None:
        return values[field] if values[field] and changed(field) else None

    def bound(field: str) -> str | None:
        # A field the form did not post (an older page, a script) is left as it is.
        text = values.get(field)
        if text is None or not changed(field):
            return None
        return text or (NONE_WORD if given is not None else None)

    schedule = values["schedule"] if changed("kind", "schedule") else ""
    kind = values["kind"]
    # An instant without a UTC offset is read in the form's zone, changed or not.
    reads_instant = (kind == "at" and schedule) or bound("start_time") or bound("end_time")
    zone = value("timezone") or (values["timezone"] or None if reads_instant else None)
    return entry_from_options(
        name, task=value("task"),
        cron=schedule if kind == "cron" and schedule else None,
        every=schedule if kind == "every" and schedule else None,
        at_=schedule if kind == "at" and schedule else None,
        solar=schedule if kind == "solar" and schedule else None,
        args=value("args"), kwargs=value("kwargs"), queue=value("queue"),
        tz=zone, policy=value("policy"), dispatch=value("dispatch"),
        start=bound("start_time"), end=bound("end_time"), max_runs=bound("max_runs"),
        one_off=bound("one_off"),
        overlap=bound("overlap"), deadline=bound("deadline"),
        catch_up_window=bound("catch_up_window"), jitter=bound("jitter"),
        pause_after_failures=bound("pause_after_failures"),
        edit=given is not None, fields=FORM_NAMES)
