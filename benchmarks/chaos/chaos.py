"""Chaos harness: real beat replicas and a real worker under injected faults.

    python benchmarks/chaos/chaos.py [--faults sigkill,sigstop,...] [--fault-seconds 20]
                               [--short] [--json] [--inject KIND,...] [--self-test]
                               [--at-most-once]

Starts a private PostgreSQL cluster, ``--replicas`` `celery beat -S awa_beat.Scheduler`
processes (each in a network namespace of its own when the partition fault is run),
dispatching to RabbitMQ through a TCP proxy, and one `celery worker` (straight to
RabbitMQ) that records every task it runs. benchmarks/chaos/chaosapp.py has the schedules:
one every second (coalesce) and two every 2 and 3 s (catch_up). Then it injects the
faults one after another, each followed by a wait for recovery and a few quiet seconds.
At the end it pauses the schedules, waits for the worker to run everything fired, stops
every process and reads what happened. benchmarks/README.md says how to read the output.

With ``--at-most-once`` the worker records outcomes and claims each fire before running
it (``awa_beat_at_most_once``): a message the bridge published twice is run once, and
the report adds how many second deliveries the worker skipped. The die-before-mark
fault (not in the default list) forces that case: the leader dies after the broker
accepted a batch and before the batch is marked published.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(HERE), str(HERE.parent)]

import chaoscheck as cc  # noqa: E402
import common  # noqa: E402
from chaosapp import SCHEDULES  # noqa: E402
from chaosinfra import (  # noqa: E402
    BrokerProxy,
    InfraError,
    Loopback,
    Namespaces,
    PrivateCluster,
)

from awa_beat._bridge import fire_task_id  # noqa: E402
from awa_beat._db.database import Database  # noqa: E402
from awa_beat._testing import TempDatabases, server_url, wait_for  # noqa: E402
from awa_beat.errors import WaitTimeout  # noqa: E402

FAULTS: dict[str, str] = {
    "sigkill": "SIGKILL of the leader; a replacement started at once",
    "sigstop": "SIGSTOP of the leader just after a fire; its lock session terminated "
               "while it is stopped; SIGCONT at the fault's end",
    "lock-terminate": "pg_terminate_backend of the leader's lock session",
    "partition": "kernel-level packet drop between the leader and PostgreSQL",
    "broker-reset": "the broker proxy closes every connection and refuses new ones",
    "broker-hang": "the broker proxy keeps sockets open and forwards nothing",
    "pg-restart": "PostgreSQL crashed (pg_ctl stop -m immediate), started at the fault's end",
    "sigterm": "SIGTERM of the leader; a replacement started once it exited",
    "kill-two": "SIGKILL of the leader and one standby at once; two replacements",
    "die-before-mark": "the leader dies (os._exit) after the broker accepted a batch and "
                       "before marking it published; a replacement started at once",
}
#: Faults run only when asked for: die-before-mark makes re-executions by design unless
#: the worker runs at most once.
OPT_IN_FAULTS = {"die-before-mark"}
SHORT_FAULTS = ["sigkill", "broker-reset"]
#: Faults that need the private cluster (every run uses it when initdb is here).
NEEDS_CLUSTER = {"pg-restart", "partition"}
LEADER_SQL = (
    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
    " WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database()"
    " AND a.application_name LIKE 'awa-beat leader %%'")
JOBS_SQL = (
    "SELECT id, metadata ->> 'cron_name', metadata ->> 'cron_fire_time',"
    " extract(epoch FROM (metadata ->> 'cron_fire_time')::timestamptz)::float8,"
    " state::text, extract(epoch FROM created_at)::float8,"
    " extract(epoch FROM finalized_at)::float8 FROM awa.jobs WHERE metadata ? 'cron_fire_time'")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Observer:
    """The harness's own view: every job it has seen, and the worker's record."""

    def __init__(self, url: str, record: Path) -> None:
        self.url, self.record = url, record
        self.conn: psycopg.Connection | None = None
        self.seen: dict[int, cc.Job] = {}
        self.present: set[int] = set()

    def _execute(self, sql: str, params: Any = None) -> list[tuple[Any, ...]] | None:
        """Rows, or None while the database cannot be reached (a fault under way)."""
        try:
            if self.conn is None or self.conn.closed:
                self.conn = psycopg.connect(self.url, autocommit=True, connect_timeout=2)
            return self.conn.execute(sql, params).fetchall()
        except psycopg.Error:
            if self.conn is not None:
                self.conn.close()
            self.conn = None
            return None

    def poll(self) -> bool:
        rows = self._execute(JOBS_SQL)
        if rows is None:
            return False
        self.present = set()
        for jid, name, fire_text, fire, state, created, finalized in rows:
            self.seen[jid] = cc.Job(jid, name, fire, state, created, finalized,
                                    fire_task_id(name, fire_text, jid))
            self.present.add(jid)
        return True

    def runs(self) -> list[cc.Execution]:
        out = []
        for line in self.record.read_text().splitlines():
            with contextlib.suppress(ValueError, KeyError):
                r = json.loads(line)
                out.append(cc.Execution(r["id"], tuple(r["args"]), r["t"], r["pid"]))
        return out

    def data(self, until: float, faults: list[cc.Fault]) -> cc.Data:
        jobs = [j if j.id in self.present else cc.Job(**{**j.__dict__, "state": "deleted"})
                for j in self.seen.values()]
        return cc.Data(dict(SCHEDULES), jobs, self.runs(), until, faults)

    def leader_pid(self) -> int | None:
        rows = self._execute(LEADER_SQL)
        return int(rows[0][0].rsplit(" ", 1)[1]) if rows else None

    def connected(self, pid: int) -> bool:
        rows = self._execute("SELECT count(*) FROM pg_stat_activity WHERE application_name"
                             " = %s", (f"awa-beat leader {pid}",))
        return bool(rows and rows[0][0])

    def terminate_lock_session(self, pid: int) -> int:
        rows = self._execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                             " WHERE application_name = %s", (f"awa-beat leader {pid}",))
        return int(rows[0][0]) if rows else 0

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


class Group:
    """The beat replicas, one per slot (a network namespace, when there are any), and
    the worker; a replica that dies is replaced in its slot, as an orchestrator would."""

    def __init__(self, net: Loopback, db_url: Callable[[str], str], proxy: BrokerProxy,
                 env: dict[str, str], logs: Path, replicas: int) -> None:
        self.net, self.db_url, self.proxy, self.env, self.logs = net, db_url, proxy, env, logs
        self.slots: list[subprocess.Popen[bytes] | None] = [None] * replicas
        self.all: list[subprocess.Popen[bytes]] = []
        self.worker: subprocess.Popen[bytes] | None = None

    def _spawn(self, argv: list[str], name: str, env: dict[str, str]
               ) -> subprocess.Popen[bytes]:
        with open(self.logs / f"{name}.log", "wb") as out:  # the child keeps its own copy
            proc = subprocess.Popen(argv, cwd=self.logs, env={**self.env, **env},
                                    stdout=out, stderr=subprocess.STDOUT)
        self.all.append(proc)
        return proc

    def start(self, slot: int) -> subprocess.Popen[bytes]:
        n = len(self.all)
        argv = [sys.executable, "-m", "celery", "-A", "chaosapp", "beat", "-S",
                "awa_beat.Scheduler", "-l", "info", "--pidfile=",
                "-s", str(self.logs / f"unused-{n}")]
        proc = self._spawn(self.net.wrap(slot, argv), f"beat{n}-slot{slot}", {
            "AWA_BEAT_DATABASE_URL": self.db_url(self.net.db_host(slot)),
            "CHAOSAPP_BROKER": self.proxy.url(self.net.broker_host(slot))})
        self.slots[slot] = proc
        return proc

    def start_worker(self, broker: str, extra: dict[str, str] | None = None) -> None:
        self.worker = self._spawn(
            [sys.executable, "-m", "celery", "-A", "chaosapp", "worker", "-P", "solo",
             "-l", "info", "-Q", self.env["CHAOSAPP_QUEUE"], "--without-mingle",
             "--without-gossip", "--without-heartbeat", "-n", f"chaos{os.getpid()}@%h"],
            "worker", {"CHAOSAPP_BROKER": broker, "C_FORCE_ROOT": "1", **(extra or {})})

    def slot_of(self, pid: int) -> int | None:
        return next((i for i, p in enumerate(self.slots) if p is not None and p.pid == pid),
                    None)

    def replace(self, slot: int) -> None:
        """Wait for the slot's process to be gone, then start another in its place."""
        proc = self.slots[slot]
        if proc is not None:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.start(slot)

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.slots if p is not None and p.poll() is None]

    def stop(self) -> None:
        procs = [p for p in self.all if p.poll() is None]
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGCONT)  # a stopped process cannot act on SIGTERM
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def tail(self, chars: int = 2000) -> str:
        return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-chars:]
                         for p in sorted(self.logs.glob("*.log")))


