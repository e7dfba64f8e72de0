"""Moving an existing Celery schedule into ``awa.cron_jobs`` (``awa-beat import``).

There are four sources, with one module each. Each source is read into a list of
results, one per entry found: an :class:`Imported` (a validated
:class:`~awa_beat._schedules.spec.ScheduleSpec`, the cursor and the pause) or a
:class:`NotCarried` (the name and the reason). Nothing is ever dropped silently.

* :mod:`.celery_app` reads a Celery app's ``beat_schedule`` (:func:`load_app`,
  :func:`from_beat_schedule`). No run is known, so the cursor is "now", as in a normal
  sync.
* :mod:`.django` reads django-celery-beat's tables with plain SQL (:func:`read_django`,
  :func:`from_django`).
* :mod:`.redbeat` reads RedBeat's hashes in Redis (:func:`read_redbeat`,
  :func:`from_redbeat`) and decodes them as celery-redbeat 2.4's ``RedBeatJSONDecoder``
  does.
* :mod:`.schedule_file` reads a ``celerybeat-schedule`` shelve file that Celery's
  ``PersistentScheduler`` wrote (:func:`read_schedule_file`, :func:`from_schedule_file`).

:mod:`.common` holds what the sources share (the result types, :func:`convert`,
:func:`utc_cursor`), and :mod:`.planning` compares the results with the stored rows
(:func:`plan`). Reading does I/O, while every ``from_*`` function and :func:`plan` is
pure.
"""

from __future__ import annotations

from .celery_app import from_beat_schedule, load_app
from .common import (
    BACKEND_CLEANUP,
    BACKEND_CLEANUP_REASON,
    Imported,
    NotCarried,
    Result,
    convert,
    dedupe,
    utc_cursor,
)
from .django import DJANGO_PAUSED_BY, DjangoTables, from_django, read_django
from .planning import ABSENT, DEFINITION, Plan, plan
from .redbeat import (
    REDBEAT_PAUSED_BY,
    RedBeatRecord,
    decode_redbeat,
    from_redbeat,
    read_redbeat,
    redact_url,
)
from .schedule_file import ScheduleFile, from_schedule_file, naive_zone, read_schedule_file

__all__ = [
    "ABSENT", "BACKEND_CLEANUP", "BACKEND_CLEANUP_REASON", "DEFINITION", "DJANGO_PAUSED_BY",
    "REDBEAT_PAUSED_BY", "DjangoTables", "Imported", "NotCarried", "Plan", "RedBeatRecord",
    "Result", "ScheduleFile", "convert", "decode_redbeat", "dedupe", "from_beat_schedule",
    "from_django", "from_redbeat", "from_schedule_file", "load_app", "naive_zone", "plan",
    "read_django", "read_redbeat", "read_schedule_file", "redact_url", "utc_cursor",
]
