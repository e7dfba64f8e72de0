"""awa_beat.Scheduler inside a real Celery app, in-process, with an injected clock."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import psycopg
import pytest
from celery import Celery
from celery.schedules import crontab

from awa_beat._celery.scheduler import Scheduler
from awa_beat._db.database import connect
from awa_beat._testing import FakeClock as Clock
from tests.apps import celery_app

pytestmark = pytest.mark.integration
UTC = timezone.utc



def make_app(db_url: str, beat_schedule: dict[str, Any], **conf: Any) -> Celery:
    return celery_app(db_url=db_url, beat_schedule=beat_schedule,
                      **{"awa_beat_election_interval": 0.05, **conf})


def backend_count(conn, dbname: str) -> int:
    return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s",
                        (dbname,)).fetchone()[0]


def jobs(conn) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in conn.execute(
        "SELECT metadata ->> 'cron_name', metadata ->> 'cron_fire_time' FROM awa.jobs"
        " ORDER BY id")]


def test_lazy_instance_opens_no_connection(db_url: str, conn) -> None:
    before = backend_count(conn, conn.info.dbname)
    scheduler = Scheduler(app=make_app(db_url, {"t": {"task": "t", "schedule": 5}}), lazy=True,
                          schedule_filename="ignored", max_interval=300)
    assert backend_count(conn, conn.info.dbname) == before
    assert "awa-beat" in scheduler.info
    scheduler.close()


def test_scheduler_syncs_elects_and_fires_with_injected_clock(db_url: str, conn) -> None:
    start = datetime.now(UTC).replace(microsecond=0)
    clock = Clock(start)
    app = make_app(db_url, {
        "every-minute": {"task": "t.minute", "schedule": crontab(), "args": [1]},
        "ny-daily": {"task": "t.daily", "schedule": crontab(minute=30, hour=2),
                     "options": {"awa_beat": {"timezone": "America/New_York",
                                              "missed_fire_policy": "catch_up"}}},
        "every-7s": {"task": "t.seven", "schedule": 7,
                     "options": {"awa_beat": {"missed_fire_policy": "catch_up"}}},
    })
    scheduler = Scheduler(app=app, clock=clock)
    try:
        assert {r[0] for r in conn.execute("SELECT name FROM awa.cron_jobs")} == {
            "every-minute", "ny-daily", "every-7s"}
        assert scheduler.tick() >= 0  # wins the election and runs a first pass
        assert scheduler.node.leadership.is_leader
        # Move the cursors to a known past and let the clock cross a DST change.
        conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s, updated_at = now()",
                     (datetime(2025, 3, 8, 12, tzinfo=UTC),))
        clock.now = datetime(2025, 3, 10, 12, 0, 0, tzinfo=UTC)
        scheduler.node.engine.load()
        scheduler.tick()
        fired = jobs(conn)
        assert ("ny-daily", "2025-03-09 07:00:00+00") in fired  # 02:30 skipped -> 03:00 EDT
        assert ("ny-daily", "2025-03-10 06:30:00+00") in fired
        assert [f for n, f in fired if n == "every-minute"] == ["2025-03-10 12:00:00+00"]
        sevens = [f for n, f in fired if n == "every-7s"]
        assert len(sevens) == 1000  # the catch-up limit per pass; the rest next passes
        scheduler.tick()
        assert len([1 for n, _ in jobs(conn) if n == "every-7s"]) == 2000
    finally:
        scheduler.close()
    assert not scheduler.node.leadership.is_leader


def test_bad_schedule_exits_with_every_problem_and_writes_nothing(db_url: str, conn,
                                                                    capsys) -> None:
    app = make_app(db_url, {
        "good": {"task": "t", "schedule": 5},
        "bad": {"task": "t", "schedule": crontab(), "options": {"awa_beat": {"priority": 7}}},
        "worse": {"task": "t", "schedule": "every day"},
    })
    with pytest.raises(SystemExit) as info:
        Scheduler(app=app)
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "entry 'bad', field 'options.awa_beat.priority'" in err
    assert "entry 'worse', field 'schedule'" in err
    assert conn.execute("SELECT count(*) FROM awa.cron_jobs").fetchone()[0] == 0


def test_two_schedulers_only_one_leads_and_close_hands_over(db_url: str) -> None:
    schedule = {"t": {"task": "t", "schedule": 5}}
    first = Scheduler(app=make_app(db_url, schedule))
    second = Scheduler(app=make_app(db_url, schedule))
    try:
        first.tick()
        second.tick()
        assert first.node.leadership.is_leader and not second.node.leadership.is_leader
        first.close()
        deadline = 50
        while not second.node.leadership.is_leader and deadline:
            second.node.timers.election.expire()
            second.tick()
            deadline -= 1
        assert second.node.leadership.is_leader
    finally:
        first.close()
        second.close()


def test_orphans_are_reported_not_deleted(db_url: str, caplog) -> None:
    Scheduler(app=make_app(db_url, {"old": {"task": "t", "schedule": 5},
                                    "kept": {"task": "t", "schedule": 5}})).close()
    with caplog.at_level("WARNING", logger="awa_beat"):
        Scheduler(app=make_app(db_url, {"kept": {"task": "t", "schedule": 5}})).close()
    orphans = [r for r in caplog.records if getattr(r, "action", None) == "schedule.orphan"]
    assert [r.schedule for r in orphans] == ["old"]
    assert "awa-beat remove old" in orphans[0].getMessage()
    c = connect(db_url)
    assert {r[0] for r in c.execute("SELECT name FROM awa.cron_jobs")} == {"old", "kept"}
    c.close()


def test_the_leader_reasserts_the_configuration_in_slices(db_url: str, conn, monkeypatch) -> None:
    import awa_beat._beat.configuration as cs

    monkeypatch.setattr(cs, "RESYNC_SLICE", 2)
    schedule = {f"t{i}": {"task": "t", "schedule": 3600} for i in range(5)}
    scheduler = Scheduler(app=make_app(db_url, schedule))
    try:
        scheduler.tick()
        assert scheduler.node.leadership.is_leader
        conn.execute("DELETE FROM awa.cron_jobs WHERE name IN ('t1', 't4')")
        conn.execute("UPDATE awa.cron_jobs SET cron_expr = '0 0 1 1 *' WHERE name = 't2'")
        scheduler.node.timers.sync.expire()
        waits = [scheduler.tick() for _ in range(3)]  # three slices of at most two rows
        assert waits[:2] == [0.0, 0.0]  # no sleeping while slices remain
        rows = dict(conn.execute("SELECT name, cron_expr FROM awa.cron_jobs"))
    finally:
        scheduler.close()
    assert rows == {f"t{i}": "0 0 * * * *" for i in range(5)}


def test_a_tick_after_close_does_nothing(db_url: str) -> None:
    scheduler = Scheduler(app=make_app(db_url, {"t": {"task": "t", "schedule": 5}}))
    scheduler.tick()
    scheduler.close()
    assert scheduler.tick() == scheduler.max_interval
    scheduler.close()  # idempotent


YEARLY = {"yearly": {"task": "t", "schedule": crontab(minute=0, hour=0, day_of_month=1,
                                                      month_of_year=1)}}


def _lead(scheduler: Scheduler) -> None:
    """Win the election, then the tick that reports the new leader's heartbeat."""
    scheduler.tick()
    assert scheduler.node.leadership.is_leader
    scheduler.tick()


