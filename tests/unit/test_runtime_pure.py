"""The pure parts of runtime writes: merging an edit into an entry, the owner check."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from awa_beat._db.records import ScheduleRow
from awa_beat._ops.operations import check_owners
from awa_beat._schedules.stored_entries import merge_entry
from awa_beat.errors import ScheduleOwned

NOW = datetime(2026, 12, 3, tzinfo=timezone.utc)


def row(name: str, owner: str | None, deployment: str | None = "proj") -> ScheduleRow:
    return ScheduleRow(name, "* * * * *", "UTC", "t", "default", {}, 2, 25, [], {},
                       "coalesce", None, NOW, NOW, None, None, deployment, owner)


def test_merge_replaces_top_level_keys_and_merges_options_key_by_key() -> None:
    entry = {"task": "t", "schedule": 5, "kwargs": {"a": 1},
             "options": {"queue": "q", "expires": 60,
                         "awa_beat": {"timezone": "UTC", "priority": 1}}}
    merged = merge_entry(entry, {"schedule": 10, "kwargs": {"b": 2}, "options": {
        "expires": None, "awa_beat": {"timezone": "Asia/Tokyo", "priority": None}}})
    assert merged == {"task": "t", "schedule": 10, "kwargs": {"b": 2},
                      "options": {"queue": "q", "awa_beat": {"timezone": "Asia/Tokyo"}}}
    assert entry["options"]["expires"] == 60  # the original is left as it was


def test_owner_check() -> None:
    check_owners([row("a", "runtime")], force=False)
    with pytest.raises(ScheduleOwned, match="beat_schedule of deployment proj"):
        check_owners([row("a", "runtime"), row("b", "config")], force=False)
    with pytest.raises(ScheduleOwned, match="not written by awa-beat"):
        check_owners([row("c", None, None)], force=False)
    check_owners([row("b", "config"), row("c", None, None)], force=True)
