"""awa-beat against the Celery beat schedulers people would otherwise run, in one run.

    python benchmarks/peers/run.py [--full] [--sizes 100,1000,10000] [--peers awa,...]
                                   [--trials 20] [--steady-seconds 10] [--burst-timeout S]
                                   [--out benchmarks/peers/results.md]

Every peer runs as a real ``celery beat`` process (app modules generated from
benchmarks/peers/peerapp.py), publishing to RabbitMQ: awa-beat (``awa_beat_dispatch =
"celery"``, the bridge), Celery's PersistentScheduler, RedBeat (Redis) and
django-celery-beat's DatabaseScheduler (same PostgreSQL, its own migrations, in a
throw-away database). Measured, per peer and N (100, 1k, 10k; with ``--full``, 100k, and
1,000,000 for awa-beat alone), in one beat process per peer and size, with the N entries
stored before it starts:

* start-up: process start until the message of an entry that is overdue at start-up is
  on the broker (at N <= 1,000 the median of ``--startup-trials`` start-ups, 5 by default,
  each with its entries stored afresh);
* idle CPU: CPU seconds of the beat process (utime + stime, /proc) per minute while
  nothing is due (measured over the seconds between start-up and the burst, scaled to a
  minute);
* burst: all N entries due at the same instant; time from that instant until all N
  messages are in the queue (``queue_declare(passive=True).message_count``, polled every
  few ms), and per-message lag p50/p99 read off that count curve (the k-th message's lag
  is when the count first reached k);
* CPU per fire: CPU seconds of the beat process from just before the instant until all
  N are on the broker, divided by N; peak RSS (VmHWM) at the end;

and, in a second process per peer and size, steady state: N entries each firing once a
minute at second ``i % 60``; over a ``--steady-seconds`` window after start-up, CPU
seconds per fire and per minute, fires seen against fires due (the window's edges make
that +-1 s of fires), and peak RSS. CPU is the kernel's schedstat run time where it keeps one, else
utime + stime from /proc (10 ms ticks).

And failover: awa-beat with 3 replicas (session advisory lock, as shipped) and RedBeat
with 3 replicas sharing its Redis lock (``beat_max_loop_interval = 1`` so that the
documented lock timeout, 5 x the loop interval, is 5 s; at RedBeat's defaults it is
1,500 s). Each trial SIGKILLs the active beat at a random point 0.1-0.9 s past a whole
second, starts a replacement, and times until the next message of the every-second
entry is on the broker.

Beside them, "the limit this machine allows", in the same harness: one
``INSERT ... SELECT`` of N rows into a plain table, and raw kombu publish loops of N
persistent messages, unconfirmed (time until all N are in the queue): a small message,
and the message Celery's beat sends (same headers, each with its own id and args). The
row "awa-beat / limit" divides awa-beat's burst by SQL + kombu. The table goes to stdout and
to benchmarks/peers/results.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import redis
from kombu import Connection, Exchange, Producer, Queue

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE.parent))

from beatprocs import CLK_TCK, SCHEDSTAT, as_installed, cpu_seconds  # noqa: E402

sys.path.insert(0, str(HERE))
from peerapp import BROKER_OPTIONS  # noqa: E402

from awa_beat._testing import TempDatabases, server_url  # noqa: E402

#: Sizes whose start-up is measured --startup-trials times (larger ones once: their
#: start-up is long enough for one run to tell, and preparing them again is slow).
STARTUP_TRIALS_UP_TO = 1000

#: The size ``--full`` runs for awa-beat alone: no peer holds it (each one's reason, from
#: its figures at the largest size it ran, goes in the notes).
AWA_ONLY = 1_000_000

PEERS = {
    "awa": ("awa-beat", "awa_beat.Scheduler"),
    "persistent": ("PersistentScheduler", "celery.beat:PersistentScheduler"),
    "redbeat": ("RedBeat", "redbeat.RedBeatScheduler"),
    "django": ("django-celery-beat", "django_celery_beat.schedulers:DatabaseScheduler"),
}


# -- helpers ---------------------------------------------------------------------------------------

def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.005) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(1, math.ceil(len(ordered) * q / 100)) - 1]


class Broker:
    """Queues of one run on RabbitMQ: declared like Celery's, counted, deleted at the end."""

    def __init__(self, url: str) -> None:
        self.conn = Connection(url)
        self.channel = self.conn.channel()
        self.queues: list[str] = []

    def declare(self, name: str) -> Queue:
        queue = Queue(name, Exchange(name, type="direct"), routing_key=name, durable=True)
        queue(self.channel).declare()
        self.queues.append(name)
        return queue

    def count(self, name: str) -> int:
        return self.channel.queue_declare(queue=name, passive=True).message_count

    def curve(self, name: str, n: int, start: float, timeout: float) -> list[tuple[float, int]]:
        """(seconds after ``start`` (time.time()), count) until the count reaches n."""
        points: list[tuple[float, int]] = []
        deadline = start + timeout
        last = -1
        while True:
            c = self.count(name)
            now = time.time()
            if c != last:
                points.append((now - start, c))
                last = c
            if c >= n or now > deadline:
                return points
            time.sleep(0.002)

    def delete_all(self) -> None:
        for name in self.queues:
            self.channel.queue_delete(name)
            self.channel.exchange_delete(name)
        self.queues.clear()

    def close(self) -> None:
        self.delete_all()
        self.conn.release()


