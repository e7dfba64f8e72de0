"""Fire times of awa-beat's crontabs against Celery's own crontab objects, over 2027.

    python benchmarks/parity/crontab_parity.py [--random 500] [--seed 40] [--cap 400]

Crontabs: a corpus of realistic ones (the kind real projects' beat_schedules hold, some
taken from PostHog's and others' public beat schedules) and ``--random`` random ones
(seeded: every field form Celery reads, lists, ranges, steps and names). Each is
converted with both DST policies (``awa``: Awa's rule, the default; ``celery``) and placed
in UTC and three DST zones (Europe/London, America/New_York, Australia/Lord_Howe, a
half-hour shift). Celery's fires are computed by its crontab object in an app of that
zone, each from the one before (``remaining_estimate`` asked at the last run, which is
when ``is_due`` first says due); awa-beat's by its calendars (``fires_between``).

Compared: the first ``--cap`` fires of 2027, every fire of 2027 within two days of each
of the zone's DST transitions, and every fire of the first day of each month of 2027.

Printed: entries stored and refused; per policy, the (entry, zone) pairs whose fires are
identical, those that differ only within three hours of a DST transition (the rule the
policy chose), and any other difference (a defect: expected 0). Plain rows (Awa fires
them too) and ``@crontab`` markers are counted apart.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

from celery.schedules import crontab

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common

from awa_beat._schedules.fire_times import calendar_for, fires_between
from awa_beat._schedules.markers import is_marker
from awa_beat._schedules.spec import to_cron_expression
from awa_beat._testing import celery_crontab_fires as celery_fires
from awa_beat.errors import ScheduleError

UTC = timezone.utc
YEAR = 2027
ZONES = ("UTC", "Europe/London", "America/New_York", "Australia/Lord_Howe")

# (project or kind, crontab arguments)
CORPUS: list[tuple[str, dict[str, object]]] = [
    ("PostHog: event partitions", {"day_of_week": "mon,fri", "hour": 0, "minute": 0}),
    ("PostHog: usage report", {"hour": 0, "minute": 17}),
    ("PostHog: license usage", {"hour": "3", "minute": "0"}),
    ("vintasoftware boilerplate: clearsessions", {"hour": 3, "minute": 0}),
    ("nightly backup", {"hour": 2, "minute": 30}),
    ("weekly digest (Monday 08:00)", {"hour": 8, "minute": 0, "day_of_week": "monday"}),
    ("every 15 min", {"minute": "*/15"}),
    ("every 5 min", {"minute": "*/5"}),
    ("hourly at :17", {"minute": 17}),
    ("business hours, quarter-hourly", {"minute": "0,15,30,45", "hour": "9-17",
                                        "day_of_week": "mon-fri"}),
    ("monthly invoice (1st, 06:00)", {"minute": 0, "hour": 6, "day_of_month": 1}),
    ("quarterly report", {"minute": 0, "hour": 4, "day_of_month": 1,
                          "month_of_year": "1,4,7,10"}),
    ("yearly cleanup (1 Jan)", {"minute": 0, "hour": 0, "day_of_month": 1,
                                "month_of_year": 1}),
    ("first Monday of the month", {"minute": 0, "hour": 7, "day_of_month": "1-7",
                                   "day_of_week": 1}),
    ("payday: the 15th if a weekday", {"minute": 0, "hour": 9, "day_of_month": 15,
                                       "day_of_week": "mon-fri"}),
    ("Friday the 13th", {"minute": 0, "hour": 13, "day_of_month": 13, "day_of_week": "fri"}),
    ("last Friday of the month", {"minute": 0, "hour": 17, "day_of_month": "25-31",
                                  "day_of_week": "fri"}),
    ("first and third Sunday", {"minute": 0, "hour": 1, "day_of_month": "1-7,15-21",
                                "day_of_week": "sun"}),
    ("twice a day", {"minute": 0, "hour": "0,12"}),
    ("every 6 hours", {"minute": 0, "hour": "*/6"}),
    ("early hours, every 10 min", {"minute": "*/10", "hour": "1-3"}),
    ("daily 01:30 (a repeated hour in autumn)", {"minute": 30, "hour": 1}),
    ("daily 02:15 (Lord Howe's skipped half hour)", {"minute": 15, "hour": 2}),
    ("weekend mornings", {"minute": 0, "hour": 10, "day_of_week": "sat,sun"}),
    ("Sentry-style cleanup at :00 of odd hours", {"minute": 0, "hour": "1-23/2"}),
    ("every minute", {}),
    ("end of month report", {"minute": 59, "hour": 23, "day_of_month": "28-31"}),
    ("semi-monthly", {"minute": 0, "hour": 0, "day_of_month": "1,15"}),
    ("every other day", {"minute": 30, "hour": 4, "day_of_month": "*/2"}),
    ("Monday the 1st", {"minute": 0, "hour": 0, "day_of_month": 1, "day_of_week": 1}),
]

_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def _field(rnd: random.Random, lo: int, hi: int, names: tuple[str, ...] = ()) -> str:
    form = rnd.randrange(7 if names else 6)
    a, b = sorted(rnd.sample(range(lo, hi + 1), 2))
    if form == 0:
        return "*"
    if form == 1:
        return str(rnd.randint(lo, hi))
    if form == 2:
        return f"*/{rnd.randint(2, max(2, (hi - lo) // 2))}"
    if form == 3:
        return f"{a}-{b}"
    if form == 4:
        return f"{a}-{b}/{rnd.randint(1, 5)}"
    if form == 5:
        return ",".join(map(str, sorted(rnd.sample(range(lo, hi + 1), rnd.randint(1, 4)))))
    return f"{rnd.choice(names)}-{rnd.choice(names)}" if rnd.random() < 0.5 else \
        ",".join(rnd.sample(names, rnd.randint(1, 3)))


def random_crontabs(n: int, seed: int) -> list[tuple[str, dict[str, object]]]:
    rnd = random.Random(seed)
    out: list[tuple[str, dict[str, object]]] = []
    while len(out) < n:
        fields = {"minute": _field(rnd, 0, 59), "hour": _field(rnd, 0, 23),
                  "day_of_month": _field(rnd, 1, 31), "month_of_year": _field(rnd, 1, 12),
                  "day_of_week": _field(rnd, 0, 6, _DAYS)}
        try:
            crontab(**fields)  # type: ignore[arg-type]
        except ValueError:
            continue  # Celery refuses it (30 February): not a crontab Celery accepts
        out.append((f"random {len(out)}", dict(fields)))
    return out


def transitions(zone: str) -> list[datetime]:
    tz = ZoneInfo(zone)
    t = datetime(YEAR, 1, 1, tzinfo=UTC)
    found, offset = [], t.astimezone(tz).utcoffset()
    while t.year == YEAR:
        t += timedelta(minutes=30)
        if t.astimezone(tz).utcoffset() != offset:
            found.append(t)
            offset = t.astimezone(tz).utcoffset()
    return found


def windows(zone: str, cap: int) -> list[tuple[datetime, datetime, int]]:
    year = (datetime(YEAR, 1, 1, tzinfo=UTC), datetime(YEAR + 1, 1, 1, tzinfo=UTC), cap)
    around = [(t - timedelta(days=2), t + timedelta(days=2), 10_000) for t in transitions(zone)]
    months = [(datetime(YEAR, m, 1, tzinfo=UTC), datetime(YEAR, m, 2, tzinfo=UTC), 10_000)
              for m in range(1, 13)]
    return [year, *around, *months]


def compare(expr: str, fields: dict[str, object], zone: str, cap: int) -> str:
    """``same``, ``dst`` (differs only within 3 h of a transition) or ``other``."""
    calendar = calendar_for(expr, zone)
    changes = transitions(zone)
    verdict = "same"
    for start, until, limit in windows(zone, cap):
        ours = fires_between(calendar, start, until, limit)
        theirs = celery_fires(fields, zone, start, until, limit)
        if ours == theirs:
            continue
        diff = set(ours) ^ set(theirs)
        if len(ours) >= limit or len(theirs) >= limit:
            # Capped series end at different fires once one has a fire more: compare
            # up to the earlier end.
            cutoff = min(series[-1] for series in (ours, theirs) if series)
            diff = {f for f in diff if f <= cutoff}
        if all(any(abs(f - c) <= timedelta(hours=3) for c in changes) for f in diff):
            verdict = "dst"
        else:
            return "other"
    return verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--random", type=int, default=500, help="random crontabs")
    parser.add_argument("--seed", type=int, default=40)
    parser.add_argument("--cap", type=int, default=400,
                        help="fires compared from the start of 2027")
    args = parser.parse_args()
    began = time.perf_counter()
    groups = {"corpus": CORPUS, "random": random_crontabs(args.random, args.seed)}
    counts: dict[tuple[str, str, str, str], int] = {}
    refused: dict[str, list[str]] = {"corpus": [], "random": []}
    others: list[str] = []
    for group, entries in groups.items():
        for name, fields in entries:
            for dst in ("awa", "celery"):
                try:
                    expr, _ = to_cron_expression(crontab(**fields), dst)  # type: ignore[arg-type]
                except ScheduleError as exc:
                    refused[group].append(f"{name} ({dst}): {exc}")
                    continue
                kind = "marker" if is_marker(expr) else "plain"
                for zone in ZONES:
                    verdict = compare(expr, fields, zone, args.cap)
                    key = (group, dst, kind, verdict)
                    counts[key] = counts.get(key, 0) + 1
                    if verdict == "other":
                        others.append(f"{group} {name} {fields} {dst} {zone}: {expr}")
    print(f"crontab parity with Celery {__import__('celery').__version__}, {YEAR}, "
          f"zones {', '.join(ZONES)}; {time.perf_counter() - began:.0f} s")
    for group, entries in groups.items():
        print(f"\n{group}: {len(entries)} crontabs, refused: {len(refused[group])}")
        for line in refused[group]:
            print("  refused:", line)
        print(f"  {'policy':7} {'stored as':9} {'same':>6} {'DST rule':>9} {'other':>6}"
              "   (entry x zone pairs)")
        for dst in ("awa", "celery"):
            for kind in ("plain", "marker"):
                row = [counts.get((group, dst, kind, v), 0) for v in ("same", "dst", "other")]
                if sum(row):
                    print(f"  {dst:7} {kind:9} {row[0]:6} {row[1]:9} {row[2]:6}")
    for line in others:
        print("  DIFFERS:", line)
    sys.exit(1 if others or any(refused.values()) else 0)


if __name__ == "__main__":
    common.run(main)
