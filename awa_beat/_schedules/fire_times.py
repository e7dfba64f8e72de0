"""Fire-time arithmetic shared with Awa's evaluator; no clock, no I/O.

Every function takes the current time as an argument and works on aware datetimes; every
returned instant is an aware UTC datetime with whole seconds.

* :class:`CronCalendar` steps exactly like croner 2.2.0's ``iter_from`` under chrono-tz: the
  search runs on the naive wall clock in the schedule's zone; a repeated wall time resolves to
  its earliest instant (so a schedule fires only in the first pass of a repeated hour); a wall
  time that does not exist moves forward second by second to the end of the gap, and a gap
  that is more than 3600 s away ends the iteration (the schedule stalls, as Awa's does).
* :class:`IntervalCalendar` fires every ``n`` seconds on a grid anchored at the Unix epoch.
* :func:`due_fires` ports Awa's ``compute_fire_times`` (``awa-worker/src/maintenance.rs``):
  first registration, ``coalesce`` and ``catch_up``.

Intervals share Awa's ``awa.cron_jobs`` table, so they are stored as text in ``cron_expr``:
:func:`interval_expression` writes an equivalent Awa cron expression when the grid is a cron
pattern in UTC, otherwise the marker ``@every {n}s``, which Awa rejects and therefore never
fires on a calendar of its own. The other schedules Awa cannot evaluate (solar, ``at``,
rrule, any bounded schedule) have markers and calendars of their own in
:mod:`awa_beat._schedules.markers`; :func:`calendar_for` reads them all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import date, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from hashlib import blake2b
from typing import Protocol, runtime_checkable

from awa_beat._schedules.cron import CronExpression, load_timezone, local_seconds
from awa_beat._schedules.cron import epoch_seconds as _epoch_seconds
from awa_beat._schedules.markers import is_marker, parse_marker
from awa_beat.errors import InvalidCronExpression

__all__ = [
    "CATCH_UP_LIMIT",
    "Calendar",
    "CronCalendar",
    "IntervalCalendar",
    "calendar_for",
    "can_fire_from",
    "catch_up_window",
    "due_fires",
    "every_seconds",
    "fires_between",
    "interval_expression",
    "jitter_delay",
    "jitter_of",
    "next_epoch_from",
    "next_fire_after",
    "run_times",
]

#: Awa's ``CRON_CATCH_UP_LIMIT``: at most this many catch-up fires per schedule per pass.
CATCH_UP_LIMIT = 1000

_UTC = timezone.utc
_EPOCH = datetime(1970, 1, 1, tzinfo=_UTC)
_SECOND = timedelta(seconds=1)
_MINUTE = timedelta(minutes=1)
_ORDINAL_1970 = date(1970, 1, 1).toordinal()
_MAX_EPOCH = (datetime(9999, 12, 31, 23, 59, 59, tzinfo=_UTC) - _EPOCH) // _SECOND
_EVERY = re.compile(r"@every ([1-9][0-9]*)s")
#: Awa's missed-fire policies.
POLICIES = ("coalesce", "catch_up")
# chrono's from_local_datetime + croner: a wall time in a gap is moved forward by at most
# this many seconds; further than that the search fails.
_GAP_STEPS = 3600

# Zones with one fixed offset for all time, so wall time is plain arithmetic.
_FIXED_ZONES = frozenset(
    {
        "UTC", "Etc/UTC", "UCT", "Etc/UCT", "Universal", "Etc/Universal", "Zulu", "Etc/Zulu",
        "GMT", "Etc/GMT", "GMT0", "Etc/GMT0", "GMT+0", "Etc/GMT+0", "GMT-0", "Etc/GMT-0",
        "Greenwich", "Etc/Greenwich",
    }
)  # fmt: skip
_ETC_GMT = re.compile(r"Etc/GMT[+-]([0-9]|1[0-4])")


# What 3.11's fromisoformat reads past the seconds and 3.10's does not: a fraction of any
# length, "Z", and offsets without minutes or colon (PostgreSQL's and Awa's "+00").
_ISO_TAIL = re.compile(
    r"(?P<base>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?)(?P<frac>\.\d+)?"
    r"(?P<zone>Z|[+-]\d{2}(?::?\d{2})?)?")


def parse_iso(text: str) -> datetime:
    """``datetime.fromisoformat`` as Python 3.11 has it, on 3.10 too, for the instants
    Awa, PostgreSQL and the tests write: ``2026-12-03 09:00:18+00``,
    ``1970-01-01T00:00:07.5Z``. The offset is kept as given."""
    m = _ISO_TAIL.fullmatch(text)
    if m is None:
        return datetime.fromisoformat(text)
    frac, zone = m["frac"] or "", m["zone"] or ""
    if frac:
        frac = frac[:7].ljust(7, "0")  # microseconds; 3.11 also truncates past six digits
    if zone == "Z":
        zone = "+00:00"
    elif zone:
        digits = zone[1:].replace(":", "")
        zone = f"{zone[0]}{digits[:2]}:{digits[2:] or '00'}"
    return datetime.fromisoformat(m["base"] + frac + zone)


@runtime_checkable
class Calendar(Protocol):
    """A set of fire instants, stepped through like croner's iterator.

    Every fire is a whole second, so each calendar answers on epoch seconds
    (:meth:`next_epoch`), and the evaluator steps through every kind of calendar that one
    way. :meth:`next_from` is the same answer on datetimes, for callers that hold one.
    """

    def next_from(self, start: datetime, *, inclusive: bool = True) -> datetime | None:
        """The next fire at or after ``start`` (after, if not ``inclusive``), in UTC, or
        ``None`` when there is none. Sub-seconds of ``start`` are ignored."""
        ...

    def next_epoch(self, start: int, inclusive: bool = True) -> int | None:
        """:meth:`next_from` on whole epoch seconds: the epoch second of the next fire at
        or after ``start`` (after, if not ``inclusive``), or ``None``."""
        ...


def _fields(local: int) -> tuple[int, int, int, int, int, int]:
    """Wall-clock fields of ``local`` seconds since 1970-01-01 00:00:00 (no zone)."""
    days, secs = divmod(local, 86400)
    d = date.fromordinal(days + _ORDINAL_1970)
    h, rest = divmod(secs, 3600)
    mi, s = divmod(rest, 60)
    return d.year, d.month, d.day, h, mi, s


def _offset_seconds(delta: timedelta) -> int:
    return delta.days * 86400 + delta.seconds


def _fixed_offset(tz: tzinfo) -> int | None:
    """The zone's offset in seconds if it never changes, else ``None``."""
    try:
        return _FIXED_OFFSETS[tz]
    except KeyError:
        pass
    except TypeError:  # a tzinfo of another library that cannot be hashed
        return _find_fixed_offset(tz)
    if len(_FIXED_OFFSETS) >= _FIXED_OFFSETS_LIMIT:
        _FIXED_OFFSETS.clear()
    offset = _FIXED_OFFSETS[tz] = _find_fixed_offset(tz)
    return offset


