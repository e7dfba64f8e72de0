"""The costs of a due index kept in PostgreSQL, a design proposed, not built.

    python benchmarks/engine/bench_due_index.py [--n 1000000] [--calendars distinct]
                                         [--horizons 1,5,15]

The engine holds every row in memory. With every row's calendar its own (bench_scale's
``--calendars distinct``), 1,000,000 rows cost a leader about 730 MB, where issue 19 asks
for 300. docs/performance.md proposes instead a ``next_due`` column beside each row,
written by whoever computes it, and a leader that holds only the rows due within a
horizon of a few minutes. This script measures what that design would cost, on a fresh
standalone database filled as bench_scale fills it:

* computing every row's next due instant in Python (awa-beat's own calendar
  arithmetic), as a bulk write of N schedules would pay once;
* writing them (COPY into a temporary table, one UPDATE) and indexing the column;
* the leader's read of a horizon (the rows and their next due instants, joined to
  ``awa.cron_jobs``), median of five, for each ``--horizons`` minutes, with the rows
  it returns.

Nothing in awa_beat reads the column: it is added here to the benchmark's own database
and dropped with it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
from bench_scale import EXPRESSIONS, fill

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common

from awa_beat._schedules.fire_times import calendar_for, next_fire_after

UTC = timezone.utc
HORIZON_READ = (
    "SELECT c.name, c.cron_expr, c.timezone, c.missed_fire_policy, c.last_enqueued_at,"
    " c.created_at, c.updated_at, c.paused_at, s.next_due"
    " FROM awa_beat.schedules s JOIN awa.cron_jobs c ON c.name = s.name"
    " WHERE s.next_due < %s")


def compute(conn: psycopg.Connection, now: datetime) -> tuple[list[tuple[str, datetime]], float]:
    """Every row's next due instant, and the CPU seconds computing them took."""
    out: list[tuple[str, datetime]] = []
    cpu = time.process_time()
    with conn.transaction(), conn.cursor(name="rows") as cur:
        cur.itersize = 5000
        cur.execute("SELECT name, cron_expr, timezone, last_enqueued_at FROM awa.cron_jobs")
        for name, expr, zone, last in cur:
            due = next_fire_after(calendar_for(expr, zone), last or now)
            if due is not None:
                out.append((name, due))
    return out, time.process_time() - cpu


def write(conn: psycopg.Connection, dues: list[tuple[str, datetime]]) -> None:
    conn.execute("ALTER TABLE awa_beat.schedules ADD COLUMN next_due timestamptz")
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("CREATE TEMP TABLE due (name text, next_due timestamptz) ON COMMIT DROP")
        with cur.copy("COPY due (name, next_due) FROM STDIN") as copy:
            for row in dues:
                copy.write_row(row)
        cur.execute("UPDATE awa_beat.schedules s SET next_due = due.next_due FROM due"
                    " WHERE due.name = s.name")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--calendars", default="distinct", choices=sorted(EXPRESSIONS))
    parser.add_argument("--horizons", default="1,5,15", help="minutes")
    args = parser.parse_args()
    with common.databases("awabeat_dueidx") as dbs:
        url = dbs.fresh("standalone")
        start = time.perf_counter()
        fill(url, args.n, args.calendars)
        print(f"{args.n:,} rows ({args.calendars}) written in "
              f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
        with psycopg.connect(url, autocommit=True) as conn:
            now = datetime.now(UTC)
            start = time.perf_counter()
            dues, cpu = compute(conn, now)
            computed = time.perf_counter() - start
            start = time.perf_counter()
            write(conn, dues)
            written = time.perf_counter() - start
            start = time.perf_counter()
            conn.execute("CREATE INDEX schedules_next_due_idx"
                         " ON awa_beat.schedules (next_due)")
            conn.execute("VACUUM ANALYZE awa_beat.schedules")
            indexed = time.perf_counter() - start
            size = conn.execute("SELECT pg_relation_size("
                                "'awa_beat.schedules_next_due_idx')").fetchone()[0]
            print(f"| figure | {args.n:,} rows, {args.calendars} calendars |")
            print("|---|---|")
            print(f"| next due instants computed | {computed:.1f} s ({cpu:.1f} s CPU, "
                  f"{cpu / max(1, len(dues)) * 1e6:.0f} us a row) |")
            print(f"| written (COPY + UPDATE) | {written:.1f} s |")
            print(f"| index built | {indexed:.1f} s, {size / 1e6:.1f} MB |")
            for minutes in (int(m) for m in args.horizons.split(",")):
                times, count = [], 0
                for _ in range(5):
                    t = time.perf_counter()
                    count = len(conn.execute(
                        HORIZON_READ, (now + timedelta(minutes=minutes),)).fetchall())
                    times.append(time.perf_counter() - t)
                print(f"| horizon of {minutes} min: rows, read (median of 5) | "
                      f"{count:,}, {statistics.median(times) * 1000:.1f} ms |")


if __name__ == "__main__":
    common.run(main)