class Harness:
    def __init__(self, args: argparse.Namespace, obs: Observer, group: Group,
                 proxy: BrokerProxy, net: Loopback, cluster: PrivateCluster | None) -> None:
        self.args, self.obs, self.group, self.proxy = args, obs, group, proxy
        self.net, self.cluster = net, cluster
        self.faults: list[cc.Fault] = []

    # -- waiting ----------------------------------------------------------------------------

    def idle(self, seconds: float) -> None:
        """Let the group run, watching the table (so that every job is seen)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.obs.poll()
            time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))

    def leader(self, timeout: float = 30.0) -> int:
        return wait_for(self.obs.leader_pid, timeout, "a leader", 0.05)

    def healthy(self, fault: cc.Fault, catch_up: bool = True) -> bool:
        """Every slot runs and stands (its lock session open), a leader fired after the
        fault's end, every job fired for a time up to then was run and (``catch_up``)
        every catch_up fire time since the fault's start has its job."""
        if not self.obs.poll():
            return False
        if len(self.group.alive()) < len(self.group.slots):
            return False
        if not all(self.obs.connected(p.pid) for p in self.group.alive()):
            return False
        data = self.obs.data(time.time(), [])
        figures = cc.fault_figures(data, fault)
        return (figures["recovery_s"] is not None and figures["drain_executed_s"] is not None
                and not (catch_up and cc.missing_catch_up(data, fault.start - 2, fault.end)))

    def recover(self, fault: cc.Fault) -> None:
        try:
            wait_for(lambda: self.healthy(fault), self.args.recovery_timeout,
                     f"recovery from {fault.kind}", 0.25)
        except WaitTimeout as exc:
            fault.recovered = False
            fault.detail += ("; " if fault.detail else "") + str(exc)
            log(f"{fault.kind}: {exc}")

    # -- the faults --------------------------------------------------------------------------

    def run_fault(self, kind: str) -> cc.Fault:
        pid = self.leader()
        slot = self.group.slot_of(pid)
        if slot is None:
            raise RuntimeError(f"the leader {pid} is none of the harness's processes")
        hold = self.args.fault_seconds
        detail = ""
        if kind == "sigstop":
            detail = self.catch_in_flight()
        start = time.time()
        if kind == "sigkill":
            os.kill(pid, signal.SIGKILL)
            end = time.time()
            self.group.replace(slot)
        elif kind == "sigterm":
            os.kill(pid, signal.SIGTERM)
            end = time.time()
            self.group.replace(slot)
        elif kind == "kill-two":
            other = next(i for i, p in enumerate(self.group.slots)
                         if i != slot and p is not None and p.poll() is None)
            victims = [slot, other]
            for i in victims:
                proc = self.group.slots[i]
                assert proc is not None
                os.kill(proc.pid, signal.SIGKILL)
            end = time.time()
            for i in victims:
                self.group.replace(i)
            detail = f"slots {victims[0]} (leader) and {victims[1]}"
        elif kind == "die-before-mark":
            flag = Path(self.group.env["CHAOSAPP_DIE_BEFORE_MARK"])
            flag.touch()
            leader = self.group.slots[slot]
            assert leader is not None
            try:
                leader.wait(20)
            except subprocess.TimeoutExpired:
                flag.unlink(missing_ok=True)
                detail = "the leader marked nothing for 20 s"
            end = time.time()
            self.group.replace(slot)
        elif kind == "lock-terminate":
            n = self.obs.terminate_lock_session(pid)
            end = time.time()
            detail = f"{n} backend(s) terminated"
        elif kind == "sigstop":
            os.kill(pid, signal.SIGSTOP)
            time.sleep(0.5)
            n = self.obs.terminate_lock_session(pid)
            new = self.watch_takeover(pid, start + hold)
            os.kill(pid, signal.SIGCONT)
            end = time.time()
            detail += (f"; lock session terminated ({n}); "
                      + (f"pid {new} led {new_at(start):.1f} s after the stop" if new
                         else "no other leader while stopped"))
        elif kind == "partition":
            self.net.partition(slot)
            new = self.watch_takeover(pid, start + hold)
            took = f"pid {new} led {new_at(start):.1f} s in" if new else "no takeover"
            self.net.heal(slot)
            end = time.time()
            detail = f"slot {slot} cut off from PostgreSQL; {took}"
        elif kind in ("broker-reset", "broker-hang"):
            (self.proxy.reset if kind == "broker-reset" else self.proxy.hang)()
            self.idle(hold)
            (self.proxy.restore if kind == "broker-reset" else self.proxy.resume)()
            end = time.time()
        elif kind == "pg-restart":
            assert self.cluster is not None
            self.cluster.crash()
            time.sleep(hold)
            self.cluster.start()
            end = time.time()
        else:
            raise ValueError(kind)
        return cc.Fault(kind, start, end, detail=detail)

    def catch_in_flight(self) -> str:
        """Return as soon as a job of this second is fired and not yet marked published:
        a leader frozen now holds jobs it may be publishing, or may have published,
        which the next leader publishes too. Polls from just before the second; says
        where the stop landed."""
        for _ in range(5):
            sleep_to_phase(0.9, 0.95)
            second = math.ceil(time.time())
            deadline = time.time() + 1.0
            while time.time() < deadline:
                rows = self.obs._execute(
                    "SELECT count(*) FROM awa.jobs WHERE state = 'available' AND"
                    " (metadata ->> 'cron_fire_time')::timestamptz = to_timestamp(%s)",
                    (second,))
                if rows and rows[0][0]:
                    return f"stopped with a job of {second % 60:02d} s fired, not yet marked"
        sleep_to_phase(0.004, 0.012)
        return "stopped a few ms after a whole second (no unmarked job caught)"

    def watch_takeover(self, old: int, until: float) -> int | None:
        """Poll for another leader until ``until`` (epoch); the first one seen."""
        global _new_at
        new = None
        while time.time() < until:
            self.obs.poll()
            pid = self.obs.leader_pid()
            if new is None and pid is not None and pid != old:
                new, _new_at = pid, time.time()
            time.sleep(0.1)
        return new

    def run(self) -> cc.Data:
        log("waiting for a leader, its first fires and every replica standing by")
        first = cc.Fault("start-up", time.time(), time.time())
        # No catch-up check: a new schedule's first fire is its first fire time after
        # it was registered, so the times before that have no job, rightly.
        wait_for(lambda: self.healthy(first, catch_up=False), 90, "the group to start", 0.25)
        for kind in self.args.faults:
            self.idle(self.args.settle)
            if self.faults:
                self.faults[-1].window_end = time.time()
            log(f"fault: {kind} ({FAULTS[kind]})")
            fault = self.run_fault(kind)
            self.faults.append(fault)
            self.recover(fault)
            log(f"{kind}: over after {fault.end - fault.start:.1f} s; "
                f"{'recovered' if fault.recovered else 'NOT recovered'} "
                f"{time.time() - fault.end:.1f} s after. {fault.detail}")
        self.idle(self.args.settle)
        paused = time.time()
        with Database(self.obs.url) as store:
            for name in SCHEDULES:
                store.schedules.pause(name, by="chaos harness")
        until = math.floor(paused) - 1.0
        if self.faults:
            self.faults[-1].window_end = until
        log("schedules paused; waiting for the worker to run every job fired")
        with contextlib.suppress(WaitTimeout):
            wait_for(self.all_ran, 60, "every job run", 0.25)
        self.group.stop()
        wait_for(self.obs.poll, 30, "the database, for the final read", 0.25)
        return self.obs.data(until, self.faults)

    def all_ran(self) -> bool:
        if not self.obs.poll():
            return False
        ran = {r.task_id for r in self.obs.runs()}
        return all(j.task_id in ran for j in self.obs.seen.values())


