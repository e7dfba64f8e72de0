"""Helpers of bench_lag.py and bench_failover.py: real beat processes and what they fired.

Each process is `python -m celery -A lagapp beat -S awa_beat.Scheduler`, started the way
tests/acceptance/test_beat_processes.py starts them, with its log in a temporary folder.
"""

from __future__ import annotations

import argparse
import compileall
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import psycopg
from common import pct, summary  # noqa: F401 - the scripts take them from here

from awa_beat._testing import terminate, wait_for

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
# Nanosecond CPU time per thread where the kernel keeps it; else 10 ms ticks.
SCHEDSTAT = Path("/proc/self/schedstat").exists() and int(
    Path("/proc/self/schedstat").read_text().split()[0]) > 0


def as_installed() -> None:
    """Byte-compile awa_beat and the benchmarks' apps, as pip does at install and Python
    does on a first run. Where PYTHONDONTWRITEBYTECODE is set (as on these machines),
    every process started from a checkout would otherwise compile awa_beat from source
    again, a start-up cost that no installed copy pays and that the peers, installed by
    pip, do not pay here either."""
    for folder in (ROOT / "awa_beat", HERE):
        compileall.compile_dir(folder, quiet=1)


class Beats:
    """Starts and stops `celery beat -S awa_beat.Scheduler` processes of benchmarks/lagapp.py."""

    def __init__(self, db_url: str, logs: Path, env: dict[str, str]) -> None:
        path = os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")])
        # awa-beat's settings are the shipped defaults unless ``env`` says otherwise.
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("AWA_BEAT_")}
        self.env = {**inherited, "AWA_BEAT_DATABASE_URL": db_url, "PYTHONPATH": path, **env}
        self.logs = logs
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        n = len(self.procs)
        with open(self.logs / f"beat{n}.log", "wb") as log:  # the child keeps its own copy
            proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "lagapp", "beat", "-S",
                 "awa_beat.Scheduler", "-l", "info", "--pidfile=",
                 "-s", str(self.logs / f"unused-{n}")],
                cwd=self.logs, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def start_leader(self, timeout: float = 300.0, interval: float = 0.2
                     ) -> subprocess.Popen[bytes]:
        """Start a beat process and wait until it leads. The script exits with the beat's
        log when the process dies first."""
        proc = self.start()

        def leading() -> bool:
            if proc.poll() is not None:
                sys.exit(f"beat exited with {proc.returncode}\n{self.tail()}")
            with psycopg.connect(self.env["AWA_BEAT_DATABASE_URL"], autocommit=True) as c:
                row = c.execute("SELECT count(*) FROM awa_beat.beats"
                                " WHERE role = 'leader' AND identity LIKE %s",
                                (f"%:{proc.pid}",)).fetchone()
            return bool(row and row[0])

        wait_for(leading, timeout, "a leader", interval=interval)
        return proc

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.procs if p.poll() is None]

    def tail(self, chars: int = 3000) -> str:
        return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-chars:]
                         for p in sorted(self.logs.glob("beat*.log")))

    def stop_all(self) -> None:
        terminate(self.procs, 15)


def leader_pid(conn: psycopg.Connection) -> int | None:
    """The OS pid of the beat process that leads (its lock session's application_name
    is ``awa-beat leader <pid>`` and holds a granted advisory lock), or None."""
    row = conn.execute(
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
        " WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database()"
        " AND a.application_name LIKE 'awa-beat leader %%'").fetchone()
    return int(row[0].rsplit(" ", 1)[1]) if row else None


def cpu_seconds(pid: int) -> float:
    """CPU seconds of the process so far: every live thread's run time from schedstat
    (nanoseconds), or utime + stime in 10 ms ticks where schedstat is off."""
    if SCHEDSTAT:
        total = 0
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue  # the thread ended meanwhile
        return total / 1e9
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def fires(conn: psycopg.Connection, after: datetime | None = None
          ) -> list[tuple[str, datetime, datetime]]:
    """(cron_name, cron_fire_time, created_at) of every fired job, oldest first."""
    return conn.execute(
        "SELECT metadata ->> 'cron_name', (metadata ->> 'cron_fire_time')::timestamptz,"
        " created_at FROM awa.jobs WHERE metadata ? 'cron_fire_time'"
        " AND created_at > coalesce(%s::timestamptz, '-infinity') ORDER BY created_at, id",
        (after,)).fetchall()


def duplicates(conn: psycopg.Connection) -> list[tuple[str, str, int]]:
    """(cron_name, cron_fire_time, jobs) for every fire enqueued more than once."""
    return conn.execute(
        "SELECT metadata ->> 'cron_name', metadata ->> 'cron_fire_time', count(*)"
        " FROM awa.jobs WHERE metadata ? 'cron_fire_time' GROUP BY 1, 2"
        " HAVING count(*) > 1 ORDER BY 1, 2").fetchall()


def add_beat_options(parser: argparse.ArgumentParser, *, schedule: str) -> None:
    """The options of every script that runs beat processes on the lag app."""
    parser.add_argument("--schedule", default=schedule,
                        help="<seconds>:<count> pairs (LAGAPP_SCHEDULE)")
    parser.add_argument("--background", type=int, default=0,
                        help="extra schedules stored that never fire in the run")
    parser.add_argument("--layout", default="standalone", choices=("standalone", "awa"))
    parser.add_argument("--logs", help="keep the beat logs in this folder (default: discarded)")
