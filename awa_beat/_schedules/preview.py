"""A calendar's next fires, with its daylight-saving changes marked, and what to watch for.

The module is pure, like :mod:`awa_beat._schedules.fire_times`: the current time is passed
in, and the fires are those that :func:`~awa_beat._schedules.fire_times.next_fire_after`
steps through, so a preview lists exactly what the evaluator fires.

Each fire is marked when a change of the zone's UTC offset touches it:

* ``gap``: clocks went forward, and the wall time the calendar names did not exist that
  day, so the fire moved (Awa's calendars to the end of the gap, Celery's ``dst=celery``
  crontab by the length of the gap). Only the wall-clock calendars (cron, ``@crontab``)
  name a wall time; the others name instants.
* ``fold``: clocks went back, and the fire's wall time happened twice; the mark says in
  which pass it fires.
* ``offset``: the UTC offset changed since the fire before (or since now).

The warnings look one year ahead (or to the end of the preview, if later) at every
change of the zone's offset: a calendar that fires the same wall time twice or moves a
fire in a change, one that never fires, and one that fires every second (the most often
a calendar can fire, since fires are whole seconds, so a beat that falls behind by a
pass has a backlog at once).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any

from ..errors import ValidationError
from .cron import load_timezone
from .describe import describe, offset_text
from .fire_times import Calendar, CronCalendar, calendar_for, next_fire_after, run_times
from .markers import BoundedCalendar, CeleryCrontabCalendar

UTC = timezone.utc
#: How many fires a preview lists when it is given no count.
DEFAULT_COUNT = 10
#: The most fires one preview lists, with a count or until an instant.
MAX_COUNT = 1000
#: How far ahead the warnings look for changes of the zone's offset.
HORIZON = timedelta(days=366)
#: How many fires around one change of the offset the warnings step through. A calendar
#: with more fires than that in a change (one firing every second) is reported for its
#: rate, and its steps in the change are not listed.
WINDOW_FIRES = 20_000
#: How many fires are stepped through to find the shortest time between two.
RATE_SAMPLE = 20
_SECOND = timedelta(seconds=1)


@dataclass(frozen=True)
class PreviewFire:
    """One fire to come."""

    at: datetime
    """The fire time, in UTC."""
    local: datetime
    """The same instant on the wall clock of the schedule's zone."""
    mark: str = ""
    """``gap``, ``fold`` or ``offset`` when a change of the zone's UTC offset touches
    this fire (see the module's notes), or an empty string."""
    note: str = ""
    """What the mark means for this fire, in words."""
    run_at: datetime | None = None
    """When its job runs under the schedule's jitter (the fire time plus the delay that
    the firing rules give it), in UTC; None without a jitter."""


@dataclass(frozen=True)
class Preview:
    """A schedule's next fires (:class:`PreviewFire`), what they are in words, and what to
    watch for. Returned by ``Schedules.preview``, ``awa-beat preview`` and shown by the
    dashboard and the Django admin."""

    cron_expr: str
    """The calendar as stored (an Awa cron expression or one of awa-beat's markers)."""
    timezone: str
    description: str | None
    """The calendar in words."""
    fires: tuple[PreviewFire, ...]
    warnings: tuple[str, ...] = ()
    """Calendars that fire twice or move a fire in a DST change, never fire, or fire
    every second."""
    notices: tuple[str, ...] = ()
    """What the schedule's state does to the fires: paused, retired, runs left."""
    more: bool = False
    """Whether the calendar fires again after the last fire listed."""
    start: datetime | None = field(default=None)
    """The instant after which the fires are listed."""


