"""The dispatch bridge, in-process, against real brokers and a real PostgreSQL."""

from __future__ import annotations

import logging
import socket
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from celery.beat import ScheduleEntry
from celery.beat import Scheduler as CeleryScheduler
from kombu import Connection

from awa_beat._bridge import Bridge, fire_task_id
from awa_beat._bridge.amqp import coalesced_writes
from awa_beat._bridge.messages import MessageBuilder
from awa_beat._db.database import Database, connect
from awa_beat._db.records import FireRequest
from awa_beat._ops.operations import Operations
from awa_beat._schedules.fire_times import calendar_for, jitter_of
from awa_beat._schedules.spec import spec_from_entry
from awa_beat._testing import actions, wait_for
from awa_beat.errors import StoreError
from tests.apps import celery_app
from tests.brokers import BROKERS, broker_conf

pytestmark = pytest.mark.integration
UTC = timezone.utc
# Recent, so that a relative expiry counted from the fire is still in the future.
T0 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=5)


def fire_text(minutes: int) -> str:
    return (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%d %H:%M:%S+00")


@pytest.fixture(params=BROKERS)
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Celery:
    conf = broker_conf(request.param, tmp_path)
    if conf is None:
        pytest.skip(f"{request.param} does not answer on this machine")
    app = celery_app("bridgetest", task_default_queue=f"q-{uuid.uuid4().hex[:8]}", **conf)
    app.broker_kind = request.param  # type: ignore[attr-defined]
    return app


@pytest.fixture
def standalone(databases) -> Database:
    store = Database(databases.fresh("standalone")).open()
    yield store
    store.close()


def register(store: Database, app: Celery, entries: dict[str, dict[str, Any]],
             deployment: str = "bt") -> None:
    rows = []
    for name, entry in entries.items():
        entry.setdefault("options", {}).setdefault("awa_beat", {})["dispatch"] = "celery"
        rows.append(spec_from_entry(name, entry).row(deployment))
    store.schedules.sync(rows, deployment=deployment)
    c = connect(store.conninfo)
    c.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (T0,))
    c.close()


def fire(store: Database, names: list[str], minutes: int = 1) -> None:
    fires = [T0 + timedelta(minutes=m) for m in range(1, minutes + 1)]
    result = store.evaluator.fire([FireRequest(n, T0, fires) for n in names])
    assert len(result.jobs) == len(names) * minutes


def consume(app: Celery, queue: str, expected: int, timeout: float = 10,
            then_wait: float = 0.0) -> list[Any]:
    """Read ``expected`` raw messages from ``queue``, then any more for ``then_wait`` s."""
    got: list[Any] = []
    with Connection(app.conf.broker_url,
                    transport_options=app.conf.broker_transport_options) as conn:
        q = conn.SimpleQueue(queue)
        try:
            while len(got) < expected:
                got.append(q.get(timeout=timeout))
                got[-1].ack()
            while then_wait:
                try:
                    got.append(q.get(timeout=then_wait))
                except q.Empty:
                    break
                got[-1].ack()
        finally:
            q.close()
    return got


