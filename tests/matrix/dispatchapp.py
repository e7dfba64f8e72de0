"""Celery app of the matrix's dispatch cells: deployment ``proj``, every job published to
Celery (the dispatch bridge), one schedule that fires once a year. The database, the
endpoint's port and the broker (``DISPATCHAPP_BROKER``, a JSON object of Celery broker
settings) come from the environment.
"""

from __future__ import annotations

import json
import os

from celery import Celery

app = Celery("proj")
app.conf.update(
    timezone="UTC", result_expires=None, awa_beat_dispatch="celery",
    beat_schedule={"yearly": {"task": "proj.yearly", "schedule": "0 0 1 1 *"}},
    **json.loads(os.environ.get("DISPATCHAPP_BROKER", '{"broker_url": "memory://"}')),
)
