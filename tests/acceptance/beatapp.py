"""The Celery app the acceptance tests run with `celery beat -S awa_beat.Scheduler`.

Its beat_schedule is picked by $BEATAPP_SCHEDULE; the database and timings come from
the AWA_BEAT_* environment variables, as in a container.
"""

from __future__ import annotations

import os

from celery import Celery
from celery.schedules import crontab

SCHEDULES = {
    "ha": {
        "every-second": {"task": "acc.tick", "schedule": 1.0},
        "catch-up-3s": {"task": "acc.reconcile", "schedule": 3.0,
                        "options": {"awa_beat": {"missed_fire_policy": "catch_up"}}},
    },
    "bad": {
        "fine": {"task": "acc.tick", "schedule": 1.0},
        "broken": {"task": "acc.tick", "schedule": crontab(),
                   "options": {"awa_beat": {"timezone": "Mars/Olympus"}}},
    },
}

app = Celery("acc")
app.conf.update(
    broker_url="memory://",
    result_expires=None,
    timezone="UTC",
    beat_schedule=SCHEDULES[os.environ.get("BEATAPP_SCHEDULE", "ha")],
)
