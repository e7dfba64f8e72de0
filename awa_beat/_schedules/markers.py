"""Schedules that Awa's evaluator cannot honour: their ``cron_expr`` markers and their
calendars.

The module is pure, like :mod:`awa_beat._schedules.fire_times`: it reads no clock and
does no I/O. Every instant is an aware datetime, and every fire is a whole second in UTC.

Such a schedule shares ``awa.cron_jobs`` with Awa's own rows, so its ``cron_expr`` is a
marker that Awa's parser (croner) rejects: it starts with ``@`` and is none of Awa's
aliases (``@yearly``, ``@annually``, ``@monthly``, ``@weekly``, ``@daily``, ``@hourly``).
An Awa leader that shares the table logs such a row as invalid and never fires it, so
the row can never fire on a calendar other than the one written. These are the markers
(their text is canonical: a schedule always converts to the same string, so a sync sees
"unchanged")::

    @every <n>s                         an interval off Awa's cron grids (fire_times)
    @cron <awa cron expression> | ...   a cron schedule with bounds (below)
    @solar <event> <lat> <lon>          Celery's solar(event, lat, lon), in UTC
    @at <YYYY-MM-DDTHH:MM:SSZ> | runs=1 once, at that instant (calendars.at, clocked)
    @rrule DTSTART=<local time>[<offset>];FREQ=...;...   an RFC 5545 recurrence rule
    @crontab <min> <hour> <dom> <month> <dow>[ dst=celery]   Celery's crontab (below)

``@crontab`` is a Celery crontab that no plain Awa expression can say: Celery fires on a
day that matches the day of the month *and* the day of the week, while cron fires on a
day that matches either. Its fields are numbers, ranges and lists, as
:func:`.spec.crontab_to_cron` writes them, with weekdays from 0 (Sunday) to 6. Without
``dst=celery`` it steps like an Awa expression in its zone (a skipped wall time fires at
the end of the gap, and a repeated one in its first pass). With ``dst=celery``, every
fire is the one that Celery's own crontab object computes from the one before, gaps and
folds included (see the README's DST policy).

Any marker may end in `` | `` and bounds, in this order, each of them optional::

    start=<YYYY-MM-DDTHH:MM:SSZ>        no fire before (inclusive)
    end=<YYYY-MM-DDTHH:MM:SSZ>          no fire after (inclusive)
    window=<s>                          the catch-up window: a fire older than s is skipped
    jitter=<s>                          each job runs up to s after its fire time
    runs=<n>                            at most n runs in all

``window`` and ``jitter`` are seconds, written as :func:`seconds_text` writes them (a
whole number, or up to three decimals without trailing zeros), so the text stays
canonical. Awa honours neither, so an Awa expression with either is stored as
``@cron <expr> | window=300``, like a bounded one. The calendar of such a marker carries
them as ``window`` and ``jitter`` (every calendar has both; None when not set), so the
firing rules read them from the calendar that the rows sharing it already hold.

``start`` and ``end`` are part of the calendar. ``runs`` is counted in the database: the
fire statement reads the limit from the marker (``' runs=([0-9]+)$'``), counts the runs
it inserts in ``awa_beat.schedule_runs``, and retires the row (it sets ``paused_at``, and
``paused_by`` to :data:`awa_beat._db.records.RETIRED_BY`) in the statement that fires the
last run.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from ..errors import InvalidCronExpression, ScheduleError
from .cron import epoch_seconds as _epoch
from .cron import from_epoch as _from_epoch

if TYPE_CHECKING:
    from datetime import tzinfo

    from .cron import CronExpression
    from .fire_times import Calendar


class PlainCalendar(Protocol):
    """Build the calendar of a plain expression (an Awa cron expression or ``@every Ns``)
    in a zone, as :func:`awa_beat._schedules.fire_times.calendar_for` does.

    :mod:`~awa_beat._schedules.fire_times` imports this module to read markers, so it
    hands its builders in, rather than this module importing them back.
    """

    def __call__(self, cron_expr: str, timezone: str, /) -> Calendar: ...


class CronCalendarOf(Protocol):
    """Build the calendar of a parsed cron expression on the wall clock of a zone
    (:class:`awa_beat._schedules.fire_times.CronCalendar` itself). It is handed in for the
    same reason as :class:`PlainCalendar`."""

    def __call__(self, expr: CronExpression, tz: tzinfo, /) -> Calendar: ...

UTC = timezone.utc
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)

#: Celery's solar events, as (horizon, ephem method, use_center), like
#: ``celery.schedules.solar``.
SOLAR_EVENTS: dict[str, tuple[str, str, bool]] = {
    "dawn_astronomical": ("-18", "next_rising", True),
    "dawn_nautical": ("-12", "next_rising", True),
    "dawn_civil": ("-6", "next_rising", True),
    "sunrise": ("-0:34", "next_rising", False),
    "solar_noon": ("0", "next_transit", False),
    "sunset": ("-0:34", "next_setting", False),
    "dusk_civil": ("-6", "next_setting", True),
    "dusk_nautical": ("-12", "next_setting", True),
    "dusk_astronomical": ("-18", "next_setting", True),
}
#: celery.schedules.solar.max_search_days: how many days are searched for an event that
#: skips days.
SOLAR_SEARCH_DAYS = 366
#: How many searches of SOLAR_SEARCH_DAYS each run before a solar calendar says "no
#: further fire".
SOLAR_SEARCH_YEARS = 3

_MARKER = re.compile(r"@(every|cron|solar|at|rrule|crontab) ")
_BOUND = re.compile(r"(start|end|window|jitter|runs)=(\S+)")
_BOUND_ORDER = ("start", "end", "window", "jitter", "runs")
_SECONDS = re.compile(r"[0-9]+(\.[0-9]{1,3})?")
#: The shortest and longest catch-up window and jitter, in seconds. A window shorter than
#: a second would skip fires that are merely a pass late; the longest is the longest
#: interval (about ten years), past which neither means anything.
MIN_WINDOW = 1.0
MIN_JITTER = 0.001
MAX_SECONDS = 3660 * 86400
_INSTANT = "%Y-%m-%dT%H:%M:%SZ"
RUNS_PATTERN = re.compile(r" runs=([0-9]+)$")
"""The pattern with which the fire statement reads the run limit. Keep it in step with
queries.sql."""


def is_marker(cron_expr: str) -> bool:
    """Return whether ``cron_expr`` is one of awa-beat's markers (``@every Ns`` included)."""
    return isinstance(cron_expr, str) and _MARKER.match(cron_expr) is not None


