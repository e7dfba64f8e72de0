"""Cost of an evaluation pass with 100,000 schedules stored and none due.

    python benchmarks/engine/bench_pass.py [--n 100000] [--passes 1000] [--step 0.01]
                                    [--layouts standalone,awa] [--scenarios synced,spread]

For each layout (standalone; awa.jobs migrated by awa-pg) and each scenario, N schedules
are synced with Database.sync (daily crontabs in seven time zones, 6-field daily crons,
``@every Ns`` intervals of a day or more and cron-grid intervals), each checked to have
its next fire at least 30 min after its cursor, and every cursor (last_enqueued_at) is
set to the current second, so nothing is due. Scenarios:

* ``synced``: updated_at as Database.sync wrote it (one statement, so every row shares it),
  which is what a beat that has just synced its beat_schedule sees;
* ``spread``: updated_at spread over the day before, as in a table edited and fired at
  many different times.

A child process (so its RSS is the engine's alone) then builds
``Engine(store.evaluator, clock=fake)`` and measures:

(a) ``engine.load()``: wall and CPU time, VmRSS growth;
(b) process RSS after load and after the passes: VmRSS and peak (VmHWM);
(c) ``run_pass()`` with the fake clock advanced by ``--step`` s before each pass, so about
    one pass in ``1/step`` does the 1 s refresh: CPU time (time.process_time, all
    threads) and SQL statements per pass, for refresh passes and the others; passes up
    to the first refresh are a warm-up and not counted. Statements are counted by
    wrapping ``psycopg.Cursor.execute/executemany/stream`` for the whole process (every
    connection, the pool's included); the evaluator part's methods called are recorded too. The
    counter is cross-checked against the server's transaction count for the database
    (pg_stat_database: each autocommit statement or connection start is one
    transaction; beat's sessions prepare nothing server-side) over a run of its own,
    in a child process run just before, with parallel query off since parallel workers
    count as transactions too.
    Note that a beat with nothing due sleeps until the next refresh, so in production
    every pass is a refresh pass;
(d) the database-side time of ``queries["changed_schedules"]`` (EXPLAIN ANALYZE,
    execution time) with a ``since`` that returns every row (newest updated_at - 5 s) and
    with ``since = now()`` (no changed rows: the cost of the table fingerprint alone).

Targets (from the issue): at most 5 ms CPU and at most 1 query per pass, at most 200 MB RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common

from awa_beat._db.database import Database, connect
from awa_beat._db.evaluator import EvaluatorStore
from awa_beat._db.sql import queries
from awa_beat._schedules.fire_times import calendar_for, next_fire_after
from awa_beat._testing import TempDatabases, server_url

UTC = timezone.utc
ZONES = ["UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney",
         "America/Los_Angeles", "Asia/Kolkata"]
INTERVALS = [86400, 90000, 172800, 259200, 604800]
CRON_GRIDS = ["0 0 */6 * * *", "0 0 */12 * * *", "0 0 0 * * *", "0 0 0 * * 4"]
#: Every schedule's next fire is at least this far after its cursor.
HORIZON = timedelta(minutes=30)
MB = 1024 * 1024


# -- the schedules -------------------------------------------------------------------------------


def _safe_daily(i: int, zone: str, cursor: datetime) -> str:
    """A daily crontab at least an hour after ``cursor``'s wall time in ``zone``."""
    hour = (cursor.astimezone(ZoneInfo(zone)).hour + 2 + i % 20) % 24
    return f"{i % 60} {hour} * * *"


def schedule_rows(n: int, cursor: datetime) -> list[dict[str, Any]]:
    """N rows like bench_enqueue's, none with a fire within HORIZON after ``cursor``."""
    rows = []
    for i in range(n):
        zone = ZONES[i % len(ZONES)]
        kind = i % 10
        if kind < 7:
            expr = _safe_daily(i, zone, cursor)
        elif kind == 7:
            expr, zone = f"@every {INTERVALS[i % len(INTERVALS)]}s", "UTC"
        elif kind == 8:
            expr, zone = CRON_GRIDS[i % len(CRON_GRIDS)], "UTC"
        else:
            expr = f"{i % 60} {_safe_daily(i, zone, cursor)}"
        fire = next_fire_after(calendar_for(expr, zone), cursor)
        if fire is None or fire < cursor + HORIZON:
            expr = _safe_daily(i, zone, cursor)
        rows.append({
            "name": f"bench-{i:06d}", "cron_expr": expr, "timezone": zone,
            "kind": "bench.tasks.report", "queue": "default",
            "args": {"args": [i], "kwargs": {"region": "eu"}}, "priority": 2,
            "max_attempts": 25, "tags": [], "metadata": {"celery": {"options": {}}},
            "missed_fire_policy": "catch_up" if i % 3 == 0 else "coalesce",
        })
    return rows


