"""Fire lag of one real `celery beat -S awa_beat.Scheduler` process.

    python benchmarks/process/bench_lag.py [--duration 60] [--schedule 1:20,2:5,5:5]
                                   [--background 0] [--layout standalone]

Starts one beat process (benchmarks/lagapp.py) on a throw-away database with the
schedule given (default: 20 entries firing every second, 5 every 2 s, 5 every 5 s; plus
``--background`` daily crontabs that never fire during the run, to see what a large table
does), waits for its first fire and ``--warmup`` seconds more, lets it run for
``--duration`` seconds, stops it, and for every fire time in that window computes

    lag = job created_at - cron_fire_time (metadata ->> 'cron_fire_time')

``created_at`` is now() of the fire statement's transaction, i.e. when the batched fire
started on the server; the job is visible at its commit a little later. Percentiles are
over jobs (the jobs of one pass share one created_at). Also counted:
fires missing from the window (grid times with no job) and fires enqueued twice.
Target (from the issue): p99 lag at most 100 ms on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common
from beatprocs import Beats, add_beat_options, duplicates, fires, summary, wait_for

from awa_beat._db.database import connect

UTC = timezone.utc


def grid(period: int, start: datetime, end: datetime) -> int:
    """How many multiples of ``period`` seconds since the epoch lie in [start, end)."""
    first = -(-int(start.timestamp()) // period)
    last = -(-int(end.timestamp()) // period)
    return last - first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds measured")
    parser.add_argument("--warmup", type=float, default=3.0,
                        help="seconds after the first fire that are not measured")
    add_beat_options(parser, schedule="1:20,2:5,5:5")
    parser.add_argument("--show-late", type=int, default=10,
                        help="list at most this many late fire times")
    args = parser.parse_args()
    periods = {int(p.split(":")[0]): int(p.split(":")[1]) for p in args.schedule.split(",")}

    with (common.log_folder(args.logs, "awabeat-lag-") as logs,
          common.databases(f"awabeat_lag{os.getpid()}") as dbs):
        beats: Beats | None = None
        try:
            url = dbs.fresh(args.layout)
            beats = Beats(url, logs, {"LAGAPP_SCHEDULE": args.schedule,
                                      "LAGAPP_BACKGROUND": str(args.background)})
            conn = connect(url)
            proc = beats.start()
            print(f"beat pid {proc.pid}: {sum(periods.values())} firing schedules "
                  f"({args.schedule}), {args.background:,} background; layout {args.layout}",
                  flush=True)
            first = wait_for(lambda: fires(conn), 120, "the first fire", interval=0.1)
            start = first[0][2].replace(microsecond=0) + timedelta(seconds=1 + args.warmup)
            end = start + timedelta(seconds=args.duration)
            print(f"measuring fire times in [{start:%H:%M:%S}, {end:%H:%M:%S}) UTC", flush=True)
            time.sleep(max(0.0, (end - datetime.now(UTC)).total_seconds() + 1.0))
            if proc.poll() is not None:
                sys.exit(f"beat exited with {proc.returncode}\n{beats.tail()}")
            beats.stop_all()
            rows = [r for r in fires(conn) if start <= r[1] < end]
            doubles = duplicates(conn)
            conn.close()
        finally:
            if beats is not None:
                beats.stop_all()

    by_period: dict[int, list[float]] = defaultdict(list)
    for name, fire_time, created_at in rows:
        period = int(name.split("-")[1].rstrip("s"))
        by_period[period].append((created_at - fire_time).total_seconds() * 1000)
    print(f"\nlag = created_at - cron_fire_time, ms, fire times in a {args.duration:.0f} s window")
    print(f"{'schedules':<16} {'fires':>6} {'expected':>8} {'missing':>7} {'p50':>7} {'p90':>7} "
          f"{'p99':>7} {'max':>7} {'mean':>7}")
    groups = [(f"every {p} s x {n}", by_period[p], n * grid(p, start, end))
              for p, n in sorted(periods.items())]
    every = [lag for lags in by_period.values() for lag in lags]
    groups.append(("all", every, sum(expected for _, _, expected in groups)))
    for label, lags, expected in groups:
        s = summary(lags)
        print(f"{label:<16} {s['n']:>6} {expected:>8} {expected - s['n']:>7} {s['p50']:>7.1f} "
              f"{s['p90']:>7.1f} {s['p99']:>7.1f} {s['max']:>7.1f} {s['mean']:>7.1f}")
    late = sorted({fire_time for _, fire_time, created_at in rows
                   if (created_at - fire_time).total_seconds() > 0.1})
    print(f"\nfire times with a job more than 100 ms late: {len(late)}"
          + "".join(f"\n  {fire:%H:%M:%S}" for fire in late[:args.show_late])
          + ("\n  ..." if len(late) > args.show_late else ""))
    seen = {fire_time for _, fire_time, _ in rows}
    gaps = [t for t in (start + timedelta(seconds=i) for i in range(int(args.duration)))
            if 1 in periods and t not in seen]
    if gaps:
        print(f"seconds with no fire at all: {len(gaps)}, "
              f"{', '.join(f'{t:%H:%M:%S}' for t in gaps[:args.show_late])}")
    print(f"fires enqueued twice: {len(doubles)}"
          + "".join(f"\n  {name} {fire} x{count}" for name, fire, count in doubles))
    p99 = summary(every)["p99"]
    print(f"target p99 <= 100 ms: {'met' if p99 <= 100 else 'NOT met'} (p99 {p99:.1f} ms)")


if __name__ == "__main__":
    common.run(main)
