"""awa_beat.Schedules against a real database: validation, ownership, cursors,
transactions, bulk adds, and a running beat that acts on each change at once."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from celery.schedules import crontab
from click.testing import CliRunner

from awa_beat import Schedules
from awa_beat._celery.scheduler import Scheduler
from awa_beat._cli import main
from awa_beat._config import Settings
from awa_beat._db.database import Database
from awa_beat._ops.operations import Operations
from awa_beat._schedules.fire_times import parse_iso
from awa_beat._schedules.spec import specs_from_beat_schedule
from awa_beat._testing import wait_for
from awa_beat.errors import (
    ConfigError,
    NotFound,
    ScheduleExists,
    ScheduleOwned,
    ValidationError,
)
from tests.apps import celery_app

pytestmark = pytest.mark.integration
UTC = timezone.utc
PROJ = Settings(deployment="proj", default_timezone="Europe/Paris", dispatch="awa")


@pytest.fixture
def schedules(db_url: str) -> Iterator[Schedules]:
    with Schedules(db_url, settings=PROJ) as s:
        yield s


def configured(db_url: str, **entries: Any) -> None:
    """Register ``entries`` as deployment proj's beat_schedule does."""
    specs = specs_from_beat_schedule(entries)
    with Database(db_url) as store:
        store.schedules.sync([s.row("proj") for s in specs], deployment="proj")


def stored(conn: psycopg.Connection, name: str) -> dict[str, Any] | None:
    cur = conn.cursor(row_factory=psycopg.rows.dict_row)
    return cur.execute("SELECT c.*, s.owner, s.deployment FROM awa.cron_jobs c "
                       "LEFT JOIN awa_beat.schedules s USING (name) WHERE name = %s",
                       (name,)).fetchone()


def test_add_reads_the_entry_as_beat_does_with_the_apps_settings(schedules: Schedules,
                                                                  conn) -> None:
    spec = schedules.add("tenant-42-report", task="reports.build",
                         schedule=crontab(hour=7, minute=30), kwargs={"tenant": 42},
                         options={"queue": "reports", "expires": 60})
    assert spec.cron_expr == "30 7 * * *" and spec.timezone == "Europe/Paris"
    row = stored(conn, "tenant-42-report")
    assert row is not None
    assert (row["owner"], row["deployment"], row["timezone"]) == ("runtime", "proj",
                                                                   "Europe/Paris")
    assert row["args"] == {"args": [], "kwargs": {"tenant": 42}}
    assert row["metadata"]["celery"] == {"options": {"queue": "reports", "expires": 60},
                                         "dispatch": "awa", "deployment": "proj"}
    # The cursor is the second of the write: nothing from before it fires.
    assert datetime.now(UTC) - row["last_enqueued_at"] < timedelta(seconds=5)
    view = schedules.get("tenant-42-report")
    assert view.owner == "runtime" and view.owner_text == "runtime (via proj)"
    assert view.next_fire is not None and view.next_fire.astimezone(UTC).minute == 30
    assert [v.name for v in schedules.list("tenant-%")] == ["tenant-42-report"]


def test_a_bad_entry_raises_the_same_validation_error_as_beat_schedule_and_writes_nothing(
        schedules: Schedules, conn) -> None:
    entry = {"task": "", "schedule": "0 0 30 2 *",
             "options": {"awa_beat": {"priority": 9}}}
    with pytest.raises(ValidationError) as from_config:
        specs_from_beat_schedule({"bad": entry}, default_timezone="Europe/Paris")
    with pytest.raises(ValidationError) as from_api:
        schedules.add("bad", **entry)
    assert from_api.value.problems == from_config.value.problems
    assert len(from_api.value.problems) == 3
    with pytest.raises(ValidationError, match="given more than once"):
        schedules.add_many([("a", {"task": "t", "schedule": 5}),
                            ("a", {"task": "t", "schedule": 6})])
    assert conn.execute("SELECT count(*) FROM awa.cron_jobs").fetchone()[0] == 0


def test_an_existing_name_is_refused_unless_replace(schedules: Schedules, conn) -> None:
    schedules.add("r", task="t.one", schedule=60)
    with pytest.raises(ScheduleExists, match="replace=True"):
        schedules.add("r", task="t.two", schedule=60)
    with pytest.raises(ScheduleExists):  # all or none: "new" is not written either
        schedules.add_many({"new": {"task": "t", "schedule": 5},
                            "r": {"task": "t", "schedule": 5}})
    assert stored(conn, "new") is None and stored(conn, "r")["kind"] == "t.one"
    schedules.add("r", task="t.two", schedule=60, replace=True)
    assert stored(conn, "r")["kind"] == "t.two"