def mix(rows: list[dict[str, Any]]) -> str:
    """What the rows are, e.g. ``70,000 daily crontabs, ...``."""
    kinds: dict[str, int] = {}
    for row in rows:
        expr = row["cron_expr"]
        kind = ("@every intervals" if expr.startswith("@every") else
                "cron-grid intervals" if expr in CRON_GRIDS else
                "6-field daily crons" if len(expr.split()) == 6 else "daily crontabs")
        kinds[kind] = kinds.get(kind, 0) + 1
    zones = len({row["timezone"] for row in rows})
    return ", ".join(f"{v:,} {k}" for k, v in kinds.items()) + f"; {zones} time zones"


def prepare(url: str, n: int, scenario: str) -> str:
    cursor = datetime.now(UTC).replace(microsecond=0)
    rows = schedule_rows(n, cursor)
    with Database(url) as store:
        store.schedules.sync(rows, deployment="bench")
    admin = connect(url)
    if scenario == "spread":
        admin.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s, updated_at = %s"
                      " - (abs(hashtext(name)) %% 86400) * interval '1 second'",
                      (cursor, cursor - timedelta(hours=1)))
    else:
        admin.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (cursor,))
    admin.execute("VACUUM ANALYZE awa.cron_jobs")
    admin.execute("VACUUM ANALYZE awa_beat.schedules")
    admin.close()
    return mix(rows)


# -- measurements in the child process ------------------------------------------------------------


def vm_rss() -> float:
    """Current resident set size in MB (/proc/self/status VmRSS)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024 / MB
    return float("nan")


def max_rss() -> float:
    """Peak resident set size in MB (/proc/self/status VmHWM).

    Not getrusage's maxrss: Linux carries that over from the forking parent, which here
    had just synced 100,000 rows, so it reported the parent's peak, not the engine's.
    """
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / MB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MB


class StatementCounter:
    """Counts every statement this process sends through psycopg, on any connection
    (except from the thread ``ignored``), and the backend pid of every connection made."""

    def __init__(self) -> None:
        self.count = 0
        self.connections = 0
        self.pids: set[int] = set()
        self.ignored: int | None = None

    def install(self) -> None:
        for name in ("execute", "executemany", "stream"):
            setattr(psycopg.Cursor, name, self._wrap(getattr(psycopg.Cursor, name)))
        connect = psycopg.Connection.connect.__func__  # type: ignore[attr-defined]

        def counted_connect(cls: Any, *args: Any, **kwargs: Any) -> Any:
            conn = connect(cls, *args, **kwargs)
            if threading.get_ident() != self.ignored:
                self.connections += 1
                self.pids.add(conn.info.backend_pid)
            return conn

        psycopg.Connection.connect = classmethod(counted_connect)  # type: ignore[assignment]
        psycopg.connect = psycopg.Connection.connect  # an alias bound at import

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(cursor: Any, *args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != self.ignored:
                self.count += 1
            return original(cursor, *args, **kwargs)

        return counted


class Watcher(threading.Thread):
    """Samples every few ms which backends are connected to the database."""

    def __init__(self, server: str, dbname: str, counter: StatementCounter) -> None:
        super().__init__(daemon=True)
        self.server, self.dbname, self.counter = server, dbname, counter
        self.seen: set[tuple[int, str]] = set()
        self.done = threading.Event()

    def run(self) -> None:
        self.counter.ignored = threading.get_ident()
        with psycopg.connect(self.server, autocommit=True) as conn:
            while not self.done.is_set():
                self.seen.update(conn.execute(
                    "SELECT pid, backend_type FROM pg_stat_activity WHERE datname = %s",
                    (self.dbname,)).fetchall())
                time.sleep(0.005)

    def others(self) -> list[str]:
        """Backends on the database that were not this process's connections."""
        return sorted({kind for pid, kind in self.seen if pid not in self.counter.pids})


