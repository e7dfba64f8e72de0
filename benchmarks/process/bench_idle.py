"""CPU of an idle leader: one real `celery beat -S awa_beat.Scheduler` with nothing due.

    python benchmarks/process/bench_idle.py [--background 10000] [--seconds 120]
                                    [--layouts standalone,awa]

Per layout: starts one beat process (benchmarks/lagapp.py) with ``--background`` daily
crontabs that never fire during the run, waits until it leads and has settled, then
over ``--seconds`` reads the process's CPU time (every thread's run time from
/proc/PID/task/*/schedstat, in nanoseconds, as the peer harness reads it) and its main
thread's voluntary context switches (about one per wake-up from sleep). On the
standalone schema the leader sleeps on its lock session until a notification or its
next heartbeat, ping or resync; where Awa owns the tables it polls every second.

The peer harness (benchmarks/peers/run.py) measures idle CPU only over the few seconds
between a beat's start-up and its burst; this measures whole minutes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common
from beatprocs import Beats, cpu_seconds

from awa_beat._testing import TempDatabases


def wakeups(pid: int) -> int:
    """Voluntary context switches of the main thread so far."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    raise RuntimeError("no voluntary_ctxt_switches in /proc/PID/status")


def measure(dbs: TempDatabases, layout: str, args: argparse.Namespace, logs: Path
            ) -> tuple[float, float]:
    """(CPU seconds per minute, wake-ups per minute) of an idle leader."""
    url = dbs.fresh(layout)
    beats = Beats(url, logs, {"LAGAPP_SCHEDULE": "", "LAGAPP_BACKGROUND": str(args.background)})
    try:
        proc = beats.start_leader(timeout=120, interval=0.1)
        time.sleep(args.settle)
        t0, cpu0, wake0 = time.monotonic(), cpu_seconds(proc.pid), wakeups(proc.pid)
        time.sleep(args.seconds)
        t1, cpu1, wake1 = time.monotonic(), cpu_seconds(proc.pid), wakeups(proc.pid)
        if proc.poll() is not None:
            sys.exit(f"beat exited with {proc.returncode}\n{beats.tail()}")
    finally:
        beats.stop_all()
    minutes = (t1 - t0) / 60
    return (cpu1 - cpu0) / minutes, (wake1 - wake0) / minutes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--background", type=int, default=10000,
                        help="schedules stored, none due during the run")
    parser.add_argument("--seconds", type=float, default=120.0, help="seconds measured")
    parser.add_argument("--settle", type=float, default=5.0,
                        help="seconds after the election that are not measured")
    parser.add_argument("--layouts", default="standalone,awa")
    parser.add_argument("--logs", help="keep the beat logs in this folder (default: discarded)")
    args = parser.parse_args()

    with (common.log_folder(args.logs, "awabeat-idle-") as logs,
          common.databases(f"awabeat_idle{os.getpid()}") as dbs):
        print(f"idle leader, {args.background:,} schedules stored, {args.seconds:.0f} s "
              "measured per layout")
        print(f"{'layout':<12} {'refresh':<22} {'CPU s/min':>10} {'wake-ups/min':>13}")
        for layout in args.layouts.split(","):
            cpu, wakes = measure(dbs, layout, args, logs)
            how = "on notification" if layout == "standalone" else "polled every second"
            print(f"{layout:<12} {how:<22} {cpu:>10.4f} {wakes:>13.1f}", flush=True)


if __name__ == "__main__":
    common.run(main)