def test_start_up_and_election_open_two_connections_in_all(db_url: str,
                                                           monkeypatch) -> None:
    # The lock's session reads the layout, and a pooled connection checks that session
    # locks hold: each connection opened for one of those alone costs start-up and
    # failover a few milliseconds.
    opened: list[str | None] = []
    real = psycopg.Connection.connect.__func__

    def counted(cls: type, *args: Any, **kwargs: Any) -> Any:
        opened.append(kwargs.get("application_name"))
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "connect", classmethod(counted))
    monkeypatch.setattr(psycopg, "connect", psycopg.Connection.connect)
    scheduler = Scheduler(app=make_app(db_url, YEARLY))
    _lead(scheduler)
    scheduler.close()
    assert len(opened) == 2, opened
    assert f"awa-beat leader {os.getpid()}" in opened


def test_an_idle_leader_sleeps_until_a_change_wakes_it(db_url: str, layout: str,
                                                        monkeypatch) -> None:
    import threading

    # Pings every 2 s, so that no tick here sleeps longer than that.
    scheduler = Scheduler(app=make_app(db_url, YEARLY, awa_beat_ping_interval=2))
    try:
        _lead(scheduler)
        if layout == "awa":
            # Awa's tables carry no trigger of ours: the leader polls every second.
            assert not scheduler.node.leadership.listening
            assert 0 <= scheduler.tick() <= 1.0
            return
        assert scheduler.node.leadership.listening
        refreshes = _spy_refreshes(monkeypatch, scheduler)
        woken_by = []
        real_wait = scheduler.node.leadership.wait
        monkeypatch.setattr(scheduler.node.leadership, "wait",
                            lambda t: woken_by.append(real_wait(t)) or woken_by[-1])
        changed = threading.Event()

        def pause_elsewhere() -> None:
            with connect(db_url) as other:
                other.execute("UPDATE awa.cron_jobs SET paused_at = now(), "
                              "paused_by = 'test', updated_at = now() WHERE name = 'yearly'")
            changed.set()

        timer = threading.Timer(0.5, pause_elsewhere)
        timer.start()
        assert scheduler.tick() == 0.0
        timer.join()
        # It slept through the half second without polling, until the notification.
        assert changed.is_set() and refreshes == []
        assert woken_by == [{"cron_jobs "}]  # the table, and no origin: not beat's
        scheduler.tick()
        assert refreshes == [1]
        assert scheduler.node.engine.rows()[0].paused_at is not None
    finally:
        scheduler.close()


