"""The evaluator against a real PostgreSQL, driven by an injected clock."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

from awa_beat._db.database import Database
from awa_beat._engine.engine import Engine
from awa_beat._testing import FakeClock as Clock

pytestmark = pytest.mark.integration
UTC = timezone.utc



def add(store: Database, conn: psycopg.Connection, name: str, cron_expr: str, cursor: datetime,
        **over: Any) -> None:
    row = {"name": name, "cron_expr": cron_expr, "timezone": "UTC", "kind": "t.k",
           "queue": "default", "args": {"args": [], "kwargs": {}}, "priority": 2,
           "max_attempts": 25, "tags": [], "metadata": {}, "missed_fire_policy": "coalesce"}
    row.update(over)
    store.schedules.sync([row], deployment="test")
    conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s WHERE name = %s",
                 (cursor, name))


def fired(conn: psycopg.Connection, name: str) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT metadata ->> 'cron_fire_time' FROM awa.jobs"
        " WHERE metadata ->> 'cron_name' = %s ORDER BY id", (name,))]


T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def test_coalesce_fires_only_the_latest_missed_fire(store: Database, conn) -> None:
    add(store, conn, "c", "* * * * *", T0)
    clock = Clock(T0 + timedelta(minutes=10, seconds=30))
    engine = Engine(store.evaluator, clock=clock)
    report = engine.run_pass()
    assert fired(conn, "c") == ["2026-03-02 12:10:00+00"]
    assert report.wait == pytest.approx(1.0)  # the refresh comes before 12:11:00
    clock.advance(seconds=30)
    engine.run_pass()
    assert fired(conn, "c") == ["2026-03-02 12:10:00+00", "2026-03-02 12:11:00+00"]


def test_catch_up_replays_in_order_bounded_per_pass(store: Database, conn) -> None:
    add(store, conn, "cu", "* * * * *", T0, missed_fire_policy="catch_up")
    clock = Clock(T0 + timedelta(minutes=7, seconds=5))
    engine = Engine(store.evaluator, clock=clock, catch_up_limit=3)
    assert engine.run_pass().wait == 0  # more is due right away
    assert len(fired(conn, "cu")) == 3
    engine.run_pass()
    engine.run_pass()
    assert engine.run_pass().wait > 0
    assert fired(conn, "cu") == [f"2026-03-02 12:0{m}:00+00" for m in range(1, 8)]


def test_dst_fall_back_fires_only_the_first_pass(store: Database, conn) -> None:
    add(store, conn, "ny", "30 1 * 11 *", datetime(2025, 10, 31, tzinfo=UTC),
        timezone="America/New_York", missed_fire_policy="catch_up")
    engine = Engine(store.evaluator, clock=Clock(datetime(2025, 11, 3, 12, tzinfo=UTC)))
    engine.run_pass()
    assert fired(conn, "ny") == ["2025-11-01 05:30:00+00", "2025-11-02 05:30:00+00",
                                 "2025-11-03 06:30:00+00"]


def test_dst_spring_forward_moves_to_the_end_of_the_gap(store: Database, conn) -> None:
    add(store, conn, "ny", "30 2 * * *", datetime(2025, 3, 8, 12, tzinfo=UTC),
        timezone="America/New_York", missed_fire_policy="catch_up")
    engine = Engine(store.evaluator, clock=Clock(datetime(2025, 3, 10, 12, tzinfo=UTC)))
    engine.run_pass()
    assert fired(conn, "ny") == ["2025-03-09 07:00:00+00", "2025-03-10 06:30:00+00"]


def test_interval_fires_on_the_epoch_grid(store: Database, conn) -> None:
    start = datetime(2026, 3, 2, 12, 0, 1, tzinfo=UTC)  # epoch second divisible by 7
    assert int(start.timestamp()) % 7 == 0
    add(store, conn, "i7", "@every 7s", start, missed_fire_policy="catch_up")
    clock = Clock(start + timedelta(seconds=20))
    Engine(store.evaluator, clock=clock).run_pass()
    assert fired(conn, "i7") == ["2026-03-02 12:00:08+00", "2026-03-02 12:00:15+00"]


def test_wait_is_the_time_until_the_next_fire(store: Database, conn) -> None:
    add(store, conn, "h", "0 * * * *", T0)
    engine = Engine(store.evaluator, clock=Clock(T0 + timedelta(minutes=59, seconds=59.5)),
                    refresh_interval=3600)
    assert engine.run_pass().wait == pytest.approx(0.5)


def test_paused_rows_are_skipped_and_resume_is_noticed(store: Database, conn) -> None:
    add(store, conn, "p", "* * * * *", T0)
    store.schedules.pause("p", by="test")
    clock = Clock(T0 + timedelta(minutes=5))
    engine = Engine(store.evaluator, clock=clock)
    engine.run_pass()
    assert fired(conn, "p") == []
    store.schedules.resume("p")
    clock.advance(seconds=1)
    engine.run_pass()  # the refresh sees the resume
    engine.run_pass()
    assert fired(conn, "p") == ["2026-03-02 12:05:00+00"]  # coalesced: one fire


def test_new_changed_and_removed_rows_are_noticed_on_refresh(store: Database, conn) -> None:
    add(store, conn, "a", "0 0 1 1 *", T0)
    clock = Clock(T0)
    engine = Engine(store.evaluator, clock=clock)
    engine.run_pass()
    add(store, conn, "b", "* * * * *", T0)  # written by someone else
    conn.execute("UPDATE awa.cron_jobs SET cron_expr = '* * * * *', updated_at = now()"
                 " WHERE name = 'a'")
    clock.advance(minutes=1)
    engine.run_pass()
    engine.run_pass()
    assert fired(conn, "a") == fired(conn, "b") == ["2026-03-02 12:01:00+00"]
    store.schedules.remove("b")
    clock.advance(seconds=1)
    engine.run_pass()
    assert {row.name for row in engine.rows()} == {"a"}


def test_invalid_rows_are_logged_once_and_skipped(store: Database, conn, caplog) -> None:
    add(store, conn, "good", "* * * * *", T0)
    conn.execute("INSERT INTO awa.cron_jobs (name, cron_expr, kind, last_enqueued_at)"
                 " VALUES ('bad', 'FRI-MON', 'k', %s), ('badtz', '* * * * *', 'k', %s)",
                 (T0, T0))
    conn.execute("UPDATE awa.cron_jobs SET timezone = 'Mars/Base' WHERE name = 'badtz'")
    clock = Clock(T0 + timedelta(minutes=1))
    engine = Engine(store.evaluator, clock=clock)
    with caplog.at_level(logging.ERROR, logger="awa_beat.engine"):
        for _ in range(3):
            engine.run_pass()
            clock.advance(seconds=1)
    assert fired(conn, "good") == ["2026-03-02 12:01:00+00"]
    invalid = sorted(r.schedule for r in caplog.records
                     if getattr(r, "action", None) == "schedule.invalid")
    assert invalid == ["bad", "badtz"]


def test_two_engines_without_a_lock_still_fire_once(store: Database, conn, db_url: str) -> None:
    for i in range(20):
        add(store, conn, f"s{i}", "* * * * *", T0, missed_fire_policy="catch_up")
    clock = Clock(T0 + timedelta(minutes=3))
    with Database(db_url) as other:
        first, second = Engine(store.evaluator, clock=clock), Engine(other.evaluator, clock=clock)
        first.load()
        second.load()
        first.run_pass()
        second.run_pass()  # read the same cursors: every CAS loses
        clock.advance(minutes=1)
        second.run_pass()
        first.run_pass()
    counts = conn.execute(
        "SELECT count(*), count(DISTINCT (metadata ->> 'cron_name', metadata ->> "
        "'cron_fire_time')) FROM awa.jobs").fetchone()
    assert counts == (20 * 4, 20 * 4)


def test_a_new_awa_row_with_no_cursor_follows_awas_first_fire_rule(store: Database, conn) -> None:
    created = datetime(2026, 3, 2, 9, 1, 0, 700000, tzinfo=UTC)
    conn.execute("INSERT INTO awa.cron_jobs (name, cron_expr, kind, created_at)"
                 " VALUES ('fresh', '0 9 * * *', 'k', %s)", (created,))
    Engine(store.evaluator, clock=Clock(datetime(2026, 3, 2, 9, 5, tzinfo=UTC))).run_pass()
    assert fired(conn, "fresh") == ["2026-03-02 09:00:00+00"]


def settled(read: Any, conn: psycopg.Connection) -> Any:
    """``read()`` again until its snapshot's xmin is past every row's writer.

    A snapshot's xmin is the oldest transaction still running anywhere on the server, so
    another database's busy client can hold it below the rows this test just wrote; the
    engine then sees them once more, which is harmless. The rule under test applies once
    the read's xmin is past them."""
    newest = conn.execute("SELECT max(xmin::text::bigint) FROM awa.cron_jobs").fetchone()[0]
    deadline = time.monotonic() + 30
    while True:
        result = read()
        state = result[0]
        if state.xmin > newest or time.monotonic() > deadline:
            return result
        time.sleep(0.05)


