"""The import's plan leaves runtime-owned rows out unless forced."""

from __future__ import annotations

from datetime import datetime, timezone

from awa_beat._db.records import ScheduleRow
from awa_beat._importers.common import convert
from awa_beat._importers.planning import plan

UTC = timezone.utc


def stored(name: str, owner: str) -> ScheduleRow:
    t = datetime(2026, 1, 1, tzinfo=UTC)
    return ScheduleRow(name=name, cron_expr="0 7 * * *", timezone="UTC", kind="t.old",
                       queue="default", args={"args": [], "kwargs": {}}, priority=2,
                       max_attempts=25, tags=[], metadata={}, missed_fire_policy="coalesce",
                       last_enqueued_at=t, created_at=t, updated_at=t, paused_at=None,
                       paused_by=None, deployment="proj", owner=owner)


def results() -> list:
    return [convert(name, {"task": "t.new", "schedule": 30.0}, default_timezone="UTC",
                    default_dispatch="awa") for name in ("mine", "theirs")]


def test_a_runtime_owned_name_is_not_carried_over() -> None:
    existing = {"mine": stored("mine", "config"), "theirs": stored("theirs", "runtime")}
    out = plan(results(), existing, "proj")
    assert [r.name for r in out.not_carried] == ["theirs"]
    assert "--force" in out.not_carried[0].reason
    assert [name for name, _ in out.changed] == ["mine"]


def test_forced_a_runtime_owned_name_is_planned_as_any_other() -> None:
    existing = {"mine": stored("mine", "config"), "theirs": stored("theirs", "runtime")}
    out = plan(results(), existing, "proj", force=True)
    assert out.not_carried == []
    assert [name for name, _ in out.changed] == ["mine", "theirs"]
