"""Celery app for the outcome acceptance tests: a beat fires, a worker records outcomes.

Configured from the environment: OUTCOMESAPP_BROKER (a JSON object of Celery broker
settings), OUTCOMESAPP_RECORD (a file each task appends one JSON line per run to).
The worker records outcomes because of AWA_BEAT_TRACK_OUTCOMES=1 alone, which the
tests set: awa-beat's worker_init hook, loaded with the ``celery`` command, does the rest.
"""

from __future__ import annotations

import json
import os
import time

from celery import Celery

SCHEDULE = {
    "ok": {"task": "oc.run", "schedule": 1.0, "args": ["ok"]},
    "fail": {"task": "oc.fail", "schedule": 2.0},
    "retry": {"task": "oc.retry", "schedule": 3.0},
    "revoked": {"task": "oc.run", "schedule": 2.0, "args": ["revoked"]},
    "once": {"task": "oc.run", "schedule": 2.0, "args": ["once"],
             "options": {"awa_beat": {"at_most_once": True}}},
    "slow": {"task": "oc.slow", "schedule": 1.0,
             "options": {"awa_beat": {"overlap": "skip", "max_runtime": 5}}},
}

app = Celery("outcomesacc")
app.conf.update(
    timezone="UTC",
    task_default_queue="outcomesacc",
    awa_beat_dispatch="celery",
    worker_prefetch_multiplier=1,
    beat_schedule=SCHEDULE,
    **json.loads(os.environ.get("OUTCOMESAPP_BROKER", '{"broker_url": "memory://"}')),
)


def _record(task: object, what: str, **more: object) -> None:
    with open(os.environ["OUTCOMESAPP_RECORD"], "a") as out:
        out.write(json.dumps({"id": task.request.id, "what": what,  # type: ignore[attr-defined]
                              "at": time.time(), **more}) + "\n")


@app.task(name="oc.run", bind=True)
def run(self, what: str) -> None:
    _record(self, what)


@app.task(name="oc.fail", bind=True)
def fail(self) -> None:
    _record(self, "fail")
    raise ValueError("boom")


@app.task(name="oc.retry", bind=True, max_retries=2)
def retry(self) -> None:
    _record(self, "retry", retries=self.request.retries)
    if self.request.retries == 0:
        raise self.retry(countdown=0.2)


@app.task(name="oc.slow", bind=True)
def slow(self) -> None:
    _record(self, "slow-start")
    time.sleep(2.5)
    _record(self, "slow-end")
