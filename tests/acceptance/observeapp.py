"""Celery app of the observability acceptance tests: a schedule firing every second.

``OBSERVEAPP_STUCK`` names a file: while it exists, the loop of a beat run with
``-S tests.acceptance.observeapp.StuckScheduler`` blocks right after each fire, as a
loop stuck on a socket would. The database, the endpoint's port and the timings come
from the AWA_BEAT_* environment variables.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from celery import Celery

from awa_beat import Scheduler
from awa_beat._beat.node import NodeHooks

app = Celery("observe")
app.conf.update(
    broker_url="memory://",
    result_expires=None,
    timezone="UTC",
    beat_schedule={"every-second": {"task": "obs.tick", "schedule": 1.0}},
)


def _block_while_flagged(result: object) -> None:
    flag = Path(os.environ["OBSERVEAPP_STUCK"])
    while flag.exists():
        time.sleep(0.05)


class StuckScheduler(Scheduler):
    """Blocks its loop after a fire while the file ``$OBSERVEAPP_STUCK`` exists."""

    hooks = NodeHooks(after_fire=_block_while_flagged)
