"""A standby that LISTENs sleeps between elections on its lock's session and refreshes
its view on a change from another session, not on its own writes nor on job inserts."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from awa_beat._beat.node import BeatNode
from awa_beat._config import Settings
from awa_beat._testing import FakeClock, MemoryLeadership, MemoryLock, MemoryStore

T0 = datetime(2026, 3, 2, 12, 0, 0, tzinfo=timezone.utc)


class NotifiedLeadership(MemoryLeadership):
    """Subscribed, as a real standby's session is: wait() hands out queued payloads."""

    subscribed = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.queued: list[set[str]] = []
        self.waits: list[float] = []

    def wait(self, timeout: float) -> set[str]:
        self.waits.append(timeout)
        return self.queued.pop(0) if self.queued else set()


def standby(clock: FakeClock, store: MemoryStore, election_interval: float
            ) -> tuple[BeatNode, list[NotifiedLeadership]]:
    """A node that loses every election (someone else leads), on a subscribed session."""
    lock = MemoryLock()
    lock.holder = object()
    leaderships: list[NotifiedLeadership] = []

    def leadership(url: str, key: int, probe: Any, **_: Any) -> NotifiedLeadership:
        leaderships.append(NotifiedLeadership(lock, "h:2", clock.monotonic))
        return leaderships[0]

    node = BeatNode(Settings(deployment="d", election_interval=election_interval), [],
                    database_url="memory://", identity="h:2", clock=clock,
                    monotonic=clock.monotonic, make_store=lambda url, origin: store,
                    make_leadership=leadership).open()
    return node, leaderships


def test_a_subscribed_standby_refreshes_on_each_change_from_another_session() -> None:
    clock = FakeClock(T0)
    store = MemoryStore(clock, origin="standby")
    node, leaderships = standby(clock, store, 1.0)
    node.tick(clock.monotonic())  # the first election, lost
    clock.advance(seconds=0.1)
    assert node.tick(clock.monotonic()) == 0.0  # it slept on the session, not the caller
    assert engine_state(node, "new") is None
    before = store.calls.count("changes") + store.calls.count("cron_states")

    store.add("new", "* * * * *")
    leaderships[0].queued = [{"jobs leader", "cron_jobs standby"}]  # not a change to us
    node.tick(clock.monotonic())
    assert store.calls.count("changes") + store.calls.count("cron_states") == before
    leaderships[0].queued = [{"cron_jobs leader"}]
    node.tick(clock.monotonic())
    assert engine_state(node, "new") is not None
    assert all(0 < w <= 1.2 for w in leaderships[0].waits)  # never past the election


def engine_state(node: BeatNode, name: str) -> Any:
    assert node.engine is not None
    return node.engine.state(name)


def test_a_change_whose_refresh_failed_is_refreshed_again_soon() -> None:
    clock = FakeClock(T0)
    store = MemoryStore(clock, origin="standby")
    node, leaderships = standby(clock, store, 0.2)
    node.tick(clock.monotonic())
    clock.advance(seconds=0.1)
    node.tick(clock.monotonic())
    store.add("new", "* * * * *")
    store.down = "connection lost"  # the notified refresh fails
    leaderships[0].queued = [{"cron_jobs leader"}]
    node.tick(clock.monotonic())
    store.down = None
    assert engine_state(node, "new") is None
    # No other notification comes: the change is seen within a second anyway, well
    # before the periodic refresh.
    for _ in range(6):
        clock.advance(seconds=0.2)
        node.tick(clock.monotonic())
    assert engine_state(node, "new") is not None
