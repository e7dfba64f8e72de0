"""What the metrics endpoint costs: scrape time with a large table, and idle CPU.

    python benchmarks/process/bench_metrics.py [--schedules 100000] [--scrapes 300]
                                       [--idle-schedules 10000] [--seconds 60]
                                       [--scrape-interval 15]

One real `celery beat -S awa_beat.Scheduler` at a time (benchmarks/lagapp.py) leads a
standalone database of daily crontabs, none due during the run.

Idle CPU, on a table of ``--idle-schedules`` rows (bench_idle.py's default, so the
figures compare with its own; on a far larger table the leader's periodic re-sync and
full reload dominate a minute's CPU and drown the difference measured here), each over
``--seconds``:

1. endpoint off (as bench_idle.py measures it);
2. endpoint on (``AWA_BEAT_HTTP_PORT``), never scraped;
3. the same process scraped every ``--scrape-interval`` seconds.

Scrape time, on a table of ``--schedules`` rows: ``--scrapes`` scrapes of /metrics,
0.1 s apart, so that the scrapes that walk every row (at most once per 5 s) are among
them; the time of each, from the request to the last byte, against the 50 ms limit;
and the leader's CPU while scraped every ``--scrape-interval`` seconds.

CPU is the process's, every thread's (/proc/PID/task/*/schedstat), as bench_idle.py
reads it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "chaos"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common
from beatprocs import Beats, cpu_seconds, pct
from chaosinfra import free_port

LIMIT_MS = 50.0


def scrape(url: str) -> tuple[float, int]:
    """(milliseconds, bytes) of one GET of ``url``."""
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=10) as response:
        body = response.read()
    return (time.perf_counter() - t0) * 1000, len(body)


def idle_cpu(pid: int, seconds: float, metrics: str | None = None,
             every: float = 15.0) -> float:
    """CPU seconds per minute of ``pid`` over ``seconds``, scraping ``metrics`` every
    ``every`` seconds if given."""
    t0, cpu0 = time.monotonic(), cpu_seconds(pid)
    end = t0 + seconds
    while (now := time.monotonic()) < end:
        if metrics is not None:
            scrape(metrics)
        time.sleep(min(every, end - now) if metrics is not None else end - now)
    t1, cpu1 = time.monotonic(), cpu_seconds(pid)
    return (cpu1 - cpu0) / ((t1 - t0) / 60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=100_000,
                        help="rows stored for the scrape-time measurement")
    parser.add_argument("--idle-schedules", type=int, default=10_000,
                        help="rows stored for the idle CPU measurements")
    parser.add_argument("--scrapes", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="seconds of each idle CPU measurement")
    parser.add_argument("--scrape-interval", type=float, default=15.0,
                        help="seconds between scrapes in the scraped idle measurement")
    parser.add_argument("--settle", type=float, default=10.0,
                        help="seconds after the election that are not measured")
    parser.add_argument("--logs", help="keep the beat logs in this folder")
    args = parser.parse_args()

    with (common.log_folder(args.logs, "awabeat-metrics-") as logs,
          common.databases(f"awabeat_metrics{os.getpid()}") as dbs):
        idle_url = dbs.fresh("standalone")
        idle_env = {"LAGAPP_SCHEDULE": "", "LAGAPP_BACKGROUND": str(args.idle_schedules)}
        print(f"idle leader, {args.idle_schedules:,} schedules stored, "
              f"{args.seconds:.0f} s per CPU measurement", flush=True)
        off = Beats(idle_url, logs, idle_env)
        try:
            pid = off.start_leader().pid
            time.sleep(args.settle)
            cpu_off = idle_cpu(pid, args.seconds)
        finally:
            off.stop_all()
        print(f"  endpoint off:                 {cpu_off:.4f} CPU s/min", flush=True)
        port = free_port()
        on = Beats(idle_url, logs, {**idle_env, "AWA_BEAT_HTTP_PORT": str(port)})
        metrics = f"http://127.0.0.1:{port}/metrics"
        try:
            pid = on.start_leader().pid
            time.sleep(args.settle)
            cpu_on = idle_cpu(pid, args.seconds)
            print(f"  endpoint on, not scraped:     {cpu_on:.4f} CPU s/min", flush=True)
            cpu_scraped = idle_cpu(pid, args.seconds, metrics, args.scrape_interval)
            print(f"  scraped every {args.scrape_interval:g} s:          "
                  f"{cpu_scraped:.4f} CPU s/min", flush=True)
        finally:
            on.stop_all()

        url = dbs.fresh("standalone")
        env = {"LAGAPP_SCHEDULE": "", "LAGAPP_BACKGROUND": str(args.schedules),
               "AWA_BEAT_HTTP_PORT": str(port)}
        print(f"idle leader, {args.schedules:,} schedules stored", flush=True)
        big = Beats(url, logs, env)
        try:
            pid = big.start_leader().pid
            time.sleep(args.settle)
            times, size = [], 0
            for _ in range(args.scrapes):
                ms, size = scrape(metrics)
                times.append(ms)
                time.sleep(0.1)
            cpu_big = idle_cpu(pid, args.seconds, metrics, args.scrape_interval)
        finally:
            big.stop_all()
        p50, p99, worst = pct(times, 50), pct(times, 99), max(times)
        verdict = "met" if p99 <= LIMIT_MS else "NOT met"
        print(f"  scrape of /metrics ({size:,} bytes), {len(times)} scrapes: "
              f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {worst:.1f} ms; "
              f"target p99 <= {LIMIT_MS:.0f} ms: {verdict}")
        print(f"  CPU, scraped every {args.scrape_interval:g} s:     "
              f"{cpu_big:.4f} CPU s/min (periodic re-sync and reload included)")


if __name__ == "__main__":
    common.run(main)
