"""The Celery app a matrix test runs `celery beat -S awa_beat.Scheduler` with: the
catalogue's config-owned entries as its beat_schedule, deployment ``matrix``; the database
comes from $AWA_BEAT_DATABASE_URL."""

from __future__ import annotations

from celery import Celery

from tests.matrix.catalogue import CATALOGUE, DEPLOYMENT, beat_schedule

app = Celery(DEPLOYMENT)
app.conf.update(
    broker_url="memory://",
    timezone="UTC",
    beat_schedule=beat_schedule(e for e in CATALOGUE.values() if e.owner == "config"),
)