def test_published_message_matches_what_celery_beat_sends(app: Celery,
                                                          standalone: Database) -> None:
    queue = app.conf.task_default_queue
    entry = {"task": "proj.report", "schedule": 60, "args": [1, "two"],
             "kwargs": {"full": True},
             "options": {"queue": queue, "priority": 5, "expires": 3600,
                         "headers": {"x-team": "data"}}}
    register(standalone, app, {"report": entry})
    fire(standalone, ["report"])
    bridge = Bridge(app, standalone.outbox, deployment="bt")
    assert bridge.drain() == 1
    bridge.close()
    ours = consume(app, queue, 1)[0]

    # The same entry sent by Celery's own beat, for comparison.
    celery_beat = CeleryScheduler(app, lazy=True)
    celery_beat.apply_async(ScheduleEntry(
        name="report", task="proj.report", schedule=60, args=(1, "two"),
        kwargs={"full": True}, options={k: v for k, v in entry["options"].items()
                                        if k != "awa_beat"}, app=app))
    theirs = consume(app, queue, 1)[0]

    # Celery's beat adds the celery_beat_task header from 5.7 on; we always add it, and
    # awa-beat's own (the fire, read by the workers' outcome recorder).
    ours_only = {"celery_beat_task", "awa_beat_job", "awa_beat_schedule",
                 "awa_beat_fire_time", "awa_beat_at_most_once"}
    assert ours.headers["celery_beat_task"] is True
    assert ours.headers.keys() - ours_only == theirs.headers.keys() - {"celery_beat_task"}
    assert (ours.headers["awa_beat_schedule"], ours.headers["awa_beat_fire_time"],
            ours.headers["awa_beat_at_most_once"]) == ("report", fire_text(1), "0")
    for key in ("task", "x-team", "lang", "retries", "ignore_result"):
        assert ours.headers[key] == theirs.headers[key], key
    assert ours.headers["id"] == fire_task_id("report", fire_text(1), 0)
    # A relative expiry counts from the fire time.
    assert datetime.fromisoformat(ours.headers["expires"]) == T0 + timedelta(minutes=61)
    assert ours.decode()[:2] == theirs.decode()[:2] == [[1, "two"], {"full": True}]
    assert ours.content_type == theirs.content_type
    if app.broker_kind != "filesystem":  # type: ignore[attr-defined]
        assert ours.properties.get("priority") == theirs.properties.get("priority") == 5
    c = connect(standalone.conninfo)
    state, meta = c.execute("SELECT state::text, metadata FROM awa.jobs").fetchone()
    c.close()
    assert state == "completed" and meta["celery_task_id"] == ours.headers["id"]


def test_backlog_is_published_in_fire_order(app: Celery, standalone: Database) -> None:
    queue = app.conf.task_default_queue
    register(standalone, app, {f"s{i}": {"task": "t.x", "schedule": 60, "args": [i],
                                         "options": {"queue": queue}} for i in range(3)})
    fire(standalone, ["s0", "s1", "s2"], minutes=4)
    bridge = Bridge(app, standalone.outbox, deployment="bt", batch_size=5)
    assert bridge.drain() == 12
    bridge.close()
    messages = consume(app, queue, 12)
    ids = [m.headers["id"] for m in messages]
    assert len(set(ids)) == 12
    by_fire = [(int(m.headers["argsrepr"].strip("(),[]")), m.headers["id"]) for m in messages]
    expected = [fire_task_id(f"s{i}", fire_text(minute), 0)
                for minute in range(1, 5) for i in range(3)]
    if app.broker_kind == "filesystem":  # type: ignore[attr-defined]
        # That transport does not deliver in publish order within one millisecond.
        assert sorted(tid for _, tid in by_fire) == sorted(expected)
    else:
        assert [tid for _, tid in by_fire] == expected  # fire order, then schedule order


def _woken_during_reads(bridge: Bridge, store: Database) -> None:
    """Every read of the outbox is followed by a wake, as when beat fires meanwhile."""
    read = store.outbox.pending_celery_jobs

    def reading(*args: Any, **kwargs: Any) -> Any:
        jobs = read(*args, **kwargs)
        bridge.wake()
        return jobs

    store.outbox.pending_celery_jobs = reading  # type: ignore[method-assign]


def _carrying(app: Celery, store: Database, schedules: int, fired: int) -> Bridge:
    """A bridge whose drain sent the jobs of the first ``fired`` of ``schedules`` and,
    woken meanwhile, left them in flight for the next drain to confirm."""
    queue = app.conf.task_default_queue
    register(store, app, {f"s{i}": {"task": "t.x", "schedule": 60, "args": [i],
                                    "options": {"queue": queue}} for i in range(schedules)})
    fire(store, [f"s{i}" for i in range(fired)])
    bridge = Bridge(app, store.outbox, deployment="bt", batch_size=5)
    _woken_during_reads(bridge, store)
    assert bridge.drain() == 0  # sent, not yet confirmed nor marked
    return bridge


def _fire_ids(count: int) -> list[str]:
    return sorted(fire_task_id(f"s{i}", fire_text(1), 0) for i in range(count))