def lag_at(points: list[tuple[float, int]], k: int) -> float:
    """Seconds until the count first reached k."""
    for t, c in points:
        if c >= k:
            return t
    return float("nan")


@dataclass
class Env:
    args: argparse.Namespace
    server: str
    dbs: TempDatabases
    broker: Broker
    tmp: Path
    redis_prefixes: list[str] = field(default_factory=list)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def config(self, peer: str, n: int, **extra: Any) -> dict[str, Any]:
        tag = f"{peer}-{n}-{uuid.uuid4().hex[:6]}"
        cfg: dict[str, Any] = {"peer": peer, "n": n, "broker": self.args.broker,
                               "queue": f"peers-{tag}", "probe_queue": f"peers-{tag}-probe",
                               **extra}
        if peer == "awa":
            cfg["db_url"] = self.dbs.fresh("standalone")
            cfg.setdefault("conf", {})["awa_beat_database_url"] = cfg["db_url"]
        elif peer == "django":
            cfg["db_url"] = self.dbs.fresh()
        elif peer == "redbeat":
            cfg["redis"] = self.args.redis
            cfg["redis_prefix"] = f"peers-{tag}:"
            self.redis_prefixes.append(cfg["redis_prefix"])
        cfg["schedule_file"] = str(self.tmp / f"celerybeat-{tag}")
        self.broker.declare(cfg["queue"])
        self.broker.declare(cfg["probe_queue"])
        module = f"peers_{tag.replace('-', '_')}"
        (self.tmp / f"{module}.py").write_text(
            f"from peerapp import build\nCFG = {json.dumps(cfg)!r}\n"
            "import json\nCFG = json.loads(CFG)\napp = build(CFG)\n")
        cfg["module"] = module
        return cfg

    def environ(self) -> dict[str, str]:
        path = os.pathsep.join([str(self.tmp), str(HERE), str(ROOT),
                                os.environ.get("PYTHONPATH", "")])
        return {**os.environ, "PYTHONPATH": path, "C_FORCE_ROOT": "1"}

    def prepare(self, cfg: dict[str, Any]) -> None:
        subprocess.run([sys.executable, "-c", f"import peerapp, {cfg['module']} as m; "
                        "peerapp.prepare(m.app, m.CFG)"],
                       cwd=self.tmp, env=self.environ(), check=True)

    def beat(self, cfg: dict[str, Any], name: str, level: str = "warning"
             ) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"{name}.log", "wb")  # noqa: SIM115 - closed right after
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", cfg["module"], "beat",
             "-S", PEERS[cfg["peer"]][1], "-l", level, "--pidfile=",
             "-s", cfg["schedule_file"]], cwd=self.tmp, env=self.environ(),
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(proc)
        return proc

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def cleanup(self) -> None:
        for proc in self.procs:
            self.stop(proc)
        self.broker.close()
        if self.redis_prefixes:
            r = redis.Redis.from_url(self.args.redis)
            for prefix in self.redis_prefixes:
                keys = list(r.scan_iter(match=f"{prefix}*", count=5000))
                for i in range(0, len(keys), 5000):
                    r.delete(*keys[i:i + 5000])
            r.close()
        self.dbs.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


