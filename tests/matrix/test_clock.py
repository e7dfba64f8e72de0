"""Time comes from one place (issue 35, item 1): the database's clock.

* The skew measure and the refusal to lead beyond ``awa_beat_clock_tolerance``, with an
  injected host clock against the real server (a follower never takes the lock, a
  leader stands down and a correct replica takes over).
* The fire statement itself refuses a fire dated past the database's ``now()`` plus the
  tolerance, in both layouts, for every active schedule of the catalogue: no job, no
  cursor move, and the engine learns why.
* ``/readyz`` fails on a replica whose clock keeps it from leading.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

from awa_beat._beat.http import readiness
from awa_beat._config import Settings
from awa_beat._db.database import Database, clock_skew
from awa_beat._db.lock import Leadership, skew_problem
from awa_beat._db.records import FireRequest
from awa_beat._engine.engine import Engine
from awa_beat._testing import FakeClock, MemoryStore, wait_for
from awa_beat.errors import ConfigError
from tests.matrix.catalogue import MatrixDB

UTC = timezone.utc
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
HOUR = 3600.0


# -- the measure ---------------------------------------------------------------------------

def test_skew_is_the_database_clock_against_the_round_trip_midpoint() -> None:
    # Sent at 100, answered at 104: the server read its clock at about 102.
    assert clock_skew(100.0, 102.0, 104.0) == 0.0
    assert clock_skew(100.0, 102.0 - HOUR, 104.0) == -HOUR  # this host is an hour ahead
    assert clock_skew(100.0, 102.0 + HOUR, 104.0) == HOUR  # an hour behind


def test_skew_within_the_tolerance_is_no_problem_beyond_it_either_way_is() -> None:
    assert skew_problem(1.9, 2.0) is None
    assert skew_problem(-2.0, 2.0) is None
    ahead = skew_problem(-HOUR, 2.0)
    behind = skew_problem(2.5, 2.0)
    assert ahead is not None and "3600.0 s ahead of the database's" in ahead
    assert behind is not None and "2.5 s behind the database's" in behind
    assert "awa_beat_clock_tolerance: 2 s" in behind


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "601", "soon"])
def test_the_tolerance_setting_is_finite_and_in_range(value: str) -> None:
    with pytest.raises(ConfigError, match="awa_beat_clock_tolerance"):
        Settings.from_app({"awa_beat_clock_tolerance": value}, environ={})


def test_the_tolerance_defaults_to_two_seconds_and_is_read_from_the_environment() -> None:
    assert Settings.from_app({}, environ={}).clock_tolerance == 2.0
    assert Settings.from_app({}, environ={"AWA_BEAT_CLOCK_TOLERANCE": "0.5"}
                             ).clock_tolerance == 0.5


# -- the election, with an injected host clock against the real server -----------------------

class ShiftedWall:
    """This host's epoch clock, off by :attr:`offset` seconds."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def __call__(self) -> float:
        return time.time() + self.offset


@pytest.mark.parametrize("offset", [HOUR, -HOUR, 3.0, -3.0])
def test_a_skewed_follower_never_takes_the_lock(db_url: str, offset: float,
                                                caplog: pytest.LogCaptureFixture) -> None:
    skewed = Leadership(db_url, 7_100_001, wall=ShiftedWall(offset))
    correct = Leadership(db_url, 7_100_001)
    try:
        for _ in range(3):
            assert not skewed.try_acquire()
        assert skewed.skew is not None and abs(skewed.skew + offset) < 1.0
        assert skewed.clock_problem is not None
        # Said once, not at every election.
        said = [r for r in caplog.records if getattr(r, "action", "") == "leader.clock_skew"]
        assert len(said) == 1 and "will not lead" in said[0].getMessage()
        assert correct.try_acquire()  # the lock was free all along
        assert correct.clock_problem is None and abs(correct.skew or 0) < 1.0
    finally:
        skewed.close()
        correct.close()