def test_a_fire_during_a_drain_leaves_its_last_batch_for_the_next_drain_to_confirm(
        app: Celery, standalone: Database) -> None:
    queue = app.conf.task_default_queue
    bridge = _carrying(app, standalone, schedules=6, fired=3)
    assert bridge.due() and len(standalone.outbox.pending_celery_jobs("bt", 10)) == 3
    fire(standalone, ["s3", "s4", "s5"])
    bridge.wake = lambda: None  # type: ignore[method-assign]  # no further fires
    assert bridge.drain() == 6  # the new jobs sent, then both batches confirmed
    assert standalone.outbox.pending_celery_jobs("bt", 10) == []
    bridge.close()
    ids = [m.headers["id"] for m in consume(app, queue, 6, then_wait=0.5)]
    assert sorted(ids) == _fire_ids(6)


def test_a_database_error_after_a_drain_left_a_batch_in_flight_sends_it_once(
        app: Celery, standalone: Database) -> None:
    queue = app.conf.task_default_queue
    bridge = _carrying(app, standalone, schedules=4, fired=2)
    fire(standalone, ["s2", "s3"])
    read = standalone.outbox.pending_celery_jobs
    failures = iter([StoreError("the database went away")])

    def failing_once(*args: Any, **kwargs: Any) -> Any:
        for error in failures:
            raise error
        return read(*args, **kwargs)

    standalone.outbox.pending_celery_jobs = failing_once  # type: ignore[method-assign]
    with pytest.raises(StoreError):
        bridge.drain()
    assert bridge.due()
    published = bridge.drain()
    while bridge.due():
        published += bridge.drain()
    assert published == 4 and standalone.outbox.pending_celery_jobs("bt", 10) == []
    bridge.close()
    ids = [m.headers["id"] for m in consume(app, queue, 4, then_wait=0.5)]
    assert sorted(ids) == _fire_ids(4)


def test_a_deposed_bridge_confirms_the_batch_it_left_in_flight_and_sends_nothing_new(
        app: Celery, standalone: Database) -> None:
    queue = app.conf.task_default_queue
    bridge = _carrying(app, standalone, schedules=4, fired=2)
    bridge.stand_down()
    fire(standalone, ["s2", "s3"])
    assert bridge.due()
    assert bridge.drain() == 2  # the batch in flight, confirmed and marked
    assert not bridge.due()
    assert {j["cron_name"] for j in standalone.outbox.pending_celery_jobs("bt", 10)} == {"s2", "s3"}
    bridge.close()
    ids = [m.headers["id"] for m in consume(app, queue, 2, then_wait=0.5)]
    assert sorted(ids) == _fire_ids(2)


def test_manual_triggers_go_first_and_pages_miss_nothing(app: Celery,
                                                         standalone: Database) -> None:
    queue = app.conf.task_default_queue
    register(standalone, app, {f"s{i}": {"task": "t.x", "schedule": 60, "args": [i],
                                         "options": {"queue": queue}} for i in range(4)})
    fire(standalone, [f"s{i}" for i in range(4)], minutes=2)
    triggered = [standalone.schedules.trigger("s3"), standalone.schedules.trigger("s0")]
    bridge = Bridge(app, standalone.outbox, deployment="bt", batch_size=3)  # pages end mid-fire
    assert bridge.drain() == 10
    bridge.close()
    messages = consume(app, queue, 10)
    c = connect(standalone.conninfo)
    task_ids = dict(c.execute("SELECT id, metadata ->> 'celery_task_id' FROM awa.jobs"))
    left = c.execute("SELECT count(*) FROM awa.jobs WHERE state = 'available'").fetchone()[0]
    c.close()
    assert left == 0
    ids = [m.headers["id"] for m in messages]
    assert len(set(ids)) == 10
    if app.broker_kind != "filesystem":  # type: ignore[attr-defined]
        assert ids[:2] == [task_ids[j] for j in triggered]  # no fire time: first, by id
        scheduled = [fire_task_id(f"s{i}", fire_text(m), 0)
                     for m in (1, 2) for i in range(4)]
        assert ids[2:] == scheduled