# -- one beat process per peer and size: start-up, idle, burst ----------------------------------

def run_burst(env: Env, peer: str, n: int, margin: float) -> dict[str, Any]:
    due = math.ceil(time.time() + margin)
    cfg = env.config(peer, n, due=due)
    t_prep = time.time()
    env.prepare(cfg)
    prepare_s = time.time() - t_prep
    name = cfg["module"]
    t0 = time.time()
    if t0 > due - 2:
        return {"retry": True, "prepare": prepare_s, "startup": float("nan")}
    proc = env.beat(cfg, name)
    try:
        got = wait_for(lambda: env.broker.count(cfg["probe_queue"]) >= 1 or proc.poll() is not None,
                       max(due - time.time() - 1.0, 1.0))
        startup = time.time() - t0
        if proc.poll() is not None or not got or env.broker.count(cfg["probe_queue"]) < 1:
            if proc.poll() is not None:
                raise RuntimeError(f"{peer} beat exited:\n{env.log(name)[-3000:]}")
            return {"retry": True, "prepare": prepare_s, "startup": startup}
        time.sleep(0.3)
        idle_from, cpu_from = time.time(), cpu_seconds(proc.pid)
        time.sleep(max(0.0, due - 0.3 - time.time()))
        idle_to, cpu_mid = time.time(), cpu_seconds(proc.pid)
        idle_per_min = (cpu_mid - cpu_from) / (idle_to - idle_from) * 60
        points = env.broker.curve(cfg["queue"], n, due, burst_timeout(env.args, n))
        cpu_end = cpu_seconds(proc.pid)
        rss = peak_rss_mb(proc.pid)
        count = points[-1][1] if points else 0
    finally:
        env.stop(proc)
        text = env.log(name)
        if "Traceback" in text:
            print(f"  ({peer} logged a traceback:)\n{text[text.index('Traceback'):][:4000]}",
                  file=sys.stderr)
    return {
        "retry": False, "prepare": prepare_s, "startup": startup,
        "idle_cpu_min": idle_per_min, "idle_window": idle_to - idle_from,
        "idle_cpu_min_res": (0.0 if SCHEDSTAT else 60 / CLK_TCK) / (idle_to - idle_from),
        "all": points[-1][0] if count >= n else float("nan"), "count": count,
        "p50": lag_at(points, math.ceil(n * 0.5)), "p99": lag_at(points, math.ceil(n * 0.99)),
        "cpu_fire_ms": (cpu_end - cpu_mid) / max(count, 1) * 1000, "rss": rss,
    }


def burst_timeout(args: argparse.Namespace, n: int) -> float:
    """Seconds a burst of N may take: ``--burst-timeout``, else 20 s or N / 1000 x 2 s,
    whichever is more (per size: a peer that needs longer at 10k is not run larger)."""
    return args.burst_timeout or max(20.0, n / 1000 * 2)


def burst(env: Env, peer: str, n: int, estimate: float) -> dict[str, Any]:
    margin = 6.0 + estimate
    for _ in range(3):
        result = run_burst(env, peer, n, margin)
        env.broker.delete_all()
        if not result["retry"]:
            return result
        margin = 6.0 + 3 * (result["prepare"] + (result["startup"]
                                                  if not math.isnan(result["startup"])
                                                  else margin))
        print(f"  {peer} n={n}: start-up overran the due instant; retrying with a "
              f"{margin:.0f} s margin", file=sys.stderr)
    raise RuntimeError(f"{peer} n={n}: never started before the due instant")


def startup_once(env: Env, peer: str, n: int) -> float:
    """Start-up alone: a beat with the N entries stored, none due for a day, until the
    overdue probe's message is on the broker."""
    cfg = env.config(peer, n, due=math.ceil(time.time() + 86400))
    env.prepare(cfg)
    t0 = time.time()
    proc = env.beat(cfg, cfg["module"])
    try:
        got = wait_for(lambda: env.broker.count(cfg["probe_queue"]) >= 1
                       or proc.poll() is not None, 60)
        elapsed = time.time() - t0
        if proc.poll() is not None or not got:
            raise RuntimeError(f"{peer} n={n}: no first fire\n{env.log(cfg['module'])[-3000:]}")
    finally:
        env.stop(proc)
        env.broker.delete_all()
    return elapsed


