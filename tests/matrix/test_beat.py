"""Matrix, beat: every type fires exactly as documented.

The real engine and fire statement on a clock of the test's own walk each schedule through
its next documented fires (the calendar of :mod:`tests.matrix.catalogue`, computed without
awa-beat), in both layouts; then one real ``celery beat`` process runs the catalogue's
``beat_schedule`` against a database holding all of it and fires the short interval on its
grid, and nothing else.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest

from awa_beat._db.database import Database, connect
from awa_beat._db.records import RETIRED_BY
from awa_beat._engine.engine import Engine
from awa_beat._schedules.fire_times import parse_iso
from awa_beat._testing import FAKE_CLOCK_TOLERANCE, FakeClock, terminate, wait_for
from tests.matrix.catalogue import (
    AT_INSTANT,
    CATALOGUE,
    END_TIME,
    NAMES,
    START_TIME,
    MatrixDB,
    stored_rows,
)

pytestmark = pytest.mark.integration
UTC = timezone.utc
ROOT = Path(__file__).resolve().parents[2]
STEPS = 4
"""Documented fires each schedule is walked through (more than any run limit but one)."""
#: Where a schedule's walk starts, when its interesting fires are far off.
WALK_FROM = {"bound-start": START_TIME - timedelta(hours=2),
             "at": AT_INSTANT - timedelta(days=1),
             "bound-end": END_TIME - timedelta(hours=2, minutes=30)}


def fired(conn: psycopg.Connection, name: str) -> list[tuple[datetime, str, dict, dict]]:
    """(fire time, task, args, celery options) of each job ``name`` fired, in order."""
    return [(parse_iso(t), kind, args, options) for t, kind, args, options in conn.execute(
        "SELECT metadata ->> 'cron_fire_time', kind, args, metadata -> 'celery' -> 'options'"
        "  FROM awa.jobs WHERE metadata ->> 'cron_name' = %s ORDER BY id", (name,))]


def documented(name: str, start: datetime, steps: int) -> list[datetime]:
    """The first ``steps`` fires of ``name``'s calendar after ``start`` (run limits aside)."""
    times: list[datetime] = []
    t: datetime | None = start
    while t is not None and len(times) < steps:
        t = CATALOGUE[name].calendar(t)
        if t is not None:
            times.append(t)
    return times


HELD_BY = "matrix: held while another schedule is walked"


@contextmanager
def others_held(conn: psycopg.Connection, name: str) -> Iterator[None]:
    """The engine fires every due row: while ``name`` is walked, the other active rows
    of the shared database are held paused, then released as they were."""
    conn.execute("UPDATE awa.cron_jobs SET paused_at = now(), paused_by = %s"
                 " WHERE name <> %s AND paused_at IS NULL", (HELD_BY, name))
    try:
        yield
    finally:
        conn.execute("UPDATE awa.cron_jobs SET paused_at = NULL, paused_by = NULL"
                     " WHERE paused_by = %s", (HELD_BY,))