def test_a_leader_whose_clock_goes_wrong_stands_down_at_its_next_ping(db_url: str) -> None:
    wall = ShiftedWall()
    leader = Leadership(db_url, 7_100_002, wall=wall)
    standby = Leadership(db_url, 7_100_002)
    try:
        assert leader.try_acquire() and leader.ping()
        assert not standby.try_acquire()
        wall.offset = HOUR
        assert not leader.ping()
        assert not leader.is_leader and leader.clock_problem is not None
        # The lock was released (the session closed), not held idle.
        wait_for(standby.try_acquire, what="the correct standby to take over")
        assert not leader.try_acquire()
        wall.offset = 0.0
        standby.resign()
        wait_for(leader.try_acquire, what="the corrected replica to lead again")
        assert leader.clock_problem is None
    finally:
        leader.close()
        standby.close()


def test_a_wider_tolerance_lets_a_slightly_skewed_host_lead(db_url: str) -> None:
    leader = Leadership(db_url, 7_100_003, wall=ShiftedWall(5.0), clock_tolerance=10.0)
    try:
        assert leader.try_acquire()
    finally:
        leader.close()


# -- the fire statement ---------------------------------------------------------------------

def _cursors(conn: psycopg.Connection, names: list[str]) -> dict[str, Any]:
    rows = conn.execute("SELECT name, last_enqueued_at FROM awa.cron_jobs "
                        "WHERE name = ANY(%s)", (names,)).fetchall()
    return dict(rows)


def _job_count(conn: psycopg.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM awa.jobs").fetchone()[0])


def test_the_fire_statement_refuses_fires_past_the_database_clock(matrix_db: MatrixDB) -> None:
    active = [e.name for e in matrix_db.entries() if not e.paused]
    with Database(matrix_db.url) as store, psycopg.connect(matrix_db.url,
                                                        autocommit=True) as conn:
        cursors = _cursors(conn, active)
        jobs = _job_count(conn)
        db_now = store.database_clock()
        # A host an hour ahead: every fire dated up to an hour past the database's clock.
        ahead = [FireRequest(name, cursors[name],
                             [db_now + timedelta(minutes=30), db_now + timedelta(hours=1)])
                 for name in active]
        result = store.evaluator.fire(ahead)
        assert result.jobs == [] and result.skipped == [] and result.failed == {}
        assert sorted(result.ahead) == sorted(active)
        assert _job_count(conn) == jobs
        assert _cursors(conn, active) == cursors
        # Just past the tolerance is refused; within it fires.
        name = active[0]
        store.clock_tolerance = 2.0
        late = store.evaluator.fire(
            [FireRequest(name, cursors[name], [db_now + timedelta(seconds=30)])])
        assert late.ahead == [name] and late.jobs == []
        store.clock_tolerance = 60.0
        within = store.evaluator.fire([FireRequest(name, cursors[name],
                                                   [db_now + timedelta(seconds=30)])])
        assert within.ahead == [] and len(within.jobs) == 1
        assert _job_count(conn) == jobs + 1


# -- what the engine and the node make of it --------------------------------------------------

def test_the_engine_learns_its_fires_were_ahead_and_retries_them() -> None:
    db_clock = FakeClock(T0)
    store = MemoryStore(db_clock)
    store.add("minutely", "* * * * *", last_enqueued_at=T0)
    host = FakeClock(T0 + timedelta(hours=1))  # this host is an hour ahead
    engine = Engine(store.evaluator, clock=host)
    engine.run_pass()
    assert store.fired("minutely") == []
    assert store.rows["minutely"].last_enqueued_at == T0
    assert engine.stats.skipped["clock_ahead"] == 1
    assert engine.next_due() is not None  # retried, not dropped
    # With the right time the same engine fires what was due, from the old cursor.
    host.now = T0 + timedelta(minutes=1, seconds=5)
    db_clock.now = host.now
    engine.run_pass()
    assert store.fired("minutely") == ["2026-03-02 12:01:00+00"]


class _Node:
    """Enough of a node for the readiness probe."""

    def __init__(self, problem: str | None) -> None:
        self.engine = object()
        self.closed = False
        self.elected_once = True
        self.clock_problem = problem
        self.store = MemoryStore(FakeClock(T0))
        self.store.contact.ok()

    def status(self) -> Any:
        return type("S", (), {"role": "standby"})()


def test_readyz_fails_on_a_replica_whose_clock_keeps_it_from_leading() -> None:
    ok, why = readiness(_Node(None), 0.0)  # type: ignore[arg-type]
    assert ok, why
    problem = skew_problem(-HOUR, 2.0)
    ok, why = readiness(_Node(problem), 0.0)  # type: ignore[arg-type]
    assert not ok and "ahead of the database's" in why
