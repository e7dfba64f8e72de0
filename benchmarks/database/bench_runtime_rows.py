"""Beat with N API-managed schedules against beat with the same N from ``beat_schedule``.

Rows added through ``awa_beat.Schedules`` are ordinary ``awa.cron_jobs`` rows to the
engine; this checks that they cost it the same. For each source, on a fresh standalone
database: the write (``Store.sync`` of the entries, or one ``Schedules.add_many``), then
in a child process ``Engine.load()`` (time, RSS growth) and passes with nothing due (CPU
per pass). It prints both and their ratio (runtime / config); a ratio near 1 is the goal.

    python benchmarks/database/bench_runtime_rows.py [--n 100000] [--passes 300]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common

from awa_beat import Schedules
from awa_beat._beat.configuration import encode_batches
from awa_beat._config import Settings
from awa_beat._db.database import Database
from awa_beat._schedules.spec import specs_from_beat_schedule
from awa_beat._testing import TempDatabases

SERVER = os.environ.get("AWA_BEAT_TEST_DATABASE_URL",
                        "postgresql://postgres@127.0.0.1:5432/postgres")
ZONES = ["UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney"]
SETTINGS = Settings(deployment="bench", default_timezone="UTC", dispatch="awa")


def entries(n: int) -> dict[str, dict]:
    rng = random.Random(7)
    return {f"tenant-{i:07d}-report": {
        "task": "reports.build", "kwargs": {"tenant": i},
        "schedule": f"{rng.randrange(60)} {rng.randrange(24)} * * {rng.randrange(7)}",
        "options": {"awa_beat": {"timezone": rng.choice(ZONES)}}} for i in range(n)}


def child(url: str, passes: int) -> None:
    """Load every row into an engine and run passes; print figures as JSON."""
    from awa_beat._engine.engine import Engine

    def rss() -> float:
        with open("/proc/self/status") as f:
            return int(f.read().split("VmRSS:")[1].split()[0]) / 1024

    with Database(url) as store:
        engine = Engine(store.evaluator)
        before = rss()
        t0 = time.perf_counter()
        engine.load()
        load_s = time.perf_counter() - t0
        growth = rss() - before
        cpu = []
        for _ in range(passes):
            c0 = time.process_time()
            engine.fire_due()
            cpu.append((time.process_time() - c0) * 1000)
        print(json.dumps({"rows": len(engine), "load_s": load_s, "growth_mb": growth,
                          "pass_p50_ms": statistics.median(cpu),
                          "pass_p99_ms": sorted(cpu)[int(len(cpu) * 0.99) - 1]}))


def measure(url: str, passes: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", url, "--passes", str(passes)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--passes", type=int, default=300)
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.passes)
        return
    beat_schedule = entries(args.n)
    dbs = TempDatabases(SERVER, prefix="bench_runtime_rows")
    try:
        results = {}
        config_url = dbs.fresh("standalone")
        t0 = time.perf_counter()
        specs = specs_from_beat_schedule(beat_schedule, default_dispatch="awa")
        with Database(config_url) as store:
            for batch in encode_batches(specs, "bench"):
                store.schedules.sync(batch)
        results["config"] = {"write_s": time.perf_counter() - t0,
                             **measure(config_url, args.passes)}
        runtime_url = dbs.fresh("standalone")
        t0 = time.perf_counter()
        with Schedules(runtime_url, settings=SETTINGS) as api:
            api.add_many(beat_schedule)
        results["runtime"] = {"write_s": time.perf_counter() - t0,
                              **measure(runtime_url, args.passes)}
    finally:
        dbs.close()
    keys = ["rows", "write_s", "load_s", "growth_mb", "pass_p50_ms", "pass_p99_ms"]
    print(f"{'source':10}" + "".join(f"{k:>14}" for k in keys))
    for source in ("config", "runtime"):
        r = results[source]
        print(f"{source:10}" + "".join(
            f"{r[k]:>14,}" if k == "rows" else f"{r[k]:>14.3f}" for k in keys))
    ratio = {k: results["runtime"][k] / results["config"][k] for k in keys[1:]
             if results["config"][k]}
    print(f"{'ratio':10}{'':>14}" + "".join(f"{ratio.get(k, float('nan')):>14.2f}"
                                           for k in keys[1:]))


if __name__ == "__main__":
    common.run(main)
