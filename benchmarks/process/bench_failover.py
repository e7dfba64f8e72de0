"""Failover of real `celery beat -S awa_beat.Scheduler` replicas after a SIGKILL.

    python benchmarks/process/bench_failover.py [--trials 20] [--replicas 3] [--election-interval S]
                                        [--schedule 1:1] [--background 0] [--replace at-kill]
                                        [--layout standalone]

Starts ``--replicas`` beat processes, staggered by a random fraction of the election
interval (benchmarks/lagapp.py; election interval as shipped, 1 s, unless
``--election-interval`` sets AWA_BEAT_ELECTION_INTERVAL), with one schedule firing every
second (plus ``--background`` daily crontabs that never fire during the run, to see what
a large table does). Each trial waits until the leader has fired twice, then sleeps to a
uniformly random point 0.1-0.9 s past a whole second (so no fire of the old leader is in
flight; fires are at whole seconds and are over long before), SIGKILLs the leader, takes
``t_kill`` as soon as kill() returns, and starts a replacement process, as an
orchestrator would (``--replace after``: only once a standby has fired, so that the
standbys alone are measured). Measured per trial:

(a) takeover: t_kill until pg_locks shows another process holding the lock (the
    leader is the backend whose application_name is ``awa-beat leader <os pid>`` and holds
    a granted advisory lock; polled every 10 ms, so +-10 ms);
(b) next fire: t_kill until the created_at of the first job created after t_kill, i.e.
    a standby fired the next due schedule;
(c) that job's lag: created_at - cron_fire_time (coalesced fires missed meanwhile are
    counted as "skipped");

and p50/p99/max over the trials are printed. Afterwards every (cron_name,
cron_fire_time) must appear at most once. Target (from the issue): the next due schedule
fired within 2 s of the kill (p99).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common
from beatprocs import (
    Beats,
    add_beat_options,
    as_installed,
    duplicates,
    fires,
    leader_pid,
    summary,
    wait_for,
)

from awa_beat._db.database import connect

UTC = timezone.utc


def other_leader(conn: psycopg.Connection, old: int) -> int | None:
    pid = leader_pid(conn)
    return pid if pid != old else None


def standby_connected(conn: psycopg.Connection, pid: int) -> bool:
    """Whether process ``pid`` has its election connection open (it stands for election)."""
    row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                       (f"awa-beat leader {pid}",)).fetchone()
    return bool(row and row[0])


def sleep_to_phase(low: float = 0.1, high: float = 0.9) -> None:
    """Sleep until a uniformly random point between ``low`` and ``high`` s past a second."""
    phase = random.uniform(low, high)
    now = time.time()
    target = int(now) + phase
    if target <= now + 0.01:
        target += 1
    time.sleep(target - now)


def trial(conn: psycopg.Connection, beats: Beats, replace_at_kill: bool) -> dict[str, float]:
    old = wait_for(lambda: leader_pid(conn), 60, "a leader")
    rows = fires(conn)
    latest = rows[-1][2] if rows else None
    wait_for(lambda: len(fires(conn, latest)) >= 2, 15, "two fires from the leader", 0.05)
    sleep_to_phase()
    before = fires(conn)
    os.kill(old, signal.SIGKILL)
    t_kill = datetime.now(UTC)
    kill_mono = time.monotonic()
    [proc] = [p for p in beats.procs if p.pid == old]
    replacement = beats.start() if replace_at_kill else None
    new = wait_for(lambda: other_leader(conn, old), 30, "another leader")
    takeover = time.monotonic() - kill_mono
    name, fire_time, created_at = wait_for(lambda: fires(conn, t_kill), 30,
                                           "a fire after the kill", 0.02)[0]
    proc.wait(10)
    if replacement is None:
        replacement = beats.start()
    wait_for(lambda: standby_connected(conn, replacement.pid), 60, "the replacement", 0.05)
    period = timedelta(seconds=int(name.split("-")[1].rstrip("s")))
    previous = max(fire for n, fire, _ in before if n == name)
    skipped = (fire_time - previous) / period - 1
    return {"takeover": takeover * 1000,
            "next_fire": (created_at - t_kill).total_seconds() * 1000,
            "lag": (created_at - fire_time).total_seconds() * 1000,
            "skipped": skipped, "old": old, "new": new,
            "replacement_won": float(new == replacement.pid)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--election-interval", type=float, default=None,
                        help="AWA_BEAT_ELECTION_INTERVAL in seconds (default: as shipped, 1)")
    add_beat_options(parser, schedule="1:1")
    parser.add_argument("--replace", default="at-kill", choices=("at-kill", "after"),
                        help="start the replacement right after the kill (it may win the "
                        "election at its start-up), or only after a standby fired")
    args = parser.parse_args()
    as_installed()
    env = {"LAGAPP_SCHEDULE": args.schedule, "LAGAPP_BACKGROUND": str(args.background)}
    if args.election_interval is not None:
        env["AWA_BEAT_ELECTION_INTERVAL"] = str(args.election_interval)
    interval = args.election_interval or 1.0

    results = []
    with (common.log_folder(args.logs, "awabeat-fo-") as logs,
          common.databases(f"awabeat_fo{os.getpid()}") as dbs):
        beats: Beats | None = None
        try:
            url = dbs.fresh(args.layout)
            beats = Beats(url, logs, env)
            conn = connect(url)
            for _ in range(args.replicas):
                # Staggered, like replicas started at different times: replicas started
                # together stand for election in step, since the interval has no jitter.
                beats.start()
                time.sleep(random.uniform(0.0, interval))
            print(f"{args.replicas} beat processes, election interval {interval} s, schedule "
                  f"{args.schedule}, {args.background:,} background schedules, layout "
                  f"{args.layout}", flush=True)
            print(f"{'trial':>5} {'killed':>7} {'new':>7} {'winner':>11} {'takeover ms':>11} "
                  f"{'next fire ms':>12} {'lag ms':>7} {'skipped':>7}")
            for i in range(args.trials):
                try:
                    r = trial(conn, beats, args.replace == "at-kill")
                except TimeoutError as exc:
                    sys.exit(f"trial {i + 1}: {exc}\n{beats.tail()}")
                results.append(r)
                winner = "replacement" if r["replacement_won"] else "standby"
                print(f"{i + 1:>5} {r['old']:>7} {r['new']:>7} {winner:>11} "
                      f"{r['takeover']:>11.0f} "
                      f"{r['next_fire']:>12.0f} {r['lag']:>7.0f} {r['skipped']:>7.0f}",
                      flush=True)
            beats.stop_all()
            doubles = duplicates(conn)
            total = len(fires(conn))
            conn.close()
        finally:
            if beats is not None:
                beats.stop_all()

    print(f"\nover {len(results)} SIGKILLs of the leader ({args.replicas} replicas, "
          f"election interval {interval} s, replacement started {args.replace}), ms")
    print(f"{'measure':<44} {'p50':>7} {'p99':>7} {'max':>7} {'mean':>7}")
    measures = [("takeover", "(a) kill -> another process holds the lock"),
                ("next_fire", "(b) kill -> first job created after it"),
                ("lag", "(c) that job's lag from its fire time"),
                ("skipped", "fires skipped (coalesced) per failover")]
    for key, label in measures:
        s = summary([r[key] for r in results])
        print(f"{label:<44} {s['p50']:>7.0f} {s['p99']:>7.0f} {s['max']:>7.0f} {s['mean']:>7.1f}")
    for winner, won_by in (("a standby", 0.0), ("the replacement", 1.0)):
        subset = [r for r in results if r["replacement_won"] == won_by]
        for key, label in measures[:2] if subset else ():
            s = summary([r[key] for r in subset])
            shown = f"{label[:3]} when {winner} won (n={len(subset)})"
            print(f"{shown:<44} {s['p50']:>7.0f} {s['p99']:>7.0f} {s['max']:>7.0f} "
                  f"{s['mean']:>7.1f}")
    won = sum(r["replacement_won"] for r in results)
    print(f"\ntakeovers won by the freshly started replacement: {won:.0f} of {len(results)}")
    print(f"jobs fired in all: {total}; (cron_name, cron_fire_time) enqueued twice: "
          f"{len(doubles)}" + "".join(f"\n  {n} {f} x{c}" for n, f, c in doubles))
    p99 = summary([r["next_fire"] for r in results])["p99"]
    print(f"target: next due schedule fired within 2 s of the kill (p99): "
          f"{'met' if p99 <= 2000 else 'NOT met'} (p99 {p99:.0f} ms)")


if __name__ == "__main__":
    common.run(main)
