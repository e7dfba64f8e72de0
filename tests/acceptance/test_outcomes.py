"""What became of each fire, reported by real Celery workers (prefork and threads) on
RabbitMQ and Redis: success, failure, retry and revoke recorded; a second delivery of
an at-most-once fire skipped; an overlap=skip schedule whose task outlasts its interval
never piles up and records its skips; a worker killed mid-task leaves its run lost
once the bound has passed.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from awa_beat._bridge.messages import fire_task_id
from awa_beat._db.database import connect
from awa_beat._ops.operations import Operations
from awa_beat._ops.records import Occurrence
from awa_beat._testing import terminate
from tests.brokers import broker_conf

from .test_beat_processes import ROOT, wait_for

pytestmark = pytest.mark.acceptance
QUEUE = "outcomesacc"
COMBINATIONS = [("rabbitmq", "prefork"), ("redis", "threads"), ("rabbitmq", "threads"),
                ("redis", "prefork")]


class Run:
    def __init__(self, url: str, env: dict[str, str], tmp: Path, control: Celery) -> None:
        self.url, self.env, self.tmp, self.control = url, env, tmp, control
        self.procs: list[subprocess.Popen[bytes]] = []
        self.record = Path(env["OUTCOMESAPP_RECORD"])

    def start(self, name: str, *argv: str) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"{name}.log", "wb")  # noqa: SIM115 - lives with the process
        proc = subprocess.Popen([sys.executable, "-m", "celery", "-A",
                                 "tests.acceptance.outcomesapp", *argv], cwd=ROOT,
                                env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # its pool processes die with it
        self.procs.append(proc)
        return proc

    def executed(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.record.read_text().splitlines() if line]

    def history(self, name: str) -> list[Occurrence]:
        with Operations.open(self.url) as ops:
            return ops.occurrences(name, 200)

    def outcomes(self) -> dict[str, dict[str, Any]]:
        with connect(self.url) as c:
            cur = c.execute("SELECT * FROM awa_beat.outcomes")
            names = [d.name for d in cur.description]
            return {r[0]: dict(zip(names, r, strict=True)) for r in cur}

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.tmp.glob("*.log")))


@pytest.fixture(params=COMBINATIONS, ids=["-".join(c) for c in COMBINATIONS])
def run(request: pytest.FixtureRequest, databases, tmp_path: Path) -> Iterator[Run]:
    broker, pool = request.param
    conf = broker_conf(broker, tmp_path)
    if conf is None:
        pytest.skip(f"{broker} does not answer on this machine")
    control = Celery("outcomes-control", **conf, task_default_queue=QUEUE)
    control.control.purge()  # leftovers of an earlier run
    url = databases.fresh("standalone")
    record = tmp_path / "record.jsonl"
    record.touch()
    env = {**os.environ, "AWA_BEAT_DATABASE_URL": url, "AWA_BEAT_ELECTION_INTERVAL": "0.2",
           "AWA_BEAT_TRACK_OUTCOMES": "1", "OUTCOMESAPP_BROKER": json.dumps(conf),
           "OUTCOMESAPP_RECORD": str(record), "PYTHONPATH": str(ROOT), "C_FORCE_ROOT": "1"}
    r = Run(url, env, tmp_path, control)
    r.start("worker", "worker", "-P", pool, "-c", "3", "-l", "info", "-Q", QUEUE,
            "--without-mingle", "--without-gossip", "-n", f"w-{pool}@%h")
    r.start("beat", "beat", "-S", "awa_beat.Scheduler", "-l", "info", "--pidfile=",
            "-s", str(tmp_path / "unused"))
    yield r
    for proc in r.procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    terminate(r.procs, 15)
    control.close()


def upcoming_task_ids(name: str, every: int, count: int) -> list[str]:
    """Task ids of the schedule's next fires that are at least 1.5 s away."""
    first = math.ceil((time.time() + 1.5) / every) * every
    return [fire_task_id(name, datetime.fromtimestamp(first + k * every, timezone.utc)
                         .strftime("%Y-%m-%d %H:%M:%S+00"), 0) for k in range(count)]


def test_outcomes_of_real_workers(run: Run) -> None:
    try:
        _scenario(run)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{run.logs()}") from None


def _states(run: Run, schedule: str) -> list[str]:
    return [o["state"] for o in run.outcomes().values() if o["schedule"] == schedule]


def _scenario(run: Run) -> None:
    wait_for(lambda: "succeeded" in _states(run, "ok"), 45, "a recorded success")
    revoked = upcoming_task_ids("revoked", 2, 3)
    run.control.control.revoke(revoked)

    # A second delivery of an at-most-once fire (as when a leader dies between the
    # broker's acceptance and the mark): the bridge publishes the job again.
    wait_for(lambda: "succeeded" in _states(run, "once"), 30, "an at-most-once run")
    with connect(run.url) as c:
        job_id, task_id = c.execute(
            "SELECT id, metadata ->> 'celery_task_id' FROM awa.jobs"
            " WHERE metadata ->> 'cron_name' = 'once' AND state = 'completed'"
            " ORDER BY id LIMIT 1").fetchone()
        c.execute("UPDATE awa.jobs SET state = 'available', finalized_at = NULL WHERE id = %s",
                  (job_id,))

    def missing() -> list[str]:
        outcomes = run.outcomes()
        checks = {
            "the duplicate counted": outcomes.get(task_id, {}).get("duplicates") == 1,
            "a failure": "failed" in _states(run, "fail"),
            "a retried run that succeeded": any(
                o["schedule"] == "retry" and o["state"] == "succeeded" and o["retries"] == 1
                for o in outcomes.values()),
            "a revoked task": any(outcomes.get(t, {}).get("state") == "revoked"
                                  for t in revoked),
            "two skips": sum(o.kind == "skipped" for o in run.history("slow")) >= 2,
        }
        return [what for what, ok in checks.items() if not ok]

    deadline = time.monotonic() + 45
    while missing():
        assert time.monotonic() < deadline, f"not recorded in 45 s: {missing()}"
        time.sleep(0.2)
    outcomes = run.outcomes()
    failed = next(o for o in outcomes.values() if o["schedule"] == "fail")
    assert failed["error"] == "ValueError: boom" and failed["worker"].startswith("w-")
    ok = next(o for o in outcomes.values() if o["state"] == "succeeded")
    assert ok["runtime"] >= 0 and ok["started_at"] <= ok["finished_at"]
    executed = run.executed()
    assert [e["id"] for e in executed].count(task_id) == 1, "the duplicate ran"
    assert not {e["id"] for e in executed} & set(revoked), "a revoked task ran"

    # overlap=skip: the slow task (2.5 s) never ran while its previous run was unfinished.
    runs = sorted((e["at"], e["what"]) for e in executed if e["what"].startswith("slow"))
    depth = 0
    for _, what in runs:
        depth += 1 if what == "slow-start" else -1
        assert depth <= 1, f"slow runs overlapped: {runs}"
    history = run.history("slow")
    assert [o.at for o in history] == sorted((o.at for o in history), reverse=True)
    assert {o.kind for o in history} == {"fired", "skipped"}

    # A worker killed mid-task: its run reads lost once max_runtime (5 s) has passed.
    wait_for(lambda: any(o.outcome == "started" for o in run.history("slow")), 20,
             "a slow run under way")
    worker = run.procs[0]
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(10)
    started = {o.task_id for o in run.history("slow") if o.outcome == "started"}
    wait_for(lambda: any(o.outcome == "lost" and o.task_id in started
                         for o in run.history("slow")), 20, "the killed run shown as lost")