_new_at = 0.0


def new_at(start: float) -> float:
    return _new_at - start


def sleep_to_phase(low: float, high: float) -> None:
    """Sleep to a random point between ``low`` and ``high`` seconds past a second."""
    now = time.time()
    target = math.floor(now) + random.uniform(low, high)
    if target <= now + 0.05:
        target += 1
    time.sleep(target - time.time())


# -- injected corruptions on the real table and record --------------------------------------


def inject(kinds: list[str], obs: Observer, data: cc.Data
           ) -> dict[str, Callable[[dict[str, Any]], bool]]:
    """Corrupt the run's table and worker record as chaoscheck.CORRUPTIONS does to plain
    data, with every process stopped (so nothing repairs it). Returns, per kind, how to
    recognise its corruption among what its check reports."""
    conn = psycopg.connect(obs.url, autocommit=True)
    found: dict[str, Callable[[dict[str, Any]], bool]] = {}

    def drop_lines(task_id: str) -> None:
        lines = obs.record.read_text().splitlines(keepends=True)
        obs.record.write_text("".join(ln for ln in lines if json.loads(ln)["id"] != task_id))

    def copy_row(job: cc.Job) -> int:
        cols = ("kind, queue, args, state, priority, attempt, max_attempts, run_at,"
                " created_at, finalized_at, metadata, tags")
        (new_id,) = conn.execute(
            f"INSERT INTO awa.jobs ({cols}) SELECT {cols} FROM awa.jobs WHERE id = %s"
            " RETURNING id", (job.id,)).fetchone()
        return int(new_id)

    def pending_copy(offset: int) -> int:
        """A pending job of the coalesce schedule, ``offset`` s after its last fire."""
        name = data.coalesce()[0]
        last = max((j for j in data.jobs if j.name == name), key=lambda j: j.fire_time)
        new_id = copy_row(last)
        conn.execute(
            "UPDATE awa.jobs SET state = 'available', finalized_at = NULL,"
            " metadata = (metadata - 'celery_task_id') || jsonb_build_object("
            "'cron_fire_time', to_char(((metadata ->> 'cron_fire_time')::timestamptz"
            " + make_interval(secs => %(s)s)) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS+00'))"
            " WHERE id = %(id)s", {"id": new_id, "s": offset})
        return new_id

    for kind in kinds:
        if kind == "duplicate-job":
            job = cc._pick(data, "coalesce")
            copy_row(job)
            found[kind] = lambda i, j=job: (i["schedule"], i["fire_time"]) == (j.name,
                                                                              j.fire_time)
        elif kind == "deleted-catch-up-job":
            job = cc._pick(data, "catch_up")
            conn.execute("DELETE FROM awa.jobs WHERE id = %s", (job.id,))
            drop_lines(job.task_id)
            found[kind] = lambda i, j=job: (i["schedule"], i["fire_time"]) == (j.name,
                                                                              j.fire_time)
        elif kind == "dropped-record":
            job = cc._pick(data, "coalesce", 1)
            drop_lines(job.task_id)
            found[kind] = lambda i, j=job: i["job"] == j.id
        elif kind == "duplicate-record":
            job = cc._pick(data, "coalesce", 2)
            line = next(ln for ln in obs.record.read_text().splitlines()
                        if json.loads(ln)["id"] == job.task_id)
            with open(obs.record, "a") as f:
                f.write(line + "\n")
            found[kind] = lambda i, j=job: i["task_id"] == j.task_id
        elif kind == "unpublished-job":
            new_id = pending_copy(1)
            found[kind] = lambda i, n=new_id: i["job"] == n
        elif kind == "deleted-unpublished-job":
            new_id = pending_copy(2)
            wait_for(lambda n=new_id: obs.poll() and n in obs.seen, 10, "the harness to see it")
            conn.execute("DELETE FROM awa.jobs WHERE id = %s", (new_id,))
            found[kind] = lambda i, n=new_id: i["job"] == n
        else:
            raise ValueError(kind)
    conn.close()
    return found