def record_store_calls(store: EvaluatorStore, calls: list[str], changed: list[int]) -> None:
    """Wrap the evaluator part's methods that the engine calls, so that each call is
    listed in ``calls``."""
    for name in ("cron_states", "changes", "fire", "cron_states_by_name"):
        original = getattr(store, name)

        def wrapper(*args: Any, __name: str = name, __original: Any = original) -> Any:
            calls.append(__name)
            result = __original(*args)
            if __name == "changes":
                # The rows are streamed, so they are counted as the engine reads them,
                # without holding them all at once.
                state, rows = result
                changed.append(0)
                return state, _counted(rows, changed)
            return result

        setattr(store, name, wrapper)


def _counted(rows: Iterator[Any], changed: list[int]) -> Iterator[Any]:
    """``rows``, adding one to the last count in ``changed`` for each row read."""
    for row in rows:
        changed[-1] += 1
        yield row


def server_xacts(conn: psycopg.Connection, dbname: str) -> int:
    """Transactions committed or rolled back in ``dbname``, once the count is stable."""
    previous = -1
    while True:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        value = conn.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database"
                             " WHERE datname = %s", (dbname,)).fetchone()[0]
        if value == previous:
            return int(value)
        previous = value
        time.sleep(0.5)


class Run:
    """One Engine on its own Database, driven by a fake clock."""

    def __init__(self, url: str, counter: StatementCounter) -> None:
        from awa_beat._engine.engine import Engine

        self.counter = counter
        self.start = datetime.now(UTC)
        self.offset = 0.0
        self.store = Database(url).open()
        self.calls: list[str] = []
        self.changed: list[int] = []
        record_store_calls(self.store.evaluator, self.calls, self.changed)
        self.engine = Engine(self.store.evaluator, clock=self.clock)

    def clock(self) -> datetime:
        return self.start + timedelta(seconds=self.offset)

    def load(self) -> dict[str, Any]:
        rss0, cpu0, wall0 = vm_rss(), time.process_time(), time.perf_counter()
        n0 = self.counter.count
        self.engine.load()
        return {"wall": time.perf_counter() - wall0, "cpu": time.process_time() - cpu0,
                "growth": vm_rss() - rss0, "statements": self.counter.count - n0,
                "rss": vm_rss(), "maxrss": max_rss(), "entries": len(self.engine)}

    def passes(self, count: int, step: float) -> list[dict[str, Any]]:
        """``count`` passes, the clock advanced by ``step`` before each; those up to the
        first refresh are a warm-up and left out."""
        measured: list[dict[str, Any]] = []
        warm = False
        for _ in range(count):
            self.offset += step
            del self.calls[:], self.changed[:]
            n0, cpu0, wall0 = self.counter.count, time.process_time(), time.perf_counter()
            report = self.engine.run_pass()
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            if report.fired.jobs or report.fired.failed:
                raise SystemExit(f"a schedule was due: {report.fired}")
            if warm:
                measured.append({"refresh": report.refreshed, "cpu": cpu, "wall": wall,
                                 "statements": self.counter.count - n0,
                                 "calls": list(self.calls), "changed": sum(self.changed)})
            warm = warm or report.refreshed
        return measured


def child(config: dict[str, Any]) -> dict[str, Any]:
    counter = StatementCounter()
    counter.install()
    if config["mode"] == "check":
        return check_counter(config, counter)
    baseline = vm_rss()
    run = Run(config["url"], counter)
    load = run.load()
    load["baseline"] = baseline
    passes = run.passes(config["passes"], config["step"])
    after = {"rss": vm_rss(), "maxrss": max_rss()}
    run.store.close()
    return {"load": load, "passes": passes, "after": after, "step": config["step"]}