def instant_text(t: datetime) -> str:
    """Write an instant as markers write it: in UTC, in whole seconds, with ``Z``."""
    return t.astimezone(UTC).strftime(_INSTANT)


def _parse_instant(text: str) -> datetime:
    try:
        return datetime.strptime(text, _INSTANT).replace(tzinfo=UTC)
    except ValueError:
        raise InvalidCronExpression(f"{text!r} is not an instant like 2027-01-01T09:00:00Z"
                                    ) from None


# -- bounds ----------------------------------------------------------------------------------


def seconds_text(seconds: float) -> str:
    """Write a window or a jitter as markers write it: a whole number as such, else up to
    three decimals without trailing zeros (``300``, ``0.5``, ``1.25``)."""
    value = round(float(seconds), 3)
    if value.is_integer():
        return str(int(value))
    return f"{value:.3f}".rstrip("0")


def check_seconds(key: str, value: Any) -> float:
    """Return a window (``key`` "window") or a jitter ("jitter") as a float of at most
    three decimals, or raise ScheduleError saying what is allowed: a positive finite
    number of seconds, at least :data:`MIN_WINDOW` (or :data:`MIN_JITTER`) and at most
    :data:`MAX_SECONDS`. A ``timedelta`` counts as its seconds."""
    low = MIN_WINDOW if key == "window" else MIN_JITTER
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScheduleError(f"{value!r} is not a number of seconds (from {seconds_text(low)} "
                            f"to {MAX_SECONDS})")
    if isinstance(value, int) and value > MAX_SECONDS:  # An int may be too large for float().
        raise ScheduleError(f"{value} s is too long; at most {MAX_SECONDS} s (about ten "
                            "years)")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ScheduleError(f"{value!r} must be a positive number of seconds")
    if seconds > MAX_SECONDS:
        raise ScheduleError(f"{value!r} s is too long; at most {MAX_SECONDS} s (about ten "
                            "years)")
    if round(seconds, 3) != seconds:
        raise ScheduleError(f"{value!r} has more than three decimals; give whole "
                            "milliseconds at most")
    if seconds < low:
        raise ScheduleError(f"{value!r} s is too short; at least {seconds_text(low)} s")
    return seconds