# -- the report ---------------------------------------------------------------------------


def fmt(value: float | None, unit: str = " s") -> str:
    return "never" if value is None else f"{value:.1f}{unit}"


def fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f} ms"


def report(args: argparse.Namespace, data: cc.Data, results: dict[str, list[Any]],
           figures: list[dict[str, Any]], elapsed: float, setup: dict[str, Any],
           injected: dict[str, Any] | None) -> dict[str, Any]:
    total_skipped = cc.skipped_seconds(data, min((j.fire_time for j in data.jobs),
                                                 default=data.until), data.until)
    out = {"setup": setup, "elapsed_s": round(elapsed, 1), "faults": figures,
           "jobs": len([j for j in data.jobs if j.state != "deleted"]),
           "executions": len(data.runs), "unknown_executions": cc.unknown_runs(data),
           "skipped_total": len(total_skipped),
           "checks": {k: {"count": len(v), "pass": not v, "items": v[:20]}
                      for k, v in results.items()},
           "pass": cc.clean(results)}
    if injected is not None:
        out["injected"] = injected
    if args.json:
        print(json.dumps(out, indent=2, default=str))
        return out
    print(f"\nchaos run: {setup['replicas']} beat replicas ({setup['network']}), database "
          f"{setup['database']}, broker through a proxy, one worker; "
          f"{elapsed:.0f} s in all")
    print(f"\n{'fault':<15} {'held':>6} {'recovery':>9} {'longest gap':>12} {'skipped':>8} "
          f"{'lag p99':>8} {'drain pub.':>11} {'drain exec.':>12} {'re-exec.':>8}  notes")
    for f in figures:
        notes = f["detail"] + ("" if f["recovered"] else " [NOT RECOVERED]")
        print(f"{f['fault']:<15} {fmt(f['seconds']):>6} {fmt(f['recovery_s']):>9} "
              f"{fmt(f['longest_gap_s']):>12} {f['skipped']:>8} "
              f"{fmt_ms(f['lag_p99_s']):>8} {fmt(f['drain_published_s']):>11} "
              f"{fmt(f['drain_executed_s']):>12} "
              f"{f['re_executions']:>8}  {notes}")
    print(f"\njobs fired: {out['jobs']}; tasks run by the worker: {out['executions']}; "
          f"coalesce fire seconds skipped in all: {out['skipped_total']}")
    if setup.get("at_most_once"):
        print(f"at most once: second deliveries the worker skipped: "
              f"{setup['second_deliveries_skipped']}")
    labels = {"duplicates": "duplicates ((cron_name, cron_fire_time) with 2+ jobs)",
              "catch_up_gaps": "catch-up gaps (catch_up fire times with no job)",
              "lost": "lost jobs (never published or never run)",
              "re_executions": "re-executions (task ids the worker ran 2+ times)"}
    for key, label in labels.items():
        items = results[key]
        print(f"  {'PASS' if not items else 'FAIL'}  {label}: {len(items)}")
        for item in items[:10]:
            print(f"          {describe(item)}")
        if len(items) > 10:
            print(f"          ... and {len(items) - 10} more")
    if injected is not None:
        print("\ninjected corruptions (after the run, on the table and the record file):")
        for kind, row in injected.items():
            print(f"  {'caught' if row['caught'] else 'MISSED'}  {kind}: {row['what']}\n"
                  f"          {row['check']}: {row['before']} -> {row['after']}, reports "
                  + (describe(row["item"]) if row["item"] else "nothing of it"))
    print(f"\nresult: {'PASS' if out['pass'] else 'FAIL'}")
    return out


