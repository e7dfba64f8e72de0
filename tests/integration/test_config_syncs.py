"""A restart with the configuration already stored skips the start-up sync, and only
then: any write to a definition or an owner since the last whole sync makes the next
start sync again. Against a real PostgreSQL, in both layouts."""

from __future__ import annotations

import logging
from typing import Any

import psycopg
import pytest
from celery.schedules import crontab

from awa_beat._beat.node import BeatNode
from awa_beat._config import Settings
from awa_beat._db.batches import SyncBatch
from awa_beat._db.database import Database
from awa_beat._db.schedules import ScheduleStore
from awa_beat._schedules.spec import ScheduleSpec, specs_from_beat_schedule

pytestmark = pytest.mark.integration
PROJ = Settings(deployment="proj", default_timezone="UTC", dispatch="awa")


def row(name: str, **over: Any) -> dict[str, Any]:
    base = {
        "name": name, "cron_expr": "*/5 * * * *", "timezone": "Europe/Paris",
        "kind": "app.tasks.tick", "queue": "default",
        # Keys out of jsonb's order, nested, unicode: the hash of the input must be the
        # hash of the row as stored.
        "args": {"kwargs": {"z": 1, "a": [1.5, None, "é"]}, "args": [2]},
        "priority": 2, "max_attempts": 25, "tags": ["beat", "b c"],
        "metadata": {"celery": {"options": {"queue": "q"}}}, "missed_fire_policy": "coalesce",
    }
    base.update(over)
    return base


def sync_whole(store: Database, rows: list[dict[str, Any]], digest: str,
               deployment: str = "proj") -> None:
    """A start-up sync in two batches, then its record."""
    half = len(rows) // 2
    batches = [SyncBatch.encode(rows[:half], deployment),
               SyncBatch.encode(rows[half:], deployment)]
    store.schedules.record_config(deployment, digest, store.schedules.sync_all(batches))


def test_a_synced_configuration_stays_in_force_through_fires_and_pauses(
        store: Database, conn: psycopg.Connection) -> None:
    rows = [row(f"s{i}", cron_expr=f"{i} * * * *") for i in range(5)]
    assert not store.schedules.config_in_force("proj", "d1")  # nothing recorded yet
    sync_whole(store, rows, "d1")
    assert store.schedules.config_in_force("proj", "d1")
    assert not store.schedules.config_in_force("proj", "d2")  # another configuration
    assert not store.schedules.config_in_force("other", "d1")  # another deployment's record
    # Fires (Awa's statement and ours set the cursor and updated_at) and pauses change
    # no definition.
    conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = now(), updated_at = now()")
    store.schedules.pause("s1", by="ops")
    store.schedules.resume("s1")
    store.schedules.pause("s2", by="ops")
    assert store.schedules.config_in_force("proj", "d1")


@pytest.mark.parametrize("change", [
    "UPDATE awa.cron_jobs SET args = '{\"args\": [3]}' WHERE name = 's3'",
    "UPDATE awa.cron_jobs SET metadata = metadata || '{\"x\": 1}' WHERE name = 's0'",
    "UPDATE awa.cron_jobs SET tags = '{beat}' WHERE name = 's4'",
    "UPDATE awa.cron_jobs SET timezone = 'UTC' WHERE name = 's2'",
    "DELETE FROM awa.cron_jobs WHERE name = 's1'",
    "UPDATE awa_beat.schedules SET owner = 'runtime' WHERE name = 's2'",
    "UPDATE awa_beat.schedules SET deployment = 'other' WHERE name = 's2'",
    "INSERT INTO awa_beat.schedules (name, deployment) VALUES ('stray', 'proj')",
])
def test_any_write_to_a_definition_or_an_owner_ends_it(
        store: Database, conn: psycopg.Connection, change: str) -> None:
    rows = [row(f"s{i}") for i in range(5)]
    sync_whole(store, rows, "d1")
    conn.execute("INSERT INTO awa.cron_jobs (name, cron_expr, kind)"
                 " VALUES ('stray', '* * * * *', 'app.tasks.tick')")
    assert store.schedules.config_in_force("proj", "d1")  # a row of no deployment counts for none
    conn.execute(change)
    assert not store.schedules.config_in_force("proj", "d1")