def run_steady(env: Env, peer: str, n: int, margin: float) -> dict[str, Any]:
    """N entries, each firing once a minute at second i % 60: CPU over a steady window."""
    seconds = env.args.steady_seconds
    due = math.ceil(time.time() + margin)
    cfg = env.config(peer, n, due=due, steady=True)
    env.prepare(cfg)
    if time.time() > due - 1:
        return {"retry": True}
    proc = env.beat(cfg, cfg["module"])
    try:
        time.sleep(max(0.0, due - time.time()))
        if proc.poll() is not None:
            raise RuntimeError(f"{peer} beat exited:\n{env.log(cfg['module'])[-3000:]}")
        c0, cpu0, t0 = env.broker.count(cfg["queue"]), cpu_seconds(proc.pid), time.time()
        time.sleep(seconds)
        c1, cpu1, t1 = env.broker.count(cfg["queue"]), cpu_seconds(proc.pid), time.time()
        rss = peak_rss_mb(proc.pid)
    finally:
        env.stop(proc)
        env.broker.delete_all()
    expected = sum(1 for i in range(n) if (i % 60 - due) % 60 < round(t1 - t0))
    fired = c1 - c0
    return {"retry": False, "steady_cpu_fire_ms": (cpu1 - cpu0) / max(fired, 1) * 1000,
            "steady_cpu_min": (cpu1 - cpu0) / (t1 - t0) * 60, "steady_fired": fired,
            "steady_expected": expected, "steady_rss": rss}


def steady(env: Env, peer: str, n: int, startup: float) -> dict[str, Any]:
    margin = 3.0 + 2 * startup
    for _ in range(3):
        result = run_steady(env, peer, n, margin)
        if not result["retry"]:
            return result
        margin *= 2
    raise RuntimeError(f"{peer} n={n}: steady run never started before its first fire")


# -- the machine's limits -------------------------------------------------------------------------

def sql_limit(env: Env, n: int) -> float:
    url = env.dbs.fresh()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE plain (id bigint, name text, args jsonb,"
                     " created_at timestamptz)")
        best = float("inf")
        for _ in range(3):
            conn.execute("TRUNCATE plain")
            start = time.perf_counter()
            conn.execute("INSERT INTO plain SELECT i, 'b' || i, jsonb_build_array(i), now()"
                         " FROM generate_series(1, %s) i", (n,))
            best = min(best, time.perf_counter() - start)
    return best


def kombu_limit(env: Env, n: int) -> dict[str, float]:
    """Raw kombu publish loops of N persistent messages, unconfirmed: a small message,
    and the message Celery's beat sends for ``peers.tick`` (the same headers and body
    shape), each with its own task id and args."""
    from celery import Celery

    from awa_beat._bridge.messages import _Recorder
    out: dict[str, float] = {}
    app = Celery("limit", set_as_current=False)
    app.conf.update(broker_url=env.args.broker, result_expires=None)
    recorder = _Recorder(app.connection_for_write(), auto_declare=False)
    app.send_task("peers.tick", [0], {}, producer=recorder, retry=False,
                  headers={"celery_beat_task": True})
    assert recorder.recorded is not None
    body, _, ctype, cenc, headers, props, *_ = recorder.recorded
    recorder.connection.release()
    embed = json.loads(body)[2]
    for kind in ("small", "celery"):
        name = f"peers-limit-{n}-{kind}-{uuid.uuid4().hex[:6]}"
        queue = env.broker.declare(name)
        with Connection(env.args.broker, transport_options=BROKER_OPTIONS) as conn:
            producer = Producer(conn.channel(), exchange=queue.exchange, routing_key=name)
            start = time.time()
            if kind == "small":
                for i in range(n):
                    producer.publish({"args": [i], "kwargs": {}}, serializer="json",
                                     delivery_mode=2, headers={"task": "peers.tick"})
            else:
                for i in range(n):
                    task_id = str(uuid.uuid4())
                    h = dict(headers, id=task_id, root_id=task_id, argsrepr=f"[{i}]")
                    producer.publish(json.dumps([[i], {}, embed]),
                                     content_type=ctype, content_encoding=cenc, headers=h,
                                     delivery_mode=2, correlation_id=task_id,
                                     priority=props.get("priority"))
            points = env.broker.curve(name, n, start, max(120.0, n / 1000 * 2))
        suffix = "" if kind == "small" else "_celery"
        out["all" + suffix] = points[-1][0]
        out["p50" + suffix] = lag_at(points, math.ceil(n * 0.5))
        out["p99" + suffix] = lag_at(points, math.ceil(n * 0.99))
        env.broker.delete_all()
    return out


