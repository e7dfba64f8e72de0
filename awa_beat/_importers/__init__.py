"""Moving an existing Celery schedule into ``awa.cron_jobs`` (``awa-beat import``).

Four sources, one module each, each read into a list of results, one per entry found:
:class:`Imported` (a validated :class:`~awa_beat._schedules.spec.ScheduleSpec`, the cursor, the
pause) or :class:`NotCarried` (the name and why). Nothing is ever dropped silently.

* :mod:`.celery_app`: a Celery app's ``beat_schedule`` (:func:`load_app`,
  :func:`from_beat_schedule`); no run is known, so the cursor is "now", as a normal sync;
* :mod:`.django`: django-celery-beat's tables, read with plain SQL (:func:`read_django`,
  :func:`from_django`);
* :mod:`.redbeat`: RedBeat's hashes in Redis (:func:`read_redbeat`, :func:`from_redbeat`),
  decoded as celery-redbeat 2.4's ``RedBeatJSONDecoder`` does;
* :mod:`.schedule_file`: a ``celerybeat-schedule`` shelve file written by Celery's
  ``PersistentScheduler`` (:func:`read_schedule_file`, :func:`from_schedule_file`).

:mod:`.common` holds what they share (the result types, :func:`convert`,
:func:`utc_cursor`); :mod:`.planning` compares the results with the stored rows
(:func:`plan`). Reading is I/O; every ``from_*`` function and :func:`plan` is pure.
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
