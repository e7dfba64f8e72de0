"""A beat's start-up with N entries in beat_schedule, step by step, in a fresh process.

    python benchmarks/process/bench_startup.py [--entries 100000] [--runs 2]

The peer harness's start-up workload (benchmarks/peers/peerapp.py, peer ``awa``): N
entries sharing one calendar, none due for a day, plus a probe whose cursor is two days
old, synced beforehand into a throw-away database by another process. Each run is a
fresh process that builds the Celery app, starts ``awa_beat.Scheduler`` and ticks it
until the probe has fired, printing the seconds from process start and the RSS / peak
RSS after each step: building the app (Celery's own beat_schedule), converting the
entries, encoding them, the start-up sync (unchanged rows), loading the rows, the fire.
The harness measures only the whole (``python benchmarks/peers/run.py --full``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

T0 = time.perf_counter()
BENCHMARKS = Path(__file__).resolve().parents[1]
# The peers' app and the repository root come first: the child gets them as its PYTHONPATH.
sys.path[:0] = [str(BENCHMARKS / "peers"), str(BENCHMARKS.parent), str(BENCHMARKS)]


def memory() -> str:
    text = Path("/proc/self/status").read_text()
    rss, peak = (int(text.split(f"{k}:")[1].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))
    return f"{rss:.0f} / {peak:.0f} MB"


def one_start(cfg: dict[str, Any]) -> None:
    """In this fresh process: start beat on the prepared database, step by step."""
    marks: list[tuple[str, float, str]] = []

    def mark(step: str) -> None:
        marks.append((step, time.perf_counter() - T0, memory()))

    import celery.beat  # noqa: F401 - what `celery beat` has imported before the scheduler
    mark("importing Celery")
    import peerapp

    import awa_beat._beat.configuration as configuration
    import awa_beat._celery.scheduler as adapter
    import awa_beat._engine.engine as engine
    mark("importing awa_beat")
    app = peerapp.build(cfg)
    mark("building the app (beat_schedule)")

    def step(owner: Any, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            result = inner(*args, **kwargs)
            mark(label)
            return result
        setattr(owner, name, timed)

    step(adapter, "specs_from_beat_schedule", "converting the entries")
    step(configuration, "packed_configuration", "encoding them (packed, and their digest)")
    step(configuration.Configuration, "sync_all",
         "the start-up sync (none: the configuration is stored)")
    step(engine.Engine, "load", "loading the rows")
    scheduler = adapter.Scheduler(app=app, lazy=False)
    for _ in range(200):
        scheduler.tick()
        row = scheduler.node.engine.state("probe") if scheduler.node.engine else None
        if row is not None and row.last_enqueued_at is not None and (
                time.time() - row.last_enqueued_at.timestamp() < 86400):
            break
    else:
        raise SystemExit("the probe never fired")
    mark("the probe fired")
    scheduler.close()
    previous = 0.0
    for label, at, mem in marks:
        print(f"| {label} | {at:.2f} s | +{at - previous:.2f} s | {mem} |")
        previous = at


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        one_start(json.loads(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672//")
    args = parser.parse_args()
    from beatprocs import as_installed


    as_installed()

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path[:2])}
    with common.databases(f"awabeat_startup{os.getpid()}") as dbs:
        url = dbs.fresh("standalone")
        cfg = {"peer": "awa", "n": args.entries, "broker": args.broker,
               "queue": "bench-startup", "probe_queue": "bench-startup-probe",
               "due": math.ceil(time.time() + 86400), "db_url": url,
               "conf": {"awa_beat_database_url": url}}
        subprocess.run([sys.executable, "-c", "import json, sys, peerapp; "
                        "cfg = json.loads(sys.argv[1]); "
                        "peerapp.prepare(peerapp.build(cfg), cfg)", json.dumps(cfg)],
                       check=True, env=env)
        for run in range(args.runs):
            print(f"\nrun {run + 1}, {args.entries:,} entries\n")
            print("| step | since process start | step took | RSS / peak RSS after |")
            print("|---|---|---|---|", flush=True)
            subprocess.run([sys.executable, __file__, "--one", json.dumps(cfg)],
                           check=True, env=env)


if __name__ == "__main__":
    import common

    common.run(main)