def test_a_long_backlog_is_resumed_then_passed_again_from_the_start(app: Celery,
                                                                     standalone: Database) -> None:
    queue = app.conf.task_default_queue
    register(standalone, app, {f"s{i}": {"task": "t.x", "schedule": 60, "args": [i],
                                         "options": {"queue": queue}} for i in range(3)})
    fire(standalone, ["s0", "s1", "s2"], minutes=2)
    # A page a drain.
    bridge = Bridge(app, standalone.outbox, deployment="bt", batch_size=2, budget=0)
    counts = [bridge.drain()]
    triggered = standalone.schedules.trigger("s0")  # sorts before everything, behind the cursor
    for _ in range(4):
        counts.append(bridge.drain())
    bridge.close()
    # Resumed where each drain stopped; the pass that ended past the start asks for one
    # more from the start, which finds the trigger.
    assert counts == [2, 2, 2, 0, 1]
    assert bridge.pending is False
    c = connect(standalone.conninfo)
    left = c.execute("SELECT count(*) FROM awa.jobs WHERE state = 'available'").fetchone()[0]
    (trigger_task,) = c.execute("SELECT metadata ->> 'celery_task_id' FROM awa.jobs"
                                " WHERE id = %s", (triggered,)).fetchone()
    c.close()
    assert left == 0
    ids = [m.headers["id"] for m in consume(app, queue, 7)]
    assert len(set(ids)) == 7
    if app.broker_kind != "filesystem":  # type: ignore[attr-defined]
        assert ids[-1] == trigger_task


def test_jobs_of_other_deployments_and_awa_dispatch_are_left_alone(app: Celery,
                                                                   standalone: Database) -> None:
    register(standalone, app, {"mine": {"task": "t.x", "schedule": 60}}, deployment="bt")
    register(standalone, app, {"theirs": {"task": "t.x", "schedule": 60}}, deployment="other")
    rows = [spec_from_entry("awa-job", {"task": "t.x", "schedule": 60}).row("bt")]
    standalone.schedules.sync(rows, deployment="bt")
    c = connect(standalone.conninfo)
    c.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (T0,))
    fire(standalone, ["mine", "theirs", "awa-job"])
    bridge = Bridge(app, standalone.outbox, deployment="bt")
    assert bridge.drain() == 1
    bridge.close()
    states = dict(c.execute("SELECT metadata ->> 'cron_name', state::text FROM awa.jobs"))
    c.close()
    assert states == {"mine": "completed", "theirs": "available", "awa-job": "available"}


def test_broker_outage_logs_once_then_drains_when_back(app: Celery, standalone: Database,
                                                       caplog) -> None:
    if app.broker_kind == "filesystem":  # type: ignore[attr-defined]
        pytest.skip("the filesystem transport cannot be made unreachable")
    queue = app.conf.task_default_queue
    good = app.conf.broker_url
    register(standalone, app, {"a": {"task": "t.x", "schedule": 60,
                                     "options": {"queue": queue}}})
    fire(standalone, ["a"], minutes=3)
    app.conf.broker_url = good.replace("5672", "1").replace("6379", "1")
    app.conf.broker_connection_timeout = 1
    bridge = Bridge(app, standalone.outbox, deployment="bt")
    with caplog.at_level(logging.INFO, logger="awa_beat.bridge"):
        for _ in range(3):
            bridge._retry_at = 0  # skip the backoff wait
            assert bridge.drain() == 0
        app.conf.broker_url = good
        bridge._retry_at = 0
        assert bridge.drain() == 3
    bridge.close()
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert actions(errors) == ["bridge.outage"]
    assert "cannot publish to the broker" in errors[0].getMessage()
    assert actions(caplog.records) == ["bridge.outage", "bridge.recovered"]
    assert len(consume(app, queue, 3)) == 3