# By zone object: a zone's calendars are made once per row when every row's is its own.
_FIXED_OFFSETS: dict[tzinfo, int | None] = {}
_FIXED_OFFSETS_LIMIT = 1024


def _find_fixed_offset(tz: tzinfo) -> int | None:
    offset: timedelta | None
    if isinstance(tz, timezone):
        offset = tz.utcoffset(None)
    else:
        key = getattr(tz, "key", None)
        if key is None or not (key in _FIXED_ZONES or _ETC_GMT.fullmatch(key)):
            return None
        offset = tz.utcoffset(datetime(2000, 1, 1))
    return None if offset is None else _offset_seconds(offset)


class CronCalendar:
    """An Awa cron schedule: ``expr`` evaluated on the wall clock of ``tz``."""

    __slots__ = ("_fixed", "expr", "tz")
    #: No catch-up window and no jitter: a marker that has them wraps its calendar in
    #: :class:`~awa_beat._schedules.markers.BoundedCalendar`, which carries them.
    window: float | None = None
    jitter: float | None = None

    def __init__(self, expr: CronExpression, tz: tzinfo) -> None:
        self.expr = expr
        self.tz = tz
        self._fixed = _fixed_offset(tz)

    def __repr__(self) -> str:
        return f"CronCalendar({self.expr.source!r}, {getattr(self.tz, 'key', self.tz)!r})"

    def next_from(self, start: datetime, *, inclusive: bool = True) -> datetime | None:
        """croner's ``find_next_occurrence(start, inclusive)``.

        The result can lie *before* ``start`` when ``start`` is in the second pass of a
        repeated hour: the wall time is found first and then resolved to its earliest instant,
        exactly as croner does. Use :func:`next_fire_after` for "the first fire after t".
        """
        found = self.next_epoch(_epoch_seconds(start), inclusive)
        return None if found is None else datetime.fromtimestamp(found, _UTC)

    def next_epoch(self, start: int, inclusive: bool = True) -> int | None:
        """:meth:`next_from` on whole epoch seconds."""
        try:
            found = self._next_epoch(start, inclusive)
        except (OverflowError, ValueError):
            return None  # wall time outside years 1-9999: past croner's limit anyway
        return found if found is None or found <= _MAX_EPOCH else None

    def _next_epoch(self, start: int, inclusive: bool) -> int | None:
        offset = self._fixed
        if offset is not None:
            local = start + offset if inclusive else start + offset + 1
            found = self.expr.next_fields(*_fields(local))
            return None if found is None else local_seconds(*found) - offset
        wall = _wall_at(self.tz, start)
        if inclusive:
            found = self.expr.next_fields(*wall)
        else:
            found = self.expr.next_fields(*_fields(local_seconds(*wall) + 1))
        return None if found is None else _earliest_at(self.tz, found)


