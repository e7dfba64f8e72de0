"""Matrix, backfill (issue 38, part 1): ``Schedules.backfill`` on every type of the
catalogue in both layouts, checked against each type's documented calendar (computed
without awa-beat), then what makes it safe: idempotency (twice, two replicas at once, over
fires the schedule made itself, over a reported outcome), the cursor left alone, the
limit, overlap, dry runs, the audit log, history, removal, Celery dispatch, and the
command line run as a process.

One database per layout serves the API cells, with every cursor moved past the ranges
below (as if each schedule had fired up to 2036), so that every range is the past; each
cell backfills a schedule of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

from awa_beat import BackfillRefused, BackfillResult, Schedules
from awa_beat._db.database import Database, connect
from tests.matrix.catalogue import CATALOGUE, NAMES, SETTINGS, MatrixDB

pytestmark = pytest.mark.integration
UTC = timezone.utc
#: Where the API cells put every cursor: after every range of :data:`RANGES`.
CURSOR = datetime(2036, 1, 1, tzinfo=UTC)


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


#: A range of each type, chosen to cross what makes the type itself: a DST change
#: (cron-zone: Paris, 29 March 2026), the bounds (start= and end= inside the range), the
#: one instant of ``at``, Celery's AND of the day fields.
RANGES: dict[str, tuple[datetime, datetime]] = {
    "cron-zone": (_t("2026-03-27T00:00:00+00:00"), _t("2026-04-01T00:00:00+00:00")),
    "grid-interval": (_t("2026-11-01T00:00:00+00:00"), _t("2026-11-01T02:00:00+00:00")),
    "offgrid-interval": (_t("2026-11-01T00:00:00+00:00"), _t("2026-11-01T00:10:00+00:00")),
    "solar": (_t("2026-06-01T00:00:00+00:00"), _t("2026-06-05T00:00:00+00:00")),
    "at": (_t("2030-12-31T00:00:00+00:00"), _t("2031-01-02T00:00:00+00:00")),
    "rrule": (_t("2026-01-01T00:00:00+00:00"), _t("2026-02-01T00:00:00+00:00")),
    "crontab-and": (_t("2026-01-01T00:00:00+00:00"), _t("2027-12-31T00:00:00+00:00")),
    "crontab-dst-celery": (_t("2026-01-10T00:00:00+00:00"), _t("2026-01-14T00:00:00+00:00")),
    "bound-start": (_t("2030-05-31T21:30:00+00:00"), _t("2030-06-01T03:00:00+00:00")),
    "bound-end": (_t("2034-12-31T21:30:00+00:00"), _t("2035-01-01T03:00:00+00:00")),
    "bound-max-runs": (_t("2026-11-01T00:00:00+00:00"), _t("2026-11-01T05:00:00+00:00")),
    "one-off": (_t("2026-11-01T00:00:00+00:00"), _t("2026-11-05T00:00:00+00:00")),
    "paused": (_t("2026-11-01T00:00:00+00:00"), _t("2026-11-04T00:00:00+00:00")),
    "retired": (_t("2026-11-01T00:00:00+00:00"), _t("2026-11-01T00:00:09+00:00")),
}


def documented(name: str, start: datetime, end: datetime) -> list[datetime]:
    """The fire times of ``name``'s documented calendar in ``[start, end]``."""
    calendar = CATALOGUE[name].calendar
    found: list[datetime] = []
    t = start - timedelta(microseconds=1)
    while (nxt := calendar(t)) is not None and nxt <= end:
        found.append(nxt)
        t = nxt
    return found


def pg_text(t: datetime) -> str:
    """A fire time as the fire statement writes it into ``cron_fire_time``."""
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S+00")


def jobs_of(url: str, name: str, *, backfilled: bool = True) -> list[tuple[int, str, bool]]:
    """``name``'s jobs (by default those a backfill inserted): id, fire time, backfilled."""
    with connect(url) as conn:
        return conn.execute(
            "SELECT id, metadata ->> 'cron_fire_time', (metadata ->> 'backfilled')::boolean"
            "  FROM awa.jobs WHERE metadata ->> 'cron_name' = %s"
            "   AND (metadata ? 'backfilled' OR NOT %s) ORDER BY id",
            (name, backfilled)).fetchall()


def cursor_of(url: str, name: str) -> datetime | None:
    with connect(url) as conn:
        row = conn.execute("SELECT last_enqueued_at FROM awa.cron_jobs WHERE name = %s",
                           (name,)).fetchone()
    assert row is not None
    return row[0]