def check_counter(config: dict[str, Any], counter: StatementCounter) -> dict[str, Any]:
    """The statement counter against the server's own count, over a whole run (a process
    of its own, before the measured one). Parallel workers count as transactions too, so
    this run's sessions do without them."""
    monitor = psycopg.connect(config["server"], autocommit=True)
    xacts_before = server_xacts(monitor, config["dbname"])
    statements, connections = counter.count, counter.connections
    watcher = Watcher(config["server"], config["dbname"], counter)
    watcher.start()
    serial = make_conninfo(config["url"], options="-c max_parallel_workers_per_gather=0")
    check = Run(serial, counter)
    check.load()
    check.passes(config["passes"], config["step"])
    check.store.close()
    statements, connections = counter.count - statements, counter.connections - connections
    xacts = server_xacts(monitor, config["dbname"]) - xacts_before
    watcher.done.set()
    watcher.join()
    monitor.close()
    return {"passes": config["passes"], "client": statements, "connections": connections,
            "server": xacts, "others": watcher.others()}


# -- the database side of the refresh -------------------------------------------------------------


def explain(url: str, repeat: int) -> list[dict[str, Any]]:
    """EXPLAIN ANALYZE of the refresh query with the engine's ``since`` and with now()."""
    conn = connect(url)
    newest = conn.execute("SELECT max(updated_at) FROM awa.cron_jobs").fetchone()[0]
    results = []
    for label, since in (("newest change - 5 s (all rows)", newest - timedelta(seconds=5)),
                         ("now() - 5 s (the engine's)", datetime.now(UTC) - timedelta(seconds=5))):
        times, rows = [], 0
        for _ in range(repeat):
            [[plan]] = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) "
                                    + queries["changed_schedules"],
                                    {"since": since, "seen_xmin": None}).fetchall()
            times.append(plan[0]["Execution Time"])
            rows = plan[0]["Plan"]["Actual Rows"]
        results.append({"since": label, "times": times, "rows": rows})
    conn.close()
    return results