# Rows that share a zone, but not a calendar, meet the same instants and wall times: a
# load with a calendar per row asks each zone the same two questions over and over, and
# the answers cost more than the search between them. Keyed by the zone object (one per
# name, kept by load_timezone), which is all the answers depend on beside the key.
_WALLS: dict[tuple[tzinfo, int], tuple[int, int, int, int, int, int]] = {}
_HOURS: dict[tuple[tzinfo, int, int, int, int], int | None] = {}
#: Instants (rows' cursors) whose wall time is remembered before the memo starts afresh.
WALL_MEMO_LIMIT = 4096
#: Wall hours whose offset is remembered before the memo starts afresh.
HOUR_MEMO_LIMIT = 16384
_UNKNOWN = object()


def _wall_at(tz: tzinfo, start: int) -> tuple[int, int, int, int, int, int]:
    """The wall-clock fields of epoch second ``start`` in ``tz``."""
    key = (tz, start)
    try:
        wall = _WALLS.get(key)
    except TypeError:  # a tzinfo of another library that cannot be hashed
        return _wall_fields(tz, start)
    if wall is None:
        wall = _wall_fields(tz, start)
        if len(_WALLS) >= WALL_MEMO_LIMIT:
            _WALLS.clear()
        _WALLS[key] = wall
    return wall


def _wall_fields(tz: tzinfo, start: int) -> tuple[int, int, int, int, int, int]:
    t = datetime.fromtimestamp(start, tz)
    return t.year, t.month, t.day, t.hour, t.minute, t.second


def _earliest_at(tz: tzinfo, wall: tuple[int, int, int, int, int, int]) -> int | None:
    """:func:`_resolve`, through the offset of the wall hour when it has one throughout."""
    y, mo, d, h, mi, s = wall
    key = (tz, y, mo, d, h)
    try:
        offset = _HOURS.get(key, _UNKNOWN)
    except TypeError:  # a tzinfo that cannot be hashed
        return _resolve(tz, wall)
    if offset is _UNKNOWN:
        offset = _hour_offset(tz, y, mo, d, h)
        if len(_HOURS) >= HOUR_MEMO_LIMIT:
            _HOURS.clear()
        _HOURS[key] = offset
    if offset is None:
        return _resolve(tz, wall)
    return local_seconds(y, mo, d, h, mi, s) - offset  # type: ignore[operator]


def _hour_offset(tz: tzinfo, y: int, mo: int, d: int, h: int) -> int | None:
    """The zone's offset all through wall hour ``h`` of that day, or ``None`` if the hour
    holds a change of offset (part of it skipped or repeated).

    Equal offsets at both ends of the hour, in both folds, mean no change within it:
    no zone changes its offset twice within an hour (tests/unit/test_cron.py checks
    every zone the tz database holds)."""
    first = datetime(y, mo, d, h, tzinfo=tz)
    last = datetime(y, mo, d, h, 59, 59, tzinfo=tz)
    offsets = {first.utcoffset(), first.replace(fold=1).utcoffset(),
               last.utcoffset(), last.replace(fold=1).utcoffset()}
    if len(offsets) != 1:
        return None
    return _offset_seconds(offsets.pop())  # type: ignore[arg-type]


