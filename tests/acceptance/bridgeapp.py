"""Celery app for the bridge acceptance tests: beat replicas publish, a worker records.

Configured from the environment: BRIDGEAPP_BROKER (a JSON object of Celery broker
settings), BRIDGEAPP_RECORD (a file the worker appends one JSON line per task to),
BRIDGEAPP_SCHEDULE ("idle": one yearly entry instead of the every-second ones).
"""

from __future__ import annotations

import json
import os

from celery import Celery
from celery.schedules import crontab

from awa_beat import Scheduler
from awa_beat._beat.node import NodeHooks

IDLE_SCHEDULE = {
    "yearly": {"task": "acc.record", "args": ["yearly"],
               "schedule": crontab(minute=0, hour=0, day_of_month=1, month_of_year=1)},
}

BUSY_SCHEDULE = {
    "every-second": {"task": "acc.record", "schedule": 1.0, "args": [1, "one"],
                     "kwargs": {"k": [1, 2]},
                     "options": {"priority": 3, "headers": {"x-origin": "awa-beat"}}},
    "every-2s": {"task": "acc.record", "schedule": 2.0, "args": [2],
                 "options": {"awa_beat": {"missed_fire_policy": "catch_up"}}},
}

app = Celery("bridgeacc")
app.conf.update(
    result_expires=None,
    timezone="UTC",
    task_default_queue="bridgeacc",
    awa_beat_dispatch="celery",
    worker_prefetch_multiplier=1,
    beat_schedule=IDLE_SCHEDULE if os.environ.get("BRIDGEAPP_SCHEDULE") == "idle"
    else BUSY_SCHEDULE,
    **json.loads(os.environ.get("BRIDGEAPP_BROKER", '{"broker_url": "memory://"}')),
)


@app.task(name="acc.record", bind=True)
def record(self, *args, **kwargs) -> None:
    with open(os.environ["BRIDGEAPP_RECORD"], "a") as out:
        out.write(json.dumps({
            "id": self.request.id, "args": list(args), "kwargs": kwargs,
            "beat": bool(getattr(self.request, "celery_beat_task", None)
                         or (self.request.headers or {}).get("celery_beat_task")),
            "origin": getattr(self.request, "x-origin", None)
            or (self.request.headers or {}).get("x-origin"),
        }) + "\n")


class CrashingScheduler(Scheduler):
    """Dies (exit code 3) right after its first fire commits, before it publishes."""

    hooks = NodeHooks(after_fire=lambda result: os._exit(3))