def test_an_injected_clock_never_blocks_a_tick(db_url: str, layout: str) -> None:
    scheduler = Scheduler(app=make_app(db_url, YEARLY),
                          clock=Clock(datetime.now(UTC).replace(microsecond=0)))
    try:
        _lead(scheduler)
        assert not scheduler.node.leadership.listening
        assert scheduler.tick() > 0  # Celery (here: the test) does the sleeping
    finally:
        scheduler.close()


def _spy_refreshes(monkeypatch, scheduler: Scheduler) -> list[int]:
    calls: list[int] = []
    real = scheduler.node.store.evaluator.changes
    monkeypatch.setattr(scheduler.node.store.evaluator, "changes",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def test_a_listening_leader_passes_over_its_own_fires(db_url: str, conn, layout: str,
                                                       monkeypatch) -> None:
    if layout == "awa":
        pytest.skip("Awa's tables send no notifications")
    scheduler = Scheduler(app=make_app(db_url, {"t": {"task": "t", "schedule": 1}},
                                       awa_beat_ping_interval=2))
    try:
        _lead(scheduler)
        refreshes = _spy_refreshes(monkeypatch, scheduler)
        before = len(jobs(conn))
        while len(jobs(conn)) < before + 2:
            scheduler.tick()
        # Each fire notified, but the notifications were beat's own: nothing to re-read.
        assert refreshes == []
    finally:
        scheduler.close()


def test_a_resync_that_changed_rows_is_re_read(db_url: str, conn, layout: str,
                                              monkeypatch) -> None:
    scheduler = Scheduler(app=make_app(db_url, YEARLY, awa_beat_ping_interval=2))
    try:
        _lead(scheduler)
        conn.execute("UPDATE awa.cron_jobs SET cron_expr = '0 0 2 2 *', updated_at = now()")
        scheduler.node.engine.refresh()  # the leader now holds the edited row
        assert scheduler.node.engine.rows()[0].cron_expr == "0 0 2 2 *"
        scheduler.node.timers.sync.expire()
        scheduler.tick()  # re-asserts the configuration: a write of its own
        assert scheduler.node.engine.rows()[0].cron_expr == "0 0 1 1 *"
    finally:
        scheduler.close()


@contextlib.contextmanager
def celery_stop_handler(service: Any) -> Iterator[None]:
    """Celery beat's own SIGTERM/SIGINT handler for ``service`` (close the scheduler,
    then raise SystemExit), as `celery beat` installs it; the previous handlers after."""
    import signal

    from celery.apps.beat import Beat

    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        Beat(app=service.app).install_sync_handler(service)
        yield
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def test_sigterm_while_beat_waits_for_the_broker_stops_beat(databases, monkeypatch,
                                                            caplog) -> None:
    """Celery's own SIGTERM handler, run while the bridge (on its thread) waits for
    RabbitMQ's confirms: beat stops at once, resigned and closed, and the bridge takes
    nothing for a broker outage."""
    import signal
    import threading

    import amqp.transport
    from celery import beat

    from tests.brokers import RABBITMQ_URL, answers

    if not answers(5672):
        pytest.skip("RabbitMQ does not answer on this machine")
    queue = f"sigterm-{os.getpid()}-{id(caplog)}"
    app = make_app(databases.fresh("standalone"), {"t": {"task": "t", "schedule": 1}},
                   broker_url=RABBITMQ_URL, awa_beat_dispatch="celery",
                   task_default_queue=queue)
    service = beat.Service(app, scheduler_cls=Scheduler)
    scheduler = service.scheduler
    signalled: list[bool] = []
    read_frame = amqp.transport._AbstractTransport.read_frame

    def signal_mid_read(transport: Any, *args: Any, **kwargs: Any) -> Any:
        publisher = scheduler.node.outbox.bridge._publisher
        if not signalled and publisher._tag > publisher._confirmed:  # confirms awaited
            signalled.append(True)
            os.kill(os.getpid(), signal.SIGTERM)  # its handler runs inside this read
        return read_frame(transport, *args, **kwargs)

    monkeypatch.setattr(amqp.transport._AbstractTransport, "read_frame", signal_mid_read)
    timed_out: list[bool] = []

    def stop_anyway() -> None:  # the bug: beat ran on after the signal, closed
        timed_out.append(True)
        service._is_shutdown.set()

    watchdog = threading.Timer(20, stop_anyway)
    caplog.set_level(logging.INFO)
    try:
        with celery_stop_handler(service):
            try:
                watchdog.start()
                service.start()
            finally:
                watchdog.cancel()
                monkeypatch.undo()  # before the default SIGTERM handler is back
    finally:
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)
    assert signalled, "no publish waited for the broker"
    assert not timed_out, "beat did not stop on SIGTERM"
    assert scheduler.node.store is None and not scheduler.node.leadership.is_leader
    # (Other libraries' handlers of beat_init may log: RedBeat's, once a test imported it.)
    errors = [r.getMessage() for r in caplog.records
              if r.levelno >= logging.ERROR and r.name.startswith("awa_beat")]
    assert errors == [], errors