# -- the parent -----------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def run_child(config: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(config)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"child failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def print_tables(results: list[tuple[str, str, dict[str, Any], list[dict[str, Any]]]],
                 n: int) -> None:
    print(f"\n(a, b) engine.load() of {n:,} schedules, RSS of the child process (MB)")
    print(f"{'layout':<11} {'scenario':<8} {'load s':>7} {'CPU s':>6} {'stmts':>5} "
          f"{'base':>6} {'growth':>7} {'B/row':>6} {'VmRSS':>7} {'maxrss':>7} "
          f"{'VmRSS end':>9} {'maxrss end':>10}")
    for layout, scenario, r, _ in results:
        load, after = r["load"], r["after"]
        print(f"{layout:<11} {scenario:<8} {load['wall']:>7.2f} {load['cpu']:>6.2f} "
              f"{load['statements']:>5} {load['baseline']:>6.1f} {load['growth']:>7.1f} "
              f"{load['growth'] * MB / max(1, load['entries']):>6,.0f} {load['rss']:>7.1f} "
              f"{load['maxrss']:>7.1f} {after['rss']:>9.1f} {after['maxrss']:>10.1f}")

    print("\n(c) run_pass() with nothing due (CPU = time.process_time; stmts = psycopg "
          "statements)")
    print(f"{'layout':<11} {'scenario':<8} {'pass':<10} {'passes':>6} {'CPU ms p50':>10} "
          f"{'p99':>8} {'max':>8} {'wall p50':>8} {'stmts/pass':>10} {'rows re-read':>12} "
          f"store calls/pass")
    for layout, scenario, r, _ in results:
        for refresh in (False, True):
            group = [p for p in r["passes"] if p["refresh"] == refresh]
            if not group:
                continue
            cpu = [p["cpu"] * 1000 for p in group]
            calls: dict[str, int] = {}
            for p in group:
                for call in p["calls"]:
                    calls[call] = calls.get(call, 0) + 1
            shown = ", ".join(f"{k} {v / len(group):.2f}" for k, v in calls.items()) or "-"
            stmts = statistics.mean(p["statements"] for p in group)
            rows = statistics.mean(p["changed"] for p in group) if refresh else 0
            print(f"{layout:<11} {scenario:<8} {'refresh' if refresh else 'no refresh':<10} "
                  f"{len(group):>6} {pct(cpu, 50):>10.3f} {pct(cpu, 99):>8.3f} "
                  f"{max(cpu):>8.3f} {pct([p['wall'] * 1000 for p in group], 50):>8.3f} "
                  f"{stmts:>10.2f} {rows:>12,.0f} {shown}")
    print("\n(c) steady state; cross-check of the statement counter against the server's "
          "transaction count\n    over a whole run of its own (load + passes, parallel query "
          "off, so one statement = one transaction)")
    print(f"{'layout':<11} {'scenario':<8} {'CPU ms per s of clock':>21} {'check passes':>12} "
          f"{'stmts (client)':>14} {'+ connects':>10} {'xacts (server)':>14} {'diff':>5}  "
          f"other backends on the database")
    for layout, scenario, r, _ in results:
        counted = r["passes"]
        seconds = len(counted) * r["step"]
        cpu_per_s = sum(p["cpu"] for p in counted) * 1000 / max(1e-9, seconds)
        check = r["check"]
        print(f"{layout:<11} {scenario:<8} {cpu_per_s:>21.1f} {check['passes']:>12} "
              f"{check['client']:>14} {check['connections']:>10} {check['server']:>14} "
              f"{check['server'] - check['client'] - check['connections']:>5}  "
              f"{', '.join(check['others']) or '-'}")
    print("    (diff: 0 expected; more would mean statements the counter missed)")
    print("\n(d) database-side time of queries['changed_schedules'] (EXPLAIN ANALYZE, ms)")
    print(f"{'layout':<11} {'scenario':<8} {'since':<24} {'p50':>8} {'max':>8} {'rows':>8}")
    for layout, scenario, _, plans in results:
        for plan in plans:
            print(f"{layout:<11} {scenario:<8} {plan['since']:<24} "
                  f"{statistics.median(plan['times']):>8.2f} {max(plan['times']):>8.2f} "
                  f"{plan['rows']:>8,}")

    print("\ntargets: CPU <= 5 ms and <= 1 statement per pass (p99, every kind of pass), "
          "RSS <= 200 MB")
    print(f"{'layout':<11} {'scenario':<8} {'CPU p99 ms':>10} {'stmts max':>9} "
          f"{'peak RSS MB':>11}  verdict")
    for layout, scenario, r, _ in results:
        worst_cpu = max(pct([p["cpu"] * 1000 for p in r["passes"] if p["refresh"] == kind], 99)
                        for kind in (False, True))
        stmts = max((p["statements"] for p in r["passes"]), default=0)
        peak = max(r["load"]["maxrss"], r["after"]["maxrss"])
        missed = [what for what, bad in (("CPU", worst_cpu > 5), ("statements", stmts > 1),
                                         ("RSS", peak > 200)) if bad]
        verdict = "met" if not missed else "NOT met: " + ", ".join(missed)
        print(f"{layout:<11} {scenario:<8} {worst_cpu:>10.3f} {stmts:>9} {peak:>11.1f}  {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="schedules stored")
    parser.add_argument("--passes", type=int, default=1000, help="passes per run")
    parser.add_argument("--step", type=float, default=0.01,
                        help="seconds the fake clock advances before each pass")
    parser.add_argument("--layouts", default="standalone,awa")
    parser.add_argument("--scenarios", default="synced,spread")
    parser.add_argument("--check-passes", type=int, default=300,
                        help="passes of the statement-count cross-check run")
    parser.add_argument("--explain-repeat", type=int, default=10)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    results = []
    with server_url() as server:
        dbs = TempDatabases(server, prefix=f"awabeat_pass{os.getpid()}")
        try:
            for layout in args.layouts.split(","):
                for scenario in args.scenarios.split(","):
                    url = dbs.fresh(layout)
                    shown = prepare(url, args.n, scenario)
                    print(f"{layout} / {scenario}: synced {shown}; measuring", flush=True)
                    config = {"url": url, "server": server, "dbname": dbs.created[-1],
                              "step": args.step}
                    check = run_child({**config, "mode": "check", "passes": args.check_passes})
                    r = run_child({**config, "mode": "measure", "passes": args.passes})
                    r["check"] = check
                    results.append((layout, scenario, r, explain(url, args.explain_repeat)))
        finally:
            dbs.close()
    print_tables(results, args.n)


if __name__ == "__main__":
    common.run(main)
