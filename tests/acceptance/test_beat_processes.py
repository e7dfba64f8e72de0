"""Real `celery beat -S awa_beat.Scheduler` processes against a real PostgreSQL.

Three replicas run a schedule firing every second and a catch_up schedule firing every
3 s while the leader is SIGKILLed, SIGTERMed, and has its lock connection terminated.
Every (cron_name, cron_fire_time) must appear at most once and the catch_up schedule
must have no gap.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import psycopg
import pytest

from awa_beat._db.database import connect
from awa_beat._schedules.fire_times import parse_iso
from awa_beat._testing import terminate, wait_for

pytestmark = pytest.mark.acceptance
ROOT = Path(__file__).resolve().parents[2]




class Beats:
    """Starts and stops beat processes; keeps their logs for failure messages."""

    def __init__(self, db_url: str, tmp: Path, schedule: str = "ha") -> None:
        self.env = {**os.environ, "AWA_BEAT_DATABASE_URL": db_url,
                    "AWA_BEAT_ELECTION_INTERVAL": "0.2", "AWA_BEAT_PING_INTERVAL": "0.5",
                    "BEATAPP_SCHEDULE": schedule, "PYTHONPATH": str(ROOT)}
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        n = len(self.procs)
        log = open(self.tmp / f"beat{n}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tests.acceptance.beatapp", "beat",
             "-S", "awa_beat.Scheduler", "-l", "info", "--pidfile=",
             "-s", str(self.tmp / f"unused-{n}")],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.procs if p.poll() is None]

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:]
                         for p in sorted(self.tmp.glob("beat*.log")))

    def stop_all(self) -> None:
        terminate(self.procs, 10)


@pytest.fixture
def standalone_url(databases) -> str:
    return databases.fresh("standalone")


@pytest.fixture
def beats(standalone_url: str, tmp_path: Path) -> Iterator[Beats]:
    b = Beats(standalone_url, tmp_path)
    yield b
    b.stop_all()


def leader(conn: psycopg.Connection) -> tuple[int, int] | None:
    """(OS pid of the leading beat, backend pid of its lock session), or None."""
    row = conn.execute(
        "SELECT a.application_name, a.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
        " WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database()"
        " AND a.application_name LIKE 'awa-beat leader %%'").fetchone()
    return (int(row[0].rsplit(" ", 1)[1]), row[1]) if row else None


def leader_pid(conn: psycopg.Connection) -> int | None:
    found = leader(conn)
    return found[0] if found else None


def fires(conn: psycopg.Connection) -> list[tuple[str, str, datetime]]:
    return conn.execute(
        "SELECT metadata ->> 'cron_name', metadata ->> 'cron_fire_time', created_at"
        " FROM awa.jobs ORDER BY id").fetchall()


def test_three_replicas_survive_kill_term_and_terminated_lock(beats: Beats,
                                                              standalone_url: str) -> None:
    conn = connect(standalone_url)
    for _ in range(3):
        beats.start()
    try:
        for action in ("SIGKILL", "SIGTERM", "terminate", "SIGKILL"):
            old, old_session = wait_for(lambda: leader(conn), 30, "a leader")
            before = len(fires(conn))
            wait_for(lambda b=before: len(fires(conn)) >= b + 2, 10, "fires from the leader")
            if action == "terminate":
                # The session (and with it the lock) dies; whoever wins the next election,
                # possibly the same process on a new session, leads from then on.
                conn.execute("SELECT pg_terminate_backend(%s)", (old_session,))
                wait_for(lambda s=old_session: (leader(conn) or (0, s))[1] != s, 15,
                         "a new leader session")
                continue_after = len(fires(conn))
                wait_for(lambda c=continue_after: len(fires(conn)) >= c + 2, 10,
                         "fires after the lock was lost")
                continue
            os.kill(old, getattr(signal, action))
            [proc] = [p for p in beats.procs if p.pid == old]
            proc.wait(10)
            beats.start()  # keep three replicas, like an orchestrator would
            wait_for(lambda o=old: leader_pid(conn) not in (None, o), 15, "a new leader")
            count = len(fires(conn))
            wait_for(lambda c=count: len(fires(conn)) >= c + 2, 10, "fires after failover")
        # One more catch_up fire after the last failover, so the gap check covers it.
        landed = len([n for n, _, _ in fires(conn) if n == "catch-up-3s"])
        wait_for(lambda: len([n for n, _, _ in fires(conn) if n == "catch-up-3s"]) > landed,
                 10, "a catch-up fire after the last failover")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- beat logs ---\n{beats.logs()}") from None
    finally:
        beats.stop_all()
    rows = fires(conn)
    conn.close()
    keys = [(name, fire) for name, fire, _ in rows]
    assert len(keys) == len(set(keys)), "a fire was enqueued twice"
    catch_up = sorted(parse_iso(f) for n, f, _ in rows if n == "catch-up-3s")
    gaps = [b - a for a, b in itertools.pairwise(catch_up)]
    assert len(catch_up) >= 5 and all(g.total_seconds() == 3 for g in gaps), catch_up


def test_bad_schedule_exits_non_zero_with_the_message_and_writes_nothing(
    standalone_url: str, tmp_path: Path
) -> None:
    beats = Beats(standalone_url, tmp_path, schedule="bad")
    proc = beats.start()
    assert proc.wait(60) == 1
    output = (tmp_path / "beat0.log").read_text()
    assert "entry 'broken', field 'options.awa_beat.timezone'" in output
    assert "Mars/Olympus" in output
    assert "Traceback" not in output
    conn = connect(standalone_url)
    assert conn.execute("SELECT count(*) FROM awa.cron_jobs").fetchone()[0] == 0
    conn.close()