@dataclass(frozen=True)
class Bounds:
    """When a schedule may fire: not before ``start`` and not after ``end`` (both whole
    seconds, inclusive), and at most ``runs`` times; how late a missed fire may still
    fire (``window``, seconds), and how long after its fire time each job may run
    (``jitter``, seconds)."""

    start: datetime | None = None
    end: datetime | None = None
    runs: int | None = None
    window: float | None = None
    jitter: float | None = None

    def __post_init__(self) -> None:
        if self.runs is not None and self.runs < 1:
            raise ScheduleError(f"runs={self.runs}: at least 1")
        if self.start is not None and self.end is not None and self.end < self.start:
            raise ScheduleError(f"end {instant_text(self.end)} is before start "
                                f"{instant_text(self.start)}: it would never fire")
        for key in ("window", "jitter"):
            value = getattr(self, key)
            if value is not None:
                try:
                    object.__setattr__(self, key, check_seconds(key, value))
                except ScheduleError as exc:
                    raise ScheduleError(f"{key}={value!r}: {exc}") from None

    def __bool__(self) -> bool:
        return (self.start is not None or self.end is not None or self.runs is not None
                or self.window is not None or self.jitter is not None)

    def text(self) -> str:
        parts = []
        if self.start is not None:
            parts.append(f"start={instant_text(self.start)}")
        if self.end is not None:
            parts.append(f"end={instant_text(self.end)}")
        if self.window is not None:
            parts.append(f"window={seconds_text(self.window)}")
        if self.jitter is not None:
            parts.append(f"jitter={seconds_text(self.jitter)}")
        if self.runs is not None:
            parts.append(f"runs={self.runs}")
        return " ".join(parts)


def ceil_second(t: datetime) -> datetime:
    """Return ``t`` rounded up to a whole second, so that "no fire before ``t``" means "no
    fire before this"."""
    floor = t.replace(microsecond=0)
    return floor if floor == t else floor + _SECOND


def floor_second(t: datetime) -> datetime:
    return t.replace(microsecond=0)


def bounded(expr: str, bounds: Bounds) -> str:
    """Return ``expr`` (an Awa cron expression or a marker without bounds) with
    ``bounds``. An Awa expression becomes ``@cron <expr>``, since Awa would fire it out of
    bounds."""
    if not bounds:
        return expr
    if split_bounds(expr)[1]:
        raise ScheduleError(f"{expr!r} already has bounds; give them in one place")
    base = expr if is_marker(expr) else f"@cron {expr}"
    return f"{base} | {bounds.text()}"


def with_timing(expr: str, window: float | None, jitter: float | None) -> str:
    """Return ``expr`` (an Awa expression or a marker, with or without bounds) with its
    catch-up window and jitter replaced by ``window`` and ``jitter`` (None: none). An Awa
    expression that gets either becomes ``@cron <expr> | ...``; a ``@cron`` marker left
    with no bounds becomes its expression again."""
    if is_marker(expr):
        base, bounds = split_bounds(expr)
    else:
        base, bounds = f"@cron {expr}", Bounds()
    bounds = Bounds(bounds.start, bounds.end, bounds.runs, window, jitter)
    if not bounds and base.startswith("@cron "):
        return base[len("@cron "):]
    return f"{base} | {bounds.text()}" if bounds else base


def split_bounds(cron_expr: str) -> tuple[str, Bounds]:
    """Return a marker's schedule part and its bounds (empty when it has none)."""
    base, sep, tail = cron_expr.partition(" | ")
    if not sep:
        return cron_expr, Bounds()
    values: dict[str, Any] = {}
    order = list(_BOUND_ORDER)
    for word in tail.split(" "):
        m = _BOUND.fullmatch(word)
        if m is None or m.group(1) not in order:
            raise InvalidCronExpression(
                f"bad bounds {tail!r}: expected start=<instant> end=<instant> window=<s> "
                "jitter=<s> runs=<n>, in that order")
        key, value = m.groups()
        order = order[order.index(key) + 1:]
        if key == "runs":
            if not value.isdigit():
                raise InvalidCronExpression(f"runs={value}: a whole number")
            values[key] = int(value)
        elif key in ("window", "jitter"):
            if not _SECONDS.fullmatch(value) or seconds_text(float(value)) != value:
                raise InvalidCronExpression(
                    f"{key}={value}: seconds, written as a whole number or with up to three "
                    "decimals and no trailing zeros (300, 0.5)")
            values[key] = float(value)
        else:
            values[key] = _parse_instant(value)
    try:
        return base, Bounds(**values)
    except ScheduleError as exc:
        raise InvalidCronExpression(str(exc)) from None


