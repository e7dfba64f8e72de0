"""The bridge without a database or a real broker: task ids, the messages built from job
rows, and the drain's handling of errors, on kombu's in-memory transport."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kombu.serialization import register

from awa_beat._bridge import Bridge, Dispatcher, fire_task_id
from awa_beat._bridge import messages as m
from awa_beat._bridge.messages import MessageBuilder, _call, _Plan, parse_fire_time
from awa_beat._db.records import Fence
from awa_beat._testing import actions, wait_for
from awa_beat.errors import DatabaseUnavailable
from tests.apps import celery_app

UTC = timezone.utc
FIRE = "2026-01-01 10:00:00+00"


def row(job_id: int, *, kind: str = "proj.report", args: Any = None,
        options: dict[str, Any] | None = None, cron_name: str | None = "report",
        fire_time: str | None = FIRE) -> dict[str, Any]:
    """A row as Database.pending_celery_jobs returns it."""
    return {"id": job_id, "kind": kind,
            "args": json.dumps(args if args is not None else {"args": [], "kwargs": {}}),
            "options": json.dumps(options) if options is not None else None,
            "cron_name": cron_name, "cron_fire_time": fire_time,
            "created_at": datetime(2026, 1, 1, 9, 0, tzinfo=UTC),
            "fire_key": fire_time or ""}


@pytest.fixture
def app() -> Any:
    return celery_app("bridgeunit", task_default_queue=f"q-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def builder(app: Any) -> Any:
    b = MessageBuilder(app)
    yield b
    b.close()


# -- task ids -----------------------------------------------------------------------------


def test_task_ids_are_pinned_to_the_fire() -> None:
    # Pinned: a job published before an upgrade and again after it must keep its id.
    assert fire_task_id("report", FIRE, 7) == str(uuid.uuid5(
        m.TASK_ID_NAMESPACE, f"report@{FIRE}"))
    assert fire_task_id("report", "2026-01-01 00:00:00+00", 7) == (
        "b713c833-936e-5d5c-8c52-4e011a64cafd")
    assert fire_task_id("report", FIRE, 7) == fire_task_id("report", FIRE, 8)
    assert fire_task_id("report", FIRE, 7) != fire_task_id("other", FIRE, 7)


def test_a_job_without_a_fire_time_is_known_by_its_id() -> None:
    assert fire_task_id(None, None, 42) == "b252d19a-eeb0-5889-a3f8-431e484396d0"
    assert fire_task_id("report", None, 42) == fire_task_id(None, None, 42)
    assert fire_task_id("report", None, 42) != fire_task_id("report", None, 43)


# -- parsing a row ------------------------------------------------------------------------


def test_options_the_bridge_owns_are_dropped_and_expiry_is_read() -> None:
    plan = _Plan.parse(json.dumps({"queue": "q", "task_id": "x", "retry": True,
                                   "retry_policy": {}, "expires": 60}))
    assert plan.options == {"queue": "q"}
    assert plan.expires == 60 and plan.relative_expiry and plan.templatable
    absolute = _Plan.parse(json.dumps({"expires": "2026-01-01T00:00:00+00:00"}))
    assert not absolute.relative_expiry
    assert not _Plan.parse(json.dumps({"expires": True})).relative_expiry
    assert not _Plan.parse(json.dumps({"countdown": 5})).templatable
    assert not _Plan.parse(json.dumps({"eta": "2026-01-01T00:00:00"})).templatable
    assert _Plan.parse("null").options == {}


def test_args_come_from_the_args_column() -> None:
    assert _call('{"args": [1, 2], "kwargs": {"a": 1}}') == ([1, 2], {"a": 1})
    assert _call(None) == ((), {})
    assert _call("[1, 2]") == ((), {})  # not Awa's {"args", "kwargs"} form
    assert _call('{"args": null}') == ((), {})


def test_fire_times_in_awas_text_form() -> None:
    assert parse_fire_time(FIRE) == datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    assert parse_fire_time(None) is None and parse_fire_time("") is None


# -- messages -----------------------------------------------------------------------------


def test_a_message_carries_the_fire_and_beats_header(builder: Any) -> None:
    prepared = builder.prepare(row(1, args={"args": [1, "two"], "kwargs": {"full": True}},
                                   options={"priority": 5, "task_id": "not-this-one",
                                            "headers": {"x-team": "data"}}))
    task_id = fire_task_id("report", FIRE, 1)
    assert prepared.task_id == prepared.headers["id"] == task_id
    assert prepared.properties["correlation_id"] == task_id
    assert prepared.headers["celery_beat_task"] is True
    assert prepared.headers["x-team"] == "data"
    assert prepared.headers["task"] == "proj.report"
    assert prepared.headers["argsrepr"] == "[1, 'two']"
    assert prepared.priority == 5


def test_a_relative_expiry_counts_from_the_fire_or_the_creation(builder: Any) -> None:
    fired = builder.prepare(row(1, options={"expires": 3600}))
    assert datetime.fromisoformat(fired.headers["expires"]) == datetime(
        2026, 1, 1, 11, 0, tzinfo=UTC)
    triggered = builder.prepare(row(2, options={"expires": 60}, fire_time=None))
    assert datetime.fromisoformat(triggered.headers["expires"]) == datetime(
        2026, 1, 1, 9, 1, tzinfo=UTC)


def test_copies_of_a_template_equal_what_celery_builds(app: Any, builder: Any) -> None:
    options = {"expires": 900, "priority": 4, "headers": {"h": 1}}
    rows = [row(i, args=call, options=options, cron_name=f"s{i}")
            for i, call in enumerate([{"args": [1], "kwargs": {}},
                                      {"args": [], "kwargs": {"a": "b" * 300}},
                                      {"args": [{"deep": [1, [2, [3]]]}],
                                       "kwargs": {"x": None}}])]
    copies = [builder.prepare(r) for r in rows]
    assert len(builder._templates) == 1
    assert copies[1].table is copies[2].table is not None  # copies, not Celery's builds
    for r, copy in zip(rows, copies, strict=True):
        alone = MessageBuilder(app)
        fresh = alone.prepare(r)
        alone.close()
        for field in ("body", "content_type", "content_encoding", "routing_key", "exchange",
                      "priority", "task_id", "headers"):
            assert getattr(copy, field) == getattr(fresh, field), field
        assert {k: v for k, v in copy.properties.items() if k != "expiration"} == {
            k: v for k, v in fresh.properties.items() if k != "expiration"}
        assert abs(int(copy.properties["expiration"]) -
                   int(fresh.properties["expiration"])) < 2000


def test_messages_that_depend_on_the_send_are_never_copied(builder: Any) -> None:
    builder.prepare(row(1, options={"countdown": 10}))
    builder.prepare(row(2, options={"compression": "zlib"}))
    assert builder._templates == {}


def test_a_message_is_kept_until_forgotten(builder: Any) -> None:
    first = builder.prepare(row(1))
    assert builder.prepare(row(1)) is first  # published again after a failure: as built
    builder.forget([first])
    assert builder.prepare(row(1)) is not first


def test_the_cache_of_args_is_bounded(builder: Any) -> None:
    for i in range(m.CALL_CACHE_SIZE + 10):
        builder.prepare(row(i, args={"args": [i], "kwargs": {}}))
    assert len(builder._calls) <= m.CALL_CACHE_SIZE


@settings(max_examples=200, deadline=None)
@given(name=st.one_of(st.none(), st.text(max_size=40)), fire_time=st.one_of(
    st.none(), st.text(max_size=30)), job_id=st.integers(0, 2**63 - 1))
def test_task_ids_are_uuid5_of_the_fire(name: str | None, fire_time: str | None,
                                       job_id: int) -> None:
    key = f"{name}@{fire_time}" if fire_time else f"job:{job_id}"
    try:
        expected = str(uuid.uuid5(m.TASK_ID_NAMESPACE, key))
    except UnicodeEncodeError:  # a lone surrogate: no id either way
        with pytest.raises(UnicodeEncodeError):
            fire_task_id(name, fire_time, job_id)
        return
    assert fire_task_id(name, fire_time, job_id) == expected


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(),
              st.text(max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=st.lists(json_values, max_size=4),
       kwargs=st.dictionaries(st.text(max_size=8), json_values, max_size=3))
def test_copies_bodies_equal_celerys_for_any_json_args(args: list[Any],
                                                        kwargs: dict[str, Any]) -> None:
    app = celery_app("bridgebody")
    builder = MessageBuilder(app)
    builder.prepare(row(1, args={"args": [0], "kwargs": {}}, cron_name="first"))
    call = {"args": args, "kwargs": kwargs}
    copy = builder.prepare(row(2, args=call, cron_name="second"))
    alone = MessageBuilder(app)
    fresh = alone.prepare(row(2, args=call, cron_name="second"))
    builder.close(), alone.close()
    assert copy.table is not None and copy.body == fresh.body
    assert copy.headers["argsrepr"] == fresh.headers["argsrepr"]
    assert copy.headers["kwargsrepr"] == fresh.headers["kwargsrepr"]


def test_copies_of_a_serializer_of_the_apps_own_are_made_by_it() -> None:
    def sorted_json(value: Any) -> str:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))

    register("awa-sorted-json", sorted_json, json.loads,
             content_type="application/x-awa-sorted-json", content_encoding="utf-8")
    app = celery_app("bridgeserializer", task_serializer="awa-sorted-json")
    builder = MessageBuilder(app)
    call = {"args": [{"b": 1, "a": 2}], "kwargs": {"z": 1, "y": 2}}
    builder.prepare(row(1, args=call, cron_name="first"))
    copy = builder.prepare(row(2, args=call, cron_name="second"))
    builder.close()
    assert copy.table is not None  # a copy, with its body made by the app's serializer
    assert copy.body == '[[{"a":2,"b":1}],{"y":2,"z":1},{"callbacks":null,"chain":null,' \
        '"chord":null,"errbacks":null}]'


# -- the drain ------------------------------------------------------------------------------


class FakeStore:
    """The part of Store the bridge uses, in memory."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = {r["id"]: r for r in rows}
        self.lock: Any = None
        """The Fence whose session holds the lock now."""
        self.published: dict[int, str] = {}
        self.failed: dict[int, str] = {}
        self.purges = 0

    def pending_celery_jobs(self, deployment: str, limit: int,
                            after: tuple[str, int] = ("", 0),
                            fence: Any = None) -> list[dict[str, Any]]:
        if fence is not None and fence != self.lock:
            return []  # the fence: that session no longer holds the lock
        pending = sorted((r for r in self.rows.values()
                          if r["id"] not in self.published and r["id"] not in self.failed
                          and (r["fire_key"], r["id"]) > after),
                         key=lambda r: (r["fire_key"], r["id"]))
        return pending[:limit]

    def mark_published(self, ids: list[int], task_ids: list[str]) -> int:
        self.published.update(zip(ids, task_ids, strict=True))
        return len(ids)

    def mark_unpublishable(self, job_id: int, error: str) -> None:
        self.failed[job_id] = error

    def purge_published(self, retention: timedelta, limit: int) -> int:
        self.purges += 1
        return limit if self.purges < 3 else 1


