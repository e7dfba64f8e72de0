"""Schedules.add_many: N schedules added at run time, validation and writes included.

    python benchmarks/database/bench_add_many.py [--n 10000] [--repeat 3] [--layouts standalone,awa]

Each measurement is one ``Schedules.add_many`` call of N new entries (crontabs and
intervals, args, kwargs, options), end to end: validation as a beat_schedule, the
ownership check and the write (a lock read and one upsert, in one transaction). Then
the same N replaced (``replace=True``, every row existing) and N added on a caller's
connection inside its transaction. Target: 10,000 in at most 2 s; the run says whether
the median met it and exits 1 if not.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import psycopg
from celery.schedules import crontab

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common

from awa_beat import Schedules
from awa_beat._config import Settings

TARGET_SECONDS = 2.0
TARGET_N = 10_000


def entries(n: int, prefix: str, hour: int = 3) -> dict[str, dict[str, Any]]:
    return {
        f"{prefix}-{i:06d}": {
            "task": "bench.tasks.report",
            "schedule": crontab(minute=i % 60, hour=hour) if i % 2 else 300 + i % 7,
            "args": [i],
            "kwargs": {"tenant": i},
            "options": {"queue": "reports", "expires": 600,
                        "awa_beat": {"timezone": "Europe/Paris"}},
        }
        for i in range(n)
    }


def line(label: str, times: list[float]) -> float:
    median = statistics.median(times)
    print(f"  {label:<40} median {median:6.3f} s   best {min(times):6.3f} s", flush=True)
    return median


def run_layout(url: str, n: int, repeat: int) -> float:
    """The three measurements on one database; the median of the first."""
    with Schedules(url, settings=Settings(deployment="bench")) as schedules:
        batches = [entries(n, f"a{k}") for k in range(repeat)]
        added = line("new names", common.measure(repeat, lambda k: schedules.add_many(batches[k])))
        changed = entries(n, "a0", hour=4)
        line("replace=True, every row existing",
             common.measure(repeat, lambda k: schedules.add_many(changed, replace=True)))
        joined = [entries(n, f"j{k}") for k in range(repeat)]
        with psycopg.connect(url) as conn:

            def in_transaction(k: int) -> None:
                schedules.add_many(joined[k], conn=conn)
                conn.commit()

            line("new names, on the caller's transaction", common.measure(repeat, in_transaction))
    return added


def main() -> int:
    return common.layouts_against_target(__doc__.splitlines()[0], TARGET_N, TARGET_SECONDS,
                                         "add_many of {n} schedules", "{n} new",
                                         run_layout)


if __name__ == "__main__":
    common.run(main)
