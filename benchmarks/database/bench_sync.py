"""Sync of a large beat_schedule: validation, then one round trip to upsert it all.

    python benchmarks/database/bench_sync.py [--n 100000]

Prints the time to validate/convert N beat_schedule entries and to sync them to
awa.cron_jobs: first sync (all inserts), an unchanged resync, and a resync where
every entry changed. Target: a sync of 100,000 specs in at most 3 s.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from celery.schedules import crontab

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common

from awa_beat._db.database import Database
from awa_beat._schedules.spec import specs_from_beat_schedule


def beat_schedule(n: int, hour: int) -> dict:
    return {
        f"entry-{i:06d}": {
            "task": "bench.tasks.report",
            "schedule": crontab(minute=i % 60, hour=hour) if i % 2 else 300 + i % 7,
            "args": [i],
            "kwargs": {"region": "eu"},
            "options": {"queue": "reports", "expires": 600,
                        "awa_beat": {"missed_fire_policy": "catch_up" if i % 3 else "coalesce"}},
        }
        for i in range(n)
    }


def timed(label: str, func: Callable[[], object]) -> object:
    start = time.perf_counter()
    result = func()
    shown = "" if isinstance(result, list) else result
    print(f"{label:<36} {time.perf_counter() - start:8.3f} s   {shown}", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    n = parser.parse_args().n
    schedule = beat_schedule(n, hour=3)
    specs = timed(f"validate + convert {n:,} entries", lambda: specs_from_beat_schedule(schedule))
    rows = [spec.row() for spec in specs]
    changed = [spec.row() for spec in specs_from_beat_schedule(beat_schedule(n, hour=4))]
    with common.databases("awabeat_bench") as dbs:
        for layout in ("standalone", "awa"):
            with Database(dbs.fresh(layout)) as store:
                print(f"-- {layout}")
                timed(f"first sync of {n:,} (inserts)",
                      lambda: store.schedules.sync(rows, deployment="b"))
                timed("unchanged resync", lambda: store.schedules.sync(rows, deployment="b"))
                timed("resync, every row changed",
                      lambda: store.schedules.sync(changed, deployment="b"))


if __name__ == "__main__":
    common.run(main)