def test_a_drain_publishes_and_marks_every_job(app: Any) -> None:
    store = FakeStore([row(i, cron_name=f"s{i}") for i in range(5)])
    bridge = Bridge(app, store, deployment="d", batch_size=2)
    assert bridge.due()
    assert bridge.drain() == 5
    bridge.close()
    assert store.published == {i: fire_task_id(f"s{i}", FIRE, i) for i in range(5)}
    assert not bridge.pending and not bridge.due()


def test_wake_is_how_the_runtime_says_there_is_work(app: Any) -> None:
    bridge = Bridge(app, FakeStore([]), deployment="d")
    assert bridge.drain() == 0 and not bridge.due()
    bridge.wake()
    assert bridge.pending and bridge.due()
    with pytest.raises(AttributeError):
        bridge.pending = False  # type: ignore[misc]
    bridge.close()


@pytest.mark.parametrize("error", [TypeError("a bug"),
                                   DatabaseUnavailable("no database connection: refused")],
                         ids=["bug", "database"])
def test_what_is_not_the_brokers_propagates_and_is_no_outage(app: Any, caplog,
                                                             error: Exception) -> None:
    store = FakeStore([row(1)])

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise error

    store.pending_celery_jobs = broken  # type: ignore[method-assign]
    bridge = Bridge(app, store, deployment="d")
    with caplog.at_level(logging.DEBUG, logger="awa_beat.bridge"), \
            pytest.raises(type(error)):
        bridge.drain()
    bridge.close()
    assert actions(caplog.records) == []
    assert bridge._failures == 0 and bridge.due()  # no backoff to wait out


