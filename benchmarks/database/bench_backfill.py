"""Schedules.backfill: N fire times of an every-second schedule in one call.

    python benchmarks/database/bench_backfill.py [--n 100000] [--repeat 3]
        [--layouts standalone,awa]

Each measurement is one ``Schedules.backfill`` call over a range of an every-second
schedule that holds exactly N fire times, end to end: the calendar stepped over the
range, the check of the limit and the cursor, the insert of N jobs and N rows of
``awa_beat.backfills`` (one transaction, under the schedule's lock) and the audit entry.
Each repeat backfills a schedule of its own, so every call inserts all N. Then the same
range again (every fire time skipped: the second replica's call) and a dry run. Target
(issue 38): 100,000 in at most 5 s; the run says whether the median met it, per layout,
and exits 1 if not.
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common

from awa_beat import Schedules
from awa_beat._config import Settings
from awa_beat._schedules.backfill import fires_in_range
from awa_beat._schedules.fire_times import calendar_for

TARGET_SECONDS = 5.0
TARGET_N = 100_000


def line(label: str, times: list[float]) -> float:
    median = statistics.median(times)
    print(f"  {label:<44} median {median:6.3f} s   best {min(times):6.3f} s", flush=True)
    return median


def run_layout(url: str, n: int, repeat: int) -> float:
    """The measurements on one database; the median of the full backfill."""
    with Schedules(url, settings=Settings(deployment="bench", dispatch="awa")) as schedules:
        names = [f"every-second-{k}" for k in range(repeat)]
        schedules.add_many({name: {"task": "bench.tasks.tick", "schedule": 1}
                            for name in names})
        # A range that ends well before every cursor (the second they were added).
        end = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(seconds=10)
        start = end - timedelta(seconds=n - 1)
        calendar = calendar_for("@every 1s", "UTC")
        began = time.perf_counter()
        assert len(fires_in_range(calendar, start, end, n + 1)) == n
        print(f"  {'the calendar alone (fires_in_range)':<44} "
              f"{time.perf_counter() - began:6.3f} s")

        def full(k: int) -> None:
            done = schedules.backfill(names[k], start, end, limit=n)
            assert done.inserted_count == n and done.skipped_count == 0, done.inserted_count

        def again(k: int) -> None:
            done = schedules.backfill(names[k], start, end, limit=n)
            assert done.inserted_count == 0 and done.skipped_count == n

        def dry(k: int) -> None:
            done = schedules.backfill(names[k], start, end, limit=n, dry_run=True)
            assert done.skipped_count == n

        inserted = line(f"{n:,} fire times inserted", common.measure(repeat, full))
        line("the same range again (every one skipped)", common.measure(repeat, again))
        line("a dry run of it", common.measure(repeat, dry))
    return inserted


def main() -> int:
    return common.layouts_against_target(__doc__.splitlines()[0], TARGET_N, TARGET_SECONDS,
                                         "backfill of {n} fire times in one call", "{n}",
                                         run_layout)


if __name__ == "__main__":
    common.run(main)