def preview(cron_expr: str, zone: str, now: datetime, *, count: int | None = None,
            until: datetime | None = None, runs_left: int | None = None,
            name: str = "preview", stored: bool = False) -> Preview:
    """Return the fires of ``cron_expr`` in ``zone`` strictly after ``now``: ``count`` of
    them (default :data:`DEFAULT_COUNT`), or all those up to ``until`` (inclusive, at most
    :data:`MAX_COUNT`), and no more than ``runs_left`` when the schedule has a run limit.
    For a ``stored`` schedule under a jitter, each fire carries when its job runs
    (``run_at``), which depends on the schedule's ``name``.

    Raises :class:`~awa_beat.errors.ValidationError` naming the field (``count``,
    ``until``) for a count out of range, both given, or an ``until`` not after ``now``,
    and the calendar's own error (:class:`~awa_beat.errors.ScheduleError`) for a bad
    expression or zone. ``name`` is the schedule named in those errors.
    """
    if count is not None and until is not None:
        raise ValidationError([(name, "until", "give a count or an until, not both")])
    if count is not None and not (isinstance(count, int) and 1 <= count <= MAX_COUNT):
        raise ValidationError([(name, "count", f"must be a whole number from 1 to {MAX_COUNT}"
                                f", not {count!r}")])
    if until is not None:
        if until.tzinfo is None:
            raise ValidationError([(name, "until", "must carry a UTC offset")])
        if until <= now:
            raise ValidationError([(name, "until", f"must be after now ({_utc_text(now)})")])
    calendar = calendar_for(cron_expr, zone)
    tz = load_timezone(zone)
    limit = MAX_COUNT if until is not None else (count or DEFAULT_COUNT)
    if runs_left is not None:
        limit = min(limit, runs_left)
    fires: list[PreviewFire] = []
    previous = now.astimezone(tz).utcoffset()
    wanted = wall_matcher(calendar)
    t = now
    while len(fires) < limit:
        nxt = next_fire_after(calendar, t)
        if nxt is None or (until is not None and nxt > until):
            break
        fires.append(mark_fire(nxt, tz, zone, previous, wanted))
        previous, t = nxt.astimezone(tz).utcoffset(), nxt
    runs = run_times(name, calendar, [f.at for f in fires]) if stored else None
    if runs is not None:
        fires = [replace(f, run_at=r) for f, r in zip(fires, runs, strict=True)]
    after = next_fire_after(calendar, t)
    retires = runs_left is not None and len(fires) >= runs_left
    last = fires[-1].at if fires else now
    warnings = _warnings(calendar, tz, zone, now, max(last, now + HORIZON), wanted)
    notices = []
    if until is not None and len(fires) >= MAX_COUNT and not retires \
            and after is not None and after <= until:
        notices.append(f"only the first {MAX_COUNT} fires up to {_utc_text(until)} "
                       "are listed")
    if retires and fires:
        notices.append(f"{_runs(len(fires))} left: it retires after the fire at "
                       f"{_utc_text(fires[-1].at)}")
    return Preview(cron_expr, zone, describe(cron_expr), tuple(fires), tuple(warnings),
                   tuple(notices), after is not None and not retires, now)


def _runs(n: int) -> str:
    return "1 run" if n == 1 else f"{n} runs"


