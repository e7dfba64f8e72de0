"""What goes wrong in production: outages, bad rows, bad options, tight privileges."""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from celery import Celery

from awa_beat._bridge import Bridge
from awa_beat._celery.scheduler import Scheduler, configured_entries
from awa_beat._config import Settings
from awa_beat._db.database import Database, connect
from awa_beat._db.lock import Leadership
from awa_beat._db.records import FireRequest
from awa_beat._engine.engine import Engine
from awa_beat._schedules.spec import spec_from_entry
from awa_beat._testing import FakeClock as Clock
from awa_beat.errors import StoreError
from tests.apps import celery_app

pytestmark = pytest.mark.integration
UTC = timezone.utc



def test_an_unreachable_database_is_a_failed_election_not_a_crash() -> None:
    leadership = Leadership("postgresql://postgres@127.0.0.1:1/none")
    assert leadership.try_acquire() is False
    assert not leadership.is_leader


def test_no_pooled_connection_is_a_store_error(db_url: str) -> None:
    with Database(db_url, max_size=1, timeout=0.2) as store:
        held = threading.Event()
        release = threading.Event()

        def hold() -> None:
            with store._conn():
                held.set()
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        held.wait(10)
        try:
            with pytest.raises(StoreError, match="no database connection"):
                store.schedules.list_all()
        finally:
            release.set()
            holder.join()


def _row(name: str, **over: Any) -> dict[str, Any]:
    row = spec_from_entry(name, {"task": "t.x", "schedule": "* * * * *"}).row("d")
    row.update(over)
    return row


def test_a_failed_fire_is_retried_within_a_second(db_url: str, monkeypatch) -> None:
    t0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    with Database(db_url) as store:
        store.schedules.sync([_row("a")], deployment="d")
        c = connect(db_url)
        c.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (t0,))
        clock = Clock(t0 + timedelta(minutes=1))
        engine = Engine(store.evaluator, clock=clock, refresh_interval=3600)
        real_fire = store.evaluator.fire
        calls = []

        def flaky(requests: Any) -> Any:
            calls.append(len(requests))
            if len(calls) == 1:
                raise StoreError("firing failed: server closed the connection unexpectedly")
            return real_fire(requests)

        monkeypatch.setattr(store.evaluator, "fire", flaky)
        with pytest.raises(StoreError):
            engine.run_pass()
        assert engine.wait() == pytest.approx(1.0)  # back in a second, not at the next load
        clock.now += timedelta(seconds=1)
        engine.run_pass()
        assert c.execute("SELECT count(*) FROM awa.jobs").fetchone()[0] == 1
        c.close()


def test_a_row_whose_job_breaks_awas_limits_does_not_spin(db_url: str, caplog) -> None:
    t0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    with Database(db_url) as store:
        store.schedules.sync([_row("good"), _row("tags", tags=[f"t{i}" for i in range(21)])],
                             deployment="d")
        c = connect(db_url)
        c.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (t0,))
        c.close()
        engine = Engine(store.evaluator, clock=Clock(t0 + timedelta(minutes=1, seconds=30)),
                        refresh_interval=3600)
        with caplog.at_level(logging.ERROR, logger="awa_beat.engine"):
            engine.run_pass()
            engine.run_pass()
        assert engine.wait() == pytest.approx(30.0)
        invalid = [r.schedule for r in caplog.records
                   if getattr(r, "action", None) == "schedule.invalid"]
        assert invalid == ["tags"]


@pytest.mark.parametrize("layout", ["standalone"])
def test_bridge_ignores_publish_retry_options_and_fails_only_bad_jobs(db_url: str,
                                                                     tmp_path) -> None:
    folder = tmp_path / "broker"
    folder.mkdir()
    app = Celery("r", set_as_current=False)
    app.conf.update(broker_url="filesystem://", result_expires=None, broker_transport_options={
        "data_folder_in": str(folder), "data_folder_out": str(folder),
        "control_folder": str(folder / "control")})
    t0 = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=2)
    with Database(db_url) as store:
        rows = [spec_from_entry(name, {"task": "t.x", "schedule": 60, "options": opts}).row("d")
                for name, opts in [
                    ("retry", {"retry": True, "retry_policy": {"max_retries": 1},
                               "awa_beat": {"dispatch": "celery"}}),
                    ("bad", {"serializer": "no-such-serializer",
                             "awa_beat": {"dispatch": "celery"}})]]
        store.schedules.sync(rows, deployment="d")
        c = connect(db_url)
        c.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (t0,))
        store.evaluator.fire([FireRequest(n, t0, [t0 + timedelta(minutes=1)])
                              for n in ("retry", "bad")])
        bridge = Bridge(app, store.outbox, deployment="d")
        assert bridge.drain() == 1
        bridge.close()
        states = dict(c.execute("SELECT metadata ->> 'cron_name', state::text FROM awa.jobs"))
        c.close()
    assert states == {"retry": "completed", "bad": "failed"}