def test_connection_dropped_mid_drain_republishes_with_the_same_ids(
    app: Celery, standalone: Database
) -> None:
    if app.broker_kind != "rabbitmq":  # type: ignore[attr-defined]
        pytest.skip("drops a live AMQP connection")
    queue = app.conf.task_default_queue
    register(standalone, app, {f"s{i}": {"task": "t.x", "schedule": 60,
                                         "options": {"queue": queue}} for i in range(10)})
    fire(standalone, [f"s{i}" for i in range(10)])
    bridge = Bridge(app, standalone.outbox, deployment="bt")
    publisher = bridge._publisher
    publisher.open()
    transport = publisher.conn.connection.transport
    real_write = transport.write
    sent = []

    def drop_after_four(data: Any) -> Any:  # every publish's frames pass through here
        sent.append(data)
        if len(sent) == 5:  # the broker connection goes away under the bridge
            publisher.conn.connection.sock.shutdown(socket.SHUT_RDWR)
        return real_write(data)

    transport.write = drop_after_four
    assert bridge.drain() == 0
    c = connect(standalone.conninfo)
    assert c.execute("SELECT count(*) FROM awa.jobs WHERE state = 'available'").fetchone()[0] == 10
    bridge._retry_at = 0
    assert bridge.drain() == 10
    bridge.close()
    messages = consume(app, queue, 10, then_wait=1.0)  # and any republished copies
    ids = [m.headers["id"] for m in messages]
    expected = {fire_task_id(f"s{i}", fire_text(1), 0) for i in range(10)}
    assert set(ids) == expected  # none lost; any duplicate carries the same id
    tasks = dict(c.execute("SELECT metadata ->> 'cron_name', metadata ->> 'celery_task_id'"
                           " FROM awa.jobs"))
    c.close()
    assert set(tasks.values()) == expected


def test_retention_deletes_only_old_published_jobs(app: Celery, standalone: Database) -> None:
    register(standalone, app, {"a": {"task": "t.x", "schedule": 60}})
    fire(standalone, ["a"], minutes=3)
    bridge = Bridge(app, standalone.outbox, deployment="bt", retention=timedelta(days=7))
    assert bridge.drain() == 3
    bridge.close()
    c = connect(standalone.conninfo)
    c.execute("UPDATE awa.jobs SET finalized_at = now() - interval '8 days'"
              " WHERE id = (SELECT min(id) FROM awa.jobs)")
    assert bridge.purge() == 1
    assert c.execute("SELECT count(*) FROM awa.jobs").fetchone()[0] == 2
    c.close()


def test_messages_copied_from_a_template_equal_what_celery_builds(app: Celery,
                                                                  standalone: Database) -> None:
    queue = app.conf.task_default_queue
    entries = {f"s{i}": {"task": "t.same", "schedule": 60, "args": args, "kwargs": kwargs,
                         "options": {"queue": queue, "expires": 900, "priority": 4,
                                     "headers": {"h": i % 2}}}
               for i, (args, kwargs) in enumerate([([1], {}), ([], {"a": "b" * 300}),
                                                   ([{"deep": [1, [2, [3]]]}], {"x": None})])}
    for entry in entries.values():
        entry["options"]["headers"] = {"h": 1}  # the same options: one template
    register(standalone, app, entries)
    fire(standalone, list(entries))
    jobs = standalone.outbox.pending_celery_jobs("bt", 10)
    templated = MessageBuilder(app)
    copies = [templated.prepare(job) for job in jobs]
    assert len(templated._templates) == 1
    for job, copy in zip(jobs, copies, strict=True):
        builder = MessageBuilder(app)
        fresh = builder.prepare(job)
        builder.close()
        for field in ("body", "content_type", "content_encoding", "routing_key", "exchange",
                      "priority", "task_id"):
            assert getattr(copy, field) == getattr(fresh, field), field
        assert copy.headers == fresh.headers
        ttl = {k: v for k, v in copy.properties.items() if k != "expiration"}
        assert ttl == {k: v for k, v in fresh.properties.items() if k != "expiration"}
        if "expiration" in fresh.properties:
            assert abs(int(copy.properties["expiration"]) -
                       int(fresh.properties["expiration"])) < 2000
    templated.close()


def test_a_batch_reaches_the_socket_in_a_few_writes_whole_and_in_order(
    app: Celery, standalone: Database
) -> None:
    if app.broker_kind != "rabbitmq":  # type: ignore[attr-defined]
        pytest.skip("counts writes to py-amqp's transport")
    queue = app.conf.task_default_queue
    names = [f"s{i:03d}" for i in range(300)]
    register(standalone, app, {name: {"task": "t.x", "schedule": 60, "args": [name],
                                      "options": {"queue": queue}} for name in names})
    fire(standalone, names)
    bridge = Bridge(app, standalone.outbox, deployment="bt")
    bridge._publisher.open()
    transport = bridge._publisher.conn.connection.transport
    sendall, writes = transport._write, []

    def counted(data: Any) -> None:
        writes.append(len(data))
        sendall(data)

    transport._write = counted
    assert bridge.drain() == 300
    # The queue's declaration, then the batch: without the gathering, a write per message.
    assert len(writes) <= 6, writes
    bridge.close()
    messages = consume(app, queue, 300, then_wait=0.5)
    assert [m.decode()[0] for m in messages] == [[name] for name in names]


