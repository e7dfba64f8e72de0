"""The add/edit form's text fields as the beat_schedule entry (or the changes) they say."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from awa_beat._db.records import ScheduleRow
from awa_beat._ops.forms import entry_from_form, form_values
from awa_beat.errors import ScheduleError

NOW = datetime(2026, 1, 5, tzinfo=timezone.utc)


def stored() -> ScheduleRow:
    return ScheduleRow("r", "*/5 * * * *", "Europe/Paris", "t.task", "default",
                       {"args": [1], "kwargs": {"a": "b"}}, 2, 25, [], {}, "coalesce", None,
                       NOW, NOW, None, None, owner="runtime")


def blank(**over: str) -> dict[str, str]:
    return {"task": "", "kind": "cron", "schedule": "", "args": "", "kwargs": "",
            "queue": "", "timezone": "", "policy": "", "dispatch": "", **over}


def test_a_new_entry_has_what_the_form_gives() -> None:
    entry = entry_from_form(blank(task="t.x", schedule="0 9 * * *", kwargs='{"n": 1}',
                                  queue="reports", policy="skip"))
    assert entry == {"task": "t.x", "schedule": "0 9 * * *", "kwargs": {"n": 1},
                     "options": {"queue": "reports", "awa_beat": {
                         "queue": "reports", "missed_fire_policy": "skip"}}}
    assert entry_from_form(blank(task="t.x", kind="every", schedule="30"))[
        "schedule"].total_seconds() == 30


def test_an_edit_sends_only_the_fields_changed() -> None:
    shown = form_values(stored())
    assert shown["schedule"] == "*/5 * * * *" and shown["kwargs"] == '{"a": "b"}'
    assert entry_from_form(dict(shown), shown) == {}
    assert entry_from_form({**shown, "queue": "reports"}, shown) == {
        "options": {"queue": "reports", "awa_beat": {"queue": "reports"}}}
    assert entry_from_form({**shown, "args": "[2]"}, shown) == {"args": [2]}


def test_bad_json_is_a_schedule_error() -> None:
    with pytest.raises(ScheduleError, match="args"):
        entry_from_form(blank(task="t.x", schedule="* * * * *", args="[1"))
    with pytest.raises(ScheduleError, match="object"):
        entry_from_form(blank(task="t.x", schedule="* * * * *", kwargs="[]"))