def retried(measure: Callable[[], dict[str, float]], tries: int = 3) -> dict[str, float]:
    """``measure()``, again if the broker stalled a publisher past its socket timeout
    (RabbitMQ's flow control can, under a 100k-message loop on this small VM)."""
    from amqp.exceptions import RecoverableConnectionError

    for _ in range(tries - 1):
        try:
            return measure()
        except (OSError, RecoverableConnectionError) as exc:
            print(f"  the broker stalled a publish loop ({exc}); measuring again",
                  file=sys.stderr)
    return measure()


# -- failover --------------------------------------------------------------------------------------

def leader_awa(cfg: dict[str, Any], procs: list[subprocess.Popen[bytes]], _env: Env
               ) -> subprocess.Popen[bytes] | None:
    with psycopg.connect(cfg["db_url"], autocommit=True) as conn:
        rows = conn.execute(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
            " WHERE l.locktype = 'advisory' AND l.granted"
            " AND a.application_name LIKE 'awa-beat leader %'").fetchall()
    pids = {int(r[0].rsplit(" ", 1)[1]) for r in rows}
    return next((p for p in procs if p.pid in pids and p.poll() is None), None)


def leader_redbeat(cfg: dict[str, Any], procs: list[subprocess.Popen[bytes]], env: Env
                   ) -> subprocess.Popen[bytes] | None:
    alive = [p for p in procs if p.poll() is None
             and "Acquired lock" in env.log(f"{cfg['module']}-{p.pid}")]
    return alive[0] if len(alive) == 1 else None


def failover(env: Env, peer: str, trials: int, replicas: int = 3) -> dict[str, Any]:
    conf = {"beat_max_loop_interval": 1} if peer == "redbeat" else {}
    cfg = env.config(peer, 1, failover=True, conf=conf)
    env.prepare(cfg)
    find = leader_awa if peer == "awa" else leader_redbeat
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        proc = env.beat(cfg, "pending", level="info")
        (env.tmp / "pending.log").rename(env.tmp / f"{cfg['module']}-{proc.pid}.log")
        procs.append(proc)

    times: list[float] = []
    try:
        for _ in range(replicas):
            start()
            time.sleep(random.uniform(0, 1))  # staggered, as replicas deployed one by one
        for trial in range(trials):
            leader = wait_for(lambda: find(cfg, procs, env), 60, 0.05)
            if leader is None:
                raise RuntimeError(f"{peer}: no leader\n" + "\n".join(
                    env.log(f"{cfg['module']}-{p.pid}")[-1500:] for p in procs))
            c = env.broker.count(cfg["queue"])
            wait_for(lambda c=c: env.broker.count(cfg["queue"]) >= c + 1, 30)
            time.sleep((math.floor(time.time()) + 1 + random.uniform(0.1, 0.9)) - time.time())
            leader.kill()
            t_kill = time.time()
            leader.wait()
            base = env.broker.count(cfg["queue"])
            got = wait_for(lambda b=base: env.broker.count(cfg["queue"]) > b, 120, 0.005)
            times.append(time.time() - t_kill if got else float("nan"))
            print(f"  {peer} failover trial {trial + 1}: {times[-1]:.2f} s", file=sys.stderr)
            start()
    finally:
        for proc in procs:
            env.stop(proc)
        env.broker.delete_all()
    return {"p50": pct(times, 50), "p99": pct(times, 99), "max": max(times),
            "trials": len(times)}


# -- report ----------------------------------------------------------------------------------------