def test_frames_gathered_before_a_failure_are_dropped_and_writes_go_direct_after(
    app: Celery,
) -> None:
    if app.broker_kind != "rabbitmq":  # type: ignore[attr-defined]
        pytest.skip("py-amqp's transport")
    queue = app.conf.task_default_queue
    with Connection(app.conf.broker_url) as conn:
        producer = conn.Producer(routing_key=queue)
        conn.SimpleQueue(queue).close()  # declared
        transport = conn.connection.transport
        with pytest.raises(RuntimeError), coalesced_writes(transport):
            for i in range(3):
                producer.publish({"n": i})
            raise RuntimeError("a failure after three publishes")
        assert "_write" not in vars(transport) or vars(transport)["_write"] == (
            transport.sock.sendall)
        producer.publish({"n": "after"})
    assert [m.decode() for m in consume(app, queue, 1, then_wait=0.5)] == [{"n": "after"}]


def test_a_bug_inside_a_drain_propagates_and_is_no_outage(app: Celery, standalone: Database,
                                                          monkeypatch, caplog) -> None:
    queue = app.conf.task_default_queue
    register(standalone, app, {f"s{i}": {"task": "t.x", "schedule": 60,
                                         "options": {"queue": queue}} for i in range(4)})
    fire(standalone, [f"s{i}" for i in range(4)])
    bridge = Bridge(app, standalone.outbox, deployment="bt", batch_size=2)
    read = standalone.outbox.pending_celery_jobs
    pages: list[int] = []

    def second_page_breaks(*args: Any, **kwargs: Any) -> Any:
        pages.append(1)
        if len(pages) == 2:  # the first batch is on its way to the broker
            raise TypeError("a bug, not a broker outage")
        return read(*args, **kwargs)

    monkeypatch.setattr(standalone.outbox, "pending_celery_jobs", second_page_breaks)
    with caplog.at_level(logging.DEBUG, logger="awa_beat.bridge"), \
            pytest.raises(TypeError, match="a bug"):
        bridge.drain()
    assert "bridge.outage" not in actions(caplog.records)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert bridge._failures == 0 and bridge.due()  # no backoff: nothing to wait out
    monkeypatch.undo()
    assert bridge.drain() == 4  # the batch the bug interrupted, published again
    bridge.close()
    ids = {m.headers["id"] for m in consume(app, queue, 4, then_wait=0.5)}
    assert ids == {fire_task_id(f"s{i}", fire_text(1), 0) for i in range(4)}


def test_a_job_celery_cannot_build_is_marked_failed_and_the_rest_published(
    app: Celery, standalone: Database, caplog
) -> None:
    queue = app.conf.task_default_queue
    register(standalone, app, {
        "bad": {"task": "t.x", "schedule": 60,
                "options": {"queue": queue, "serializer": "no-such-serializer"}},
        "good": {"task": "t.x", "schedule": 60, "options": {"queue": queue}}})
    fire(standalone, ["bad", "good"])
    bridge = Bridge(app, standalone.outbox, deployment="bt")
    with caplog.at_level(logging.INFO, logger="awa_beat.bridge"):
        assert bridge.drain() == 1
    bridge.close()
    (refusal,) = [r for r in caplog.records if getattr(r, "action", None)]
    assert refusal.action == "bridge.unpublishable" and refusal.levelno == logging.ERROR
    assert "SerializerNotInstalled" in refusal.error
    c = connect(standalone.conninfo)
    rows = dict(c.execute("SELECT metadata ->> 'cron_name', state::text FROM awa.jobs"))
    (error,) = c.execute("SELECT metadata ->> 'celery_error' FROM awa.jobs"
                         " WHERE state = 'failed'").fetchone()
    c.close()
    assert rows == {"bad": "failed", "good": "completed"}
    assert refusal.job_id and error == refusal.error
    assert len(consume(app, queue, 1)) == 1