def describe(item: dict[str, Any]) -> str:
    parts = []
    for k, v in item.items():
        if k == "fire_time" and isinstance(v, float):
            v = time.strftime("%H:%M:%S", time.gmtime(v))
        parts.append(f"{k}={v}")
    return " ".join(parts)


def run_self_test(as_json: bool) -> int:
    rows = cc.self_test()
    clean_run = cc.check_all(cc.synthetic())
    ok = cc.clean(clean_run) and all(r["caught"] for r in rows)
    if as_json:
        print(json.dumps({"clean": {k: len(v) for k, v in clean_run.items()}, "rows": rows,
                          "pass": ok}, indent=2))
    else:
        print("self-test on a synthetic clean run: "
              + ", ".join(f"{k} {len(v)}" for k, v in clean_run.items()))
        for r in rows:
            print(f"  {'caught' if r['caught'] else 'MISSED'}  {r['kind']}: {r['what']} -> "
                  f"{r['check']} {r['before'][r['check']]} -> {r['after'][r['check']]}")
        print(f"result: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--faults", help="comma-separated, in order (default: all): "
                   + ",".join(FAULTS))
    p.add_argument("--fault-seconds", type=float, help="how long each lasting fault is held "
                   "(default 20; 8 with --short)")
    p.add_argument("--settle", type=float, help="quiet seconds before each fault and at "
                   "the end (default 5; 3 with --short)")
    p.add_argument("--short", action="store_true",
                   help=f"the CI form: {','.join(SHORT_FAULTS)}, shorter holds")
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--recovery-timeout", type=float, default=90.0,
                   help="seconds after a fault before it is reported as not recovered")
    p.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672//",
                   help="the RabbitMQ the proxy forwards to and the worker consumes from")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--inject", help="after the run, corrupt its data on purpose and check "
                   "that each corruption is caught: 'all' or "
                   + ",".join(cc.CORRUPTIONS))
    p.add_argument("--self-test", action="store_true", help="check that every check can "
                   "fail, on synthetic data (no database, broker or process)")
    p.add_argument("--logs", help="keep the processes' logs in this folder")
    p.add_argument("--at-most-once", action="store_true",
                   help="the worker records outcomes and runs each fire at most once")
    args = p.parse_args(argv)
    args.faults = (args.faults.split(",") if args.faults
                   else SHORT_FAULTS if args.short
                   else [f for f in FAULTS if f not in OPT_IN_FAULTS])
    unknown = [f for f in args.faults if f not in FAULTS]
    if unknown:
        p.error(f"unknown faults: {', '.join(unknown)}")
    args.fault_seconds = args.fault_seconds or (8.0 if args.short else 20.0)
    args.settle = args.settle if args.settle is not None else (3.0 if args.short else 5.0)
    if args.inject == "all":
        args.inject = list(cc.CORRUPTIONS)
    elif args.inject:
        args.inject = args.inject.split(",")
        bad = [k for k in args.inject if k not in cc.CORRUPTIONS]
        if bad:
            p.error(f"unknown corruptions: {', '.join(bad)}")
    if args.replicas < 2 and "kill-two" in args.faults:
        p.error("kill-two needs at least 2 replicas")
    return args