def fmt(value: float | None, unit: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if unit == "s":
        return f"{value:.3f} s" if value < 10 else f"{value:.1f} s"
    if unit == "ms":
        return f"{value:.3f} ms" if value < 1 else f"{value:.2f} ms"
    return f"{value:.0f} {unit}" if value >= 10 else f"{value:.2f} {unit}"


def cell(value: float | None, unit: str, ref: float | None) -> str:
    text = fmt(value, unit) if value is not None else "-"
    if (value is None or ref is None or math.isnan(value) or math.isnan(ref) or ref <= 0
            or value <= 0 or text == "-"):
        return text
    return f"{text} (x{value / ref:.1f})"


def report(args: argparse.Namespace, peers: list[str], sizes: list[int],
           results: dict[tuple[str, int], dict[str, Any]],
           limits: dict[int, dict[str, float]], fail: dict[str, dict[str, Any]],
           notes: list[str]) -> str:
    head = ["workload", "N", *[PEERS[p][0] for p in peers]]
    measures = [
        ("burst: all N on the broker", "all", "s"),
        ("burst: per-task lag p50", "p50", "s"),
        ("burst: per-task lag p99", "p99", "s"),
        ("start-up to first fire", "startup", "s"),
        ("CPU per fire (burst)", "cpu_fire_ms", "ms"),
        ("steady: CPU per fire", "steady_cpu_fire_ms", "ms"),
        ("steady: CPU per minute", "steady_cpu_min", "s"),
        ("steady: fires seen / due in the window", "steady_fired", ""),
        ("idle: CPU per minute", "idle_cpu_min", "s"),
        ("peak RSS (burst run)", "rss", "MB"),
        ("peak RSS (steady run)", "steady_rss", "MB"),
    ]
    has_limit = {"all", "p50", "p99"}
    lines = ["| " + " | ".join([*head, "limit of this machine"]) + " |",
             "|" + "---|" * (len(head) + 1)]
    for label, key, unit in measures:
        for n in sizes:
            ref = results.get(("awa", n), {}).get(key) if "awa" in peers else None
            row = [label, f"{n:,}"]
            if key == "startup" and n <= STARTUP_TRIALS_UP_TO and args.startup_trials > 1:
                row[0] = f"{label} (median of {args.startup_trials})"
            for p in peers:
                r = results.get((p, n))
                if r is None:
                    row.append("not run (see the notes)" if n == AWA_ONLY else "not run")
                    continue
                value = r.get(key)
                if key == "idle_cpu_min" and value == 0 and r["idle_cpu_min_res"]:
                    row.append(f"< {r['idle_cpu_min_res']:.2f} s (0 ticks)")
                    continue
                if key == "steady_fired":
                    row.append(f"{value:,} / {r['steady_expected']:,}" if value is not None
                               else "-")
                    continue
                if key in has_limit and r.get("count", n) < n:
                    row.append(f"{r['count']:,} of {n:,} in {burst_timeout(args, n):.0f} s")
                    continue
                if (key in ("steady_cpu_fire_ms", "steady_cpu_min", "steady_rss")
                        and value is not None
                        and r["steady_fired"] < 0.9 * r["steady_expected"]):
                    # A peer that fell behind spent its CPU and memory on fewer fires (or
                    # on none): no ratio, since it did not do the same work.
                    row.append(f"{fmt(value, unit)}, fell behind (fired"
                               f" {r['steady_fired']:,} of {r['steady_expected']:,})")
                    continue
                row.append(fmt(value, unit) if p == "awa" else cell(value, unit, ref))
            lim = limits.get(n, {})
            nan = float("nan")
            if key == "all":
                row.append(f"SQL {fmt(lim.get('sql', nan), 's')}; kombu"
                           f" {fmt(lim.get('all', nan), 's')} (small message),"
                           f" {fmt(lim.get('all_celery', nan), 's')} (Celery's message)")
            elif key in ("p50", "p99"):
                row.append(f"kombu {fmt(lim.get(key, nan), 's')} (small),"
                           f" {fmt(lim.get(key + '_celery', nan), 's')} (Celery's)")
            else:
                row.append("")
            lines.append("| " + " | ".join(row) + " |")
        if key == "all" and "awa" in peers:
            # How far awa-beat is from what this machine allows: the SQL statement plus
            # the publish loop, both needed for each fire.
            for kind, suffix in (("small message", ""), ("Celery's message", "_celery")):
                ratios = []
                for n in sizes:
                    awa = results.get(("awa", n), {}).get("all", float("nan"))
                    lim = limits.get(n, {})
                    floor = lim.get("sql", float("nan")) + lim.get("all" + suffix, float("nan"))
                    ratios.append(f"N = {n:,}: x{awa / floor:.1f}" if floor > 0 else "-")
                row = [f"burst: awa-beat / limit (SQL + kombu, {kind})", "", "; ".join(ratios)]
                lines.append("| " + " | ".join(row + [""] * (len(head) + 1 - len(row)))
                             + " |")
    for key, label in (("p50", "failover: kill to next fire p50"),
                       ("p99", "failover: kill to next fire p99"),
                       ("max", "failover: kill to next fire max")):
        row = [label, "1"]
        ref = fail.get("awa", {}).get(key)
        for p in peers:
            if p not in fail:
                row.append("n/a (single instance)" if p in ("persistent", "django")
                           else "not run")
            else:
                row.append(fmt(fail[p][key], "s") if p == "awa"
                           else cell(fail[p][key], "s", ref))
        row.append("")
        lines.append("| " + " | ".join(row) + " |")
    trials = {p: f["trials"] for p, f in fail.items()}
    machine = f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    text = "\n".join([
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine}.",
        f"Command: `{' '.join(['python benchmarks/peers/run.py', *sys.argv[1:]])}`",
        "(xR) = the peer's figure divided by awa-beat's, same run (above 1: awa-beat is"
        " lower, i.e. faster or lighter).",
        f"Failover trials: {trials}.", "", *lines])
    if notes:
        text += "\n\n" + "\n".join(f"- {note}" for note in notes)
    return text + "\n"