def test_the_fence_reads_nothing_once_the_leaders_lock_session_is_gone(
        standalone: Database) -> None:
    from awa_beat._db.lock import Leadership
    from awa_beat._db.records import Fence

    app = celery_app("fence")
    register(standalone, app, {"s": {"task": "t.s", "schedule": 60}})
    fire(standalone, ["s"])
    leader = Leadership(standalone.conninfo, 4242)
    other = Leadership(standalone.conninfo, 4242)
    try:
        assert leader.try_acquire() and leader.backend_pid is not None
        fence = Fence(leader.backend_pid, 4242)
        assert len(standalone.outbox.pending_celery_jobs("bt", 10, fence=fence)) == 1
        assert standalone.outbox.pending_celery_jobs(
            "bt", 10, fence=Fence(fence.backend_pid, 1)) == []
        c = connect(standalone.conninfo)
        c.execute("SELECT pg_terminate_backend(%s)", (leader.backend_pid,))
        wait_for(other.try_acquire, 10, "the lock to be free")  # the leader has not noticed
        assert standalone.outbox.pending_celery_jobs("bt", 10, fence=fence) == []
        assert len(standalone.outbox.pending_celery_jobs(
            "bt", 10, fence=Fence(other.backend_pid or 0, 4242))) == 1
        c.close()
    finally:
        leader.resign()
        other.resign()


def test_a_new_leader_connects_to_the_broker_before_its_first_fire(
        app: Celery, standalone: Database) -> None:
    from awa_beat._db.lock import Leadership
    from awa_beat._db.records import Fence

    queue = app.conf.task_default_queue
    register(standalone, app, {"w": {"task": "t.w", "schedule": 60,
                                     "options": {"queue": queue}}})
    leader = Leadership(standalone.conninfo, 4243)
    bridge = Bridge(app, standalone.outbox, deployment="bt")
    try:
        assert leader.try_acquire() and leader.backend_pid is not None
        assert bridge.drain() == 0
        assert not bridge._publisher.connected  # not a leader: a tool's bridge stays cold
        bridge.lead(Fence(leader.backend_pid, 4243))
        assert bridge.drain() == 0  # nothing fired yet: it connects all the same
        assert bridge._publisher.connected
        conn = bridge._publisher.conn
        fire(standalone, ["w"])
        bridge.wake()
        assert bridge.drain() == 1
        assert bridge._publisher.conn is conn  # the first fire's send used that connection
        assert len(consume(app, queue, 1)) == 1
    finally:
        bridge.close()
        leader.resign()


def test_a_new_leaders_warm_up_against_a_broker_that_is_away_reports_nothing(
        app: Celery, standalone: Database, caplog) -> None:
    from awa_beat._db.lock import Leadership
    from awa_beat._db.records import Fence

    if app.broker_kind == "filesystem":  # type: ignore[attr-defined]
        pytest.skip("the filesystem transport cannot be made unreachable")
    queue = app.conf.task_default_queue
    good = app.conf.broker_url
    register(standalone, app, {"w": {"task": "t.w", "schedule": 60,
                                     "options": {"queue": queue}}})
    app.conf.broker_url = good.replace("5672", "1").replace("6379", "1")
    app.conf.broker_connection_timeout = 1
    leader = Leadership(standalone.conninfo, 4244)
    bridge = Bridge(app, standalone.outbox, deployment="bt")
    try:
        assert leader.try_acquire() and leader.backend_pid is not None
        bridge.lead(Fence(leader.backend_pid, 4244))
        with caplog.at_level(logging.INFO, logger="awa_beat.bridge"):
            assert bridge.drain() == 0
            assert not bridge._publisher.connected
            assert actions(caplog.records) == []  # an empty outbox: no outage to report
            fire(standalone, ["w"])
            bridge.wake()
            assert bridge.drain() == 0
            assert actions(caplog.records) == ["bridge.outage"]  # the send reports it
            app.conf.broker_url = good
            bridge._retry_at = 0
            assert bridge.drain() == 1
    finally:
        bridge.close()
        leader.resign()
    assert len(consume(app, queue, 1)) == 1


