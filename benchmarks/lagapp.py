"""The Celery app bench_lag.py and bench_failover.py run `celery beat -S awa_beat.Scheduler` with.

Configured by the environment, as in a container:

* ``LAGAPP_SCHEDULE``: comma-separated ``<seconds>:<count>`` pairs, e.g. ``1:20,2:5,5:5``
  for 20 entries firing every second, 5 every 2 s and 5 every 5 s (entry names are
  ``every-<seconds>s-<i>``);
* ``LAGAPP_BACKGROUND``: that many more entries, daily crontabs at least an hour away,
  which never fire during a run (a large table);
* ``AWA_BEAT_*``: the database URL and awa-beat's timings.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any

from celery import Celery
from celery.schedules import crontab


def beat_schedule(spec: str, background: int) -> dict[str, dict[str, Any]]:
    entries: dict[str, dict[str, Any]] = {}
    for part in filter(None, spec.split(",")):
        seconds, count = (int(x) for x in part.split(":"))
        for i in range(count):
            entries[f"every-{seconds}s-{i}"] = {"task": "lag.tick", "schedule": float(seconds)}
    hour = datetime.now(timezone.utc).hour
    for i in range(background):
        entries[f"background-{i:06d}"] = {
            "task": "lag.report", "args": [i],
            "schedule": crontab(minute=i % 60, hour=(hour + 2 + i % 20) % 24)}
    return entries


app = Celery("lag")
app.conf.update(
    broker_url="memory://",
    result_expires=None,
    timezone="UTC",
    beat_schedule=beat_schedule(os.environ.get("LAGAPP_SCHEDULE", "1:20,2:5,5:5"),
                                int(os.environ.get("LAGAPP_BACKGROUND", "0"))),
)