def held_back(peer: str, results: dict[tuple[str, int], dict[str, Any]],
              last: dict[str, tuple[int, float]]) -> str:
    """Why ``peer`` is not run at :data:`AWA_ONLY`: its figures at the largest size it ran."""
    name = PEERS[peer][0]
    if peer not in last:
        return f"{name} not run at N = {AWA_ONLY:,} (awa-beat alone at that size)."
    n = last[peer][0]
    r = results[(peer, n)]
    done = (f"published the burst in {fmt(r['all'], 's')}" if r["count"] >= n
            else f"published {r['count']:,} of the {n:,} burst messages in the time allowed")
    steady_part = ""
    if r.get("steady_expected"):
        steady_part = (f", fired {r['steady_fired']:,} of the {r['steady_expected']:,} steady"
                       " fires due in the window")
    k = AWA_ONLY / n
    scaled = (f"in proportion, N = {AWA_ONLY:,} would take {fmt(r['startup'] * k, 's')} to"
              " start" + (f" and {fmt(r['all'] * k, 's')} to publish its burst"
                          if r["count"] >= n else ", and its burst would never end"))
    return (f"{name} not run at N = {AWA_ONLY:,} (awa-beat alone at that size): at"
            f" N = {n:,}, the largest size it ran, it took {fmt(r['startup'], 's')} to start,"
            f" {done}{steady_part}, peak RSS {fmt(r['rss'], 'MB')}; {scaled}.")