def _resolve(tz: tzinfo, wall: tuple[int, int, int, int, int, int]) -> int | None:
    """chrono-tz's ``from_local_datetime`` as croner uses it: earliest instant of a
    repeated wall time; for a missing one, the first valid wall time up to 3600 s later."""
    local = local_seconds(*wall)
    dt = datetime(*wall, tzinfo=tz)
    before = _offset_seconds(dt.utcoffset())  # type: ignore[arg-type]
    after = _offset_seconds(dt.replace(fold=1).utcoffset())  # type: ignore[arg-type]
    if before >= after:
        # Equal: an ordinary time. Greater: clocks went back; fold=0 is the first pass.
        return local - before
    if _gap_offset(tz, local + _GAP_STEPS) is None:
        return None
    lo, hi = 1, _GAP_STEPS
    while lo < hi:
        mid = (lo + hi) // 2
        if _gap_offset(tz, local + mid) is None:
            lo = mid + 1
        else:
            hi = mid
    offset = _gap_offset(tz, local + lo)
    assert offset is not None
    return local + lo - offset


def _gap_offset(tz: tzinfo, local: int) -> int | None:
    """The offset of the earliest instant at wall time ``local``, ``None`` in a gap."""
    dt = datetime(*_fields(local), tzinfo=tz)
    before = _offset_seconds(dt.utcoffset())  # type: ignore[arg-type]
    after = _offset_seconds(dt.replace(fold=1).utcoffset())  # type: ignore[arg-type]
    return before if before >= after else None


class IntervalCalendar:
    """Fires at every instant ``t`` with ``(t - 1970-01-01T00:00:00Z) % seconds == 0``."""

    __slots__ = ("seconds",)
    #: No catch-up window and no jitter: a marker that has them wraps its calendar in
    #: :class:`~awa_beat._schedules.markers.BoundedCalendar`, which carries them.
    window: float | None = None
    jitter: float | None = None

    def __init__(self, seconds: int) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
            raise ValueError(f"an interval must be a whole number of seconds >= 1, not {seconds!r}")
        self.seconds = seconds

    def __repr__(self) -> str:
        return f"IntervalCalendar({self.seconds})"

    def next_from(self, start: datetime, *, inclusive: bool = True) -> datetime | None:
        """The first grid instant at or after ``start`` rounded down to the second (after,
        if not ``inclusive``), mirroring croner's truncation; ``None`` past the year 9999."""
        found = self.next_epoch(_epoch_seconds(start), inclusive)
        return None if found is None else datetime.fromtimestamp(found, _UTC)

    def next_epoch(self, start: int, inclusive: bool = True) -> int | None:
        """:meth:`next_from` on whole epoch seconds."""
        if not inclusive:
            start += 1
        n = self.seconds
        found = -(-start // n) * n
        return found if found <= _MAX_EPOCH else None


def interval_expression(seconds: int) -> str:
    """Text to store in ``awa.cron_jobs.cron_expr`` (with time zone ``UTC``) for an interval.

    When the epoch-anchored grid of ``seconds`` is exactly an Awa cron pattern in UTC, return
    that pattern, so an Awa leader sharing the table fires it on the same calendar. Otherwise
    return ``@every {seconds}s``, which Awa rejects, so it never fires it on another calendar.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
        raise ValueError(f"an interval must be a whole number of seconds >= 1, not {seconds!r}")
    if seconds < 60 and 60 % seconds == 0:
        return "* * * * * *" if seconds == 1 else f"*/{seconds} * * * * *"
    if seconds % 60 == 0 and seconds < 3600 and 60 % (seconds // 60) == 0:
        m = seconds // 60
        return "0 * * * * *" if m == 1 else f"0 */{m} * * * *"
    if seconds % 3600 == 0 and seconds < 86400 and 24 % (seconds // 3600) == 0:
        h = seconds // 3600
        return "0 0 * * * *" if h == 1 else f"0 0 */{h} * * *"
    if seconds == 86400:
        return "0 0 0 * * *"
    if seconds == 7 * 86400:
        return "0 0 0 * * 4"  # 1970-01-01 was a Thursday
    return f"@every {seconds}s"


def every_seconds(cron_expr: str) -> int | None:
    """The ``n`` of an ``@every {n}s`` marker (see :func:`interval_expression`), or
    ``None`` when ``cron_expr`` is not one."""
    match = _EVERY.fullmatch(cron_expr) if isinstance(cron_expr, str) else None
    return int(match.group(1)) if match is not None else None


def calendar_for(cron_expr: str, timezone: str, *, cache: bool = True) -> Calendar:
    """The calendar stored in a ``cron_expr`` / ``timezone`` pair: an Awa cron expression,
    ``@every {n}s``, or another of awa-beat's markers (:mod:`awa_beat._schedules.markers`: solar,
    ``at``, rrule, bounds). Raises :class:`~awa_beat.errors.ScheduleError` (such as
    :class:`InvalidCronExpression` or :class:`~awa_beat.errors.InvalidTimezone`).

    ``cache=False`` builds it afresh, for a caller that keeps its own (the engine's
    kinds): a table with a calendar per row would only churn the shared cache."""
    return _calendar_for(cron_expr, timezone) if cache else _new_calendar(cron_expr, timezone)


def catch_up_window(calendar: Calendar) -> float | None:
    """The catch-up window (seconds) that the calendar's marker carries, or None. Every
    calendar built here has the attribute; a calendar from elsewhere has none."""
    return getattr(calendar, "window", None)


def jitter_of(calendar: Calendar) -> float | None:
    """The jitter (seconds) that the calendar's marker carries, or None."""
    return getattr(calendar, "jitter", None)