def test_a_refresh_returns_only_what_the_last_read_has_not_seen(store: Database, conn) -> None:
    add(store, conn, "a", "0 0 1 1 *", T0)
    add(store, conn, "b", "0 0 1 1 *", T0)
    state, _ = settled(store.evaluator.cron_states, conn)
    since = state.db_now - timedelta(seconds=30)  # both rows changed inside the lookback
    assert {r.name for r in store.evaluator.changes(since)[1]} == {"a", "b"}
    # The last read returned them.
    assert list(store.evaluator.changes(since, state.xmin)[1]) == []
    conn.execute("UPDATE awa.cron_jobs SET paused_at = now(), updated_at = now()"
                 " WHERE name = 'a'")
    later, rows = settled(lambda: store.evaluator.changes(since, state.xmin), conn)
    assert [(r.name, r.paused_at is not None) for r in rows] == [("a", True)]
    assert list(store.evaluator.changes(since, later.xmin)[1]) == []


def test_a_change_committed_after_a_read_it_began_before_is_seen(store: Database, conn,
                                                                 db_url: str) -> None:
    add(store, conn, "a", "0 0 1 1 *", T0)
    state, _ = settled(store.evaluator.cron_states, conn)
    since = state.db_now - timedelta(seconds=30)
    with psycopg.connect(db_url) as writer:  # one transaction, open across the next read
        writer.execute("SAVEPOINT s")  # in a subtransaction: the subtle case for xmin
        writer.execute("UPDATE awa.cron_jobs SET cron_expr = '* * * * *', updated_at = now()"
                       " WHERE name = 'a'")
        writer.execute("RELEASE SAVEPOINT s")
        during, rows = store.evaluator.changes(since, state.xmin)
        assert list(rows) == []  # not committed yet
        writer.commit()
    _, rows = store.evaluator.changes(since, during.xmin)
    assert [r.cron_expr for r in rows] == ["* * * * *"]


