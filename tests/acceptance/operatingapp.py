"""Celery app for the buffer_one and pause-on-failure acceptance test: a real beat fires,
a real worker runs the tasks and records their outcomes (AWA_BEAT_TRACK_OUTCOMES=1,
which the test sets for both).

Configured from the environment: OPERATINGAPP_BROKER (a JSON object of Celery broker
settings), OPERATINGAPP_RECORD (a file each task appends one JSON line per run to).
"""

from __future__ import annotations

import json
import os
import time

from celery import Celery

SCHEDULE = {
    # Fails every run: paused by awa-beat after three in a row.
    "flaky": {"task": "op.fail", "schedule": 1.0,
              "options": {"awa_beat": {"pause_after_failures": 3}}},
    # Runs 2.5 s, fired every second: one fire waits for each run, the rest are skipped.
    "held": {"task": "op.slow", "schedule": 1.0,
             "options": {"awa_beat": {"overlap": "buffer_one", "max_runtime": 30}}},
}

app = Celery("operatingacc")
app.conf.update(
    timezone="UTC",
    task_default_queue="operatingacc",
    awa_beat_dispatch="celery",
    worker_prefetch_multiplier=1,
    beat_schedule=SCHEDULE,
    **json.loads(os.environ.get("OPERATINGAPP_BROKER", '{"broker_url": "memory://"}')),
)


def _record(task: object, what: str) -> None:
    with open(os.environ["OPERATINGAPP_RECORD"], "a") as out:
        out.write(json.dumps({"id": task.request.id, "what": what,  # type: ignore[attr-defined]
                              "at": time.time()}) + "\n")


@app.task(name="op.fail", bind=True)
def fail(self) -> None:
    _record(self, "fail")
    raise ValueError("boom")


@app.task(name="op.slow", bind=True)
def slow(self) -> None:
    _record(self, "slow-start")
    time.sleep(2.5)
    _record(self, "slow-end")
