"""Fires reach a real Celery worker through two beat replicas, on every broker here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from awa_beat._db.database import Database, connect
from awa_beat._testing import terminate
from tests.brokers import BROKERS, broker_conf

from .test_beat_processes import ROOT, wait_for

pytestmark = pytest.mark.acceptance


class Processes:
    def __init__(self, env: dict[str, str], tmp: Path) -> None:
        self.env, self.tmp, self.procs = env, tmp, []

    def start(self, *argv: str, name: str, **extra_env: str) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"{name}.log", "wb")  # noqa: SIM115 - lives with the process
        proc = subprocess.Popen([sys.executable, "-m", "celery", "-A",
                                 "tests.acceptance.bridgeapp", *argv], cwd=ROOT,
                                env={**self.env, **extra_env}, stdout=log,
                                stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def beat(self, name: str, scheduler: str = "awa_beat.Scheduler",
             **extra_env: str) -> subprocess.Popen[bytes]:
        return self.start("beat", "-S", scheduler, "-l", "info", "--pidfile=",
                          "-s", str(self.tmp / f"unused-{name}"), name=name, **extra_env)

    def worker(self) -> subprocess.Popen[bytes]:
        return self.start("worker", "-P", "solo", "-l", "info", "-Q", "bridgeacc",
                          "--without-mingle", "--without-gossip", "-n", "w@%h", name="worker")

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2500:]}"
                         for p in sorted(self.tmp.glob("*.log")))

    def stop(self) -> None:
        terminate(self.procs, 15)


@pytest.fixture(params=BROKERS)
def setup(request: pytest.FixtureRequest, databases, tmp_path: Path):
    conf = broker_conf(request.param, tmp_path)
    if conf is None:
        pytest.skip(f"{request.param} does not answer on this machine")
    if request.param == "redis":
        import redis

        redis.Redis.from_url(conf["broker_url"]).flushdb()
    url = databases.fresh("standalone")
    record = tmp_path / "record.jsonl"
    record.touch()
    env = {**os.environ, "AWA_BEAT_DATABASE_URL": url, "AWA_BEAT_ELECTION_INTERVAL": "0.2",
           "BRIDGEAPP_BROKER": json.dumps(conf), "BRIDGEAPP_RECORD": str(record),
           "PYTHONPATH": str(ROOT), "C_FORCE_ROOT": "1"}
    procs = Processes(env, tmp_path)
    yield url, record, procs
    procs.stop()


def executed(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def published(url: str) -> dict[str, str]:
    c = connect(url)
    rows = dict(c.execute("SELECT metadata ->> 'celery_task_id', metadata ->> 'cron_name'"
                          " FROM awa.jobs WHERE state = 'completed'"))
    c.close()
    return rows


def test_worker_runs_every_fire_of_two_replicas(setup) -> None:
    url, record, procs = setup
    procs.worker()
    first = procs.beat("beat1")
    procs.beat("beat2")
    try:
        wait_for(lambda: len(executed(record)) >= 6, 40, "tasks executed by the worker")
        first.send_signal(signal.SIGTERM)  # hand over to the other replica mid-run
        first.wait(15)
        count = len(executed(record))
        wait_for(lambda: len(executed(record)) >= count + 4, 30, "tasks after the handover")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{procs.logs()}") from None
    procs.stop()
    runs = executed(record)
    ids = [r["id"] for r in runs]
    assert len(ids) == len(set(ids)), "a task ran twice"
    assert set(ids) <= set(published(url))
    one = next(r for r in runs if r["args"] == [1, "one"])
    assert one["kwargs"] == {"k": [1, 2]} and one["beat"] and one["origin"] == "awa-beat"


def test_leader_killed_between_commit_and_publish_loses_nothing(setup) -> None:
    url, record, procs = setup
    crashing = procs.beat("crashing", "tests.acceptance.bridgeapp:CrashingScheduler")
    assert crashing.wait(60) == 3  # died right after its first fire committed
    c = connect(url)
    (pending,) = c.execute("SELECT array_agg(id) FROM awa.jobs WHERE state = 'available'"
                           ).fetchone()
    c.close()
    assert pending, "the crashing beat fired nothing"
    procs.worker()
    procs.beat("survivor")
    try:
        wait_for(lambda: len(set(published(url)) & {r["id"] for r in executed(record)})
                 >= len(pending) + 2, 40, "the orphaned fire and new ones executed")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{procs.logs()}") from None
    c = connect(url)
    orphan_ids = {r[0] for r in c.execute(
        "SELECT metadata ->> 'celery_task_id' FROM awa.jobs WHERE id = ANY(%s)", (pending,))}
    c.close()
    assert None not in orphan_ids
    assert orphan_ids <= {r["id"] for r in executed(record)}


def test_an_idle_leader_publishes_a_manual_trigger_at_once(setup) -> None:
    url, record, procs = setup
    procs.worker()
    procs.beat("idle", BRIDGEAPP_SCHEDULE="idle")

    def leading() -> bool:
        with connect(url) as c:
            return bool(c.execute("SELECT count(*) FROM awa_beat.beats WHERE role = 'leader'"
                                  ).fetchone()[0])

    try:
        wait_for(leading, 30, "a leader")
        with Database(url) as store:
            store.schedules.trigger("yearly")
        # Nothing else is due for a year: only the job's notification can wake the leader
        # before its one-minute look for jobs fired elsewhere.
        wait_for(lambda: any(r["args"] == ["yearly"] for r in executed(record)), 20,
                 "the triggered task executed")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{procs.logs()}") from None