def test_sigterm_during_start_up_stops_beat_and_starts_nothing_twice(databases,
                                                                     monkeypatch) -> None:
    """Celery's SIGTERM handler reads Service.scheduler, which is not set while the
    scheduler starts, so Celery builds another one inside the handler: that one must stay
    empty (a second start-up runs twice, or waits forever on the first one's migration
    lock), and the interrupted one must leave no session behind."""
    import signal

    from celery import beat
    from psycopg.conninfo import conninfo_to_dict

    from awa_beat._db.database import Database
    from awa_beat._db.schedules import ScheduleStore
    from awa_beat._testing import wait_for

    url = databases.fresh("standalone")
    dbname = conninfo_to_dict(url)["dbname"]
    service = beat.Service(make_app(url, {"t": {"task": "t", "schedule": 5}}),
                           scheduler_cls=Scheduler)
    opened: list[Database] = []
    signalled: list[bool] = []
    real_open, real_sync = Database.open, ScheduleStore.sync

    def counting_open(self: Database, *args: Any, **kwargs: Any) -> Database:
        opened.append(self)
        return real_open(self, *args, **kwargs)

    def signal_in_sync(self: ScheduleStore, *args: Any, **kwargs: Any) -> Any:
        if not signalled:
            signalled.append(True)
            os.kill(os.getpid(), signal.SIGTERM)  # its handler runs inside this sync
        return real_sync(self, *args, **kwargs)

    monkeypatch.setattr(Database, "open", counting_open)
    monkeypatch.setattr(ScheduleStore, "sync", signal_in_sync)
    with celery_stop_handler(service):
        try:
            with pytest.raises(SystemExit):
                service.start()
        finally:
            monkeypatch.undo()  # before the default SIGTERM handler is back
    assert signalled
    assert len(opened) == 1, "the signal handler started a second scheduler"
    with psycopg.connect(databases.server_url, autocommit=True) as admin:
        wait_for(lambda: backend_count(admin, dbname) == 0, 10,
                 "the interrupted start-up's sessions to close")


def test_max_interval_is_honoured_and_a_schedule_file_ignored_each_with_a_log_line(
        db_url: str, caplog) -> None:
    """celery beat --max-interval 0.2 -s FILE: the idle leader, which would otherwise
    wait for its next ping (30 s), steps at least every 0.2 s; the file is not used."""
    with caplog.at_level("INFO", logger="awa_beat"):
        scheduler = Scheduler(app=make_app(db_url, YEARLY), max_interval=0.2,
                              schedule_filename="/var/lib/beat/celerybeat-schedule")
    try:
        _lead(scheduler)
        began = time.monotonic()
        waits = [scheduler.tick() for _ in range(3)]
        elapsed = time.monotonic() - began
    finally:
        scheduler.close()
    assert all(w <= 0.2 for w in waits) and elapsed < 3, (waits, elapsed)
    lines = {r.action: r.getMessage() for r in caplog.records if hasattr(r, "action")}
    assert "--max-interval 0.2 s honoured" in lines["beat.max_interval"]
    assert "-s /var/lib/beat/celerybeat-schedule ignored" in lines["beat.schedule_file"]
    assert scheduler.max_interval == 0.2  # what Celery's banner shows


def test_without_the_options_no_line_and_no_cap(db_url: str, caplog) -> None:
    with caplog.at_level("INFO", logger="awa_beat"):
        scheduler = Scheduler(app=make_app(db_url, YEARLY), max_interval=0,
                              schedule_filename="celerybeat-schedule")
    scheduler.close()
    actions = {getattr(r, "action", None) for r in caplog.records}
    assert not actions & {"beat.max_interval", "beat.schedule_file"}
    assert scheduler.node is not None and scheduler.node.max_wait == float("inf")
