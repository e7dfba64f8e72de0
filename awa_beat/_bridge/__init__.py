"""The Celery dispatch bridge: it turns fired jobs into Celery task messages, at least once.

``awa.jobs`` is the outbox. A job whose ``metadata.celery.dispatch`` is ``"celery"``
stays ``available`` until the broker has accepted its message; then it is marked
``completed`` with its task id. This has two consequences:

* a crash between the fire's commit and the publish, or a broker outage, leaves the job
  pending, and whichever replica leads publishes it later (in fire order);
* a crash between the broker's acceptance and the mark republishes the message with the
  **same task id**, derived from (schedule name, fire time), so a republish is
  recognisable: delivery is at least once, never lost.

Celery itself builds the messages (``app.send_task`` into a producer that records
instead of sending), so their routing, headers and properties are exactly what Celery's
own beat sends, including the ``celery_beat_task`` header that Celery 5.7 adds. A
relative ``expires`` counts from the fire time. The messages are then published in
batches. On AMQP the bridge uses publisher confirms and waits for the broker's acks once
per batch rather than once per message; on other transports (Redis, filesystem, ...) a
publish that returns counts as accepted.

Each module has one concern:

* :mod:`.messages` derives task ids and builds the Celery message of a job row;
* :mod:`.publisher` holds the broker connection and publishes batches with confirms;
* :mod:`.amqp` makes property encoding and socket writes cheaper on py-amqp;
* :mod:`.outbox` holds :class:`Bridge`, which drains the outbox, marks jobs and purges
  them;
* :mod:`.dispatcher` holds :class:`Dispatcher`, which runs the bridge on a thread of its
  own, so that firing never waits on the broker.
"""

from __future__ import annotations

from .dispatcher import Dispatcher
from .messages import Prepared, fire_task_id
from .outbox import DEFAULT_RETENTION, Bridge

__all__ = ["DEFAULT_RETENTION", "Bridge", "Dispatcher", "Prepared", "fire_task_id"]