def versions() -> str:
    from importlib.metadata import version
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                          capture_output=True).stdout.strip() or "unknown"
    return ", ".join(f"{p} {version(p)}" for p in
                     ("celery", "kombu", "celery-redbeat", "django-celery-beat", "awa-beat")
                     ) + f" (commit {head})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true",
                        help="sizes 100 to 100,000, and 1,000,000 for awa-beat alone")
    parser.add_argument("--sizes", help="comma-separated N (default 100,1000,10000)")
    parser.add_argument("--peers", default="awa,persistent,redbeat,django")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--burst-timeout", type=float,
                        help="seconds a burst may take (default: 20, or N / 1000 x 2 if more)")
    parser.add_argument("--startup-trials", type=int, default=5,
                        help="start-ups per peer at N <= 1,000, reported as their median"
                             " (default 5)")
    parser.add_argument("--steady-seconds", type=float, default=10.0,
                        help="length of the steady window (0: skip the steady workload)")
    parser.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672//")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--out", default=str(HERE / "results.md"))
    args = parser.parse_args()
    as_installed()
    started = time.time()
    # Killed, the harness still stops its beats: a beat left running would load every
    # later measurement (and a PersistentScheduler with 100,000 entries takes a core).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sizes = [int(s) for s in (args.sizes or ("100,1000,10000,100000" if args.full
                                             else "100,1000,10000")).split(",")]
    peers = args.peers.split(",")
    if args.full and not args.sizes and "awa" in peers:
        sizes.append(AWA_ONLY)
    results: dict[tuple[str, int], dict[str, Any]] = {}
    limits: dict[int, dict[str, float]] = {}
    fail: dict[str, dict[str, Any]] = {}
    notes: list[str] = [f"Versions: {versions()}."]
    # An installed awa-beat has its bytecode compiled (pip does it); this checkout's too,
    # even where PYTHONDONTWRITEBYTECODE is set, so no beat compiles at start-up.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "awa_beat")],
                   check=True, env={k: v for k, v in os.environ.items()
                                    if k != "PYTHONDONTWRITEBYTECODE"})
    with server_url() as server:
        env = Env(args, server, TempDatabases(server, prefix=f"awabeat_peers{os.getpid()}"),
                  Broker(args.broker), Path(tempfile.mkdtemp(prefix="awa-beat-peers-")))
        try:
            for n in sizes:
                began = time.time()
                limits[n] = {"sql": sql_limit(env, n), **retried(lambda n=n: kombu_limit(env, n))}
                limits[n]["elapsed"] = time.time() - began
                print(f"limits n={n}: {limits[n]}", file=sys.stderr)
            # (N, seconds to prepare and start) of each peer's last size: the next
            # size's due instant must leave time for both, which grow with N.
            last: dict[str, tuple[int, float]] = {}
            dead: dict[str, int] = {}
            for n in sizes:
                for peer in peers:
                    if n == AWA_ONLY and peer != "awa" and peer not in dead:
                        notes.append(held_back(peer, results, last))
                        continue
                    if peer in dead:
                        notes.append(f"{PEERS[peer][0]} not run at N = {n:,}: at N = "
                                     f"{dead[peer]:,} it had not published all N within "
                                     f"{burst_timeout(args, dead[peer]):.0f} s.")
                        continue
                    began = time.time()
                    prev_n, prev_cost = last.get(peer, (n, 1.0))
                    r = burst(env, peer, n, prev_cost * max(1.0, n / prev_n) * 1.2)
                    results[(peer, n)] = r
                    if n <= STARTUP_TRIALS_UP_TO and args.startup_trials > 1:
                        # One start-up varies between runs by as much as the peers
                        # differ at small N: take the median.
                        runs = [r["startup"], *(startup_once(env, peer, n)
                                                for _ in range(args.startup_trials - 1))]
                        r["startup_runs"] = runs
                        r["startup"] = statistics.median(runs)
                    last[peer] = (n, r["prepare"] + r["startup"])
                    if env.args.steady_seconds:
                        r.update(steady(env, peer, n, r["prepare"] + r["startup"]))
                    r["elapsed"] = time.time() - began
                    print(f"{peer} n={n}: {r}", file=sys.stderr)
                    if r["count"] < n:
                        dead[peer] = n
            if args.trials:
                for peer in ("awa", "redbeat"):
                    if peer in peers:
                        fail[peer] = failover(env, peer, args.trials)
                        print(f"{peer} failover: {fail[peer]}", file=sys.stderr)
        finally:
            env.cleanup()
    if ("awa", AWA_ONLY) in results:
        notes.append(f"awa-beat at N = {AWA_ONLY:,} (burst and steady runs) took"
                     f" {results[('awa', AWA_ONLY)]['elapsed'] / 60:.1f} min, the machine's"
                     f" limits at that size {limits[AWA_ONLY]['elapsed'] / 60:.1f} min.")
    notes.append(f"The whole run took {(time.time() - started) / 60:.1f} min.")
    text = report(args, peers, sizes, results, limits, fail, notes)
    print(text)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
