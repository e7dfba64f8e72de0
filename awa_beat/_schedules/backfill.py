"""The fire times of a backfill: a schedule's calendar over a closed range. Pure: no clock,
no I/O.

A backfill (``awa-beat backfill``, :meth:`awa_beat.Schedules.backfill`) gives one job to
each fire time of the schedule's calendar in ``[start, end]``, as if it had fired then.
The calendar is the stored one (:func:`~awa_beat._schedules.fire_times.calendar_for`), so
every schedule type counts its fires here as it fires them, bounds included: no fire
before ``start=`` or after ``end=``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from awa_beat._schedules.fire_times import Calendar, fires_between

__all__ = ["BACKFILL_LIMIT", "BACKFILL_MAX_LIMIT", "OVERLAPS", "fires_in_range"]

#: Fire times one backfill inserts at most, unless it is given another limit.
BACKFILL_LIMIT = 100_000
#: The largest limit a backfill takes: one call is one transaction, which must stay short.
BACKFILL_MAX_LIMIT = 1_000_000
#: What a backfill does when the schedule has a run in progress: ``allow`` inserts its
#: jobs anyway, ``skip`` refuses and writes nothing.
OVERLAPS = ("allow", "skip")

_SECOND = timedelta(seconds=1)


def fires_in_range(calendar: Calendar, start: datetime, end: datetime, limit: int
                   ) -> list[datetime]:
    """Every fire of ``calendar`` in ``[start, end]`` (both aware, both ends included),
    in order, at most ``limit`` of them. A caller that passes its limit plus one learns
    whether the range holds more without counting them all."""
    # Fires are whole seconds: the search starts a second early and drops what falls
    # before ``start`` (a start with a fraction of a second).
    return [f for f in fires_between(calendar, start - _SECOND, end, limit + 1)
            if f >= start][:limit]