def delete_queue(broker: str, queue: str) -> None:
    from kombu import Connection

    with contextlib.suppress(Exception), Connection(broker, connect_timeout=5) as conn:
        conn.default_channel.queue_delete(queue)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.self_test:
        return run_self_test(args.json)
    # SIGTERM and SIGHUP unwind like Ctrl-C, so that every `finally` below cleans up.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit(130))
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="awa-chaos-")))
        logs = Path(args.logs) if args.logs else tmp
        logs.mkdir(parents=True, exist_ok=True)
        net: Loopback = Loopback(args.replicas)
        if "partition" in args.faults:
            net = Namespaces(args.replicas)  # InfraError: the one-line reason
            stack.callback(net.close)
            net.setup()
        cluster: PrivateCluster | None = None
        try:
            cluster = PrivateCluster(net.db_listen(), trust=net.trusted())
        except InfraError as exc:
            if NEEDS_CLUSTER & set(args.faults):
                raise
            log(f"no private cluster ({exc}); using the shared server")
        if cluster is not None:
            stack.callback(cluster.close)
            cluster.init()
            cluster.start()
            admin = psycopg.connect(cluster.url(), autocommit=True)
            admin.execute("CREATE DATABASE chaos")
            admin.close()

            def db_url(host: str) -> str:
                return cluster.url(host, "chaos")
            where = f"private PostgreSQL cluster on port {cluster.port}"
        else:
            server = stack.enter_context(server_url())
            dbs = TempDatabases(server, prefix=f"awachaos{os.getpid()}")
            stack.callback(dbs.close)
            shared = dbs.fresh()

            def db_url(host: str) -> str:
                return shared
            where = "a temporary database on the shared server"
        with Database(db_url("127.0.0.1")) as store:
            store.migrate()
        broker = urlsplit(args.broker)
        proxy = BrokerProxy(net.broker_listen(), (broker.hostname or "127.0.0.1",
                                                   broker.port or 5672))
        proxy.start()
        stack.callback(proxy.close)
        queue = f"awa-chaos-{os.getpid()}-{random.randrange(1 << 30):x}"
        stack.callback(delete_queue, args.broker, queue)
        record = logs / "record.jsonl"
        record.touch()
        inherited = {k: v for k, v in os.environ.items()
                     if not k.startswith(("AWA_BEAT_", "CHAOSAPP_"))}
        env = {**inherited, "CHAOSAPP_QUEUE": queue, "CHAOSAPP_RECORD": str(record),
               "CHAOSAPP_DIE_BEFORE_MARK": str(logs / "die-before-mark.flag"),
               "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE),
                                              os.environ.get("PYTHONPATH", "")])}
        group = Group(net, db_url, proxy, env, logs, args.replicas)
        stack.callback(group.stop)
        obs = Observer(db_url("127.0.0.1"), record)
        stack.callback(obs.close)
        group.start_worker(args.broker, {
            "AWA_BEAT_TRACK_OUTCOMES": "1", "AWA_BEAT_AT_MOST_ONCE": "1",
            "AWA_BEAT_DATABASE_URL": db_url("127.0.0.1")} if args.at_most_once else None)
        for slot in range(args.replicas):
            group.start(slot)
            time.sleep(random.uniform(0.0, 1.0))  # replicas started at different times
        log(f"{args.replicas} beat replicas, faults: {', '.join(args.faults)}; "
            f"holds {args.fault_seconds:g} s; logs in {logs}")
        harness = Harness(args, obs, group, proxy, net, cluster)
        try:
            data = harness.run()
        except (WaitTimeout, RuntimeError) as exc:
            log(f"the run could not go on: {exc}\n{group.tail()}")
            return 2
        results = cc.check_all(data)
        figures = [cc.fault_figures(data, f) for f in data.faults]
        injected = None
        if args.inject:
            matchers = inject(args.inject, obs, data)
            obs.poll()
            after = cc.check_all(obs.data(data.until, data.faults))
            injected = {}
            for kind in args.inject:
                what, check, _ = cc.CORRUPTIONS[kind]
                item = next((i for i in after[check] if matchers[kind](i)), None)
                injected[kind] = {"what": what, "check": check, "before": len(results[check]),
                                  "after": len(after[check]), "caught": item is not None,
                                  "item": item}
        skipped_twice = None
        if args.at_most_once:
            rows = obs._execute("SELECT coalesce(sum(duplicates), 0) FROM awa_beat.outcomes")
            skipped_twice = int(rows[0][0]) if rows else None
        setup = {"replicas": args.replicas, "database": where,
                 "at_most_once": args.at_most_once,
                 "second_deliveries_skipped": skipped_twice,
                 "network": "a network namespace each" if net.can_partition
                 else "loopback", "faults": args.faults, "fault_seconds": args.fault_seconds,
                 "queue": queue}
        out = report(args, data, results, figures, time.monotonic() - started, setup,
                     injected)
    if injected is not None:
        return 0 if all(r["caught"] for r in injected.values()) else 1
    return 0 if out["pass"] else 1


def main_or_error() -> int | str:
    """Run :func:`main`, and turn a failure of the harness's own infrastructure into the
    one-line error that ends the process."""
    try:
        return main()
    except InfraError as exc:
        return f"error: {exc}"


if __name__ == "__main__":
    common.run(main_or_error)