def test_a_resync_that_restores_the_rows_restores_it(store: Database,
                                                      conn: psycopg.Connection) -> None:
    rows = [row(f"s{i}") for i in range(4)]
    sync_whole(store, rows, "d1")
    # A replica of an older configuration re-asserts its own definition of s1 (a rolling
    # deploy), then a replica of this one re-asserts it back.
    store.schedules.sync([row("s1", cron_expr="0 * * * *")], deployment="proj")
    assert not store.schedules.config_in_force("proj", "d1")
    store.schedules.sync(rows, deployment="proj")
    assert store.schedules.config_in_force("proj", "d1")


def test_a_configuration_with_a_row_written_at_run_time_syncs_every_start(
        store: Database, conn: psycopg.Connection) -> None:
    # The sync leaves that row alone, so the rows never come to what the configuration
    # says: the record describes the configuration, not what happened to be stored.
    store.schedules.sync([row("taken")], deployment="proj")
    conn.execute("UPDATE awa_beat.schedules SET owner = 'runtime' WHERE name = 'taken'")
    sync_whole(store, [row("s0"), row("taken", queue="other")], "d1")
    assert not store.schedules.config_in_force("proj", "d1")



def test_a_number_written_differently_is_written_as_configured(
        store: Database, conn: psycopg.Connection) -> None:
    # 30 and 30.0 are equal as jsonb, not as the text the fingerprint hashes: a sync that
    # kept 30 while the configuration says 30.0 would leave a record that never holds.
    sync_whole(store, [row("s0", args={"x": 30}), row("s1")], "d1")
    sync_whole(store, [row("s0", args={"x": 30.0}), row("s1")], "d2")
    assert conn.execute("SELECT args::text FROM awa.cron_jobs WHERE name = 's0'"
                        ).fetchone() == ('{"x": 30.0}',)
    assert store.schedules.config_in_force("proj", "d2")

def specs(**over: Any) -> list[ScheduleSpec]:
    return specs_from_beat_schedule({
        f"job-{i}": {"task": "app.tasks.tick", "schedule": crontab(minute=str(i)),
                     "args": (i,), "options": over} for i in range(3)})


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every sync statement a beat sends."""
    sent: list[str] = []
    real = ScheduleStore.sync

    def sync(self: ScheduleStore, batch: Any, **kw: Any) -> Any:
        sent.append("sync")
        return real(self, batch, **kw)

    monkeypatch.setattr(ScheduleStore, "sync", sync)
    return sent


def started(db_url: str, configured: list[ScheduleSpec]) -> None:
    BeatNode(PROJ, configured, database_url=db_url).open().close()


def test_a_beat_restarted_on_the_same_configuration_sends_none_of_it(
        db_url: str, conn: psycopg.Connection, calls: list[str],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="awa_beat.node")
    started(db_url, specs())
    assert calls == ["sync"] and "3 new" in caplog.text
    stored = conn.execute("SELECT name, cron_expr, updated_at FROM awa.cron_jobs"
                          " ORDER BY name").fetchall()
    caplog.clear()
    started(db_url, specs())
    assert calls == ["sync"]  # none more
    assert "3 schedule(s) of beat_schedule are stored as they are configured" in caplog.text
    assert conn.execute("SELECT name, cron_expr, updated_at FROM awa.cron_jobs"
                        " ORDER BY name").fetchall() == stored
    # A change by hand is undone by the next start, as it was before there was a record.
    conn.execute("UPDATE awa.cron_jobs SET cron_expr = '59 * * * *' WHERE name = 'job-1'")
    started(db_url, specs())
    assert calls == ["sync", "sync"]
    assert conn.execute("SELECT cron_expr FROM awa.cron_jobs WHERE name = 'job-1'"
                        ).fetchone() == ("1 * * * *",)
    # So is a change to the configuration.
    started(db_url, specs(queue="other"))
    assert calls == ["sync", "sync", "sync"]
    assert conn.execute("SELECT DISTINCT metadata #>> '{celery,options,queue}'"
                        " FROM awa.cron_jobs").fetchall() == [("other",)]


def test_an_orphan_is_warned_of_at_every_start(db_url: str, calls: list[str],
                                               caplog: pytest.LogCaptureFixture) -> None:
    started(db_url, specs())
    fewer = specs()[:2]
    for _ in range(2):
        caplog.clear()
        started(db_url, fewer)
        assert "schedule 'job-2' is stored (deployment 'proj') but no longer" in caplog.text
    assert calls == ["sync"] * 3  # the orphan is a row the configuration does not have