def max_runs(cron_expr: str) -> int | None:
    """Return the run limit of a marker (``runs=``), as the fire statement reads it, or
    None."""
    if not is_marker(cron_expr):
        return None
    m = RUNS_PATTERN.search(cron_expr)
    return int(m.group(1)) if m else None


# -- the calendars ---------------------------------------------------------------------------


def _next_from(calendar: Calendar, start: datetime, inclusive: bool) -> datetime | None:
    """``calendar.next_from``, answered through its ``next_epoch``: a calendar written on
    epoch seconds gives the same answer both ways."""
    found = calendar.next_epoch(_epoch(start), inclusive)
    return None if found is None else _from_epoch(found)


class BoundedCalendar:
    """Another calendar's fires within ``[start, end]``, in epoch seconds. None leaves a
    side unbounded. It also carries the marker's catch-up ``window`` and ``jitter``
    (seconds, or None), which are no part of the calendar's fire times but are read by
    the firing rules wherever the calendar is."""

    __slots__ = ("end", "inner", "jitter", "start", "window")

    def __init__(self, inner: Calendar, start: int | None, end: int | None,
                 window: float | None = None, jitter: float | None = None) -> None:
        self.inner = inner
        self.start = start
        self.end = end
        self.window = window
        self.jitter = jitter

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v}" for k, v in (("window", self.window),
                                                  ("jitter", self.jitter)) if v is not None)
        return f"BoundedCalendar({self.inner!r}, {self.start}, {self.end}{extra})"

    def next_from(self, start: datetime, *, inclusive: bool = True) -> datetime | None:
        return _next_from(self, start, inclusive)

    def next_epoch(self, start: int, inclusive: bool = True) -> int | None:
        if self.start is not None and start < self.start:
            start, inclusive = self.start, True
        found = self.inner.next_epoch(start, inclusive)
        if found is None or (self.end is not None and found > self.end):
            return None
        return found


class AtCalendar:
    """One fire, at ``instant`` (in epoch seconds)."""

    __slots__ = ("instant",)
    window: float | None = None
    jitter: float | None = None

    def __init__(self, instant: int) -> None:
        self.instant = instant

    def __repr__(self) -> str:
        return f"AtCalendar({instant_text(_from_epoch(self.instant))!r})"

    def next_from(self, start: datetime, *, inclusive: bool = True) -> datetime | None:
        return _next_from(self, start, inclusive)

    def next_epoch(self, start: int, inclusive: bool = True) -> int | None:
        if self.instant > start or (inclusive and self.instant == start):
            return self.instant
        return None


def _ephem() -> Any:
    try:
        import ephem
    except ImportError:
        raise ScheduleError("solar schedules need the ephem package (as Celery's solar "
                            "does): pip install 'awa-beat[solar]'") from None
    return ephem