def test_after_a_fire_the_engine_holds_the_row_as_stored(store: Database, conn) -> None:
    add(store, conn, "a", "* * * * *", T0)
    engine = Engine(store.evaluator, clock=Clock(T0 + timedelta(minutes=1)))
    engine.run_pass()
    assert fired(conn, "a") == ["2026-03-02 12:01:00+00"]
    # So the refresh that returns the fired row finds nothing to recompute in it.
    assert engine.rows() == store.evaluator.cron_states_by_name(["a"])


def test_a_burst_is_fired_in_batches_without_sleeping_between(store: Database, conn,
                                                              monkeypatch) -> None:
    import awa_beat._engine.firing as firing_module

    monkeypatch.setattr(firing_module, "FIRE_BATCH", 8)
    monkeypatch.setattr(firing_module, "FIRST_FIRE_BATCH", 1)
    monkeypatch.setattr(firing_module, "FIRE_RAMP", 4)
    for i in range(20):
        add(store, conn, f"b{i}", "* * * * *", T0)
    clock = Clock(T0 + timedelta(minutes=1))
    engine = Engine(store.evaluator, clock=clock)

    def burst() -> list[tuple[int, bool]]:
        counts = []
        for _ in range(5):
            report = engine.run_pass()
            counts.append((len(report.fired.jobs), report.wait > 0))
        return counts

    # A small first statement, for the bridge to start on, then larger ones up to a full
    # batch; then a wait.
    assert burst() == [(1, False), (4, False), (8, False), (7, True), (0, True)]
    assert all(fired(conn, f"b{i}") == ["2026-03-02 12:01:00+00"] for i in range(20))
    clock.advance(minutes=1)  # the next burst starts small again
    assert burst() == [(1, False), (4, False), (8, False), (7, True), (0, True)]