def test_a_broker_error_is_an_outage_retried_with_backoff(app: Any, caplog) -> None:
    store = FakeStore([row(i, cron_name=f"s{i}") for i in range(3)])
    bridge = Bridge(app, store, deployment="d")
    bridge._publisher.open()
    channel = bridge._publisher.channel
    real_publish = channel.basic_publish

    def dropped(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionResetError(104, "Connection reset by peer")

    channel.basic_publish = dropped
    with caplog.at_level(logging.DEBUG, logger="awa_beat.bridge"):
        assert bridge.drain() == 0
        assert not bridge.due()  # backing off
        bridge._retry_at = 0
        bridge._publisher.open()
        bridge._publisher.channel.basic_publish = dropped
        assert bridge.drain() == 0  # the same outage: not logged again
        assert bridge._failures == 2
        bridge._retry_at = 0
        channel.basic_publish = real_publish
        assert bridge.drain() == 3
    bridge.close()
    assert actions(caplog.records) == ["bridge.outage", "bridge.published",
                                       "bridge.recovered"]
    outage = next(r for r in caplog.records if getattr(r, "action", None) == "bridge.outage")
    assert outage.levelno == logging.ERROR and "Connection reset by peer" in outage.error
    assert len(store.published) == 3


def test_a_job_celery_refuses_is_marked_failed(app: Any, caplog) -> None:
    store = FakeStore([row(1, options={"serializer": "no-such-serializer"}),
                       row(2, cron_name="other")])
    bridge = Bridge(app, store, deployment="d")
    with caplog.at_level(logging.INFO, logger="awa_beat.bridge"):
        assert bridge.drain() == 1
    bridge.close()
    assert list(store.published) == [2]
    assert store.failed[1].startswith("SerializerNotInstalled: ")
    (refusal,) = [r for r in caplog.records if getattr(r, "action", None)]
    assert refusal.action == "bridge.unpublishable"
    assert (refusal.job_id, refusal.task, refusal.error) == (1, "proj.report", store.failed[1])


def test_a_purge_is_bounded_and_spaced(app: Any) -> None:
    store = FakeStore([])
    bridge = Bridge(app, store, deployment="d", purge_every=60)
    assert bridge.purge(max_batches=10) == 1000 + 1000 + 1
    assert bridge.purge() == 0  # not before purge_every
    assert bridge.next_wake() == 0  # pending, until a drain finds nothing
    assert bridge.drain() == 0
    assert bridge.next_wake() == bridge._next_purge
    bridge.close()


def test_a_bridge_told_to_stand_down_publishes_nothing_until_it_leads_again(app: Any) -> None:
    store = FakeStore([row(i, cron_name=f"s{i}") for i in range(3)])
    bridge = Bridge(app, store, deployment="d")
    mine = Fence(backend_pid=41, lock_key=7)
    store.lock = mine
    bridge.lead(mine)
    bridge.stand_down()
    assert not bridge.due() and bridge.drain() == 0 and store.published == {}
    bridge.lead(mine)
    assert bridge.drain() == 3
    bridge.close()


def test_the_fence_keeps_a_leader_that_has_not_noticed_its_loss_from_publishing(
        app: Any) -> None:
    store = FakeStore([row(i, cron_name=f"s{i}") for i in range(3)])
    bridge = Bridge(app, store, deployment="d")
    bridge.lead(Fence(backend_pid=41, lock_key=7))
    store.lock = Fence(backend_pid=99, lock_key=7)  # another session holds the lock now
    assert bridge.drain() == 0 and store.published == {}
    bridge.close()


class BlockingBridge:
    """A Bridge whose drain blocks on the 'broker' until released, or raises."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.error: BaseException | None = None
        self.pending = False
        self.deposed = False
        self.drains = 0
        self.closed = False

    def wake(self) -> None:
        self.pending = True

    def lead(self, fence: Fence) -> None:
        self.deposed = False

    def stand_down(self) -> None:
        self.deposed = True

    def due(self) -> bool:
        return self.pending and not self.deposed

    def next_wake(self) -> float:
        return float("inf")

    def drain(self) -> int:
        self.drains += 1
        self.entered.set()
        if self.error is not None:
            raise self.error
        self.release.wait(10)
        self.pending = False
        return 1

    def purge(self) -> int:
        return 0

    def close(self) -> None:
        self.closed = True


def test_the_dispatcher_publishes_nothing_before_it_is_told_to_lead() -> None:
    bridge = BlockingBridge()
    dispatcher = Dispatcher(bridge)  # type: ignore[arg-type]
    dispatcher.wake()  # a standby's fire-and-forget wake-ups
    assert not bridge.entered.wait(0.3) and bridge.drains == 0
    dispatcher.lead(Fence(1, 2))
    assert bridge.entered.wait(5), "the leader's dispatcher never drained"
    bridge.release.set()
    dispatcher.close()


def test_the_dispatcher_drains_on_its_own_thread_while_the_loop_goes_on() -> None:
    bridge = BlockingBridge()
    dispatcher = Dispatcher(bridge)  # type: ignore[arg-type]
    try:
        dispatcher.lead(Fence(1, 2))
        assert bridge.entered.wait(5), "the thread never drained"
        # The drain is stuck on the broker; the loop's calls return at once.
        started = time.monotonic()
        dispatcher.wake()
        assert not dispatcher.due() and dispatcher.drain() == 0
        assert time.monotonic() - started < 0.5
        bridge.release.set()
        wait_for(lambda: not bridge.pending, 5, "the drain to finish")
    finally:
        bridge.release.set()
        dispatcher.close()
    assert bridge.closed


def test_a_bug_on_the_dispatch_thread_is_raised_on_the_loops_next_step() -> None:
    bridge = BlockingBridge()
    bridge.error = TypeError("a bug")
    dispatcher = Dispatcher(bridge)  # type: ignore[arg-type]
    dispatcher.lead(Fence(1, 2))
    wait_for(dispatcher.due, 5, "the error to reach the loop")
    with pytest.raises(TypeError, match="a bug"):
        dispatcher.drain()
    dispatcher.close()


def test_a_database_error_on_the_dispatch_thread_is_reported_once_and_retried(
        caplog: pytest.LogCaptureFixture) -> None:
    bridge = BlockingBridge()
    bridge.error = DatabaseUnavailable("no database connection: refused")
    caplog.set_level(logging.INFO, logger="awa_beat")
    dispatcher = Dispatcher(bridge)  # type: ignore[arg-type]
    dispatcher.lead(Fence(1, 2))
    wait_for(lambda: bridge.drains >= 2, 5, "a second attempt")
    bridge.error = None
    bridge.release.set()
    wait_for(lambda: "bridge.database_recovered" in actions(caplog.records), 5, "recovery")
    dispatcher.close()
    assert actions(caplog.records).count("bridge.database_outage") == 1
    assert not dispatcher.due()