@pytest.fixture(scope="module")
def moved(shared_matrix_db: MatrixDB) -> MatrixDB:
    with connect(shared_matrix_db.url) as conn:
        conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (CURSOR,))
    return shared_matrix_db


@pytest.fixture(scope="module")
def api(moved: MatrixDB) -> Iterator[Schedules]:
    with moved.schedules() as schedules:
        yield schedules


# -- every type, both layouts ------------------------------------------------------------------


def test_the_ranges_cover_the_catalogue() -> None:
    assert sorted(RANGES) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_each_type_gets_exactly_its_fire_times_once(api: Schedules, moved: MatrixDB,
                                                    name: str) -> None:
    start, end = RANGES[name]
    expected = documented(name, start, end)
    assert expected, name  # every range holds fires of its type

    planned = api.backfill(name, start, end, dry_run=True)
    assert (list(planned.inserted), planned.skipped, planned.dry_run) == (expected, (), True)
    assert jobs_of(moved.url, name) == []  # a dry run writes nothing

    done = api.backfill(name, start, end)
    assert isinstance(done, BackfillResult)
    assert (list(done.inserted), done.skipped) == (expected, ())
    assert (done.first, done.last) == (expected[0], expected[-1])
    jobs = jobs_of(moved.url, name)
    # One job a fire time, in fire-time order, in the fire statement's text form.
    assert [(i, t, b) for i, t, b in jobs] == [
        (i, pg_text(t), True) for i, t in zip(done.job_ids, expected, strict=True)]
    assert [i for i, _, _ in jobs] == sorted(i for i, _, _ in jobs)

    again = api.backfill(name, start, end)
    assert (again.inserted, list(again.skipped)) == ((), expected)
    assert len(jobs_of(moved.url, name)) == len(expected)
    assert cursor_of(moved.url, name) == CURSOR  # the cursor is not moved
    with connect(moved.url) as conn:
        (rows,) = conn.execute("SELECT count(*) FROM awa_beat.backfills WHERE schedule = %s",
                               (name,)).fetchone() or (0,)
    assert rows == len(expected)
    kinds = {o.kind for o in api._ops.occurrences(name, len(expected))}
    assert kinds == {"backfilled"}


# -- idempotency -------------------------------------------------------------------------------


def test_two_replicas_at_once_insert_each_fire_time_once(matrix_db: MatrixDB) -> None:
    name = "offgrid-interval"  # every 7 s: thousands of fire times a day
    with connect(matrix_db.url) as conn:
        conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (CURSOR,))
    start, end = _t("2026-11-01T00:00:00+00:00"), _t("2026-11-03T00:00:00+00:00")
    expected = documented(name, start, end)
    barrier = threading.Barrier(2)
    results: list[BackfillResult] = []
    errors: list[BaseException] = []

    def replica() -> None:
        try:
            with matrix_db.schedules() as schedules:
                barrier.wait(10)
                results.append(schedules.backfill(name, start, end))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=replica) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == [] and len(results) == 2
    assert sorted(r.inserted_count for r in results) == [0, len(expected)]
    assert sorted(r.skipped_count for r in results) == [0, len(expected)]
    jobs = jobs_of(matrix_db.url, name)
    assert sorted(t for _, t, _ in jobs) == sorted(pg_text(t) for t in expected)


def test_fire_times_the_schedule_fired_itself_or_reported_are_skipped(
        matrix_db: MatrixDB) -> None:
    # "retired" fired its two runs through the real fire statement (catalogue.retire):
    # its cursor is the second of them.
    name = "retired"
    fired = [t for _, t, _ in jobs_of(matrix_db.url, name, backfilled=False)]
    assert len(fired) == 2
    cursor = cursor_of(matrix_db.url, name)
    assert cursor is not None and pg_text(cursor) == fired[-1]
    start = cursor - timedelta(seconds=5)
    with connect(matrix_db.url) as conn:  # a run reported by a worker, its job pruned
        conn.execute(
            "INSERT INTO awa_beat.outcomes (task_id, schedule, fire_time, state)"
            " VALUES ('pruned', %s, %s, 'succeeded')", (name, pg_text(start)))
    with matrix_db.schedules() as schedules:
        done = schedules.backfill(name, start, cursor)
    expected = documented(name, start, cursor)
    assert len(expected) == 6
    assert sorted(pg_text(t) for t in done.skipped) == sorted([pg_text(start), *fired])
    assert list(done.inserted) == [t for t in expected if pg_text(t) not in
                                   {pg_text(start), *fired}]
    assert len(jobs_of(matrix_db.url, name, backfilled=False)) == 2 + 3


