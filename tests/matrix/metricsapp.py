"""Celery app of the matrix's metrics cells: the whole catalogue as its ``beat_schedule``
(deployment :data:`~tests.matrix.catalogue.DEPLOYMENT`, dispatch to Awa) plus
:data:`FAILING`, a schedule whose runs the test fails as an Awa worker whose task raises
would. The database and the endpoint's port come from the AWA_BEAT_* environment.
"""

from __future__ import annotations

from celery import Celery

from tests.matrix.catalogue import DEPLOYMENT, beat_schedule

#: Fires every 10 s; overdue once a fire has not succeeded within a second.
FAILING = "failing"
SCHEDULE = {**beat_schedule(),
            FAILING: {"task": "matrix.fail", "schedule": 10.0,
                      "options": {"awa_beat": {"deadline": 1}}}}

app = Celery(DEPLOYMENT)
app.conf.update(broker_url="memory://", result_expires=None, timezone="UTC",
                awa_beat_dispatch="awa", beat_schedule=SCHEDULE)
