"""awa-beat and a real awa-pg 0.6.9 worker (Awa's own cron leader) on one database."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from awa_beat._db.database import connect
from awa_beat._testing import awa_url

from .test_beat_processes import ROOT, Beats, fires, wait_for

pytestmark = pytest.mark.acceptance
pytest.importorskip("awa", reason="awa-pg is not installed")


def test_awa_and_awa_beat_fire_the_same_schedules_once(databases, tmp_path: Path) -> None:
    url = databases.fresh("awa")
    beats = Beats(url, tmp_path)
    worker = subprocess.Popen([sys.executable, "-m", "tests.acceptance.awa_worker", awa_url(url)],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    conn = connect(url)
    try:
        beats.start()
        beats.start()
        # Both evaluators run: awa-beat's leader and Awa's, each firing every row.
        wait_for(lambda: conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()[0] >= 2, 30, "both leaders")
        # Three catch_up fires (3 s apart) while both evaluators compete for every one.
        wait_for(lambda: len([n for n, _, _ in fires(conn) if n == "catch-up-3s"]) >= 3, 30,
                 "three catch-up fires")
    finally:
        beats.stop_all()
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(15)
        except subprocess.TimeoutExpired:
            worker.kill()
    rows = fires(conn)
    conn.close()
    keys = [(name, fire) for name, fire, _ in rows]
    assert len(keys) == len(set(keys)), "a fire was enqueued twice"
    catch_up = sorted(f for n, f, _ in rows if n == "catch-up-3s")
    assert len(catch_up) >= 3
