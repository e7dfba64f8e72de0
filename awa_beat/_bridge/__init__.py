"""The Celery dispatch bridge: fired jobs become Celery task messages, at least once.

``awa.jobs`` is the outbox. A job whose ``metadata.celery.dispatch`` is ``"celery"``
stays ``available`` until the broker has accepted its message; then it is marked
``completed`` with its task id. So:

* a crash between the fire's commit and the publish, or a broker outage, leaves the job
  pending, and whichever replica leads publishes it later (in fire order);
* a crash between the broker's acceptance and the mark republishes the message with the
  **same task id**, derived from (schedule name, fire time), so a republish is
  recognisable: delivery is at least once, never lost.

Messages are built by Celery itself (``app.send_task`` into a producer that records
instead of sending), so routing, headers and properties are exactly what Celery's own
beat sends, including the ``celery_beat_task`` header Celery 5.7 adds; a relative
``expires`` counts from the fire time. They are then published in batches: on AMQP
with publisher confirms, waiting for the broker's acks once per batch rather than once
per message; on other transports (Redis, filesystem, ...) a returned publish is an
accepted one.

The modules, one concern each:

* :mod:`.messages`: task ids, and the Celery message of a job row;
* :mod:`.publisher`: the broker connection, publishing batches with confirms;
* :mod:`.amqp`: cheaper property encoding and socket writes on py-amqp;
* :mod:`.outbox`: :class:`Bridge`, draining the outbox, marking and purging;
* :mod:`.dispatcher`: :class:`Dispatcher`, the bridge on a thread of its own, so that
  firing never waits on the broker.
"""

from __future__ import annotations

from .dispatcher import Dispatcher
from .messages import Prepared, fire_task_id
from .outbox import DEFAULT_RETENTION, Bridge

__all__ = ["DEFAULT_RETENTION", "Bridge", "Dispatcher", "Prepared", "fire_task_id"]
