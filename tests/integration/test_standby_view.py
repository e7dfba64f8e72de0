"""Every replica follows runtime changes: a standby's warm view reflects an API add,
edit and removal within about a second where the schema notifies, and once the leader
stops the standby fires what was added, with no fire lost or doubled."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

import psycopg
import pytest

from awa_beat import Schedules
from awa_beat._beat import node as node_module
from awa_beat._beat.node import STANDBY_REFRESH_INTERVAL, BeatNode
from awa_beat._config import Settings
from awa_beat._schedules.fire_times import parse_iso
from awa_beat._testing import wait_for

pytestmark = pytest.mark.integration
PROJ = Settings(deployment="proj", default_timezone="UTC", dispatch="awa",
                election_interval=0.2)


class Replica:
    """One BeatNode on the real clock, ticking in a thread as a beat process does."""

    def __init__(self, db_url: str) -> None:
        self.node = BeatNode(PROJ, [], database_url=db_url).open()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and not self.node.closed:
            self._stop.wait(min(self.node.tick(), 0.2))

    def stop(self) -> None:
        self._stop.set()
        # An idle leader sleeps on its lock session until its next timer (the heartbeat,
        # 15 s) unless a change wakes it.
        self._thread.join(30)
        assert not self._thread.is_alive()
        self.node.close()

    @property
    def leads(self) -> bool:
        return bool(self.node.leadership and self.node.leadership.is_leader)


@contextmanager
def replicas(db_url: str) -> Iterator[tuple[Replica, Replica]]:
    first = Replica(db_url)
    started = [first]
    try:
        wait_for(lambda: first.leads, 10, "the first replica to lead")
        second = Replica(db_url)
        started.append(second)
        wait_for(lambda: second.node.engine is not None and second.node.engine.loaded,
                 10, "the standby's view")
        yield first, second
    finally:
        for r in started:
            if not r.node.closed:
                r.stop()


def fires(conn: psycopg.Connection, name: str) -> list[datetime]:
    return [parse_iso(r[0]) for r in conn.execute(
        "SELECT metadata ->> 'cron_fire_time' FROM awa.jobs "
        "WHERE metadata ->> 'cron_name' = %s ORDER BY id", (name,))]


def test_a_standby_follows_api_changes_then_fires_them_after_the_leader(
        db_url: str, layout: str, conn, monkeypatch: pytest.MonkeyPatch) -> None:
    # Notified where the schema sends notifications; where Awa owns the tables a
    # standby keeps its refresh interval. Where it is notified, its periodic refresh is
    # put out of reach, so that only the notification can bring a change in time; the
    # deadline leaves room for a loaded machine (2 s was once missed in a whole CI run),
    # the notification itself takes milliseconds.
    if layout == "standalone":
        monkeypatch.setattr(node_module, "STANDBY_REFRESH_INTERVAL", 600.0)
        within = 5.0
    else:
        within = STANDBY_REFRESH_INTERVAL + 1.5
    with replicas(db_url) as (leader, standby), Schedules(db_url, settings=PROJ) as api:
        assert not standby.leads
        engine = standby.node.engine
        assert engine is not None

        api.add("nightly", task="t.n", schedule="0 3 * * *")
        wait_for(lambda: engine.state("nightly") is not None, within, "the add")
        api.update("nightly", schedule="0 4 * * *")
        wait_for(lambda: engine.state("nightly").cron_expr == "0 4 * * *", within,
                 "the change")
        api.remove("nightly")
        wait_for(lambda: engine.state("nightly") is None, within, "the removal")

        api.add("tick", task="t.tick", schedule=1,
                options={"awa_beat": {"missed_fire_policy": "catch_up"}})
        wait_for(lambda: engine.state("tick") is not None, within, "the second add")
        wait_for(lambda: len(fires(conn, "tick")) >= 2, 5, "the leader's fires")
        leader.stop()
        wait_for(lambda: standby.leads, 5, "the standby to take over")
        taken = len(fires(conn, "tick"))
        wait_for(lambda: len(fires(conn, "tick")) >= taken + 2, 5, "the new leader's fires")
        standby.stop()

    times = fires(conn, "tick")
    # One job per second from the first fire to the last: none lost, none doubled.
    assert times == [times[0] + timedelta(seconds=i) for i in range(len(times))]