class SolarCalendar:
    """Celery's ``solar(event, lat, lon)``. It fires at each occurrence of the event, as
    Celery 5.7's ``solar._next_event`` finds it with ephem, rounded up to the second. A
    day on which the event does not happen, such as sunrise in the polar night, is
    skipped.

    ephem's result moves by milliseconds with the instant that the search starts from,
    which could put one event on either side of a second. Each event found is therefore
    computed again from an anchor that is a function of the event itself: the whole minute
    an hour before it, offset by half a second so that the anchor changes only where the
    event is half a second from a whole one. Every replica, and every search from any
    start, thus gives each event the same fire second.
    """

    __slots__ = ("event", "lat", "lon")
    window: float | None = None
    jitter: float | None = None

    def __init__(self, event: str, lat: float, lon: float) -> None:
        if event not in SOLAR_EVENTS:
            raise ScheduleError(f"unknown solar event {event!r}; Celery's are "
                                f"{', '.join(sorted(SOLAR_EVENTS))}")
        if not -90 <= lat <= 90:
            raise ScheduleError(f"latitude {lat} is out of range (-90 to 90)")
        if not -180 <= lon <= 180:
            raise ScheduleError(f"longitude {lon} is out of range (-180 to 180)")
        _ephem()
        self.event = event
        self.lat = lat
        self.lon = lon

    def __repr__(self) -> str:
        return f"SolarCalendar({self.event!r}, {self.lat}, {self.lon})"

    def _event_after(self, t: float, days: int = SOLAR_SEARCH_DAYS) -> tuple[float, bool]:
        """Run Celery 5.7's ``solar._next_event`` from epoch seconds ``t``. Return
        ``(event, True)`` for the first event after it, skipping days without one, or
        ``(stop, False)`` when ``days`` days were searched in vain."""
        ephem = _ephem()
        horizon, method, use_center = SOLAR_EVENTS[self.event]
        cal = ephem.Observer()  # Each search has its own, because an Observer is mutable state.
        cal.lat = str(self.lat)
        cal.lon = str(self.lon)
        cal.elev = 0
        cal.horizon = horizon
        cal.pressure = 0
        start = ephem.Date(datetime.fromtimestamp(t, UTC).replace(tzinfo=None))
        cal.date = start
        sun = ephem.Sun()
        kwargs = {"use_center": True} if use_center else {}
        found = None
        for _ in range(days):
            try:
                found = getattr(cal, method)(sun, start=start, **kwargs)
                break
            except ephem.CircumpolarError:
                start = cal.next_antitransit(sun, start=start)
        at = (found if found is not None else start).datetime().replace(tzinfo=UTC)
        return (at - _EPOCH).total_seconds(), found is not None

    def _canonical(self, e: float) -> float:
        anchor = math.floor((e - 3600.5) / 60) * 60 + 0.5
        again, found = self._event_after(anchor, days=2)
        # An anchor in a day that the search skips could land on another event, so the
        # first event is kept.
        return again if found and abs(again - e) < 60 else e

    def next_from(self, start: datetime, *, inclusive: bool = True) -> datetime | None:
        """Return the first fire at or after ``start`` (after it, if not ``inclusive``)."""
        return _next_from(self, start, inclusive)

    def next_epoch(self, start: int, inclusive: bool = True) -> int | None:
        """Return :meth:`next_from` on epoch seconds.

        Where Celery's search ends without an event (at the pole, for a whole year),
        Celery fires at the end of the search anyway. This method searches on instead, for
        up to :data:`SOLAR_SEARCH_YEARS` searches, and fires only at an event."""
        s = start + (0 if inclusive else 1)
        t: float = s - 1  # A fire second is ceil(event), which is >= s exactly when event > s - 1.
        searches = 0
        for _ in range(16):
            raw, found = self._event_after(t)
            if not found:
                searches += 1
                if searches >= SOLAR_SEARCH_YEARS:
                    return None
                t = raw
                continue
            event = self._canonical(raw)
            fire = math.ceil(event)
            if fire >= s:
                return fire
            t = max(raw, event) + 0.5
        return None  # pragma: no cover - An event is at most a day from the next.


def solar_marker(event: str, lat: float, lon: float) -> str:
    SolarCalendar(event, float(lat), float(lon))  # This validates the arguments.
    return f"@solar {event} {_number(lat)} {_number(lon)}"


def _number(x: float) -> str:
    return repr(int(x)) if float(x).is_integer() else repr(float(x))


def at_marker(instant: datetime) -> str:
    """Write the marker of ``calendars.at(instant)``: sub-seconds are dropped, and the run
    limit is one, so the schedule retires."""
    try:
        utc = instant.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not 1970 <= utc.year <= 9999:
        raise ScheduleError(f"at({instant.isoformat()}) is out of range: an instant from "
                            "1970 to 9999 (UTC)")
    return f"@at {instant_text(floor_second(utc))} | runs=1"


# -- rrule -----------------------------------------------------------------------------------

_FREQS = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY")
_Freq = Literal[0, 1, 2, 3, 4, 5, 6]  # dateutil's frequencies, which index into _FREQS.
_DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
# This maps an RFC 5545 part to its dateutil keyword, for the integer lists.
_BY = {"BYSETPOS": "bysetpos", "BYMONTH": "bymonth", "BYMONTHDAY": "bymonthday",
       "BYYEARDAY": "byyearday", "BYEASTER": "byeaster", "BYWEEKNO": "byweekno",
       "BYHOUR": "byhour", "BYMINUTE": "byminute", "BYSECOND": "bysecond"}
