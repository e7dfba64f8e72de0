"""The dashboard's schedule list at scale: page loads through the WSGI app.

    python benchmarks/web/bench_web.py [--n 100000] [--loads 200]

Fills a throw-away database with N schedules (a tenth of them paused, with a note; two
deployments), then times page loads of /schedules through the WSGI callable, as a
browser would ask for them: the first page, pages deep in the list (keyset: the name
after which to start), the page before one, a search, and the paused and owner filters.
Prints p50 and p99 per kind and over all, against the target: at most 200 ms a page.
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common

from awa_beat._db.database import Database
from awa_beat._ops.operations import Operations
from awa_beat.web import create_app

TARGET_MS = 200.0
EXPRESSIONS = ("0 9 * * 1-5", "*/15 * * * *", "0 30 6 1 * *", "@every 90s", "0 2 * * *")
ZONES = ("UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo")


def rows(n: int) -> list[dict[str, Any]]:
    return [{"name": f"tenant-{i:06d}-{('sync', 'report', 'purge')[i % 3]}",
             "cron_expr": EXPRESSIONS[i % len(EXPRESSIONS)], "timezone": ZONES[i % len(ZONES)],
             "kind": f"app.tasks.{('sync', 'report', 'purge')[i % 3]}", "queue": "default",
             "args": {"args": [i], "kwargs": {}}, "priority": 2, "max_attempts": 25,
             "tags": [], "metadata": {}, "missed_fire_policy": "coalesce"} for i in range(n)]


def load(app: Any, query: str) -> float:
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/schedules", "QUERY_STRING": query,
               "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8080", "HTTP_HOST": "127.0.0.1",
               "REMOTE_ADDR": "127.0.0.1", "wsgi.input": io.BytesIO(), "wsgi.url_scheme": "http"}
    status: list[str] = []
    start = time.perf_counter()
    body = b"".join(app(environ, lambda s, h: status.append(s)))
    elapsed = (time.perf_counter() - start) * 1000
    assert status[0].startswith("200"), (status, body[:500])
    return elapsed


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--loads", type=int, default=200, help="page loads per kind")
    args = parser.parse_args()
    with common.databases() as dbs:
        db = dbs.fresh("standalone")
        all_rows = rows(args.n)
        start = time.perf_counter()
        with Database(db) as store:
            for i in range(0, args.n, 10_000):
                chunk = all_rows[i:i + 10_000]
                store.schedules.sync(chunk, deployment="alpha" if i % 20_000 else "beta")
            ops = Operations(store)
            for r in all_rows[::10]:
                ops.pause(r["name"], "bench", "paused by the benchmark")
            store.schedules.analyze_if_stale()
        print(f"{args.n:,} schedules written in {time.perf_counter() - start:.1f} s")
        names = sorted(r["name"] for r in all_rows)
        app = create_app(db)
        rng = random.Random(18)
        kinds = {
            "first page": lambda: "",
            "deep page (after=)": lambda: f"after={rng.choice(names)}",
            "page before (before=)": lambda: f"before={rng.choice(names)}",
            "search": lambda: f"q={rng.randrange(args.n):06d}",
            "search, many matches": lambda: "q=report",
            "paused filter": lambda: "paused=yes",
            "owner filter, deep": lambda: f"owner=beta&after={rng.choice(names)}",
        }
        for _ in range(5):  # warm the pool, the planner's caches and the templates
            load(app, "")
        every: list[float] = []
        for label, query in kinds.items():
            times = [load(app, query()) for _ in range(args.loads)]
            every += times
            print(f"{label:<24} p50 {statistics.median(times):6.1f} ms   "
                  f"p99 {pct(times, 0.99):6.1f} ms")
        p99 = pct(every, 0.99)
        print(f"{'all':<24} p50 {statistics.median(every):6.1f} ms   p99 {p99:6.1f} ms   "
              f"target <= {TARGET_MS:.0f} ms: {'met' if p99 <= TARGET_MS else 'MISSED'}")
        app.close()


if __name__ == "__main__":
    common.run(main)
