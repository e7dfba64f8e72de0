"""The Celery app of benchmarks/chaos/chaos.py: beat replicas publish, one worker records.

Configured from the environment, as in a container:

* ``CHAOSAPP_BROKER``: the broker URL (the beats get the harness's proxy, the worker
  the broker itself, so that only beat's side of the broker is faulted);
* ``CHAOSAPP_QUEUE``: the queue, unique per run;
* ``CHAOSAPP_RECORD``: the file the worker appends one JSON line per task it runs to
  (task id, args, when, which process);
* ``CHAOSAPP_DIE_BEFORE_MARK``: a flag file; the beat process that next has a batch
  accepted by the broker takes it (deletes it) and dies before marking the batch
  published (the die-before-mark fault), so the next leader publishes it again;
* ``AWA_BEAT_*``: the database URL and awa-beat's timings (and, for the worker under
  ``--at-most-once``, outcome tracking and at-most-once).
"""

from __future__ import annotations

import json
import os
import time

from celery import Celery

#: name -> (period in seconds, missed-fire policy). The coalesce schedule shows skipped
#: seconds; the catch_up ones must have every fire time, whatever happened.
SCHEDULES = {
    "chaos-1s": (1, "coalesce"),
    "chaos-2s": (2, "catch_up"),
    "chaos-3s": (3, "catch_up"),
}

_DIE_FLAG = os.environ.get("CHAOSAPP_DIE_BEFORE_MARK")
if _DIE_FLAG:
    from awa_beat._db.outbox import OutboxStore

    _mark_published = OutboxStore.mark_published

    def _die_before_mark(self: OutboxStore, ids: object, task_ids: object) -> int:
        try:
            os.unlink(_DIE_FLAG)  # one process takes the flag
        except FileNotFoundError:
            return _mark_published(self, ids, task_ids)  # type: ignore[arg-type]
        os._exit(9)

    OutboxStore.mark_published = _die_before_mark  # type: ignore[method-assign]

app = Celery("chaos")
app.conf.update(
    broker_url=os.environ.get("CHAOSAPP_BROKER", "memory://"),
    result_expires=None,
    timezone="UTC",
    task_default_queue=os.environ.get("CHAOSAPP_QUEUE", "chaos"),
    awa_beat_dispatch="celery",
    worker_prefetch_multiplier=1,
    beat_schedule={
        name: {"task": "chaos.record", "schedule": float(period), "args": [name],
               "options": {"awa_beat": {"missed_fire_policy": policy}}}
        for name, (period, policy) in SCHEDULES.items()
    },
)


@app.task(name="chaos.record", bind=True)
def record(self, *args: object) -> None:
    line = json.dumps({"id": self.request.id, "args": list(args), "t": time.time(),
                       "pid": os.getpid()})
    # One write of one line in append mode: a reader never sees half a record.
    with open(os.environ["CHAOSAPP_RECORD"], "a") as out:
        out.write(line + "\n")