def jitter_delay(name: str, fire_epoch: int, jitter: float, next_epoch: int | None) -> int:
    """The delay, in microseconds, after which the job of ``name``'s fire at epoch second
    ``fire_epoch`` runs, under a jitter of ``jitter`` seconds.

    It is a function of the schedule's name and the fire time alone (a BLAKE2b hash of
    both taken as a fraction in [0, 1)), so every replica computes the same, and it is
    that fraction of ``jitter``, or of the seconds to the next fire time ``next_epoch``
    when that is sooner, so a job never runs at or past the next fire time. The
    arithmetic is on integers, so the bound holds exactly."""
    digest = blake2b(f"{name}\x00{fire_epoch}".encode("utf-8", "surrogatepass"),
                     digest_size=8).digest()
    fraction = int.from_bytes(digest, "big") >> 11  # 53 bits: below 2**53
    span = round(jitter * 1_000_000)
    if next_epoch is not None:
        span = min(span, (next_epoch - fire_epoch) * 1_000_000)
    return (fraction * max(span, 0)) >> 53


def run_times(name: str, calendar: Calendar, fires: Sequence[datetime]
              ) -> list[datetime] | None:
    """When the jobs of ``fires`` run under the calendar's jitter (:func:`jitter_delay`):
    each fire time plus its delay; None when the calendar has no jitter."""
    jitter = getattr(calendar, "jitter", None)
    if jitter is None:
        return None
    out = []
    for fire in fires:
        epoch = _epoch_seconds(fire)
        delay = jitter_delay(name, epoch, jitter, next_epoch_from(calendar, epoch, after=True))
        out.append(fire + timedelta(microseconds=delay))
    return out


#: Distinct (expression, zone) pairs whose calendar is kept. The engine keeps its own
#: cache of the calendars its rows share (``awa_beat._engine.table.KIND_CACHE``), so this one
#: only spares the other callers (validation, markers) a parse of a repeated pair.
CALENDAR_CACHE = 4096


@lru_cache(maxsize=CALENDAR_CACHE)
def _calendar_for(cron_expr: str, timezone: str) -> Calendar:
    return _new_calendar(cron_expr, timezone, cache=True)


def _new_calendar(cron_expr: str, timezone: str, *, cache: bool = False) -> Calendar:
    tz = load_timezone(timezone)
    if not isinstance(cron_expr, str):
        raise InvalidCronExpression(f"a cron expression must be text, not {cron_expr!r}")
    if cron_expr[:1] == "@":  # where an interval or a marker starts
        seconds = every_seconds(cron_expr)
        if seconds is not None:
            return IntervalCalendar(seconds)
        if is_marker(cron_expr):
            return parse_marker(cron_expr, timezone, _calendar_for, CronCalendar)
    return CronCalendar(CronExpression.parse(cron_expr, cache=cache), tz)


# -- Awa's evaluator -------------------------------------------------------------------------


def _iter_from(calendar: Calendar, start: datetime) -> Iterator[datetime]:
    """croner's ``iter_from(start)``: each step searches inclusively from the previous
    result plus one second.

    Awa's iterator can also jump back: a seconds-field fire on the last second before clocks go
    back is followed by the earliest instant of the repeated hour, and Awa's loops would then
    cycle through that hour for ever. We end the iteration there instead.
    """
    for found in _epochs_from(calendar, _epoch_seconds(start)):
        yield datetime.fromtimestamp(found, _UTC)


def _epochs_from(calendar: Calendar, second: int) -> Iterator[int]:
    """:func:`_iter_from` on epoch seconds, which is how every calendar is stepped: each
    step is one call of :meth:`Calendar.next_epoch` from the last fire plus a second."""
    step = calendar.next_epoch
    cursor = second
    prev: int | None = None
    while True:
        found = step(cursor, True)
        if found is None or (prev is not None and found <= prev):
            return
        yield found
        prev = found
        cursor = found + 1