# -- refusals: nothing written -------------------------------------------------------------------


def nothing_written(url: str) -> None:
    with connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM awa_beat.backfills").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM awa.jobs WHERE metadata ? 'backfilled'"
                            ).fetchone() == (0,)


def test_refusals_write_nothing_and_say_why(matrix_db: MatrixDB) -> None:
    name = "grid-interval"
    cursor = cursor_of(matrix_db.url, name)
    assert cursor is not None
    start = cursor - timedelta(hours=2)
    count = len(documented(name, start, cursor))
    with matrix_db.schedules() as schedules:
        with pytest.raises(BackfillRefused, match=r"after its cursor \(.*\).*end the range"):
            schedules.backfill(name, start, cursor + timedelta(hours=1))
        with pytest.raises(BackfillRefused, match="more than 5 fire times"):
            schedules.backfill(name, start, cursor, limit=5)
        with pytest.raises(BackfillRefused, match="above the maximum of 1000000"):
            schedules.backfill(name, start, cursor, limit=1_000_001)
        with pytest.raises(BackfillRefused, match="overlap must be one of allow, skip"):
            schedules.backfill(name, start, cursor, overlap="buffer_one")
        with pytest.raises(BackfillRefused, match=r"start .* has no time zone"):
            schedules.backfill(name, start.replace(tzinfo=None), cursor)
        with pytest.raises(BackfillRefused, match="is after end"):
            schedules.backfill(name, cursor, start)
        nothing_written(matrix_db.url)
        with pytest.raises(Exception, match="no schedule named 'nope'"):
            schedules.backfill("nope", start, cursor)
        # A range of exactly the limit passes.
        assert schedules.backfill(name, start, cursor, limit=count).inserted_count == count


def test_overlap_skip_refuses_while_a_run_has_not_finished(matrix_db: MatrixDB) -> None:
    name = "paused"  # paused: it may still be backfilled
    cursor = cursor_of(matrix_db.url, name)
    assert cursor is not None
    with matrix_db.schedules() as schedules:
        first = schedules.backfill(name, cursor - timedelta(days=3), cursor - timedelta(days=2),
                                   overlap="skip")
        assert first.inserted_count >= 1  # no run was in progress
        with pytest.raises(BackfillRefused, match=rf"overlap 'skip'.*job {first.job_ids[0]}"):
            schedules.backfill(name, cursor - timedelta(days=2), cursor, overlap="skip")
        # allow: every job available at once, the run in progress or not
        rest = schedules.backfill(name, cursor - timedelta(days=2), cursor)
        assert list(rest.inserted) == [
            t for t in documented(name, cursor - timedelta(days=2), cursor)
            if t not in first.inserted]


def test_audit_history_and_removal(matrix_db: MatrixDB) -> None:
    name = "bound-max-runs"
    cursor = cursor_of(matrix_db.url, name)
    assert cursor is not None
    start = cursor - timedelta(hours=3)
    count = len(documented(name, start, cursor))
    with matrix_db.schedules() as schedules:
        schedules.backfill(name, start, cursor, dry_run=True)  # not recorded: no write
        done = schedules.backfill(name, start, cursor)
        again = schedules.backfill(name, start, cursor)
        with pytest.raises(BackfillRefused):
            schedules.backfill(name, start, cursor, limit=1)
        entries = [e for e in schedules._ops.audit_log(schedule=name)
                   if e.action == "backfill"]
        assert [e.outcome.split(":")[0] for e in entries] == ["error", "ok", "ok"]
        assert entries[1].detail["inserted"] == 0
        assert entries[1].detail["skipped"] == done.inserted_count == count
        assert entries[2].detail == {
            "from": start.isoformat().replace("+00:00", "Z"),
            "to": cursor.isoformat().replace("+00:00", "Z"), "overlap": "allow",
            "inserted": count, "skipped": 0}
        assert entries[2].source == "api" and "@" in entries[2].actor
        assert again.inserted == ()
        history = schedules._ops.occurrences(name, 10)
        assert [(o.kind, o.job_id) for o in history] == [
            ("backfilled", i) for i in reversed(done.job_ids)]
        schedules.remove(name)
    with connect(matrix_db.url) as conn:
        assert conn.execute("SELECT count(*) FROM awa_beat.backfills WHERE schedule = %s",
                            (name,)).fetchone() == (0,)
        assert len(jobs_of(matrix_db.url, name)) == count  # the jobs stay, as for removal


