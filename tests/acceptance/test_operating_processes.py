"""Overlap buffer_one and pause on failure with a real ``celery beat`` and a real Celery
worker that records outcomes (docs/operating-time.md).

``flaky`` fails every run: awa-beat pauses it after three failures in a row (paused by
``awa-beat``, with a note that ends with the error), beat stops firing it, an operator
resumes it with ``awa-beat resume``, and it is paused again only after three new
failures. ``held`` runs 2.5 s and fires every second under buffer_one: its runs never
overlap, a fire waits for each run and starts after it with ``buffered: true``, and
the fires due meanwhile are skipped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from awa_beat._cli import main
from awa_beat._db.database import connect
from awa_beat._testing import terminate
from tests.brokers import broker_conf

from .test_beat_processes import ROOT, wait_for

pytestmark = pytest.mark.acceptance
QUEUE = "operatingacc"


class Run:
    def __init__(self, url: str, env: dict[str, str], tmp: Path) -> None:
        self.url, self.env, self.tmp = url, env, tmp
        self.procs: list[subprocess.Popen[bytes]] = []
        self.record = Path(env["OPERATINGAPP_RECORD"])

    def start(self, name: str, *argv: str) -> None:
        log = open(self.tmp / f"{name}.log", "wb")  # noqa: SIM115 - lives with the process
        self.procs.append(subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tests.acceptance.operatingapp", *argv],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True))

    def executed(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.record.read_text().splitlines() if line]

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with connect(self.url) as conn:
            return conn.execute(sql, params).fetchall()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.tmp.glob("*.log")))


@pytest.fixture
def run(databases, tmp_path: Path) -> Iterator[Run]:
    conf = broker_conf("rabbitmq", tmp_path) or broker_conf("redis", tmp_path)
    if conf is None:
        pytest.skip("neither RabbitMQ nor Redis answers on this machine")
    url = databases.fresh("standalone")
    record = tmp_path / "record.jsonl"
    record.touch()
    env = {**os.environ, "AWA_BEAT_DATABASE_URL": url, "AWA_BEAT_ELECTION_INTERVAL": "0.2",
           "AWA_BEAT_TRACK_OUTCOMES": "1", "OPERATINGAPP_BROKER": json.dumps(conf),
           "OPERATINGAPP_RECORD": str(record), "PYTHONPATH": str(ROOT), "C_FORCE_ROOT": "1"}
    r = Run(url, env, tmp_path)
    from celery import Celery

    control = Celery("operating-control", **conf, task_default_queue=QUEUE)
    control.control.purge()  # leftovers of an earlier run
    control.close()
    r.start("worker", "worker", "-P", "prefork", "-c", "3", "-l", "info", "-Q", QUEUE,
            "--without-mingle", "--without-gossip", "-n", "w-operating@%h")
    r.start("beat", "beat", "-S", "awa_beat.Scheduler", "-l", "info", "--pidfile=",
            "-s", str(tmp_path / "unused"))
    yield r
    for proc in r.procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    terminate(r.procs, 15)


def test_buffer_one_and_pause_after_failures_with_a_real_worker(run: Run) -> None:
    try:
        _scenario(run)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{run.logs()}") from None


def _paused(run: Run) -> tuple[Any, ...] | None:
    rows = run.query(
        "SELECT c.paused_at, c.paused_by, n.note FROM awa.cron_jobs c"
        "  LEFT JOIN awa_beat.pause_notes n ON n.name = c.name AND n.paused_at = c.paused_at"
        " WHERE c.name = 'flaky' AND c.paused_at IS NOT NULL")
    return rows[0] if rows else None


def _held_jobs(run: Run) -> list[tuple[Any, ...]]:
    return run.query("SELECT id, metadata ->> 'cron_fire_time', metadata ? 'buffered'"
                     "  FROM awa.jobs WHERE metadata ->> 'cron_name' = 'held' ORDER BY id")


def _scenario(run: Run) -> None:
    wait_for(lambda: _paused(run), 60, "flaky paused after three failures")
    paused_at, by, note = _paused(run)  # type: ignore[misc]
    assert by == "awa-beat"
    assert note == "paused after 3 consecutive failures; last error: ValueError: boom"
    assert run.query("SELECT actor, action FROM awa_beat.audit_log"
                     " WHERE schedule = 'flaky'") == [("awa-beat", "pause")]

    # buffer_one: held fires started after each run, with buffered: true.
    wait_for(lambda: sum(b for _, _, b in _held_jobs(run)) >= 2, 60,
             "two held fires of 'held' started")
    # Beat kept firing (held's jobs go on) but not flaky, paused: nothing fired after the
    # pause but what was due within beat's refresh of it.
    late = run.query("SELECT count(*) FROM awa.jobs WHERE metadata ->> 'cron_name' = 'flaky'"
                     " AND (metadata ->> 'cron_fire_time')::timestamptz > %s",
                     paused_at + timedelta(seconds=3))
    assert late == [(0,)]

    # An operator resumes it: it fires again, and the failures before the resume no
    # longer count, so it takes three new ones to pause it again.
    resumed = CliRunner().invoke(main, ["resume", "flaky", "--database-url", run.url])
    assert resumed.exit_code == 0, resumed.output
    resumed_at = datetime.now(paused_at.tzinfo)
    wait_for(lambda: _paused(run), 60, "flaky paused again")
    again = _paused(run)[0]  # type: ignore[index]
    failures_since = run.query(
        "SELECT count(*) FROM awa_beat.outcomes WHERE schedule = 'flaky'"
        " AND state = 'failed' AND fire_time::timestamptz > %s AND fire_time::timestamptz"
        " <= %s", paused_at, again)[0][0]
    assert failures_since >= 3 and again > resumed_at

    # held: its runs never overlapped; every fire of it got a job, was held or skipped.
    executed = sorted((e["at"], e["what"]) for e in run.executed()
                      if e["what"].startswith("slow"))
    depth = 0
    for _, what in executed:
        depth += 1 if what == "slow-start" else -1
        assert depth <= 1, f"held's runs overlapped: {executed}"
    kinds = {k for (k,) in run.query(
        "SELECT DISTINCT kind FROM awa_beat.occurrences WHERE schedule = 'held'")}
    assert kinds == {"buffered", "skipped"}
    jobs = _held_jobs(run)
    buffered = {t for _, t, b in jobs if b}
    held_times = {t.strftime("%Y-%m-%d %H:%M:%S+00") for (t,) in run.query(
        "SELECT fire_time FROM awa_beat.occurrences WHERE schedule = 'held'"
        " AND kind = 'buffered'")}
    assert buffered <= held_times  # each buffered job is a fire that was held
    assert len([t for _, t, _ in jobs]) == len({t for _, t, _ in jobs})  # one job a fire