def test_a_beat_schedule_row_is_refused_unless_forced_then_beat_leaves_it_alone(
        db_url: str, schedules: Schedules, conn) -> None:
    configured(db_url, report={"task": "t.report", "schedule": crontab(minute=0, hour=9)},
               gone={"task": "t.gone", "schedule": crontab(minute=0, hour=9)})
    with pytest.raises(ScheduleOwned, match="beat_schedule of deployment proj"):
        schedules.update("report", schedule=crontab(minute=0, hour=10))
    with pytest.raises(ScheduleOwned):
        schedules.add("report", task="t.x", schedule=5, replace=True)
    conn.execute("INSERT INTO awa.cron_jobs (name, cron_expr, kind) "
                 "VALUES ('awa', '* * * * *', 'k')")
    with pytest.raises(ScheduleOwned, match="not written by awa-beat"):
        schedules.update("awa", kwargs={"a": 1})
    assert stored(conn, "report")["cron_expr"] == "0 9 * * *"

    schedules.update("report", schedule=crontab(minute=0, hour=10), force=True)
    assert (stored(conn, "report")["owner"], stored(conn, "report")["cron_expr"]) == (
        "runtime", "0 10 * * *")
    # beat's sync leaves a runtime row alone, and never calls it an orphan.
    configured(db_url, report={"task": "t.report", "schedule": crontab(minute=0, hour=9)})
    assert stored(conn, "report")["cron_expr"] == "0 10 * * *"
    with Operations.open(db_url, deployment="proj", configured=lambda: []) as ops:
        assert ops.orphans() == ["gone"]
        assert ops.store.schedules.runtime_owned_names(["report", "gone"]) == ["report"]
    listed = CliRunner().invoke(main, ["list", "--database-url", db_url]).output
    assert "OWNER" in listed and "runtime (via proj)" in listed


def test_beat_reports_a_runtime_row_of_its_beat_schedule_at_start_up(db_url: str,
                                                                      caplog) -> None:
    with Schedules(db_url, settings=PROJ) as s:
        s.add("report", task="t.runtime", schedule=crontab(minute=0, hour=10))
    app = celery_app("proj", db_url=db_url, beat_schedule={
        "report": {"task": "t.config", "schedule": crontab(minute=0, hour=9)}})
    with caplog.at_level(logging.WARNING, logger="awa_beat"):
        Scheduler(app=app).close()
    conflicts = [r for r in caplog.records if getattr(r, "action", None) == "schedule.conflict"]
    assert [r.schedule for r in conflicts] == ["report"]  # type: ignore[attr-defined]
    with Schedules(db_url) as s:
        assert s.get("report").row.kind == "t.runtime"


def test_a_calendar_change_never_fires_a_time_from_before_it(schedules: Schedules,
                                                            conn) -> None:
    schedules.add("daily", task="t", schedule=crontab(hour=7, minute=0))
    old = datetime.now(UTC).replace(microsecond=0) - timedelta(days=3)
    conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s WHERE name = 'daily'", (old,))
    schedules.update("daily", kwargs={"full": True})  # not the calendar: cursor stays
    assert stored(conn, "daily")["last_enqueued_at"] == old
    before = datetime.now(UTC).replace(microsecond=0)
    schedules.update("daily", options={"awa_beat": {"timezone": "Asia/Tokyo"}})
    row = stored(conn, "daily")
    assert row["timezone"] == "Asia/Tokyo" and row["args"]["kwargs"] == {"full": True}
    assert row["last_enqueued_at"] >= before  # (old cursor, change] never fires
    conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s WHERE name = 'daily'", (old,))
    schedules.update("daily", schedule="0 8 * * *")
    assert stored(conn, "daily")["last_enqueued_at"] >= before
    with pytest.raises(NotFound):
        schedules.update("nope", kwargs={})


def test_writes_join_the_callers_transaction(db_url: str, schedules: Schedules) -> None:
    with psycopg.connect(db_url) as other:  # not autocommit: as Django's inside atomic()
        other.execute("CREATE TABLE tenants (id int)")
        other.commit()
        other.execute("INSERT INTO tenants VALUES (1)")
        schedules.add("t1", task="t", schedule=60, conn=other)
        with pytest.raises(ScheduleExists):  # a refusal leaves the transaction usable
            schedules.add("t1", task="t", schedule=60, conn=other)
        schedules.pause("t1", conn=other)
        with pytest.raises(NotFound):
            schedules.get("t1")  # not committed yet
        other.rollback()
        with pytest.raises(NotFound):
            schedules.get("t1")
        other.execute("INSERT INTO tenants VALUES (2)")
        schedules.add_many({"t2": {"task": "t", "schedule": 60}}, conn=other)
        other.commit()
    assert schedules.get("t2").owner == "runtime"
    with psycopg.connect(db_url, autocommit=True) as auto:
        with auto.transaction():
            schedules.add("t3", task="t", schedule=60, conn=auto)
            schedules.remove("t2", conn=auto)
        with pytest.raises(RuntimeError), auto.transaction():
            schedules.add("t4", task="t", schedule=60, conn=auto)
            raise RuntimeError("the caller's own failure")
        schedules.add("t5", task="t", schedule=60, conn=auto)  # outside any: commits
    assert [v.name for v in schedules.list()] == ["t3", "t5"]