@pytest.mark.parametrize("name", NAMES)
def test_each_type_fires_exactly_as_documented(shared_matrix_db: MatrixDB, name: str) -> None:
    entry = CATALOGUE[name]
    url = shared_matrix_db.url
    conn = connect(url)
    before = fired(conn, name)  # the retired one fired its runs when it was stored
    start = WALK_FROM.get(name)
    if start is None:
        (start,) = conn.execute("SELECT last_enqueued_at FROM awa.cron_jobs WHERE name = %s",
                                (name,)).fetchone()
    else:
        conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s WHERE name = %s",
                     (start, name))
    walk = documented(name, start, STEPS)
    assert walk, f"{name}: the walk must fire at least once"
    with others_held(conn, name), Database(url) as store:
        store.clock_tolerance = FAKE_CLOCK_TOLERANCE  # the walk runs ahead of the server
        clock = FakeClock(start)
        engine = Engine(store.evaluator, clock=clock)
        engine.run_pass()
        for t in walk:
            # Just before each documented fire, then just after it: a fire in between
            # that the calendar does not have shows (coalesce fires the latest due).
            clock.advance(seconds=(t - clock.now).total_seconds() - 0.5)
            engine.run_pass()
            clock.advance(seconds=1)
            engine.run_pass()
        # Then up to just before the next documented fire (a day if none): nothing more.
        following = entry.calendar(walk[-1])
        until = following - timedelta(seconds=0.5) if following else clock.now + timedelta(days=1)
        clock.advance(seconds=(until - clock.now).total_seconds())
        engine.run_pass()
    runs = STEPS if entry.max_runs is None else min(STEPS, entry.max_runs)
    expected = [] if entry.paused else walk[:runs]
    jobs = fired(conn, name)[len(before):]
    assert [j[0] for j in jobs] == expected
    for _, task, args, options in jobs:
        assert task == entry.task
        assert args == {"args": list(entry.entry["args"]), "kwargs": entry.entry["kwargs"]}
        assert options == {"queue": "matrix"}  # the apply_async options ride along
    row = stored_rows(url)[name]
    retires = entry.state == "retired" or (entry.max_runs is not None
                                            and len(walk) >= entry.max_runs)
    assert (row["paused_by"] == RETIRED_BY) == retires
    assert (row["runs"] or 0) == (entry.runs if entry.paused else
                                  len(expected) if entry.max_runs is not None else 0)
    conn.close()


# -- a real celery beat --------------------------------------------------------------------


@pytest.mark.acceptance
def test_a_celery_beat_fires_the_short_interval_on_its_grid_and_nothing_else(
        matrix_db: MatrixDB, tmp_path: Path) -> None:
    """The catalogue's config-owned entries in the app's beat_schedule, every other row
    (runtime, paused, retired) already stored: the beat syncs without changing anything,
    fires the 7 s interval at each multiple of 7 s, and nothing that is not due."""
    url = matrix_db.url
    before = stored_rows(url)
    with connect(url) as c:
        cursors = dict(c.execute("SELECT name, last_enqueued_at FROM awa.cron_jobs"))
    env = {**os.environ, "AWA_BEAT_DATABASE_URL": url, "AWA_BEAT_ELECTION_INTERVAL": "0.2",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    log_path = tmp_path / "beat.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tests.matrix.beatapp", "beat",
             "-S", "awa_beat.Scheduler", "-l", "info", "--pidfile=",
             "-s", str(tmp_path / "unused")],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    conn = connect(url)
    try:
        started = datetime.now(UTC)
        jobs = wait_for(lambda: (lambda j: j if len(j) >= 3 else None)(
            fired(conn, "offgrid-interval")), 40, "three fires of the 7 s interval")
        stopped = datetime.now(UTC)
    finally:
        terminate([proc], 10)
        text = log_path.read_text(errors="replace")
    times = [j[0] for j in fired(conn, "offgrid-interval")]
    assert all(t.timestamp() % 7 == 0 for t in times), times
    assert [b - a for a, b in itertools.pairwise(times)] == [
        timedelta(seconds=7)] * (len(times) - 1), times
    assert len(jobs) >= 3
    # Whatever else fired was due by its documented calendar after its cursor (a fire
    # missed between the catalogue's registration and the beat's start fires at start).
    others = conn.execute(
        "SELECT metadata ->> 'cron_name', metadata ->> 'cron_fire_time' FROM awa.jobs"
        " WHERE metadata ->> 'cron_name' <> 'offgrid-interval' AND created_at >= %s",
        (started,)).fetchall()
    for name, at in others:
        t = parse_iso(at)
        assert not CATALOGUE[name].paused, (name, at)
        assert CATALOGUE[name].calendar(t - timedelta(seconds=1)) == t, (name, at)
        assert cursors[name] < t <= stopped, (name, at)
    after = stored_rows(url)
    for name, row in before.items():  # owners, pauses and definitions untouched
        assert {k: v for k, v in after[name].items() if k != "runs"} == {
            k: v for k, v in row.items() if k != "runs"}, name
    assert "Traceback" not in text and "orphan" not in text, text[-3000:]
    assert "synced" in text or "nothing to sync" in text, text[-3000:]
    conn.close()
