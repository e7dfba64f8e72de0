"""Batched atomic enqueue: fires per second with N schedules due in one pass.

    python benchmarks/database/bench_enqueue.py [--sizes 1000,10000,100000] [--repeat 3]
    python benchmarks/database/bench_enqueue.py --against REV [--sizes 10000] [--repeat 10]

Runs on both layouts (standalone awa.jobs table; awa.jobs migrated by awa-pg 0.6.9),
on the server awa_beat._testing.server_url() finds, in throw-away databases. Each
measurement is one call of Database.fire(): one statement that compare-and-swaps every
cursor and inserts every job. Targets: 50,000 fires/s standalone, 7,000/s on Awa.

``--against REV`` pairs this checkout's fire statement with the one in git revision
REV's queries.sql: both run in turns on the same database, with the same bound
parameters, and the ratio of their medians is printed (what a change to the statement
costs, free of the machine's drift between two separate runs).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from psycopg import Connection

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common

from awa_beat._db.database import Database, connect
from awa_beat._db.evaluator import fire_params
from awa_beat._db.records import FireRequest
from awa_beat._db.sql import render_queries

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


def rows(n: int) -> list[dict]:
    return [
        {"name": f"bench-{i:06d}", "cron_expr": "* * * * *", "timezone": "UTC",
         "kind": "bench.tasks.tick", "queue": "default",
         "args": {"args": [i], "kwargs": {}}, "priority": 2, "max_attempts": 25,
         "tags": [], "metadata": {"celery": {"options": {}}}, "missed_fire_policy": "coalesce"}
        for i in range(n)
    ]


def due_again(admin: Connection, n: int, attempt: int) -> list[FireRequest]:
    """Every schedule's cursor set back so that each is due once more; the requests."""
    cursor = T0 + timedelta(minutes=attempt)
    admin.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (cursor,))
    admin.execute("VACUUM ANALYZE awa.cron_jobs")
    fire = cursor + timedelta(minutes=1)
    return [FireRequest(f"bench-{i:06d}", cursor, [fire]) for i in range(n)]


def measure(url: str, n: int, repeat: int) -> list[float]:
    rates = []
    with Database(url) as store:
        store.schedules.sync(rows(n), deployment="bench")
        admin = connect(url)
        for attempt in range(repeat):
            requests = due_again(admin, n, attempt)
            start = time.perf_counter()
            result = store.evaluator.fire(requests)
            elapsed = time.perf_counter() - start
            if len(result.jobs) != n:
                sys.exit(f"expected {n} jobs, got {len(result.jobs)}: {result.failed}")
            rates.append(n / elapsed)
        admin.close()
    return rates


def statement_at(rev: str, awa_owned: bool) -> str:
    """The fire statement of ``rev``'s queries.sql, for the layout (named fire_batch_awa
    and fire_batch_standalone before it was written once)."""
    text = subprocess.run(["git", "show", f"{rev}:awa_beat/_db/sql/queries.sql"], cwd=common.ROOT,
                          check=True, capture_output=True, text=True).stdout
    layout = "awa" if awa_owned else "standalone"
    rendered = render_queries(text)[layout]
    return rendered.get("fire_batch") or rendered[f"fire_batch_{layout}"]


def measure_pair(url: str, n: int, repeat: int, rev: str) -> tuple[list[float], list[float]]:
    """Rates of this checkout's statement and ``rev``'s, run in turns (ABBA order, so
    that a table growing by a batch of jobs per run weighs on both alike)."""
    ours: list[float] = []
    theirs: list[float] = []
    with Database(url) as store:
        store.schedules.sync(rows(n), deployment="bench")
        awa_owned = store.awa_owned
        statements = {"ours": store.layout.fire_statement,
                      "theirs": statement_at(rev, awa_owned)}
        admin = connect(url)
        attempt = 0
        for turn in range(repeat):
            order = ("ours", "theirs") if turn % 2 == 0 else ("theirs", "ours")
            for which in order:
                params = fire_params(due_again(admin, n, attempt))
                attempt += 1
                start = time.perf_counter()
                # An older statement binds fewer parameters; psycopg ignores the others.
                got = admin.execute(statements[which], params).fetchall()
                elapsed = time.perf_counter() - start
                if len(got) != n:
                    sys.exit(f"{which}: expected {n} jobs, got {len(got)}")
                (ours if which == "ours" else theirs).append(n / elapsed)
        admin.close()
    return ours, theirs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--layouts", default="standalone,awa")
    parser.add_argument("--against", metavar="REV",
                        help="pair with the fire statement of this git revision")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.against:
        print(f"{'layout':<11} {'due':>8} {'this checkout':>14} {args.against:>14} {'ratio':>7}")
    else:
        print(f"{'layout':<11} {'due':>8} {'fires/s (median)':>17} {'best':>9}")
    with common.databases("awabeat_bench") as dbs:
        for layout in args.layouts.split(","):
            for n in sizes:
                if args.against:
                    ours, theirs = measure_pair(dbs.fresh(layout), n, args.repeat,
                                                args.against)
                    a, b = statistics.median(ours), statistics.median(theirs)
                    print(f"{layout:<11} {n:>8} {a:>14,.0f} {b:>14,.0f} {a / b:>6.2f}x",
                          flush=True)
                    continue
                rates = measure(dbs.fresh(layout), n, args.repeat)
                print(f"{layout:<11} {n:>8} {statistics.median(rates):>17,.0f} "
                      f"{max(rates):>9,.0f}", flush=True)


if __name__ == "__main__":
    common.run(main)