def test_a_change_committed_later_than_the_lookback_is_seen_at_the_full_reload(
        store: Database, conn) -> None:
    from awa_beat._engine.view import FULL_RELOAD_INTERVAL

    add(store, conn, "a", "0 0 1 1 *", T0)
    clock = Clock(T0)
    engine = Engine(store.evaluator, clock=clock)
    engine.run_pass()
    # As a transaction that took its now() an hour ago and committed just now would write.
    conn.execute("UPDATE awa.cron_jobs SET cron_expr = '* * * * *',"
                 " updated_at = now() - interval '1 hour' WHERE name = 'a'")
    clock.advance(seconds=1)
    engine.refresh()
    assert [r.cron_expr for r in engine.rows()] == ["0 0 1 1 *"]  # outside the lookback
    clock.advance(seconds=FULL_RELOAD_INTERVAL)
    engine.refresh()
    assert [r.cron_expr for r in engine.rows()] == ["* * * * *"]


def test_a_reload_keeps_the_rows_it_holds_and_drops_a_deleted_one_an_insert_hides(
        store: Database, conn) -> None:
    for name in ("a", "b", "c"):
        add(store, conn, name, "0 0 1 1 *", T0)
    engine = Engine(store.evaluator, clock=Clock(T0))
    engine.load()
    held = {name: engine.table.packed(name) for name in ('a', 'b', 'c')}
    # A delete and an insert: the row count is the same as before.
    store.schedules.remove("b")
    add(store, conn, "d", "0 0 1 1 *", T0)
    conn.execute("UPDATE awa.cron_jobs SET cron_expr = '0 0 2 1 *', updated_at = now()"
                 " WHERE name = 'c'")
    engine.load()
    now = {row.name: row for row in engine.rows()}
    assert set(now) == {"a", "c", "d"}
    # Unchanged: the row read again was dropped, not kept.
    assert engine.table.packed("a") is held["a"]
    assert now["c"].cron_expr == "0 0 2 1 *"


def test_a_row_awa_would_refuse_is_held_as_invalid_and_skipped(store: Database, conn,
                                                                caplog) -> None:
    add(store, conn, "ok", "* * * * *", T0)
    add(store, conn, "bad", "* * * * *", T0)
    conn.execute("UPDATE awa.cron_jobs SET priority = 9 WHERE name = 'bad'")  # Awa: 1-4
    clock = Clock(T0 + timedelta(minutes=1, seconds=5))
    engine = Engine(store.evaluator, clock=clock)
    with caplog.at_level(logging.ERROR, logger="awa_beat.engine"):
        engine.run_pass()
    assert fired(conn, "ok") == ["2026-03-02 12:01:00+00"] and fired(conn, "bad") == []
    assert engine.stats.skipped["invalid"] == 1
    assert "would break Awa's limits" in caplog.text
    assert engine.census(60).invalid == 1
    clock.advance(minutes=1)
    engine.run_pass()  # not tried again until the row changes
    assert fired(conn, "bad") == [] and engine.stats.skipped["invalid"] == 1
