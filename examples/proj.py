"""A small Celery app with a realistic beat_schedule, run by awa-beat.

    celery -A examples.proj worker -B -S awa_beat.Scheduler -l info

runs a worker with an embedded awa-beat; `celery -A examples.proj beat -S
awa_beat.Scheduler` runs beat alone (start several: one leads). With no
AWA_BEAT_DATABASE_URL set, awa-beat starts an embedded PostgreSQL in ./.awa-beat/pgdata;
with no CELERY_BROKER_URL, the broker is kombu's filesystem transport (no server).
See fired jobs with `python -m examples.show_jobs`.
"""

from __future__ import annotations

import os
from datetime import timedelta

from celery import Celery
from celery.schedules import crontab

BROKER_DIR = os.path.join(".awa-beat", "broker")
os.makedirs(BROKER_DIR, exist_ok=True)  # the filesystem transport's message folder

app = Celery("proj")
app.conf.update(
    # Beat only writes jobs to PostgreSQL; the broker matters to workers (and to the
    # dispatch bridge). The filesystem transport needs no server.
    broker_url=os.environ.get("CELERY_BROKER_URL", "filesystem://"),
    broker_transport_options={"data_folder_in": BROKER_DIR, "data_folder_out": BROKER_DIR,
                              "control_folder": os.path.join(BROKER_DIR, "control")},
    timezone="Europe/London",
    # Fired jobs are published to the broker, so Celery workers run them.
    awa_beat_dispatch="celery",
    worker_hijack_root_logger=True,
    beat_schedule={
        # Every 10 seconds, on a grid anchored at the epoch: the same on every replica.
        "heartbeat": {
            "task": "proj.heartbeat",
            "schedule": 10.0,
        },
        # Weekdays at 07:30 London time (the app's time zone), with apply_async options.
        "morning-report": {
            "task": "proj.report",
            "schedule": crontab(minute=30, hour=7, day_of_week="mon-fri"),
            "kwargs": {"kind": "daily"},
            "options": {"queue": "reports", "expires": 3600},
        },
        # Every 15 seconds, and after downtime every missed run is replayed in order.
        "reconcile": {
            "task": "proj.reconcile",
            "schedule": timedelta(seconds=15),
            "options": {"awa_beat": {"missed_fire_policy": "catch_up"}},
        },
        # The first Monday of each month at 09:00 in New York.
        "monthly-invoices": {
            "task": "proj.invoices",
            "schedule": crontab(minute=0, hour=9, day_of_week="mon", day_of_month="1-7"),
            "args": ["us"],
            "options": {"awa_beat": {"timezone": "America/New_York", "priority": 1}},
        },
        # Awa's own cron dialect for what crontab cannot say: the last day of the month.
        "month-end": {
            "task": "proj.close_books",
            "schedule": "0 0 18 L * *",
            "options": {"awa_beat": {"timezone": "Asia/Tokyo"}},
        },
    },
)


@app.task(name="proj.heartbeat")
def heartbeat() -> str:
    print("heartbeat: beat fired me, a Celery worker ran me")
    return "ok"


@app.task(name="proj.report")
def report(kind: str) -> str:
    return f"{kind} report"


@app.task(name="proj.reconcile")
def reconcile() -> None:
    pass


@app.task(name="proj.invoices")
def invoices(region: str) -> str:
    return region


@app.task(name="proj.close_books")
def close_books() -> None:
    pass
