"""`awa-beat import` respects ownership: a schedule written at run time is listed as not
carried over and left as it is, unless forced, which makes it configuration again."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from awa_beat import Schedules
from awa_beat._config import Settings
from awa_beat._db.database import Database
from awa_beat._importers.run import ImportOptions, run_import
from tests.apps import celery_app

pytestmark = pytest.mark.integration
PROJ = Settings(deployment="proj", default_timezone="UTC", dispatch="awa")


def stored(conn: psycopg.Connection, name: str) -> tuple[Any, ...]:
    return conn.execute("SELECT c.cron_expr, c.kind, c.last_enqueued_at, s.owner, "
                        "s.deployment FROM awa.cron_jobs c LEFT JOIN awa_beat.schedules s "
                        "USING (name) WHERE name = %s", (name,)).fetchone()


def do_import(db_url: str, **options: Any):
    app = celery_app("proj", db_url=db_url, awa_beat_dispatch="awa", beat_schedule={
        "report": {"task": "t.imported", "schedule": 60.0},
        "fresh": {"task": "t.fresh", "schedule": 30.0}})
    return run_import(ImportOptions(app=app, **options), lambda url: Database(url, max_size=1))


def test_a_runtime_row_is_not_carried_over_unless_forced(db_url: str, conn) -> None:
    with Schedules(db_url, settings=PROJ) as api:
        api.add("report", task="t.runtime", schedule="0 7 * * *")
    before = stored(conn, "report")

    dry = do_import(db_url, dry_run=True)
    assert [(r.name, "run time" in r.reason) for r in dry.plan.not_carried] == [
        ("report", True)]
    assert [i.name for i in dry.plan.new] == ["fresh"] and dry.plan.changed == []

    done = do_import(db_url)
    assert [r.name for r in done.plan.not_carried] == ["report"]
    assert done.imported == 1 and done.written == {"inserted": 1, "changed": 0,
                                                   "cursors_moved": 0, "unchanged": 0}
    assert stored(conn, "report") == before  # definition, cursor and owner untouched
    assert stored(conn, "fresh")[1:2] == ("t.fresh",)

    forced = do_import(db_url, force=True)
    assert forced.plan.not_carried == []
    assert [name for name, _ in forced.plan.changed] == ["report"]
    cron_expr, kind, _, owner, deployment = stored(conn, "report")
    assert cron_expr != "0 7 * * *"
    assert (kind, owner, deployment) == ("t.imported", "config", "proj")


def test_the_statement_itself_leaves_a_runtime_row_alone(db_url: str, conn) -> None:
    # A runtime write may land between the plan's read and the import's write.
    with Schedules(db_url, settings=PROJ) as api:
        api.add("report", task="t.runtime", schedule="0 7 * * *")
    before = stored(conn, "report")
    row = {"name": "report", "cron_expr": "0 8 * * *", "timezone": "UTC",
           "kind": "t.imported", "queue": "default", "args": {"args": [], "kwargs": {}},
           "priority": 2, "max_attempts": 25, "tags": [], "metadata": {},
           "missed_fire_policy": "coalesce"}
    with Database(db_url) as store:
        store.schedules.import_schedules([row], [None], [None], deployment="other")
        assert stored(conn, "report") == before
        store.schedules.import_schedules([row], [None], [None], deployment="other", force=True)
    assert stored(conn, "report")[:2] == ("0 8 * * *", "t.imported")
    assert stored(conn, "report")[3:] == ("config", "other")
