"""What recording outcomes costs a Celery worker per task, against the 1 ms limit.

    python benchmarks/database/bench_outcomes.py [--n 20000] [--repeat 3]

Runs N tasks of awa-beat's (each with the bridge's headers and its derived task id)
through Celery's own tracer, the code a worker's pool runs for every task, first with
nothing installed, then with ``awa_beat.outcomes.install`` (its writer thread writing
to a real PostgreSQL in the background), and prints the difference per task. Also
reported: the cost of a task awa-beat did not fire (the identification alone), and the
at-most-once claim (one synchronous round trip per task, opt-in). Every report the
writer buffered must have reached the database by the end.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from celery import Celery
from celery.app.trace import build_tracer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common

from awa_beat._bridge.messages import fire_task_id
from awa_beat._config import Settings
from awa_beat._db.database import Database, connect
from awa_beat.outcomes import install

LIMIT_MS = 1.0


def requests(n: int, ours: bool, at_most_once: bool = False) -> list[tuple[str, dict[str, Any]]]:
    prefix = uuid.uuid4().hex[:8]
    out = []
    for i in range(n):
        fire = f"2026-12-03 12:{i // 3600 % 60:02d}:{i % 60:02d}+00"
        name = f"{prefix}-{i}"
        if not ours:
            out.append((str(uuid.uuid4()), {"hostname": "bench@host"}))
            continue
        task_id = fire_task_id(name, fire, i + 1)
        out.append((task_id, {
            "id": task_id, "hostname": "bench@host", "awa_beat_job": str(i + 1),
            "awa_beat_schedule": name, "awa_beat_fire_time": fire,
            "awa_beat_at_most_once": "1" if at_most_once else "0"}))
    return out


def timed(trace: Callable[..., Any], batch: list[tuple[str, dict[str, Any]]]) -> float:
    start = time.perf_counter()
    for task_id, request in batch:
        trace(task_id, (), {}, {"id": task_id, **request})
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with common.databases("awabeat_bench") as dbs:
        url = dbs.fresh("standalone")
        run(url, args.n, args.repeat)


def run(url: str, n: int, repeat: int) -> None:
    app = Celery("bench-outcomes", set_as_current=False)

    @app.task(name="bench.noop")
    def noop() -> None:
        return None

    app.finalize()
    plain = build_tracer("bench.noop", noop, app=app, eager=False)
    baseline = min(timed(plain, requests(n, True)) for _ in range(repeat)) / n

    settings = Settings(database_url=url, at_most_once=False)
    tracker = install(app, settings, connect=lambda: Database(url, max_size=2).open())
    traced = build_tracer("bench.noop", noop, app=app, eager=False)
    with_outcomes = min(timed(traced, requests(n, True)) for _ in range(repeat)) / n
    foreign = min(timed(traced, requests(n, False)) for _ in range(repeat)) / n
    writer = tracker.writer
    deadline = time.monotonic() + 60
    while len(writer.buffer) and time.monotonic() < deadline:
        time.sleep(0.1)
    writer.flush()
    with connect(url) as c:
        stored = c.execute("SELECT count(*) FROM awa_beat.outcomes"
                           " WHERE state = 'succeeded'").fetchone()[0]

    tracker.at_most_once = True
    claims = max(200, n // 20)
    claim_cost = statistics.median(
        timed(traced, requests(claims, True)) / claims for _ in range(repeat))

    overhead_ms = (with_outcomes - baseline) * 1000
    print(f"tasks per round: {n}, best of {repeat}")
    print(f"  Celery tracer alone:            {baseline * 1e6:8.1f} us/task")
    print(f"  with outcomes recorded:         {with_outcomes * 1e6:8.1f} us/task")
    print(f"  a task awa-beat did not fire:   {(foreign - baseline) * 1e6:+8.1f} us/task")
    print(f"  at-most-once claim (opt-in):    {(claim_cost - baseline) * 1e3:8.3f} ms/task "
          "(one synchronous round trip)")
    print(f"  reports written: {stored} of {n * repeat} (dropped {writer.buffer.dropped})")
    verdict = "OK" if overhead_ms <= LIMIT_MS else "OVER THE LIMIT"
    print(f"overhead per task: {overhead_ms:.4f} ms (limit {LIMIT_MS} ms): {verdict}")
    writer.close()


if __name__ == "__main__":
    common.run(main)