_LOCAL = "%Y%m%dT%H%M%S"


def _int_list(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return sorted(int(v) for v in value)


def rrule_marker(rule: Any) -> tuple[str, str | None]:
    """Return a dateutil ``rrule`` (or RedBeat's ``rrule`` schedule, which wraps one) as
    ``(marker, time zone)``. The time zone column is the zone of ``dtstart`` when that zone
    has an IANA name (the rule then steps on that zone's wall clock, as dateutil does). A
    fixed offset is written into the marker, and the zone is None (UTC)."""
    inner = getattr(rule, "rrule", rule)
    try:
        from dateutil.rrule import rrule as dateutil_rrule
    except ImportError:  # pragma: no cover - dateutil comes with Celery.
        raise ScheduleError("rrule schedules need python-dateutil") from None
    if not isinstance(inner, dateutil_rrule):
        raise ScheduleError(f"not an rrule: {rule!r}")
    # dateutil keeps a rule's parts only in private attributes, which its stubs leave out,
    # so they are read as Any.
    parsed: Any = inner
    if not isinstance(parsed._freq, int) or not 0 <= parsed._freq < len(_FREQS):
        raise ScheduleError(f"rrule frequency {parsed._freq!r} is none of dateutil's "
                            "(0 YEARLY to 6 SECONDLY)")
    original = getattr(inner, "_original_rule", {})
    dtstart = parsed._dtstart
    if dtstart.tzinfo is None:
        dtstart = dtstart.replace(tzinfo=UTC)  # Celery's rule is that naive means UTC.
    zone = getattr(dtstart.tzinfo, "key", None)
    if zone:
        start_text = dtstart.strftime(_LOCAL)
    else:
        offset = dtstart.utcoffset()
        assert offset is not None
        minutes = int(offset.total_seconds() // 60)
        sign = "+" if minutes >= 0 else "-"
        start_text = (dtstart.strftime(_LOCAL)
                      + f"{sign}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}")
    parts = [f"DTSTART={start_text}", f"FREQ={_FREQS[parsed._freq]}"]
    if parsed._interval != 1:
        parts.append(f"INTERVAL={parsed._interval}")
    if parsed._wkst != 0:
        parts.append(f"WKST={_DAYS[parsed._wkst]}")
    if parsed._count is not None:
        parts.append(f"COUNT={parsed._count}")
    if parsed._until is not None:
        until = parsed._until
        if until.tzinfo is None:
            until = until.replace(tzinfo=dtstart.tzinfo)
        parts.append(f"UNTIL={until.astimezone(UTC).strftime(_LOCAL)}Z")
    for part, key in _BY.items():
        values = _int_list(original.get(key))
        if values:
            parts.append(f"{part}={','.join(map(str, values))}")
    days = original.get("byweekday")
    if days is not None:
        if not isinstance(days, (list, tuple, set)):
            days = [days]
        texts = []
        for day in days:
            n = getattr(day, "n", None)
            wd = getattr(day, "weekday", day)
            texts.append(f"{n:+d}{_DAYS[wd]}" if n else _DAYS[int(wd)])
        parts.append(f"BYDAY={','.join(texts)}")
    marker = "@rrule " + ";".join(parts)
    _rrule_calendar(marker[len("@rrule "):], zone or "UTC")  # What we write must read back.
    return marker, zone


class RRuleCalendar:
    """A dateutil recurrence rule. The next fire after ``t`` is ``rule.after(t)``, which is
    how RedBeat's ``rrule`` schedule finds it."""

    __slots__ = ("rule",)
    window: float | None = None
    jitter: float | None = None

    def __init__(self, rule: Any) -> None:
        self.rule = rule

    def __repr__(self) -> str:
        return f"RRuleCalendar({self.rule!r})"

    def next_from(self, start: datetime, *, inclusive: bool = True) -> datetime | None:
        found = self.rule.after(floor_second(start), inc=inclusive)
        return None if found is None else found.astimezone(UTC)

    def next_epoch(self, start: int, inclusive: bool = True) -> int | None:
        # dateutil steps on datetimes, so this one calendar converts at its edge.
        found = self.rule.after(_from_epoch(start), inc=inclusive)
        return None if found is None else _epoch(found)


def _rrule_calendar(text: str, zone: str) -> RRuleCalendar:
    from dateutil import rrule as dr

    from .cron import load_timezone

    kwargs: dict[str, Any] = {}
    freq: _Freq | None = None
    dtstart = None
    for part in text.split(";"):
        key, sep, value = part.partition("=")
        if not sep or not value:
            raise InvalidCronExpression(f"rrule part {part!r} is not KEY=VALUE")
        try:
            if key == "DTSTART":
                if len(value) == 15:
                    dtstart = datetime.strptime(value, _LOCAL).replace(
                        tzinfo=load_timezone(zone))
                else:
                    dtstart = datetime.strptime(value, _LOCAL + "%z")
            elif key == "FREQ":
                freq = cast(_Freq, _FREQS.index(value))
            elif key == "INTERVAL":
                kwargs["interval"] = int(value)
            elif key == "WKST":
                kwargs["wkst"] = _DAYS.index(value)
            elif key == "COUNT":
                kwargs["count"] = int(value)
            elif key == "UNTIL":
                kwargs["until"] = datetime.strptime(value, _LOCAL + "Z").replace(tzinfo=UTC)
            elif key in _BY:
                kwargs[_BY[key]] = [int(v) for v in value.split(",")]
            elif key == "BYDAY":
                days = []
                for item in value.split(","):
                    wd = dr.weekday(_DAYS.index(item[-2:]))
                    days.append(wd(int(item[:-2])) if item[:-2] else wd)
                kwargs["byweekday"] = days
            else:
                raise InvalidCronExpression(f"unknown rrule part {key!r}")
        except (ValueError, IndexError):
            raise InvalidCronExpression(f"bad rrule part {part!r}") from None
    if freq is None or dtstart is None:
        raise InvalidCronExpression("an rrule needs DTSTART and FREQ")
    try:
        rule = dr.rrule(freq, dtstart=dtstart, **kwargs)
    except (ValueError, TypeError) as exc:
        raise InvalidCronExpression(f"invalid rrule: {exc}") from None
    return RRuleCalendar(rule)


# -- crontab ---------------------------------------------------------------------------------

#: The DST policies: ``awa`` (Awa's rule, the default) and ``celery`` (Celery's).
DST_POLICIES = ("awa", "celery")
_CRONTAB_FIELD = re.compile(r"\*|[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*")


def crontab_marker(fields: tuple[str, str, str, str, str], dst: str = "awa") -> str:
    """Write the ``@crontab`` marker of five field texts (as ``crontab_to_cron`` writes
    them)."""
    tail = " dst=celery" if dst == "celery" else ""
    return "@crontab " + " ".join(fields) + tail


def _crontab_fields(rest: str) -> tuple[list[str], str]:
    words = rest.split(" ")
    dst = "awa"
    if len(words) == 6 and words[5] == "dst=celery":
        dst = "celery"
        words = words[:5]
    if len(words) != 5 or not all(_CRONTAB_FIELD.fullmatch(w) for w in words):
        raise InvalidCronExpression(
            f"@crontab {rest!r}: expected five fields of numbers, ranges and lists "
            "(minute hour day-of-month month day-of-week), then optionally dst=celery")
    return words, dst


def crontab_calendar(rest: str, zone: str, cron: CronCalendarOf) -> Calendar:
    """Return the calendar of ``@crontab <fields>[ dst=celery]`` (``rest``) in ``zone``.
    ``cron`` builds the calendar of the expression that ANDs the two day fields."""
    (minute, hour, dom, month, dow), dst = _crontab_fields(rest)
    if dst == "celery":
        return CeleryCrontabCalendar(minute, hour, dom, month, dow, zone)
    from .cron import CronExpression, both_days, load_timezone

    # Two cached expressions lend their parts to a new one: the first lends its time of
    # day and days of the month, and the second its weekdays. The zone is read first, as
    # the calendar of a plain expression reads it, so a bad zone is the error reported.
    tz = load_timezone(zone)
    days = CronExpression.parse(f"{minute} {hour} {dom} {month} *", cache=True)
    weekdays = CronExpression.parse(f"{minute} {hour} * {month} {dow}", cache=True)
    return cron(both_days(f"@crontab {rest}", days, weekdays), tz)


class CeleryCrontabCalendar:
    """Celery's crontab in ``zone``, stepped by Celery's own object. Each fire is the
    previous one plus the ``remaining_estimate`` asked at that instant, which is when
    ``is_due`` first says due. Celery's wall-clock arithmetic decides gaps and folds."""

    __slots__ = ("fields", "tab")
    window: float | None = None
    jitter: float | None = None

    def __init__(self, minute: str, hour: str, dom: str, month: str, dow: str,
                 zone: str) -> None:
        from .cron import load_timezone

        self.fields = (minute, hour, dom, month, dow, zone)
        self.tab = _zoned_crontab()(minute=minute, hour=hour, day_of_month=dom,
                                    month_of_year=month, day_of_week=dow)
        self.tab.zone = load_timezone(zone)

    def __repr__(self) -> str:
        return f"CeleryCrontabCalendar{self.fields!r}"

    def _after(self, second: int) -> int:
        """Return the fire that Celery computes after a run at epoch ``second``."""
        last = _from_epoch(second).astimezone(self.tab.zone)
        # The estimate is the fire minus the clock, and the clock reads the epoch.
        return math.ceil(self.tab.remaining_estimate(last).total_seconds())

    def next_from(self, start: datetime, *, inclusive: bool = True) -> datetime | None:
        return _next_from(self, start, inclusive)

    def next_epoch(self, start: int, inclusive: bool = True) -> int | None:
        s = start + (0 if inclusive else 1)
        t = s - 1
        try:
            for _ in range(4):
                found = self._after(t)
                if found >= s:
                    return found
                # Celery's arithmetic went back (a fold), so it is due at once, and the
                # next fire is computed from the start.
                t = max(found, t) + 1
        except (OverflowError, ValueError, RuntimeError):
            return None  # This is past the year 9999, or a crontab Celery cannot roll over.
        return None


_ZONED: list[Any] = []


def _zoned_crontab() -> Any:
    """A subclass of Celery's crontab with a zone of its own and a clock that reads the
    epoch. It needs no Celery app (and does not use the current app's zone), and threads
    can share it."""
    if not _ZONED:
        from celery.schedules import crontab

        class ZonedCrontab(crontab):
            zone: Any

            @property
            def tz(self) -> Any:
                return self.zone

            def now(self) -> datetime:
                return _EPOCH

        _ZONED.append(ZonedCrontab)
    return _ZONED[0]


# -- reading a marker ------------------------------------------------------------------------


def parse_marker(cron_expr: str, zone: str, base: PlainCalendar,
                 cron: CronCalendarOf) -> Calendar:
    """Return the calendar of a marker. ``base`` and ``cron`` build what fire_times builds
    itself (the calendars of an Awa expression and of ``@every Ns``). Raise
    InvalidCronExpression or ScheduleError when the marker is invalid."""
    head, bounds = split_bounds(cron_expr)
    kind, _, rest = head.partition(" ")
    calendar: Calendar
    if kind == "@every":
        if not bounds or not re.fullmatch(r"@every [1-9][0-9]*s", head):
            raise InvalidCronExpression(f"{head!r} is not an interval: @every <n>s, n >= 1")
        calendar = base(head, zone)
    elif kind == "@cron":
        if not bounds:
            raise InvalidCronExpression("@cron without bounds: store the expression itself")
        calendar = base(rest, zone)
    elif kind == "@solar":
        words = rest.split(" ")
        if len(words) != 3:
            raise InvalidCronExpression("@solar needs: event latitude longitude")
        try:
            lat, lon = float(words[1]), float(words[2])
        except ValueError:
            raise InvalidCronExpression(f"bad solar position in {rest!r}") from None
        calendar = SolarCalendar(words[0], lat, lon)
    elif kind == "@at":
        calendar = AtCalendar(_epoch(_parse_instant(rest)))
    elif kind == "@rrule":
        calendar = _rrule_calendar(rest, zone)
    elif kind == "@crontab":
        calendar = crontab_calendar(rest, zone, cron)
    else:
        raise InvalidCronExpression(f"unknown marker {kind!r}")
    if bounds.start is None and bounds.end is None and bounds.window is None \
            and bounds.jitter is None:
        return calendar
    return BoundedCalendar(calendar,
                           None if bounds.start is None else _epoch(bounds.start),
                           None if bounds.end is None else _epoch(bounds.end),
                           bounds.window, bounds.jitter)