def test_a_malformed_url_in_the_celery_config_never_shows_the_password(capsys) -> None:
    app = celery_app("p", db_url="postgresql://bob:s3cr%zzet@db.example/x")
    with pytest.raises(SystemExit) as info:
        Scheduler(app=app, lazy=True)
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "malformed" in err and "s3cr" not in err


def test_awas_own_lock_key_is_refused() -> None:
    from awa_beat.errors import ConfigError

    with pytest.raises(ConfigError, match="Awa's own lock key"):
        Settings.from_app({"awa_beat_lock_key": 4708303813012965710}, environ={})


def test_beat_starts_with_a_role_that_cannot_create_anything(db_url: str, conn) -> None:
    role = f"awabeat_dml_{uuid.uuid4().hex[:8]}"
    conn.execute(f"CREATE ROLE {role} LOGIN")
    try:
        conn.execute(f"GRANT USAGE ON SCHEMA awa, awa_beat TO {role}")
        conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA awa, "
                     f"awa_beat TO {role}")
        conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA awa TO {role}")
        conn.execute(f"REVOKE CREATE ON DATABASE \"{conn.info.dbname}\" FROM PUBLIC")
        url = db_url.replace("postgres@", f"{role}@")
        scheduler = Scheduler(app=celery_app(
            "dml", db_url=url, beat_schedule={"t": {"task": "t", "schedule": 5}}))
        scheduler.close()
        assert conn.execute("SELECT count(*) FROM awa.cron_jobs").fetchone()[0] == 1
    finally:
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE {role}")


def test_backend_cleanup_is_added_for_celery_dispatch_only_and_per_deployment() -> None:
    app = celery_app("proj", beat_schedule={"a": {"task": "t", "schedule": 5}},
                     result_expires=timedelta(days=1))
    assert set(configured_entries(app, Settings(dispatch=None, deployment="proj"))) == {"a"}
    assert set(configured_entries(app, Settings(dispatch="celery", deployment="proj"))) == {
        "a", "proj.celery.backend_cleanup"}


def test_a_listening_leader_wakes_on_notify_and_loses_the_lead_with_its_session(
        db_url: str, conn) -> None:
    leadership = Leadership(db_url, lock_key=7_000_001)
    try:
        assert leadership.try_acquire() and leadership.listen("awa_beat_test")
        with conn.transaction():  # delivered together, at commit
            conn.execute("NOTIFY awa_beat_test, 'cron_jobs'")
            conn.execute("NOTIFY awa_beat_test, 'jobs'")
        assert leadership.wait(5) == {"cron_jobs", "jobs"}
        assert leadership.wait(0) == set()
        pid = leadership._conn.info.backend_pid

        def terminate() -> None:
            with connect(db_url) as other:
                other.execute("SELECT pg_terminate_backend(%s)", (pid,))

        timer = threading.Timer(0.3, terminate)
        timer.start()
        assert leadership.wait(30) == set()  # ended by the lost session, not the timeout
        timer.join()
        assert not leadership.is_leader and not leadership.listening
    finally:
        leadership.resign()


def test_beat_started_while_its_database_is_down_retries_then_exits_1(capsys, caplog) -> None:

    app = celery_app("down", db_url="postgresql://postgres@127.0.0.1:1/nothing",
                     awa_beat_startup_timeout=2)
    with caplog.at_level(logging.WARNING, logger="awa_beat"), \
            pytest.raises(SystemExit) as info:
        Scheduler(app=app)
    assert info.value.code == 1
    retries = [r for r in caplog.records if getattr(r, "action", None) == "startup.retry"]
    assert [r.attempt for r in retries] == [1, 2]
    err = capsys.readouterr().err
    assert "cannot start" in err and "Traceback" not in err
