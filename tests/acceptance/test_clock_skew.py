"""Real `celery beat` replicas whose host clock is wrong, under libfaketime.

One replica an hour ahead and one an hour behind (Debian's `faketime`, which fakes the
clock of the Python process only: the database server keeps the right time) start
before a correct one. Neither skewed replica may ever take the lock, and both fail
/readyz; the correct one leads. When it is killed the skewed ones still do not lead, and
a correct replacement catches up every catch_up fire missed meanwhile. No fire is dated
later than the database's clock at its insert plus the tolerance, and no cursor moves
past the database's clock.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest

from awa_beat._db.database import connect
from awa_beat._ops.operations import Operations
from awa_beat._schedules.fire_times import parse_iso
from awa_beat._testing import terminate, wait_for
from awa_beat.web._app import Dashboard
from tests.acceptance.test_beat_processes import fires, leader_pid
from tests.acceptance.test_observability import get

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "chaos"))

from chaosinfra import free_port

pytestmark = [pytest.mark.acceptance,
              pytest.mark.skipif(shutil.which("faketime") is None,
                                 reason="needs Debian's faketime (libfaketime)")]
ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = timedelta(seconds=2)


def probe(port: int) -> tuple[int, str]:
    return get(f"http://127.0.0.1:{port}/readyz")


class Replicas:
    def __init__(self, url: str, tmp: Path) -> None:
        self.url, self.tmp = url, tmp
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, offset: str | None = None) -> tuple[subprocess.Popen[bytes], int]:
        port = free_port()
        env = {**os.environ, "AWA_BEAT_DATABASE_URL": self.url,
               "AWA_BEAT_HTTP_PORT": str(port), "AWA_BEAT_ELECTION_INTERVAL": "0.2",
               "AWA_BEAT_PING_INTERVAL": "0.5", "BEATAPP_SCHEDULE": "ha",
               "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "celery", "-A", "tests.acceptance.beatapp", "beat",
                   "-S", "awa_beat.Scheduler", "-l", "info", "--pidfile=",
                   "-s", str(self.tmp / f"unused-{name}")]
        if offset is not None:
            env = faked(env, offset)
        with open(self.tmp / f"{name}.log", "wb") as log:
            proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log,
                                    stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc, port

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-3000:]
                         for p in sorted(self.tmp.glob("*.log")))


def faked(env: dict[str, str], offset: str) -> dict[str, str]:
    """``env`` with libfaketime preloaded at ``offset``, as the ``faketime`` command sets it.
    The command itself is not used: it runs the program as its child and does not pass
    signals on, so stopping it would leave the beat running after the test."""
    return {**env, "LD_PRELOAD": "/usr/$LIB/faketime/libfaketime.so.1", "FAKETIME": offset}


def cli(url: str, *args: str, offset: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "awa_beat", *args, "--database-url", url]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env=faked(env, offset) if offset is not None else env)


def skews(url: str) -> list[float]:
    shown = json.loads(cli(url, "status", "--json").stdout)
    return sorted(b["clock_skew_ms"] for b in shown["standbys"]
                  if b["clock_skew_ms"] is not None)


def surfaces_show_the_skew(url: str, tmp: Path) -> None:
    """status, doctor and the dashboard show each replica's clock; list counts from the
    database's clock even on a host an hour ahead."""
    hour_ms = 3600 * 1000
    found = wait_for(lambda: (lambda s: s if len(s) == 2 and abs(s[0] + hour_ms) < 1000
                              and abs(s[1] - hour_ms) < 1000 else None)(skews(url)),
                     30, "status to show the skewed replicas' clocks")
    assert found
    doctor = cli(url, "doctor")
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    assert "3600.0 s ahead of the database's" in doctor.stdout
    assert "3600.0 s behind the database's" in doctor.stdout
    environ: dict[str, object] = {"PATH_INFO": "/cluster"}
    setup_testing_defaults(environ)
    replies: list[str] = []
    with Operations.open(url) as ops:
        page = b"".join(Dashboard(ops)(environ, lambda status, headers: replies.append(status)))
    assert replies[0].startswith("200"), page[:500]
    assert b"3600.0 s ahead of the database&#39;s" in page or \
        b"3600.0 s ahead of the database's" in page
    listed = cli(url, "list", "--json", offset="+1h")
    assert listed.returncode == 0, listed.stderr
    with connect(url) as c:
        db_now = c.execute("SELECT now()").fetchone()[0]
    for entry in json.loads(listed.stdout):
        fire = parse_iso(entry["next_fire"])
        assert fire - db_now < timedelta(seconds=30), (entry["name"], fire, db_now)


