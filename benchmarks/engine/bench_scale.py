"""One leader with N schedules stored: start-up, memory, a steady window and failover.

    python benchmarks/engine/bench_scale.py [--sizes 100000,1000000] [--calendars daily]
                                     [--steady-seconds 120] [--trials 5] [--replicas 3]

For each N, on a fresh standalone database: N rows are written straight into
awa.cron_jobs (cloned in SQL from one schedule added through ``awa_beat.Schedules``,
owner ``runtime``, as an application that manages its schedules at run time leaves
them), with their cursors at the moment of writing, plus one probe row whose cursor is
an hour old (coalesce: it fires as soon as a leader is ready). Then real
``celery beat -S awa_beat.Scheduler`` processes of benchmarks/lagapp.py (one entry firing
every second in its beat_schedule) run on it:

* start-up: process start until the probe's job exists (created_at; same host clock),
  and the process's peak RSS (VmHWM) once it is leading;
* steady: over ``--steady-seconds``, the lag of every job fired from the stored rows
  (created_at - fire time), the fires their calendars asked for in the window that got
  no job (computed with awa-beat's own calendar arithmetic), and the leader's CPU
  seconds per minute (every thread, /proc schedstat), with its peak RSS at the end;
* failover: ``--replicas`` - 1 standbys join and load every row (their log says so); then
  ``--trials`` times the leader is SIGKILLed between two whole seconds and replaced, and
  the time from the kill to the next job is taken (p50 / p99 / max).

Calendars (``--calendars``):

* ``daily``: ``M H * * *`` with pseudo-random minute, hour and one of seven zones: about
  N / 1,440 fires a minute (12 a second at 1,000,000), 10,080 distinct calendars;
* ``distinct``: as daily, plus a pseudo-random set of weekdays: nearly every row's
  calendar is its own (fewer fires, each day only on its weekdays);
* ``shared``: ``M H * * *`` in UTC from 120 calendars, each shared by N / 120 rows.

Goals (issue 19), 1,000,000 rows: peak RSS at most 300 MB and start-up at most 15 s;
100,000 rows: at most 80 MB and 2 s; steady: every fire on time and idle CPU per minute
level with 100,000; failover p99 at most 2 s. The script prints the figures and the
ratios; it does not judge "on time" (the lag percentiles are the figure).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common
from beatprocs import Beats, as_installed, cpu_seconds, duplicates, leader_pid, pct, wait_for

from awa_beat import Schedules
from awa_beat._db.database import connect
from awa_beat._schedules.fire_times import calendar_for
from awa_beat._testing import TempDatabases, server_url

UTC = timezone.utc
ZONES = ["UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney",
         "Asia/Kolkata", "America/Sao_Paulo"]
PROBE = "scale-probe"

# Pseudo-random but reproducible columns from the row number alone (PostgreSQL's own
# integer hash, seeded per column), so that the server writes the rows in one statement.
MINUTE = "abs(hashint8(i)) %% 60"
HOUR = "abs(hashint8(i + 1000000007)) %% 24"
WEEKDAYS = "abs(hashint8(i + 2000000014)) %% 127 + 1"
EXPRESSIONS = {
    "daily": f"({MINUTE})::text || ' ' || ({HOUR})::text || ' * * *'",
    "distinct": f"({MINUTE})::text || ' ' || ({HOUR})::text || ' * * '"
                " || array_to_string(ARRAY(SELECT d FROM generate_series(0, 6) d"
                f" WHERE (({WEEKDAYS}) >> d) & 1 = 1), ',')",
    "shared": "(i %% 60)::text || ' ' || (i %% 24)::text || ' * * *'",
}


def fill(url: str, n: int, calendars: str) -> float:
    """Write ``n`` rows and the probe; returns the seconds it took."""
    start = time.perf_counter()
    with Schedules(url) as schedules:
        schedules.add("scale-template", task="scale.report", schedule="0 0 1 1 *")
    zone = ("'UTC'" if calendars == "shared"
            else "(%(zones)s::text[])[abs(hashint8(i + 3000000021)) %% 7 + 1]")
    with connect(url) as conn:
        conn.execute(
            "INSERT INTO awa.cron_jobs (name, cron_expr, timezone, kind, queue, args,"
            " priority, max_attempts, tags, metadata, missed_fire_policy, last_enqueued_at,"
            " created_at, updated_at)"
            f" SELECT 'scale-' || lpad(i::text, 7, '0'), {EXPRESSIONS[calendars]}, {zone},"
            " t.kind, t.queue,"
            " jsonb_build_object('args', jsonb_build_array(i), 'kwargs', '{}'::jsonb),"
            " t.priority, t.max_attempts, t.tags, t.metadata, t.missed_fire_policy,"
            " now(), now(), now()"
            " FROM awa.cron_jobs t, generate_series(1::bigint, %(n)s::bigint) i"
            " WHERE t.name = 'scale-template'",
            {"n": n, "zones": ZONES})
        conn.execute(
            "INSERT INTO awa_beat.schedules (name, deployment, owner)"
            " SELECT c.name, s.deployment, s.owner FROM awa.cron_jobs c, awa_beat.schedules s"
            " WHERE s.name = 'scale-template' AND c.name LIKE 'scale-0%%'")
        conn.execute(
            "UPDATE awa.cron_jobs SET name = %(probe)s, cron_expr = '* * * * *',"
            " last_enqueued_at = now() - interval '1 hour' WHERE name = 'scale-template'",
            {"probe": PROBE})
        conn.execute("UPDATE awa_beat.schedules SET name = %(probe)s"
                     " WHERE name = 'scale-template'", {"probe": PROBE})
        conn.execute("VACUUM ANALYZE awa.cron_jobs")
    return time.perf_counter() - start


def status(pid: int, field: str) -> float:
    """A /proc/PID/status figure in MB (VmRSS, VmHWM)."""
    text = Path(f"/proc/{pid}/status").read_text()
    return int(text.split(f"{field}:")[1].split()[0]) / 1024


def first_job(conn: psycopg.Connection, name: str | None, after: datetime
              ) -> datetime | None:
    row = conn.execute(
        "SELECT min(created_at) FROM awa.jobs WHERE created_at > %s"
        " AND (%s::text IS NULL OR metadata ->> 'cron_name' = %s)",
        (after, name, name)).fetchone()
    return row[0] if row else None


def loaded(beats: Beats, pid: int) -> bool:
    """Whether beat process ``pid`` holds every row (its log has the line of the
    ``engine.loaded`` event)."""
    log = beats.logs / f"beat{[p.pid for p in beats.procs].index(pid)}.log"
    return "beat: holding" in log.read_text(errors="replace")


def expected_fires(conn: psycopg.Connection, start: datetime, end: datetime
                   ) -> set[tuple[str, datetime]]:
    """(name, fire time) of every stored row's fire in (start, end], by awa-beat's own
    calendar arithmetic."""
    out: set[tuple[str, datetime]] = set()
    with conn.transaction(), conn.cursor(name="calendars") as cur:
        cur.execute("SELECT name, cron_expr, timezone FROM awa.cron_jobs"
                    " WHERE name LIKE 'scale-0%%'")
        for name, expr, zone in cur:
            calendar = calendar_for(expr, zone)
            t = calendar.next_from(start, inclusive=False)
            while t is not None and t <= end:
                out.add((name, t))
                t = calendar.next_from(t, inclusive=False)
    return out


def steady(conn: psycopg.Connection, pid: int, seconds: float) -> dict[str, float]:
    # The window starts on a whole second, after the start-up burst.
    w0 = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    time.sleep(max(0.0, (w0 - datetime.now(UTC)).total_seconds()))
    cpu0 = cpu_seconds(pid)
    t0 = time.monotonic()
    time.sleep(seconds)
    cpu = cpu_seconds(pid) - cpu0
    elapsed = time.monotonic() - t0
    w1 = w0 + timedelta(seconds=seconds)
    time.sleep(3)  # fires due at the window's end are created by now
    rows = conn.execute(
        "SELECT metadata ->> 'cron_name', (metadata ->> 'cron_fire_time')::timestamptz,"
        " created_at FROM awa.jobs WHERE metadata ->> 'cron_name' LIKE 'scale-0%%'"
        " AND (metadata ->> 'cron_fire_time')::timestamptz > %s"
        " AND (metadata ->> 'cron_fire_time')::timestamptz <= %s", (w0, w1)).fetchall()
    got = {(name, fire) for name, fire, _ in rows}
    wanted = expected_fires(conn, w0, w1)
    lags = [(created - fire).total_seconds() * 1000 for _, fire, created in rows]
    return {"fires": len(rows), "expected": len(wanted), "missed": len(wanted - got),
            "unexpected": len(got - wanted),
            "lag_p50": pct(lags, 50), "lag_p99": pct(lags, 99), "lag_max": max(lags, default=0),
            "cpu_per_min": cpu / elapsed * 60, "rss_peak": status(pid, "VmHWM"),
            "rss": status(pid, "VmRSS")}


def failover(conn: psycopg.Connection, beats: Beats, replicas: int, trials: int
             ) -> list[float]:
    for _ in range(replicas - 1):
        beats.start()
    times: list[float] = []
    for _ in range(trials):
        for proc in beats.alive():
            wait_for(lambda p=proc: loaded(beats, p.pid), 300, f"process {proc.pid} to load",
                     0.2)
        old = wait_for(lambda: leader_pid(conn), 60, "a leader")
        # Between two whole seconds, so that no fire of the old leader is in flight.
        now = time.time()
        time.sleep(int(now) + 1 + random.uniform(0.1, 0.9) - now)
        t_kill = datetime.now(UTC)
        os.kill(old, signal.SIGKILL)
        created = wait_for(lambda t=t_kill: first_job(conn, None, t), 60,
                           "a fire after the kill")
        times.append((created - t_kill).total_seconds() * 1000)
        [proc] = [p for p in beats.procs if p.pid == old]
        proc.wait(10)
        beats.start()
    return times


def run(server: str, n: int, args: argparse.Namespace) -> dict[str, float]:
    dbs = TempDatabases(server, prefix="awabeat_scale")
    if args.logs:
        logs = Path(args.logs) / f"n{n}"
        logs.mkdir(parents=True, exist_ok=True)
    else:
        logs = Path(tempfile.mkdtemp(prefix="awa-beat-scale-"))
    try:
        url = dbs.fresh("standalone")
        filled = fill(url, n, args.calendars)
        print(f"  n={n:,}: {n:,} rows written in {filled:.1f} s", file=sys.stderr, flush=True)
        beats = Beats(url, logs, {"LAGAPP_SCHEDULE": "1:1", "LAGAPP_BACKGROUND": "0"})
        with psycopg.connect(url, autocommit=True) as conn:
            try:
                t0 = datetime.now(UTC)
                proc = beats.start()
                probe = wait_for(lambda: first_job(conn, PROBE, t0 - timedelta(hours=2)),
                                 args.startup_timeout, "the probe's fire", 0.02)
                out = {"n": n, "startup": (probe - t0).total_seconds(),
                       "startup_rss_peak": status(proc.pid, "VmHWM")}
                print(f"  n={n:,}: started in {out['startup']:.2f} s; steady window...",
                      file=sys.stderr, flush=True)
                if args.steady_seconds > 0:
                    out.update(steady(conn, proc.pid, args.steady_seconds))
                if args.trials > 0:
                    print(f"  n={n:,}: failover...", file=sys.stderr, flush=True)
                    times = failover(conn, beats, args.replicas, args.trials)
                    out.update({"failover_p50": pct(times, 50), "failover_p99": pct(times, 99),
                                "failover_max": max(times)})
                dups = duplicates(conn)
                out["duplicates"] = len(dups)
            except Exception:
                print(beats.tail(), file=sys.stderr)
                raise
            finally:
                beats.stop_all()
        return out
    finally:
        dbs.close()
        if not args.logs:
            for f in logs.iterdir():
                f.unlink()
            logs.rmdir()


ROWS = [
    ("start-up to first fire", "startup", "{:.2f} s"),
    ("peak RSS at start-up", "startup_rss_peak", "{:.0f} MB"),
    ("steady: fires in window / expected / missed", None, None),
    ("steady: lag p50 / p99 / max", None, None),
    ("steady: leader CPU per minute", "cpu_per_min", "{:.2f} s"),
    ("steady: leader RSS / peak RSS at the end", None, None),
    ("failover, kill to next fire, p50 / p99 / max", None, None),
    ("duplicate fires", "duplicates", "{:.0f}"),
]


def cell(r: dict[str, float], label: str, key: str | None, fmt: str | None) -> str:
    if key:
        return fmt.format(r[key]) if key in r else "-"  # type: ignore[union-attr]
    if label.startswith("steady: fires") and "fires" in r:
        return f"{r['fires']:.0f} / {r['expected']:.0f} / {r['missed']:.0f}"
    if label.startswith("steady: lag") and "lag_p50" in r:
        return f"{r['lag_p50']:.0f} / {r['lag_p99']:.0f} / {r['lag_max']:.0f} ms"
    if label.startswith("steady: leader RSS") and "rss" in r:
        return f"{r['rss']:.0f} / {r['rss_peak']:.0f} MB"
    if label.startswith("failover") and "failover_p50" in r:
        return (f"{r['failover_p50'] / 1000:.2f} / {r['failover_p99'] / 1000:.2f}"
                f" / {r['failover_max'] / 1000:.2f} s")
    return "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--calendars", default="daily", choices=sorted(EXPRESSIONS))
    parser.add_argument("--steady-seconds", type=float, default=120.0)
    parser.add_argument("--trials", type=int, default=5, help="failover trials (0: none)")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--startup-timeout", type=float, default=120.0)
    parser.add_argument("--logs", help="keep the beat logs in this folder")
    args = parser.parse_args()
    as_installed()
    results = []
    with server_url() as server:
        for n in (int(s) for s in args.sizes.split(",")):
            results.append(run(server, n, args))
    print(f"\ncalendars: {args.calendars}\n")
    print("| figure | " + " | ".join(f"{r['n']:,} rows" for r in results) + " |")
    print("|---|" + "---|" * len(results))
    for label, key, fmt in ROWS:
        print(f"| {label} | " + " | ".join(cell(r, label, key, fmt) for r in results) + " |")
    if len(results) >= 2 and all("cpu_per_min" in r for r in results):
        first, last = results[0], results[-1]
        print(f"\nleader CPU per minute, {last['n']:,} / {first['n']:,} rows: "
              f"x{last['cpu_per_min'] / first['cpu_per_min']:.2f}")
    if any(r.get("duplicates") for r in results):
        sys.exit(1)


if __name__ == "__main__":
    common.run(main)