def test_a_celery_dispatched_backfill_is_published_by_the_bridge(matrix_db: MatrixDB) -> None:
    if matrix_db.layout != "standalone":
        pytest.skip("Celery dispatch: the standalone layout only (refused where Awa is)")
    with Schedules(matrix_db.url, settings=SETTINGS) as schedules:
        schedules.add("celery-backfill", task="matrix.celery", schedule=60,
                      options={"awa_beat": {"dispatch": "celery"}})
        cursor = schedules.get("celery-backfill").row.last_enqueued_at
        assert cursor is not None
        end = cursor.replace(second=0)
        done = schedules.backfill("celery-backfill", end - timedelta(minutes=4), end)
    assert done.inserted_count == 5
    with Database(matrix_db.url) as store:
        pending = store.outbox.pending_celery_jobs(SETTINGS.deployment, 100)
    assert [(j["id"], j["cron_fire_time"]) for j in pending] == [
        (i, pg_text(t)) for i, t in zip(done.job_ids, done.inserted, strict=True)]


# -- the command line, as a process --------------------------------------------------------------


def awa_beat(db: MatrixDB, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run([sys.executable, "-m", "awa_beat", "backfill", *args,
                           "--database-url", db.url], capture_output=True, text=True,
                          timeout=60, env=env, check=False)


def test_the_command(matrix_db: MatrixDB) -> None:
    db = matrix_db
    name = "one-off"
    cursor = cursor_of(db.url, name)
    assert cursor is not None
    start = (cursor - timedelta(days=3)).isoformat()
    end = cursor.isoformat().replace("+00:00", "Z")
    expected = documented(name, _t(start), cursor)
    count = len(expected)
    assert count >= 3

    dry = awa_beat(db, name, "--from", start, "--to", end, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith(f"dry run, nothing written: {name}: would insert {count} job(s), "
                                 "0 fire time(s) skipped")
    assert jobs_of(db.url, name) == []

    ran = awa_beat(db, name, "--from", start, "--to", end, "--json")
    assert ran.returncode == 0, ran.stderr
    found = json.loads(ran.stdout)
    assert (found["inserted"], found["skipped"], found["dry_run"]) == (count, 0, False)
    assert found["first"] == expected[0].isoformat() and found["last"] == \
        expected[-1].isoformat()
    assert [t for _, t, _ in jobs_of(db.url, name)] == [pg_text(t) for t in expected]

    again = awa_beat(db, name, "--from", start, "--to", end)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [
        f"backfilled {name}: 0 job(s) inserted, {count} fire time(s) skipped (they had a job "
        "already)",
        f"fire times (UTC): {expected[0]:%Y-%m-%d %H:%M:%S} .. {expected[-1]:%Y-%m-%d %H:%M:%S}"]

    shown = subprocess.run([sys.executable, "-m", "awa_beat", "history", name, "--json",
                            "--database-url", db.url], capture_output=True, text=True,
                           timeout=60, env={**os.environ, "PYTHONPATH": os.getcwd()},
                           check=False)
    assert shown.returncode == 0, shown.stderr
    assert [(o["kind"], o["fire_time"]) for o in json.loads(shown.stdout)] == [
        ("backfilled", t.isoformat()) for t in reversed(expected)]

    for args, words in [
            (("--from", "2026-11-01T00:00:00", "--to", end), "--from '2026-11-01T00:00:00' "
                                                              "has no offset"),
            (("--from", "yesterday", "--to", end), "--from 'yesterday' is not an instant"),
            (("--from", start, "--to", end, "--limit", "2"), "more than 2 fire times"),
            (("--from", start, "--to", end, "--limit", "x"), "--limit 'x' is not a whole"),
            (("--from", start, "--to", end, "--overlap", "maybe"), "overlap must be one of"),
            (("--from", end, "--to", start), "is after end")]:
        bad = awa_beat(db, name, *args)
        assert bad.returncode == 1, (args, bad.stdout)
        lines = bad.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], (
            args, bad.stderr)
    assert len(jobs_of(db.url, name)) == count