def test_replicas_an_hour_ahead_and_behind_never_lead_and_lose_no_fire(
        databases, tmp_path: Path) -> None:
    url = databases.fresh("standalone")
    replicas = Replicas(url, tmp_path)
    conn = connect(url)
    try:
        ahead, ahead_port = replicas.start("ahead", "+1h")
        behind, behind_port = replicas.start("behind", "-1h")
        skewed = {ahead.pid, behind.pid}
        for port, way in ((ahead_port, "ahead of"), (behind_port, "behind")):
            wait_for(lambda p=port, w=way: probe(p)[0] == 503 and w in probe(p)[1], 30,
                     f"/readyz to fail on the replica {way} the database's clock")
        assert leader_pid(conn) is None and fires(conn) == []
        correct, correct_port = replicas.start("correct")
        wait_for(lambda: leader_pid(conn) == correct.pid, 30, "the correct replica to lead")
        wait_for(lambda: probe(correct_port)[0] == 200, 15, "the leader to be ready")
        wait_for(lambda: len(fires(conn)) >= 4, 15, "fires from the correct replica")
        # Without it, the skewed replicas still stand by: nothing fires meanwhile.
        os.kill(correct.pid, signal.SIGKILL)
        correct.wait(10)
        wait_for(lambda: leader_pid(conn) is None, 15, "the killed leader's lock to go")
        # A window of many of their elections (every 0.2 s), watched throughout.
        watch_until = time.monotonic() + 3
        while time.monotonic() < watch_until:
            assert leader_pid(conn) not in skewed
            time.sleep(0.05)
        assert probe(ahead_port)[0] == probe(behind_port)[0] == 503
        replacement, _ = replicas.start("replacement")
        wait_for(lambda: leader_pid(conn) == replacement.pid, 30, "a correct replacement")
        landed = len(fires(conn))
        wait_for(lambda: len(fires(conn)) >= landed + 4, 15, "fires from the replacement")
        # The catch_up schedule's fires of the outage, and one after it, from the
        # replacement (on a busy machine its first passes may come a little late).
        led_at = conn.execute("SELECT now()").fetchone()[0]
        wait_for(lambda: sum(1 for n, f, _ in fires(conn) if n == "catch-up-3s"
                             and parse_iso(f) > led_at) >= 1, 15,
                 "the replacement to fire the catch_up schedule")
        assert leader_pid(conn) not in skewed
        surfaces_show_the_skew(url, tmp_path)
        cursors = conn.execute(
            "SELECT count(*) FROM awa.cron_jobs WHERE last_enqueued_at > now() + %s",
            (TOLERANCE,)).fetchone()[0]
        assert cursors == 0
        said = replicas.logs()
        assert "leader.clock_skew" in said or "will not lead" in said
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{replicas.logs()}") from None
    finally:
        terminate(replicas.procs, 10)
    rows = fires(conn)
    conn.close()
    try:
        no_fire_lost_doubled_or_early(rows)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{rows}\n{replicas.logs()}") from None


def no_fire_lost_doubled_or_early(rows: list[tuple[str, str, Any]]) -> None:
    keys = [(name, fire) for name, fire, _ in rows]
    assert len(keys) == len(set(keys)), "a fire was enqueued twice"
    # Never early: each job was inserted no sooner than its fire time less the tolerance
    # (created_at is the database's clock).
    early = [(n, f, c) for n, f, c in rows if parse_iso(f) > c + TOLERANCE]
    assert early == []
    # Never lost: the catch_up schedule has every fire time from its first to its last,
    # the outage without a correct replica included.
    catch_up = sorted(parse_iso(f) for n, f, _ in rows if n == "catch-up-3s")
    assert len(catch_up) >= 3
    assert [b - a for a, b in itertools.pairwise(catch_up)] == \
        [timedelta(seconds=3)] * (len(catch_up) - 1)
