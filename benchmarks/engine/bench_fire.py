"""CPU the engine spends working out a burst's fires, in-process, with no database.

    python benchmarks/engine/bench_fire.py [--n 20000] [--calendars shared|distinct]

N schedules in the in-memory store (``awa_beat._testing.MemoryStore``) are all due at
once: daily at 12:00 in two zones (``shared``: what a burst of tenants at one instant
looks like), or each at its own minute and hour in one of seven zones (``distinct``).
The clock is then moved past their fire and ``Engine.fire_due()`` is called until it
fires nothing. It prints the jobs fired, the CPU per fire, and how many times
``due_fires`` was called. The store's share is the in-memory one, so the figure is the
engine's own cost, not a beat's (benchmarks/peers/run.py measures that).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common

import awa_beat._engine.firing as engine_module
from awa_beat._engine.engine import Engine
from awa_beat._testing import FakeClock, MemoryStore

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)
ZONES = ["UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney",
         "Asia/Kolkata", "America/Sao_Paulo"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--calendars", choices=["shared", "distinct"], default="shared")
    args = parser.parse_args()
    clock = FakeClock(T0)
    store = MemoryStore(clock)
    rng = random.Random(7)
    for i in range(args.n):
        if args.calendars == "shared":
            expr, zone = "0 12 * * *", ZONES[i % 2]
        else:
            expr, zone = f"{rng.randrange(60)} {rng.randrange(24)} * * *", rng.choice(ZONES)
        store.add(f"s{i}", expr, timezone=zone, last_enqueued_at=T0 - timedelta(days=1))
    engine = Engine(store.evaluator, clock=clock)
    engine.load()
    clock.advance(hours=24)
    calls = 0
    due_fires = engine_module.due_fires

    def counted(*a: object, **k: object) -> object:
        nonlocal calls
        calls += 1
        return due_fires(*a, **k)  # type: ignore[arg-type]

    engine_module.due_fires = counted  # type: ignore[assignment]
    fired = 0
    start = time.process_time()
    while True:
        jobs = len(engine.fire_due().jobs)
        if not jobs:
            break
        fired += jobs
    cpu = time.process_time() - start
    print(f"{args.calendars} calendars: {fired:,} fired, {cpu / max(fired, 1) * 1e6:.1f} us "
          f"of CPU per fire ({cpu:.2f} s), due_fires called {calls:,} times")


if __name__ == "__main__":
    common.run(main)
