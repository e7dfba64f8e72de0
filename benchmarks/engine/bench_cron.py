"""Speed of awa-beat's fire-time arithmetic.

Run ``python benchmarks/engine/bench_cron.py``. It prints how many next-fire computations
(``Calendar.next_from`` with aware datetimes in and out, each step starting one second after the
previous fire) run per second for a few calendars, and what one ``due_fires`` call costs per
schedule on an evaluation pass where nothing is due.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common

from awa_beat._schedules.fire_times import Calendar, calendar_for, due_fires, next_fire_after

UTC = timezone.utc
ONE_SECOND = timedelta(seconds=1)
START = datetime(2025, 1, 1, tzinfo=UTC)

CALENDARS = [
    ("*/5 * * * *", "UTC"),
    ("*/5 * * * *", "America/New_York"),
    ("0 9 * * 1-5", "Europe/Paris"),
    ("0 0 1W * *", "UTC"),
    ("0 30 2 * * *", "Australia/Lord_Howe"),
    ("@every 7s", "UTC"),
]


def rate(func: Callable[[], object], seconds: float = 1.0) -> float:
    """Calls of ``func`` per second, measured over about ``seconds``."""
    func()  # warm caches
    calls = 0
    batch = 1000
    began = time.perf_counter()
    while True:
        for _ in range(batch):
            func()
        calls += batch
        elapsed = time.perf_counter() - began
        if elapsed >= seconds:
            return calls / elapsed


def stepper(calendar: Calendar) -> Callable[[], object]:
    """One croner iterator step per call, restarting when the calendar runs dry."""
    state = {"t": START}

    def step() -> object:
        fire = calendar.next_from(state["t"])
        if fire is None or fire.year > 2400:
            state["t"] = START
        else:
            state["t"] = fire + ONE_SECOND
        return fire

    return step


def main() -> None:
    print("next-fire computations per second (Calendar.next_from)")
    for expr, zone in CALENDARS:
        per_second = rate(stepper(calendar_for(expr, zone)))
        print(f"  {expr!r:18} {zone:22} {per_second:12,.0f} /s")

    print("due_fires per schedule when nothing is due")
    now = datetime(2026, 6, 1, 12, 0, 30, 250_000, tzinfo=UTC)
    for expr, zone in CALENDARS:
        calendar = calendar_for(expr, zone)
        last = now - timedelta(days=1)
        while (fire := next_fire_after(calendar, last)) is not None and fire <= now:
            last = fire  # the newest fire already enqueued, so nothing is due at `now`
        for policy in ("coalesce", "catch_up"):

            def call(calendar: Calendar = calendar, last: datetime = last, p: str = policy) -> None:
                due_fires(calendar, last_enqueued_at=last, created_at=last, now=now, policy=p)

            assert not due_fires(calendar, last_enqueued_at=last, created_at=last, now=now,
                                 policy=policy)
            micros = 1e6 / rate(call, 0.5)
            print(f"  {expr!r:18} {zone:22} {policy:9} {micros:8.1f} us")


if __name__ == "__main__":
    common.run(main)
