"""The store against a real PostgreSQL, in both layouts (standalone and Awa-migrated)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

from awa_beat._db.database import Database, connect
from awa_beat._db.evaluator import fire_params
from awa_beat._db.records import FireRequest, SyncResult
from awa_beat._db.schedules import ScheduleStore
from awa_beat._testing import wait_for
from awa_beat.errors import NotFound, StoreError

pytestmark = pytest.mark.integration
UTC = timezone.utc
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def row(name: str = "every-minute", **over: Any) -> dict[str, Any]:
    base = {
        "name": name, "cron_expr": "* * * * *", "timezone": "UTC", "kind": "app.tasks.tick",
        "queue": "default", "args": {"args": [1], "kwargs": {"x": "y"}}, "priority": 2,
        "max_attempts": 25, "tags": ["beat"], "metadata": {"celery": {"options": {"queue": "q"}}},
        "missed_fire_policy": "coalesce",
    }
    base.update(over)
    return base


def jobs(conn: psycopg.Connection, name: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT metadata ->> 'cron_fire_time', kind, args, metadata, tags, priority, queue"
        " FROM awa.jobs WHERE metadata ->> 'cron_name' = %s ORDER BY id", (name,)
    ).fetchall()


def cursor_of(conn: psycopg.Connection, name: str) -> datetime | None:
    return conn.execute(
        "SELECT last_enqueued_at FROM awa.cron_jobs WHERE name = %s", (name,)
    ).fetchone()[0]


def set_cursor(conn: psycopg.Connection, name: str, value: datetime | None) -> None:
    conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s WHERE name = %s", (value, name))




def test_migrate_is_idempotent_and_versioned(store: Database, layout: str) -> None:
    again = store.migrate()
    assert again.applied == ()
    assert again.awa_owned is (layout == "awa")
    assert store.check_schema().version == again.version


def test_sync_creates_rows_with_cursor_at_registration(store: Database, conn) -> None:
    before = conn.execute("SELECT date_trunc('second', now())").fetchone()[0]
    result = store.schedules.sync([row("a"), row("b")], deployment="proj")
    assert (result.inserted, result.updated, result.unchanged) == (2, 0, 0)
    a = store.schedules.get("a")
    assert a.deployment == "proj"
    assert a.args == {"args": [1], "kwargs": {"x": "y"}}
    # The cursor is the registration second: nothing before it ever fires.
    assert a.last_enqueued_at is not None and a.last_enqueued_at >= before
    assert a.last_enqueued_at.microsecond == 0


def test_rows_read_together_share_one_object_per_instant(store: Database, conn,
                                                         monkeypatch) -> None:
    store.schedules.sync([row("a"), row("b"), row("c")], deployment="proj")
    set_cursor(conn, "c", T0 + timedelta(microseconds=250))
    stored = {r[0]: r[1:] for r in conn.execute(
        "SELECT name, last_enqueued_at, created_at, updated_at, paused_at FROM awa.cron_jobs")}
    _, rows = store.evaluator.cron_states()
    by_name = {r.name: r for r in rows}
    for name, (last, created, updated, paused) in stored.items():
        r = by_name[name]
        assert (r.last_enqueued_at, r.created_at, r.updated_at, r.paused_at) == (
            last, created, updated, paused)
    a, b, c = by_name["a"], by_name["b"], by_name["c"]
    # Synced in one statement: the same instants, one object each for every row.
    assert a.created_at is b.created_at and a.updated_at is b.updated_at
    assert a.last_enqueued_at is b.last_enqueued_at
    assert c.last_enqueued_at == T0 + timedelta(microseconds=250)
    # A slice of a sweep and a refresh read their rows the same way.
    _, sliced = store.evaluator.cron_states_after("", 10)
    assert sliced[0].created_at is sliced[1].created_at
    changed = list(store.evaluator.changes(T0 - timedelta(days=3650))[1])
    assert changed[0].created_at is changed[1].created_at
    # Past the bound, instants are parsed afresh: still the stored values.
    monkeypatch.setattr("awa_beat._db.evaluator.SHARED_INSTANTS", 1)
    _, bounded = store.evaluator.cron_states()
    assert sorted((r.name, r.last_enqueued_at, r.created_at) for r in bounded) == sorted(
        (name, v[0], v[1]) for name, v in stored.items())


def test_resync_is_additive_and_keeps_cursor_pause_and_created_at(store: Database, conn) -> None:
    store.schedules.sync([row("a"), row("b")], deployment="proj")
    set_cursor(conn, "a", T0)
    store.schedules.pause("a", by="oncall")
    first = store.schedules.get("a")
    # Not the calendar: a change of it moves the cursor (tests/integration/test_sync_cursor.py).
    result = store.schedules.sync([row("a", kind="app.tasks.tock")], deployment="proj")
    assert (result.inserted, result.updated, result.unchanged) == (0, 1, 0)
    after = store.schedules.get("a")
    assert after.kind == "app.tasks.tock"
    assert after.last_enqueued_at == T0
    assert after.paused_at == first.paused_at and after.paused_by == "oncall"
    assert after.created_at == first.created_at
    changed = store.schedules.sync([row("a", kind="app.tasks.tock", cron_expr="*/5 * * * *")],
                                   deployment="proj")
    assert changed.updated == 1 and store.schedules.get("a").last_enqueued_at > T0
    assert store.schedules.get("a").paused_by == "oncall"
    assert {r.name for r in store.schedules.list_all()} == {"a", "b"}  # b not deleted


def test_unchanged_resync_does_not_touch_updated_at(store: Database) -> None:
    store.schedules.sync([row("a")], deployment="proj")
    first = store.schedules.get("a").updated_at
    result = store.schedules.sync([row("a")], deployment="proj")
    assert (result.inserted, result.updated, result.unchanged) == (0, 0, 1)
    assert store.schedules.get("a").updated_at == first


def test_unchanged_resync_writes_nothing_not_even_a_row_lock(store: Database, conn) -> None:
    # ON CONFLICT DO UPDATE locks each row it meets (xmax set, a WAL record) even when its
    # WHERE leaves the row alone; a restart with an unchanged schedule must not.
    store.schedules.sync([row("a"), row("b")], deployment="proj")
    conn.execute("VACUUM awa.cron_jobs")
    before = conn.execute("SELECT name, ctid, xmax::text FROM awa.cron_jobs ORDER BY name"
                          ).fetchall()
    owners = conn.execute("SELECT name, ctid, xmax::text FROM awa_beat.schedules"
                          " ORDER BY name").fetchall()
    store.schedules.sync([row("a"), row("b", cron_expr="0 5 * * *")], deployment="proj")
    after = dict((n, (c, x)) for n, c, x in conn.execute(
        "SELECT name, ctid, xmax::text FROM awa.cron_jobs ORDER BY name"))
    assert after["a"] == (before[0][1], "0")  # untouched: same tuple, never locked
    assert after["b"][0] != before[1][1]  # b changed: a new version
    assert conn.execute("SELECT name, ctid, xmax::text FROM awa_beat.schedules"
                        " ORDER BY name").fetchall() == owners


def test_sync_all_compares_batches_on_several_connections_with_one_total(
        store: Database, conn, monkeypatch) -> None:
    from awa_beat._db.batches import SyncBatch

    def batches(kind: str = "app.tasks.tick") -> list[SyncBatch]:
        return [SyncBatch.encode([row(f"s{b}-{i}", kind=kind if i == 0 else "app.tasks.tick")
                                  for i in range(50)], "proj") for b in range(6)]

    first = store.schedules.sync_all(batches())
    assert (first.inserted, first.updated, first.unchanged) == (300, 0, 0)
    again = store.schedules.sync_all(batches())
    assert (again.inserted, again.updated, again.unchanged) == (0, 0, 300)
    # The first two batches must be under way at once: one after the other, the first
    # would wait at the barrier alone and break it.
    together = threading.Barrier(2, timeout=10)
    real_sync = ScheduleStore.sync

    def sync(self: ScheduleStore, batch: Any, **kw: Any) -> Any:
        if batch.names[0] in ("s0-0", "s1-0"):
            together.wait()
        return real_sync(self, batch, **kw)

    monkeypatch.setattr(ScheduleStore, "sync", sync)
    changed = store.schedules.sync_all(batches(kind="app.tasks.tock"))
    assert (changed.inserted, changed.updated, changed.unchanged) == (0, 6, 294)
    assert conn.execute("SELECT count(*) FILTER (WHERE kind = 'app.tasks.tock'), count(*)"
                        " FROM awa.cron_jobs").fetchone() == (6, 300)
    assert store.schedules.sync_all([]) == SyncResult(0, 0, 0)


def test_sync_all_stops_at_a_refused_batch(store: Database, conn) -> None:
    from awa_beat._db.batches import SyncBatch

    good = [SyncBatch.encode([row(f"g{b}-{i}") for i in range(20)], "proj") for b in range(4)]
    bad = SyncBatch.encode([row("bad", kind="app.tasks.\x00")], "proj")  # text has no NUL
    with pytest.raises(StoreError):
        store.schedules.sync_all([*good[:2], bad, *good[2:]])
    assert conn.execute("SELECT count(*) FROM awa.cron_jobs WHERE name = 'bad'"
                        ).fetchone() == (0,)


def test_fire_inserts_job_and_moves_cursor_atomically(store: Database, conn) -> None:
    store.schedules.sync([row("a")], deployment="proj")
    set_cursor(conn, "a", T0)
    fire = T0 + timedelta(minutes=1)
    result = store.evaluator.fire([FireRequest("a", T0, [fire])])
    assert [(j.name, j.fire_time) for j in result.jobs] == [("a", "2026-01-05 09:01:00+00")]
    assert cursor_of(conn, "a") == fire
    ((fire_time, kind, args, metadata, tags, priority, queue),) = jobs(conn, "a")
    assert fire_time == "2026-01-05 09:01:00+00"
    assert kind == "app.tasks.tick" and queue == "default" and priority == 2
    assert args == {"args": [1], "kwargs": {"x": "y"}}
    assert metadata == {"cron_name": "a", "cron_fire_time": "2026-01-05 09:01:00+00",
                        "celery": {"options": {"queue": "q"}}}
    assert tags == ["beat"]


def test_fire_time_text_is_utc_whatever_the_database_timezone(store: Database, conn) -> None:
    dbname = conn.info.dbname
    conn.execute(f'ALTER DATABASE "{dbname}" SET TimeZone TO \'Pacific/Auckland\'')
    store.close()
    with Database(store.conninfo) as fresh:
        fresh.schedules.sync([row("a")], deployment="proj")
        set_cursor(conn, "a", T0)
        result = fresh.evaluator.fire([FireRequest("a", T0, [T0 + timedelta(hours=3)])])
    assert result.jobs[0].fire_time == "2026-01-05 12:00:00+00"


def test_batched_fire_many_schedules_and_catch_up_fires_in_order(store: Database, conn) -> None:
    store.schedules.sync([row(f"s{i}") for i in range(50)], deployment="proj")
    conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (T0,))
    catch_up = [T0 + timedelta(minutes=m) for m in (1, 2, 3)]
    requests = [FireRequest(f"s{i}", T0, [T0 + timedelta(minutes=1)]) for i in range(1, 50)]
    requests.append(FireRequest("s0", T0, catch_up))
    result = store.evaluator.fire(requests)
    assert len(result.jobs) == 49 + 3
    assert [j[0] for j in jobs(conn, "s0")] == [
        "2026-01-05 09:01:00+00", "2026-01-05 09:02:00+00", "2026-01-05 09:03:00+00"]
    assert cursor_of(conn, "s0") == catch_up[-1]


def test_cas_lost_yields_no_job(store: Database, conn) -> None:
    store.schedules.sync([row("a")], deployment="proj")
    set_cursor(conn, "a", T0)
    fire = T0 + timedelta(minutes=1)
    assert len(store.evaluator.fire([FireRequest("a", T0, [fire])]).jobs) == 1
    # A replica that read the old cursor loses the compare-and-swap.
    assert store.evaluator.fire([FireRequest("a", T0, [fire])]).jobs == []
    assert len(jobs(conn, "a")) == 1


def test_null_cursor_compare_and_swap(store: Database, conn) -> None:
    store.schedules.sync([row("a")], deployment="proj")
    set_cursor(conn, "a", None)
    assert store.evaluator.fire([FireRequest("a", T0, [T0])]).jobs == []  # expected T0, stored NULL
    assert len(store.evaluator.fire([FireRequest("a", None, [T0])]).jobs) == 1


def test_two_connections_racing_the_same_fire_make_exactly_one_job(
    store: Database, db_url: str, conn
) -> None:
    store.schedules.sync([row("a")], deployment="proj")
    set_cursor(conn, "a", T0)
    request = FireRequest("a", T0, [T0 + timedelta(minutes=1)])
    query, params = store.layout.fire_statement, fire_params([request])
    first, second = connect(db_url), connect(db_url)
    try:
        # The first fire runs but has not committed when the second one starts, so the
        # second must block on the row and then lose the compare-and-swap.
        first.execute("BEGIN")
        assert len(first.execute(query, params).fetchall()) == 1
        outcome: list[Any] = []
        racer = threading.Thread(
            target=lambda: outcome.append(second.execute(query, params).fetchall()))
        racer.start()
        pid = second.info.backend_pid
        wait_for(lambda: conn.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()[0] == "Lock", what="the second fire to wait on the row lock")
        first.execute("COMMIT")
        racer.join(10)
        assert outcome == [[]]
    finally:
        first.close()
        second.close()
    assert len(jobs(conn, "a")) == 1


def test_connection_killed_mid_statement_leaves_neither_mark_nor_job(
    store: Database, conn, layout: str
) -> None:
    store.schedules.sync([row("a")], deployment="proj")
    set_cursor(conn, "a", T0)
    # Make the insert half of the statement hang after the UPDATE half has run.
    target = "awa.jobs_hot" if layout == "awa" else "awa.jobs"
    conn.execute(
        "CREATE FUNCTION public.slow_insert() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN PERFORM pg_sleep(60); RETURN NEW; END $$"
    )
    conn.execute(f"CREATE TRIGGER slow BEFORE INSERT ON {target} "
                 "FOR EACH ROW EXECUTE FUNCTION public.slow_insert()")
    errors: list[BaseException] = []

    def fire() -> None:
        try:
            store.evaluator.fire([FireRequest("a", T0, [T0 + timedelta(minutes=1)])])
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=fire)
    worker.start()
    wait_for(lambda: conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'WITH due AS%%'"
        " AND wait_event = 'PgSleep'").fetchone()[0] == 1, what="the fire to reach the insert")
    conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                 " WHERE query LIKE 'WITH due AS%%' AND pid <> pg_backend_pid()")
    worker.join(10)
    assert errors and isinstance(errors[0], StoreError)
    assert cursor_of(conn, "a") == T0
    assert jobs(conn, "a") == []


def test_pause_between_read_and_cas_blocks_the_fire(store: Database, conn) -> None:
    store.schedules.sync([row("a")], deployment="proj")
    set_cursor(conn, "a", T0)
    seen = store.schedules.get("a")  # the evaluator's read
    store.schedules.pause("a", by="oncall")
    result = store.evaluator.fire([FireRequest("a", seen.last_enqueued_at,
                                               [T0 + timedelta(minutes=1)])])
    assert result.jobs == []
    assert cursor_of(conn, "a") == T0
    store.schedules.resume("a")
    assert len(store.evaluator.fire([FireRequest("a", T0, [T0 + timedelta(minutes=1)])]).jobs) == 1


def test_trigger_while_paused_makes_one_job_and_keeps_cursor(store: Database, conn) -> None:
    store.schedules.sync([row("a")], deployment="proj")
    set_cursor(conn, "a", T0)
    store.schedules.pause("a")
    job_id = store.schedules.trigger("a")
    (metadata,) = conn.execute("SELECT metadata FROM awa.jobs WHERE id = %s", (job_id,)).fetchone()
    assert metadata["cron_name"] == "a" and metadata["triggered_manually"] is True
    assert "cron_fire_time" not in metadata
    assert cursor_of(conn, "a") == T0
    assert store.schedules.get("a").paused_at is not None


def test_unknown_names_raise_not_found(store: Database) -> None:
    for call in (store.schedules.get, store.schedules.pause, store.schedules.resume,
                 store.schedules.trigger):
        with pytest.raises(NotFound, match="no schedule named 'nope'"):
            call("nope")
    assert store.schedules.remove("nope") is False


def test_remove_keeps_fired_jobs(store: Database, conn) -> None:
    store.schedules.sync([row("a")], deployment="proj")
    store.schedules.trigger("a")
    assert store.schedules.remove("a") is True
    assert store.schedules.list_all() == []
    assert conn.execute("SELECT count(*) FROM awa.jobs").fetchone()[0] == 1


def test_a_foreign_row_awa_would_reject_does_not_stop_the_batch(store: Database, conn) -> None:
    # Another deployment wrote a row whose jobs Awa's limits reject (21 tags).
    store.schedules.sync([row("good")], deployment="proj")
    conn.execute("INSERT INTO awa.cron_jobs (name, cron_expr, kind, tags, last_enqueued_at)"
                 " VALUES ('bad', '* * * * *', 'k', %s, %s)", ([f"t{i}" for i in range(21)], T0))
    set_cursor(conn, "good", T0)
    fire = [T0 + timedelta(minutes=1)]
    result = store.evaluator.fire([FireRequest("bad", T0, fire), FireRequest("good", T0, fire)])
    assert [j.name for j in result.jobs] == ["good"]
    assert cursor_of(conn, "bad") == T0  # as Awa: no job, no cursor move


def test_sessions_are_utc(store: Database) -> None:
    with store._conn() as c:
        assert c.execute("SHOW TimeZone").fetchone()[0] == "UTC"


def test_stale_statistics_are_refreshed_and_fresh_ones_left_alone(store: Database, conn) -> None:
    store.schedules.sync([row(f"r{i}") for i in range(1500)], deployment="test")
    assert store.schedules.analyze_if_stale() is True  # never analyzed
    (tuples,) = conn.execute("SELECT reltuples FROM pg_class"
                             " WHERE oid = 'awa.cron_jobs'::regclass").fetchone()
    assert tuples == 1500
    store.schedules.sync([row(f"s{i}") for i in range(10)], deployment="test")
    assert store.schedules.analyze_if_stale() is False  # 10 more rows: close enough


def test_a_small_table_is_not_analyzed_though_it_never_was(store: Database) -> None:
    store.schedules.sync([row(f"r{i}") for i in range(100)], deployment="test")
    assert store.schedules.analyze_if_stale() is False  # every plan is fast on 100 rows