def can_fire_from(calendar: Calendar, start: datetime) -> bool:
    """Whether ``calendar`` has a fire at or after ``start``: a schedule with none can
    never fire (a cron of 30 February, an rrule with no occurrence left, an ``at`` or an
    end already past)."""
    return calendar.next_from(start, inclusive=True) is not None


def next_fire_after(calendar: Calendar, t: datetime) -> datetime | None:
    """The first fire strictly after ``t``, as Awa's evaluator finds it (iterating from ``t``
    and skipping fires at or before it), or ``None`` if the calendar never fires again."""
    for fire in _iter_from(calendar, t):
        if fire > t:
            return fire
    return None


def next_epoch_from(calendar: Calendar, second: int, *, after: bool) -> int | None:
    """The first fire at or after epoch second ``second`` (croner's inclusive search), or
    with ``after`` the first strictly after it as :func:`next_fire_after` finds it for any
    instant within that second (fires are whole seconds). It works on integers, because
    the engine asks this for every row it loads."""
    if not after:
        return calendar.next_epoch(second, True)
    for found in _epochs_from(calendar, second):
        if found > second:
            return found
    return None


def fires_between(
    calendar: Calendar, after: datetime, until: datetime, limit: int = CATCH_UP_LIMIT
) -> list[datetime]:
    """Every fire in ``(after, until]`` in order, at most ``limit`` of them: what Awa's
    ``catch_up`` policy replays when the cursor is ``after`` and the clock reads ``until``."""
    fires: list[datetime] = []
    if limit <= 0:
        return fires
    for fire in _iter_from(calendar, after):
        if fire > until:
            break
        if fire <= after:
            continue
        fires.append(fire)
        if len(fires) >= limit:
            break
    return fires


def _first_due(
    calendar: Calendar, search_start: datetime, last: datetime | None, now: datetime
) -> datetime | None:
    for fire in _iter_from(calendar, search_start):
        if fire > now:
            return None
        if last is None or fire > last:
            return fire
    return None


def _latest_due_in_window(
    calendar: Calendar, window_start: datetime, last: datetime | None, now: datetime
) -> datetime | None:
    latest = None
    for fire in _iter_from(calendar, window_start):
        if fire > now:
            break
        if last is None or fire > last:
            latest = fire
    return latest


def _latest_due(
    calendar: Calendar, search_start: datetime, last: datetime | None, now: datetime
) -> datetime | None:
    first_due = _first_due(calendar, search_start, last, now)
    if first_due is None:
        return None
    total_span = max((now - first_due) // _SECOND, 1)
    lookback = 1
    while True:
        # Awa has no backwards iterator: it probes a window ending at `now` that doubles in
        # size, and scans only that window once it holds a due fire.
        window_start = max(now - timedelta(seconds=lookback), first_due)
        probe = calendar.next_from(window_start, inclusive=True)
        if probe is not None and probe <= now and (last is None or probe > last):
            return _latest_due_in_window(calendar, window_start, last, now) or first_due
        if lookback >= total_span:
            return first_due
        lookback = min(lookback * 2, total_span)


def due_fires(
    calendar: Calendar,
    *,
    last_enqueued_at: datetime | None,
    created_at: datetime,
    now: datetime,
    policy: str,
    limit: int = CATCH_UP_LIMIT,
) -> list[datetime]:
    """The fires Awa's leader would enqueue for one schedule on a pass at ``now``.

    * No cursor yet (``last_enqueued_at`` is ``None``), under either policy: at most one fire,
      the latest in ``[floor(created_at - 60 s), now]``.
    * ``coalesce``: only the latest fire in ``(last_enqueued_at, now]``.
    * ``catch_up``: every fire in ``(last_enqueued_at, now]`` in order, at most ``limit``.

    Cheap when nothing is due: two calendar steps. Raises ``ValueError`` for another policy.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown missed-fire policy {policy!r}; use 'coalesce' or 'catch_up'")
    last = last_enqueued_at
    # On the instant, not the wall clock: created_at may be in the second pass of a
    # repeated hour.
    search_start = last if last is not None else created_at.astimezone(_UTC) - _MINUTE
    if last is None or policy == "coalesce":
        fire = _latest_due(calendar, search_start, last, now)
        return [] if fire is None else [fire]
    return fires_between(calendar, last, now, limit)
