"""The dashboard's side of the operations layer, in both layouts: the keyset-paged list
and its filters, queue pauses, pause notes and the audit log."""

from __future__ import annotations

from typing import Any

import pytest

from awa_beat._db.database import Database
from awa_beat._ops.operations import Operations
from awa_beat._ops.records import ScheduleFilter

pytestmark = pytest.mark.integration


def row(name: str, **over: Any) -> dict[str, Any]:
    return {"name": name, "cron_expr": "0 9 * * *", "timezone": "UTC", "kind": "t.k",
            "queue": "default", "args": {}, "priority": 2, "max_attempts": 25, "tags": [],
            "metadata": {}, "missed_fire_policy": "coalesce", **over}


def test_pages_filters_notes_and_audit(db_url: str, conn: Any, layout: str) -> None:
    with Database(db_url) as store:
        store.schedules.sync([row(f"a-{i:02d}") for i in range(25)], deployment="alpha")
        store.schedules.sync([row("b_1", queue="reports"), row("B%2")], deployment="beta")
    conn.execute("INSERT INTO awa.cron_jobs (name, cron_expr, kind) VALUES ('z', '@midnight', 'k')")
    with Operations.open(db_url) as ops:
        first = ops.page(limit=10)
        assert [v.name for v in first.views][:2] == ["B%2", "a-00"]
        assert (first.total, first.has_next, first.has_previous) == (28, True, False)
        second = ops.page(after=first.views[-1].name, limit=10)
        assert second.views[0].name == "a-09" and second.has_previous
        last = ops.page(after=second.views[-1].name, limit=10)
        assert [v.name for v in last.views][-2:] == ["b_1", "z"] and not last.has_next
        assert last.views[-1].invalid
        back = ops.page(before=last.views[0].name, limit=10)
        assert [v.name for v in back.views] == [v.name for v in second.views]
        assert [v.name for v in ops.page(ScheduleFilter(search="b%")).views] == ["B%2"]
        assert [v.name for v in ops.page(ScheduleFilter(search="_")).views] == ["b_1"]
        assert [v.name for v in ops.page(ScheduleFilter(owner="")).views] == ["z"]
        assert ops.page(ScheduleFilter(owner="beta")).total == 2
        assert ops.page(ScheduleFilter(names=frozenset({"a-03", "z"}))).total == 2
        ops.pause("a-03", "oncall", "disk full")
        ops.pause("a-04", "oncall")
        paused = ops.page(ScheduleFilter(paused=True))
        assert [v.name for v in paused.views] == ["a-03", "a-04"]
        assert paused.notes == {"a-03": "disk full"}
        assert ops.pause_note("a-03") == "disk full"
        ops.resume("a-03")
        ops.pause("a-03")  # paused again without a note: the old one is not shown
        assert ops.pause_note("a-03") is None
        assert ops.deployments() == ["alpha", "beta"]
        ops.record_action(actor="alice", source="web", action="pause", schedule="a-03",
                          remote_addr="10.0.0.1", detail={"note": "x"}, outcome="ok")
        ops.record_action(actor="bob", source="django", action="trigger", schedule="z",
                          outcome="error: boom")
        entries = ops.audit_log()
        assert [(e.actor, e.action, e.outcome) for e in entries] == [
            ("bob", "trigger", "error: boom"), ("alice", "pause", "ok")]
        assert [e.actor for e in ops.audit_log(schedule="a-03")] == ["alice"]
        assert [e.actor for e in ops.audit_log(before_id=entries[0].id)] == ["alice"]
        if layout == "awa":  # Awa records queue pauses; the standalone layout has none
            conn.execute("INSERT INTO awa.queue_meta (queue, paused, paused_at, paused_by) "
                         "VALUES ('reports', true, now(), 'ops')")
            assert ops.cluster.queue_pauses({"reports", "default"})["reports"].paused_by == "ops"
        else:
            assert ops.cluster.queue_pauses({"reports", "default"}) == {}


def test_the_owner_filter_tells_runtime_rows_from_config_rows(db_url: str, layout: str
                                                              ) -> None:
    with Database(db_url) as store:
        store.schedules.sync([row("config-1")], deployment="alpha")
    with Operations.open(db_url) as ops:
        ops.add({"runtime-1": {"task": "t.r", "schedule": "0 9 * * *"}})
        runtime = ops.page(ScheduleFilter(owned_by="runtime"))
        assert [(v.name, v.owner) for v in runtime.views] == [("runtime-1", "runtime")]
        assert runtime.total == 1
        config = ops.page(ScheduleFilter(owned_by="config"))
        assert [(v.name, v.owner) for v in config.views] == [("config-1", "config")]
        assert ops.failing() == []  # nothing ran yet