def _utc_text(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") + " UTC"


def _wall(t: datetime, tz: tzinfo) -> datetime:
    return t.astimezone(tz).replace(tzinfo=None)


def wall_matcher(calendar: Calendar) -> Callable[[datetime], bool] | None:
    """Return whether a wall time is one the calendar names, for the calendars that name
    wall times (cron, ``@crontab``), or None for those that name instants."""
    while isinstance(calendar, BoundedCalendar):
        calendar = calendar.inner
    if isinstance(calendar, CronCalendar):
        return calendar.expr.matches
    if isinstance(calendar, CeleryCrontabCalendar):
        tab: Any = calendar.tab
        return lambda wall: wall.hour in tab.hour and wall.minute in tab.minute
    return None


def _transition_before(t: datetime, tz: tzinfo) -> datetime:
    """Return the first instant of the UTC offset that ``tz`` has at ``t``: the change
    within the day before ``t`` (the search runs on whole seconds)."""
    offset = t.astimezone(tz).utcoffset()
    lo, hi = t - timedelta(days=1), t
    if lo.astimezone(tz).utcoffset() == offset:
        return t
    while (hi - lo) > _SECOND:
        mid = lo + (hi - lo) / 2
        mid = mid.replace(microsecond=0)
        if mid.astimezone(tz).utcoffset() == offset:
            hi = mid
        else:
            lo = mid
    return hi


def _gap_text(change: datetime, tz: tzinfo, zone: str) -> str:
    """Describe the wall times skipped at the change: ``02:00-03:00 is skipped on
    2027-03-14 in America/New_York``."""
    before = change.astimezone(tz).utcoffset() or timedelta()
    earlier = (change - _SECOND).astimezone(tz).utcoffset() or timedelta()
    end = _wall(change, tz)
    start = end - (before - earlier)
    return f"{start:%H:%M}-{end:%H:%M} is skipped on {end:%Y-%m-%d} in {zone}"


def fold_pass(t: datetime, tz: tzinfo) -> int | None:
    """Return 1 or 2 when ``t``'s wall time happens twice in ``tz`` (the pass ``t`` is
    in), else None."""
    wall = _wall(t, tz)
    first = wall.replace(tzinfo=tz, fold=0).utcoffset()
    second = wall.replace(tzinfo=tz, fold=1).utcoffset()
    if first == second:
        return None
    return 1 if t.astimezone(tz).utcoffset() == first else 2


def mark_fire(t: datetime, tz: tzinfo, zone: str, previous: timedelta | None,
          wanted: Callable[[datetime], bool] | None) -> PreviewFire:
    local = t.astimezone(tz)
    offset = local.utcoffset()
    wall = local.replace(tzinfo=None)
    change = (f"UTC offset {offset_text(previous)} -> {offset_text(offset)}"
              if offset != previous else "")
    if wanted is not None and not wanted(wall):
        moved_at = _transition_before(t, tz)
        return PreviewFire(t, local, "gap", f"moved by the DST gap: "
                           f"{_gap_text(moved_at, tz, zone)}; fires at {wall:%H:%M:%S}"
                           + (f" ({change})" if change else ""))
    fold = fold_pass(t, tz)
    if fold is not None:
        note = (f"in the repeated hour: {wall:%H:%M:%S} happens twice on {wall:%Y-%m-%d} "
                f"in {zone}; this fire is in the {'first' if fold == 1 else 'second'} pass "
                f"(UTC offset {offset_text(offset)})")
        return PreviewFire(t, local, "fold", note)
    if change:
        return PreviewFire(t, local, "offset", "DST: " + change)
    return PreviewFire(t, local)


def _changes(tz: tzinfo, start: datetime, end: datetime) -> list[datetime]:
    """Return every instant in ``(start, end]`` at which ``tz``'s UTC offset changes,
    found day by day and then to the second."""
    found: list[datetime] = []
    t = start
    offset = t.astimezone(tz).utcoffset()
    while t < end:
        nxt = min(t + timedelta(days=1), end)
        o = nxt.astimezone(tz).utcoffset()
        if o != offset:
            found.append(_transition_before(nxt, tz))
            offset = o
        t = nxt
    return found


def _warnings(calendar: Calendar, tz: tzinfo, zone: str, now: datetime, horizon: datetime,
              wanted: Callable[[datetime], bool] | None) -> list[str]:
    first = next_fire_after(calendar, now)
    if first is None:
        return [f"never fires: its calendar has no fire time after {_utc_text(now)}"]
    warnings = []
    shortest = _shortest_step(calendar, first)
    if shortest is not None and shortest <= 1:
        warnings.append("fires every second, the most often a calendar can fire: a beat "
                        "that falls behind by one pass has a backlog at once (prefer an "
                        "interval of a few seconds or more)")
    twice: str | None = None
    moved: str | None = None
    for change in _changes(tz, now, horizon):
        before = (change - _SECOND).astimezone(tz).utcoffset() or timedelta()
        after = change.astimezone(tz).utcoffset() or timedelta()
        size = abs(after - before)
        fires = _fires_in(calendar, change - size - timedelta(minutes=1),
                          change + size + timedelta(minutes=1))
        if fires is None:
            continue
        if moved is None and wanted is not None:
            for t in fires:
                if not wanted(_wall(t, tz)):
                    moved = (f"moves a fire in a DST change: {_gap_text(change, tz, zone)}, "
                             f"and the fire moves to {_wall(t, tz):%H:%M:%S} "
                             f"({_utc_text(t)})")
                    break
        if twice is None:
            seen: dict[datetime, datetime] = {}
            for t in fires:
                wall = _wall(t, tz)
                if wall in seen:
                    twice = (f"fires twice in a DST change: {wall:%Y-%m-%d %H:%M:%S} "
                             f"happens twice in {zone}, and it fires at "
                             f"{_utc_text(seen[wall])} and at {_utc_text(t)}")
                    break
                seen[wall] = t
    warnings += [w for w in (twice, moved) if w is not None]
    return warnings


def _shortest_step(calendar: Calendar, first: datetime) -> float | None:
    """Return the fewest seconds between two of the first :data:`RATE_SAMPLE` fires."""
    shortest: float | None = None
    t = first
    for _ in range(RATE_SAMPLE):
        nxt = next_fire_after(calendar, t)
        if nxt is None:
            break
        step = (nxt - t).total_seconds()
        shortest = step if shortest is None else min(shortest, step)
        if shortest <= 1:
            break
        t = nxt
    return shortest


def _fires_in(calendar: Calendar, start: datetime, end: datetime) -> list[datetime] | None:
    """Return the fires in ``(start, end]``, or None when there are more than
    :data:`WINDOW_FIRES`."""
    fires: list[datetime] = []
    t = start
    while True:
        nxt = next_fire_after(calendar, t)
        if nxt is None or nxt > end:
            return fires
        if len(fires) >= WINDOW_FIRES:
            return None
        fires.append(nxt)
        t = nxt