def test_pause_resume_trigger_remove(schedules: Schedules, conn) -> None:
    schedules.add("r", task="t", schedule=60)
    schedules.pause("r", "oncall")
    assert schedules.get("r").row.paused_by == "oncall"
    schedules.resume("r")
    job = schedules.trigger("r")
    assert conn.execute("SELECT metadata ->> 'cron_name' FROM awa.jobs WHERE id = %s",
                        (job,)).fetchone()[0] == "r"
    schedules.remove("r")
    with pytest.raises(NotFound):
        schedules.remove("r")


def test_add_many_writes_thousands_in_one_go(schedules: Schedules, conn) -> None:
    entries = {f"tenant-{i}": {"task": "t.report", "schedule": crontab(minute=0, hour=i % 24),
                               "kwargs": {"tenant": i}} for i in range(2000)}
    assert len(schedules.add_many(entries)) == 2000
    assert conn.execute("SELECT count(*) FROM awa_beat.schedules WHERE owner = 'runtime'"
                        ).fetchone()[0] == 2000
    assert stored(conn, "tenant-25")["cron_expr"] == "0 1 * * *"


def test_celery_dispatch_follows_the_layout_and_the_deployment(db_url: str, layout: str,
                                                                conn) -> None:
    app = celery_app("proj", db_url=db_url, awa_beat_dispatch="celery")
    with Schedules.from_app(app) as s:
        if layout == "awa":
            with pytest.raises(ConfigError, match="Celery dispatch needs"):
                s.add("c", task="t", schedule=5)
            return
        s.add("c", task="t", schedule=5)
    # The bridge of deployment proj publishes it, as it would a beat_schedule entry.
    assert stored(conn, "c")["metadata"]["celery"]["deployment"] == "proj"
    assert stored(conn, "c")["metadata"]["celery"]["dispatch"] == "celery"


# -- a running beat -----------------------------------------------------------------------------


class RunningBeat:
    """``celery beat``'s Scheduler on the real clock, ticking in a thread, as it runs."""

    def __init__(self, app: Any) -> None:
        self.scheduler = Scheduler(app=app)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._stop.wait(min(self.scheduler.tick(), 0.2))

    def __enter__(self) -> RunningBeat:
        self._thread.start()
        wait_for(lambda: self.scheduler.node.leadership.is_leader, 10, "beat to lead")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.scheduler.close()


def fires(conn: psycopg.Connection, name: str) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT metadata ->> 'cron_fire_time' FROM awa.jobs "
        "WHERE metadata ->> 'cron_name' = %s AND NOT metadata ? 'triggered_manually' "
        "ORDER BY id", (name,))]


def test_a_running_beat_acts_on_each_change_within_a_second(db_url: str, layout: str,
                                                             conn) -> None:
    # Notified where the schema sends notifications; polled every second where Awa owns it.
    within = 1.5 if layout == "standalone" else 2.5
    app = celery_app("proj", db_url=db_url, awa_beat_election_interval=0.1,
                     beat_schedule={"yearly": {"task": "t", "schedule": "0 0 1 1 *"}})
    with RunningBeat(app), Schedules.from_app(app) as s:
        s.add("every-second", task="t.tick", schedule=1)
        wait_for(lambda: fires(conn, "every-second"), within, "the first fire")

        s.update("every-second", task="t.tock")
        wait_for(lambda: conn.execute(
            "SELECT kind FROM awa.jobs WHERE metadata ->> 'cron_name' = 'every-second' "
            "ORDER BY id DESC LIMIT 1").fetchone()[0] == "t.tock", within + 1, "the change")

        s.pause("every-second")
        paused = len(fires(conn, "every-second"))
        s.resume("every-second")
        wait_for(lambda: len(fires(conn, "every-second")) > paused, within + 1, "the resume")

        s.remove("every-second")
        removed_at = datetime.now(UTC).replace(microsecond=0)
        last = len(fires(conn, "every-second"))
        s.add("other", task="t.other", schedule=1)  # a later change, to know beat saw both
        wait_for(lambda: fires(conn, "other"), within, "the fire after the removal")
        late = [t for t in fires(conn, "every-second")[last:]
                if parse_iso(t) > removed_at + timedelta(seconds=1)]
        assert late == []
    rows = json.loads(CliRunner().invoke(main, ["list", "--json", "--database-url",
                                                db_url]).output)
    assert {r["name"]: r["owner"] for r in rows} == {"other": "runtime", "yearly": "config"}