def test_a_jittered_job_is_published_once_with_its_run_time_as_eta(
        app: Celery, standalone: Database) -> None:
    queue = app.conf.task_default_queue
    register(standalone, app, {
        "spread": {"task": "proj.tick", "schedule": 3600,
                   "options": {"queue": queue, "expires": 60,
                               "awa_beat": {"jitter": 1800}}},
        "late": {"task": "proj.tick", "schedule": 3600,
                 "options": {"queue": queue, "awa_beat": {"jitter": 1800}}},
        "plain": {"task": "proj.tick", "schedule": 3600, "options": {"queue": queue}}})
    assert jitter_of(calendar_for(standalone.schedules.get("spread").cron_expr, "UTC")) == 1800
    # A fire whose run time (the firing rule's delay: tests/unit/test_window_jitter.py)
    # is still to come when the bridge publishes it.
    fire_at = T0 + timedelta(minutes=1)
    run_at = datetime.now(UTC) + timedelta(minutes=10, microseconds=250)
    result = standalone.evaluator.fire([
        FireRequest("spread", T0, [fire_at], run_ats=[run_at]),
        # A fire so late that its run time has passed runs at once.
        FireRequest("late", T0, [fire_at], run_ats=[fire_at + timedelta(seconds=3)]),
        FireRequest("plain", T0, [fire_at])])
    assert len(result.jobs) == 3
    bridge = Bridge(app, standalone.outbox, deployment="bt")
    assert bridge.drain() == 3
    assert bridge.drain() == 0  # Published once: a job put off is not pending again.
    bridge.close()
    got = {m.headers["awa_beat_schedule"]: m for m in consume(app, queue, 3, then_wait=0.5)}
    assert sorted(got) == ["late", "plain", "spread"]
    assert got["late"].headers.get("eta") is None
    spread, plain = got["spread"], got["plain"]
    # The fire time stays the nominal one; the run time rides as the eta.
    nominal = fire_at.strftime("%Y-%m-%d %H:%M:%S+00")
    assert spread.headers["awa_beat_fire_time"] == nominal
    assert spread.headers["id"] == fire_task_id("spread", nominal, 0)
    assert datetime.fromisoformat(spread.headers["eta"]) == run_at
    # A relative expiry counts from the run time, so the jitter cannot outlast it.
    assert datetime.fromisoformat(spread.headers["expires"]) == run_at + timedelta(seconds=60)
    assert plain.headers.get("eta") is None
    c = connect(standalone.conninfo)
    states = c.execute("SELECT state::text FROM awa.jobs").fetchall()
    c.close()
    assert states == [("completed",)] * 3


def test_backfilled_jobs_are_published_with_their_nominal_fire_time_and_a_fresh_expiry(
        app: Celery, standalone: Database) -> None:
    """A backfill (docs/operating-time.md) inserts jobs for past fire times to run now:
    the bridge publishes them in fire order with their nominal fire time, and a relative
    expiry counted from the insert, or every one would be expired on arrival."""
    queue = app.conf.task_default_queue
    register(standalone, app, {"hourly": {"task": "proj.tick", "schedule": 3600,
                                          "options": {"queue": queue, "expires": 60}}})
    c = connect(standalone.conninfo)
    c.execute("UPDATE awa.cron_jobs SET last_enqueued_at = now()")
    c.close()
    end = T0.replace(minute=0)
    done = Operations(standalone).backfill("hourly", end - timedelta(hours=2), end)
    assert done.inserted == (end - timedelta(hours=2), end - timedelta(hours=1), end)
    bridge = Bridge(app, standalone.outbox, deployment="bt")
    assert bridge.drain() == 3
    bridge.close()
    got = consume(app, queue, 3, then_wait=0.5)
    # (The filesystem transport does not keep the order in which they were sent.)
    assert sorted(m.headers["awa_beat_fire_time"] for m in got) == [
        t.strftime("%Y-%m-%d %H:%M:%S+00") for t in done.inserted]
    for m in got:
        assert datetime.fromisoformat(m.headers["expires"]) > datetime.now(UTC)
