"""The runtime node's timing and duties, against the in-memory store: no database."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from awa_beat._beat.node import HEARTBEAT_INTERVAL, BeatNode, NodeHooks
from awa_beat._config import Settings
from awa_beat._db.records import Fence, FireResult
from awa_beat._schedules.spec import specs_from_beat_schedule
from awa_beat._testing import FakeClock, MemoryLeadership, MemoryLock, MemoryStore, actions
from awa_beat.errors import ConfigError, DatabaseUnavailable, StoreError

UTC = timezone.utc
T0 = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)
IDS = {"a": "h:1", "b": "h:2"}
EVERY_5S = {"five": {"task": "t.five", "schedule": 5}}


class Cluster:
    """Nodes sharing one in-memory database and one lock, driven by one fake clock."""

    def __init__(self, clock: FakeClock, *, awa_owned: bool = False) -> None:
        self.clock = clock
        self.store = MemoryStore(clock, awa_owned=awa_owned)
        self.lock = MemoryLock()
        self.leaderships: dict[str, MemoryLeadership] = {}

    def node(self, identity: str, entries: dict[str, Any], *, dispatch: str | None = None,
             outbox: Any = None, hooks: NodeHooks | None = None, sleep: Any = None,
             **settings: Any) -> BeatNode:
        conf = Settings(deployment="d", dispatch=dispatch, **settings)
        specs = specs_from_beat_schedule(entries, default_dispatch=dispatch or "awa")

        def leadership(url: str, key: int, probe: Any, **_: Any) -> MemoryLeadership:
            self.leaderships[identity] = MemoryLeadership(self.lock, IDS[identity],
                                                          self.clock.monotonic)
            return self.leaderships[identity]

        return BeatNode(conf, specs, database_url="memory://", identity=IDS[identity],
                        clock=self.clock, monotonic=self.clock.monotonic,
                        make_store=lambda url, origin: self.store,
                        make_leadership=leadership,
                        make_outbox=(lambda store: outbox) if outbox is not None else None,
                        hooks=hooks, sleep=sleep or self.sleep)

    def sleep(self, seconds: float) -> None:
        self.clock.advance(seconds=seconds)

    def run(self, nodes: list[BeatNode], seconds: float) -> None:
        """Tick every open node and sleep what they ask (at least 1 ms) until
        ``seconds`` of fake time have passed."""
        end = self.clock.now + timedelta(seconds=seconds)
        while self.clock.now < end:
            waits = [n.tick(self.clock.monotonic()) for n in nodes if not n.closed]
            step = max(0.001, min(waits, default=1.0))
            self.clock.advance(seconds=min(step, (end - self.clock.now).total_seconds()))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def test_a_node_migrates_syncs_leads_and_fires_on_time(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    node = cluster.node("a", EVERY_5S).open()
    assert cluster.store.calls[:6] == ["open", "check_schema", "migrate", "config_in_force",
                                       "sync", "record_config"]
    assert set(cluster.store.rows) == {"five"}
    cluster.run([node], 21)
    assert node.status().role == "leader"
    assert cluster.store.fired("five") == ["2026-03-02 12:00:05+00", "2026-03-02 12:00:10+00",
                                           "2026-03-02 12:00:15+00", "2026-03-02 12:00:20+00"]
    node.close()
    assert node.closed and cluster.lock.holder is None



def test_a_restart_on_the_stored_configuration_syncs_nothing_and_a_change_resyncs(
        clock: FakeClock) -> None:
    cluster = Cluster(clock)
    cluster.node("a", EVERY_5S).open().close()
    cluster.store.calls.clear()
    cluster.node("a", EVERY_5S).open().close()
    assert "sync" not in cluster.store.calls and "config_in_force" in cluster.store.calls
    # Another writer changed the row: the next start puts the configuration back.
    cluster.store.update("five", cron_expr="*/7 * * * * *")
    cluster.node("a", EVERY_5S).open().close()
    assert cluster.store.calls.count("sync") == 1
    assert cluster.store.rows["five"].cron_expr == "*/5 * * * * *"
    # A changed configuration syncs too.
    cluster.node("a", {"five": {"task": "t.five", "schedule": 6}}).open().close()
    assert cluster.store.calls.count("sync") == 2
    assert cluster.store.rows["five"].cron_expr == "*/6 * * * * *"


def test_a_record_that_cannot_be_read_or_written_means_a_whole_sync(
        clock: FakeClock, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    cluster = Cluster(clock)

    def refused(*args: Any) -> None:
        raise StoreError("permission denied for table config_syncs")

    monkeypatch.setattr(cluster.store.schedules, "config_in_force", refused)
    monkeypatch.setattr(cluster.store.schedules, "record_config", refused)
    for _ in range(2):
        cluster.node("a", EVERY_5S).open().close()
    assert cluster.store.calls.count("sync") == 2
    assert caplog.text.count("permission denied for table config_syncs") == 4
    # A lost database is not a refusal: start-up retries it (with back-off) instead.
    cluster.store.down = "connection refused"
    monkeypatch.setattr(cluster.store.schedules, "config_in_force",
                        lambda *a: cluster.store._call("x"))
    with pytest.raises(DatabaseUnavailable):
        cluster.node("a", EVERY_5S, startup_timeout=0).open()

def test_the_wait_is_the_time_until_the_next_fire(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    node = cluster.node("a", {"hourly": {"task": "t", "schedule": 3600}}).open()
    clock.advance(seconds=10)
    # Polling (no notifications in memory): the engine refreshes every second.
    assert 0 < node.tick(clock.monotonic()) <= 1.0
    assert node.status().role == "leader"
    clock.advance(seconds=3595 - 10)  # 12:59:55
    assert node.tick(clock.monotonic()) == pytest.approx(1.0)
    clock.advance(seconds=4.5)
    assert node.tick(clock.monotonic()) == pytest.approx(0.5)
    node.close()


def test_only_one_of_two_nodes_fires_and_the_standby_takes_over(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    a = cluster.node("a", EVERY_5S).open()
    b = cluster.node("b", EVERY_5S).open()
    cluster.run([a, b], 12)
    assert [a.status().role, b.status().role] == ["leader", "standby"]
    a.close()
    cluster.run([b], 10)
    assert b.status().role == "leader"
    fired = cluster.store.fired("five")
    assert fired == [f"2026-03-02 12:00:{s:02d}+00" for s in (5, 10, 15, 20)]
    b.close()


def test_a_standby_loads_every_row_before_it_is_elected(clock: FakeClock) -> None:
    # A process sleeps what its tick asks, and a little more: a standby alone wakes
    # when its election is due, and must still load its view then, or a takeover
    # costs a full load.
    cluster = Cluster(clock)
    a = cluster.node("a", EVERY_5S).open()
    a.tick(clock.monotonic())
    b = cluster.node("b", EVERY_5S).open()
    for _ in range(3):
        clock.advance(seconds=max(0.0, b.tick(clock.monotonic())) + 0.001)
    assert [a.status().role, b.status().role] == ["leader", "standby"]
    assert b.engine is not None and b.engine.loaded
    a.close()
    b.close()


def test_a_failed_ping_ends_leadership_and_the_node_stands_again(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    node = cluster.node("a", EVERY_5S, ping_interval=2.0).open()
    cluster.run([node], 3)
    leadership = cluster.leaderships["a"]
    leadership.alive = False
    clock.now = T0.replace(second=10)  # a fire is due, and so is the ping
    node.timers.ping.expire()
    fired = len(cluster.store.jobs)
    assert node.tick(clock.monotonic()) == 0.0
    assert node.status().role == "standby" and len(cluster.store.jobs) == fired
    cluster.run([node], 10)
    assert len(cluster.store.jobs) == fired  # a node that may have lost its lock fires nothing
    leadership.alive = True
    cluster.run([node], 6)
    assert node.status().role == "leader" and len(cluster.store.jobs) > fired
    node.close()


def test_a_database_outage_is_reported_once_and_retried_within_a_second(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    cluster = Cluster(clock)
    node = cluster.node("a", EVERY_5S).open()
    cluster.run([node], 6)
    cluster.store.down = "connection refused"
    caplog.set_level(logging.INFO, logger="awa_beat")
    waits = []
    for _ in range(5):
        waits.append(node.tick(clock.monotonic()))
        clock.advance(seconds=waits[-1])
    assert all(0 < w <= 1.0 for w in waits)
    assert actions(caplog.records).count("database.outage") == 1
    cluster.store.down = None
    cluster.run([node], 1)
    assert "database.recovered" in actions(caplog.records)
    # coalesce: the fire times missed while the database was away come as one fire
    assert cluster.store.fired("five")[-1] == "2026-03-02 12:00:10+00"
    node.close()


def test_heartbeats_every_interval_with_the_role(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    a = cluster.node("a", EVERY_5S).open()
    b = cluster.node("b", EVERY_5S).open()
    cluster.run([a, b], 2)
    beats = cluster.store.heartbeats
    assert {k: v["role"] for k, v in beats.items()} == {"h:1": "leader", "h:2": "standby"}
    assert beats["h:1"]["leader_since"] is not None and beats["h:2"]["leader_since"] is None
    before = cluster.store.calls.count("heartbeat")
    cluster.run([a, b], HEARTBEAT_INTERVAL * 2)
    assert cluster.store.calls.count("heartbeat") - before == 4  # two each, no more
    a.close()
    assert set(beats) == {"h:2"}
    b.close()


def test_the_configuration_is_reasserted_every_sync_interval(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    node = cluster.node("a", {"hourly": {"task": "t", "schedule": 3600}},
                        sync_interval=30).open()
    cluster.run([node], 2)
    configured = cluster.store.rows["hourly"].cron_expr
    cluster.store.update("hourly", cron_expr="@every 60s")  # an edit by hand
    cluster.run([node], 20)
    assert cluster.store.rows["hourly"].cron_expr == "@every 60s"  # not yet
    cluster.run([node], 15)
    assert cluster.store.rows["hourly"].cron_expr == configured
    node.close()


def test_stored_rows_the_configuration_dropped_are_reported(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    cluster = Cluster(clock)
    cluster.node("a", {**EVERY_5S, "old": {"task": "t", "schedule": 9}}).open().close()
    caplog.set_level(logging.WARNING, logger="awa_beat")
    cluster.node("b", EVERY_5S).open().close()
    orphans = [r for r in caplog.records if getattr(r, "action", None) == "schedule.orphan"]
    assert [r.schedule for r in orphans] == ["old"]
    assert set(cluster.store.rows) == {"five", "old"}  # reported, never deleted


class RecordingOutbox:
    def __init__(self) -> None:
        self.pending = False
        self.wakes = self.drains = 0
        self.closed = False
        self.fence: Fence | None = None
        self.deposed = False

    def wake(self) -> None:
        self.wakes += 1
        self.pending = True

    def lead(self, fence: Fence) -> None:
        self.fence, self.deposed = fence, False
        self.wake()

    def stand_down(self) -> None:
        self.deposed = True

    def due(self) -> bool:
        return self.pending

    def next_wake(self) -> float:
        return float("inf")

    def drain(self) -> int:
        self.drains += 1
        self.pending = False
        return 1

    def purge(self) -> int:
        return 0

    def close(self) -> None:
        self.closed = True


def test_fires_wake_the_outbox_and_the_hook_runs_before_it(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    outbox = RecordingOutbox()
    seen: list[tuple[int, int]] = []

    def after_fire(result: FireResult) -> None:
        seen.append((len(result.jobs), outbox.drains))

    node = cluster.node("a", EVERY_5S, dispatch="celery", outbox=outbox,
                        hooks=NodeHooks(after_fire=after_fire)).open()
    cluster.run([node], 11)
    assert seen == [(1, 1), (1, 2)]  # each fire committed before its drain
    assert outbox.drains == 3  # the takeover's drain, then one per fire
    node.close()
    assert outbox.closed


def test_celery_dispatch_on_awas_layout_is_refused_and_nothing_stays_open(
        clock: FakeClock) -> None:
    cluster = Cluster(clock, awa_owned=True)
    node = cluster.node("a", EVERY_5S, dispatch="celery", outbox=RecordingOutbox())
    with pytest.raises(ConfigError, match=r"standalone schema.*entries: five"):
        node.open()
    assert node.closed and not cluster.store.opened and cluster.lock.holder is None
    assert cluster.store.rows == {}  # refused before anything was written


def test_start_up_waits_for_the_database_with_back_off(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    cluster = Cluster(clock)
    cluster.store.down = "connection refused"
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(seconds=seconds)
        if len(slept) == 4:
            cluster.store.down = None  # the database is back

    caplog.set_level(logging.WARNING, logger="awa_beat")
    node = cluster.node("a", EVERY_5S, sleep=sleep).open()
    assert slept == [1.0, 2.0, 4.0, 8.0]
    assert actions(caplog.records) == ["startup.retry"] * 4
    assert set(cluster.store.rows) == {"five"} and not node.closed
    node.close()


def test_start_up_gives_up_after_the_startup_timeout(clock: FakeClock) -> None:
    cluster = Cluster(clock)
    cluster.store.down = "connection refused"
    node = cluster.node("a", EVERY_5S, startup_timeout=20)
    with pytest.raises(DatabaseUnavailable, match="connection refused"):
        node.open()
    assert clock.now - T0 == timedelta(seconds=20)  # 1 + 2 + 4 + 8, then the 5 s left
    assert node.closed


def test_a_configuration_the_database_refuses_is_not_retried(clock: FakeClock) -> None:
    cluster = Cluster(clock, awa_owned=True)
    node = cluster.node("a", EVERY_5S, dispatch="celery", outbox=RecordingOutbox(),
                        sleep=lambda s: pytest.fail("retried a configuration error"))
    with pytest.raises(ConfigError):
        node.open()


def test_a_runtime_row_is_left_alone_and_reported_as_a_conflict(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    cluster = Cluster(clock)
    cluster.store.add("report", "@every 7s")
    cluster.store.runtime.add("report")  # written by the Python API
    caplog.set_level(logging.WARNING, logger="awa_beat")
    cluster.node("a", {**EVERY_5S, "report": {"task": "t", "schedule": 9}}).open().close()
    conflicts = [r for r in caplog.records if getattr(r, "action", None) == "schedule.conflict"]
    assert [r.schedule for r in conflicts] == ["report"]
    assert cluster.store.rows["report"].cron_expr == "@every 7s"
    assert not [r for r in caplog.records if getattr(r, "action", None) == "schedule.orphan"]
