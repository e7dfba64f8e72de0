"""Batched atomic enqueue: fires per second with N schedules due in one pass.

    python benchmarks/bench_enqueue.py [--sizes 1000,10000,100000] [--repeat 3]

Runs on both layouts (standalone awa.jobs table; awa.jobs migrated by awa-pg 0.6.9),
on the server awa_beat.testing.server_url() finds, in throw-away databases. Each
measurement is one call of Store.fire(): one statement that compare-and-swaps every
cursor and inserts every job. Targets: 50,000 fires/s standalone, 7,000/s on Awa.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone

from awa_beat.records import FireRequest
from awa_beat.store import Store, connect
from awa_beat.testing import TempDatabases, server_url

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


def rows(n: int) -> list[dict]:
    return [
        {"name": f"bench-{i:06d}", "cron_expr": "* * * * *", "timezone": "UTC",
         "kind": "bench.tasks.tick", "queue": "default",
         "args": {"args": [i], "kwargs": {}}, "priority": 2, "max_attempts": 25,
         "tags": [], "metadata": {"celery": {"options": {}}}, "missed_fire_policy": "coalesce"}
        for i in range(n)
    ]


def measure(url: str, n: int, repeat: int) -> list[float]:
    rates = []
    with Store(url) as store:
        store.sync(rows(n), deployment="bench")
        admin = connect(url)
        for attempt in range(repeat):
            cursor = T0 + timedelta(minutes=attempt)
            admin.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (cursor,))
            admin.execute("VACUUM ANALYZE awa.cron_jobs")
            fire = cursor + timedelta(minutes=1)
            requests = [FireRequest(f"bench-{i:06d}", cursor, [fire]) for i in range(n)]
            start = time.perf_counter()
            result = store.fire(requests)
            elapsed = time.perf_counter() - start
            if len(result.jobs) != n:
                sys.exit(f"expected {n} jobs, got {len(result.jobs)}: {result.failed}")
            rates.append(n / elapsed)
        admin.close()
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--layouts", default="standalone,awa")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'layout':<11} {'due':>8} {'fires/s (median)':>17} {'best':>9}")
    with server_url() as server:
        dbs = TempDatabases(server, prefix="awabeat_bench")
        try:
            for layout in args.layouts.split(","):
                for n in sizes:
                    rates = measure(dbs.fresh(layout), n, args.repeat)
                    print(f"{layout:<11} {n:>8} {statistics.median(rates):>17,.0f} "
                          f"{max(rates):>9,.0f}", flush=True)
        finally:
            dbs.close()


if __name__ == "__main__":
    main()
