"""The add and edit form of a runtime schedule, as text fields, and the beat_schedule
entry it says: shared by the dashboard and the Django admin (no Jinja2 needed)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..fire_times import every_seconds
from ..operations import beat_entry
from ..records import ScheduleRow

#: The form's fields, each a text input (``kind`` picks how ``schedule`` is read).
FORM_FIELDS = ("task", "kind", "schedule", "args", "kwargs", "queue", "timezone", "policy",
               "dispatch")
KINDS = {"cron": "cron expression", "every": "every N seconds", "at": "at an instant (ISO 8601)",
         "solar": "solar event (EVENT:LAT:LON)"}
FIELD_LIMIT = 4000


def form_values(row: ScheduleRow) -> dict[str, str]:
    """The edit form of ``row``, filled in as it is stored."""
    entry = beat_entry(row)
    seconds = every_seconds(row.cron_expr)
    celery = (row.metadata or {}).get("celery") or {}
    return {"task": row.kind, "kind": "every" if seconds is not None else "cron",
            "schedule": str(seconds) if seconds is not None else row.cron_expr,
            "args": json.dumps(entry["args"]), "kwargs": json.dumps(entry["kwargs"]),
            "queue": row.queue, "timezone": row.timezone, "policy": row.missed_fire_policy,
            "dispatch": celery.get("dispatch") or ""}


def entry_from_form(values: Mapping[str, str], given: Mapping[str, str] | None = None
                    ) -> dict[str, Any]:
    """The beat_schedule entry (or, with ``given`` the form as it was shown, the changes)
    the form says, read as `awa-beat add|edit` reads its options."""
    from ..cli.runtime import entry_from_options

    def changed(*fields: str) -> bool:
        return given is None or any(values[f] != given.get(f, "") for f in fields)

    def value(field: str) -> str | None:
        return values[field] if values[field] and changed(field) else None

    schedule = values["schedule"] if changed("kind", "schedule") else ""
    kind = values["kind"]
    # An instant without a UTC offset is read in the form's zone, changed or not.
    zone = value("timezone") or (values["timezone"] or None if kind == "at" and schedule
                                 else None)
    return entry_from_options(
        task=value("task"),
        cron=schedule if kind == "cron" and schedule else None,
        every=schedule if kind == "every" and schedule else None,
        at_=schedule if kind == "at" and schedule else None,
        solar=schedule if kind == "solar" and schedule else None,
        args=value("args"), kwargs=value("kwargs"), queue=value("queue"),
        tz=zone,
        policy=value("policy"), dispatch=value("dispatch"))
