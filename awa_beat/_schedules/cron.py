"""Awa's cron dialect: a port of croner 2.2.0 as Awa configures it.

Awa (``awa-pg`` 0.6.9) parses schedules with ``Cron::new(expr).with_seconds_optional().parse()``
from the Rust crate croner 2.2.0 and evaluates them with chrono-tz. This module reproduces that
grammar (what is accepted or rejected, and what each accepted pattern means) and croner's
``find_next_occurrence`` search on naive wall-clock times. Time-zone handling lives in
:mod:`.fire_times`; :func:`load_timezone` validates zone names the way chrono-tz does.

The module keeps croner's quirks on purpose, because an Awa leader that evaluates the
same row behaves the same way:

* Every ``?`` becomes ``*``. The text is lowercased, and the names ``sun``..``sat`` and
  ``jan``..``dec`` are replaced as substrings anywhere (``-sun`` first, as ``-7``).
* A field counts as unrestricted only when its text is exactly ``*``. When day-of-month
  and day-of-week are both restricted, they are ORed (``*/2`` and ``1-31`` count as
  restricted).
* ``nW`` picks the nearest weekday, and it may cross into the neighbouring month.
* A bare ``L`` in day-of-week, and ``7L``, parse but never match.
* Patterns that can never match (``0 0 30 2 *``) parse and simply never fire.

croner stops searching at the year 5000, and so does :meth:`CronExpression.next_fields`.
Since the Gregorian calendar repeats every 400 years, a pattern with no matching day in
400 consecutive years is known never to fire, and that answer is cached on the
expression.
"""

from __future__ import annotations

import re
import weakref
import zoneinfo
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache
from pathlib import Path

import tzdata

from awa_beat.errors import CronFieldError, InvalidCronExpression, InvalidTimezone

__all__ = ["CronExpression", "CronFields", "load_timezone"]

# These are croner's flag bits, kept bit for bit so that feature checks reject the same
# inputs.
_ALL = 1
_NTH = (0, 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5)  # Index n holds the bit for "#n".
_NTH_ALL = _NTH[1] | _NTH[2] | _NTH[3] | _NTH[4] | _NTH[5]
_LAST = 1 << 6
_CLOSEST_WEEKDAY = 1 << 7

# croner gives up searching once the year reaches 5000. The Gregorian calendar repeats
# every 400 years (4800 months), so a pattern that has no matching day in 4800
# consecutive months never matches at all.
_YEAR_LIMIT = 5000
_CYCLE_MONTHS = 4800

# Rust's str::trim and split_whitespace use the Unicode White_Space property, which
# differs from Python's str.isspace (the latter also treats U+001C..U+001F as spaces).
_WS = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_WS_SPLIT = re.compile(f"[{_WS}]+")
_U8 = re.compile(r"\+?[0-9]+")
# This matches digits, stars, lists, ranges and steps between spaces: an expression in
# which the alias, case and name rewriting has nothing to change.
_NUMERIC = re.compile(r"[0-9*,/ -]*")

_NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_WEEKDAY_NAMES = (
    ("-sun", "-7"),
    ("sun", "0"),
    ("mon", "1"),
    ("tue", "2"),
    ("wed", "3"),
    ("thu", "4"),
    ("fri", "5"),
    ("sat", "6"),
)
_MONTH_NAMES = (
    ("jan", "1"),
    ("feb", "2"),
    ("mar", "3"),
    ("apr", "4"),
    ("may", "5"),
    ("jun", "6"),
    ("jul", "7"),
    ("aug", "8"),
    ("sep", "9"),
    ("oct", "10"),
    ("nov", "11"),
    ("dec", "12"),
)
_FIELD_SHAPE = "Awa accepts 5 (min hour dom mon dow) or 6 (sec min hour dom mon dow)"

_ORDINAL_1970 = date(1970, 1, 1).toordinal()


def _trim(text: str) -> str:
    return text.strip(_WS)


def _parse_u8(text: str) -> int | None:
    """Parse as Rust's ``str::parse::<u8>`` does: ASCII digits with an optional ``+``, at
    most 255."""
    if _U8.fullmatch(text) is None:
        return None
    value = int(text)
    return value if value <= 255 else None


class _Component:
    """One cron field, which holds a bitfield per value, as croner's ``CronComponent`` does."""

    __slots__ = ("bits", "enabled_features", "features", "max", "min", "name")

    def __init__(self, name: str, lo: int, hi: int, features: int) -> None:
        self.name = name
        self.min = lo
        self.max = hi
        # croner always allows the ALL and LAST bits, whatever the field is.
        self.features = features | _ALL | _LAST
        self.enabled_features = 0
        self.bits = [0] * (hi + 1)

    def allowed(self) -> str:
        return f"{self.min}-{self.max}"

    def set_bit(self, pos: int, bit: int) -> None:
        if pos < self.min or pos > self.max:
            raise CronFieldError(f"{pos} is out of range; allowed {self.allowed()}")
        if self.features & bit != bit:
            raise CronFieldError(self._unsupported(bit))
        self.bits[pos] |= bit

    def unset_bit(self, pos: int, bit: int) -> None:
        self.bits[pos] &= ~bit

    def is_set(self, pos: int, bit: int) -> bool:
        return bool(self.bits[pos] & bit)

    def _unsupported(self, bit: int) -> str:
        if bit == _CLOSEST_WEEKDAY:
            return "'W' (nearest weekday) is only allowed in day-of-month"
        if bit & _NTH_ALL:
            return "'#n' (nth weekday) is only allowed in day-of-week"
        return "this modifier is not allowed here"

    def parse(self, field: str) -> None:
        if field == "*":
            for value in range(self.min, self.max + 1):
                self.set_bit(value, _ALL)
            return
        for raw in field.split(","):
            part = _trim(raw)
            if not part:
                continue  # croner skips empty list items, so ",5" is "5".
            try:
                self._parse_part(part)
            except CronFieldError as exc:
                raise CronFieldError(f"{self.name} field {field!r}: {exc}") from None

    def _parse_part(self, part: str) -> None:
        if "/" in part:
            self._stepping(part)
        elif "-" in part:
            self._range(part)
        elif "w" in part:
            self._closest_weekday(part)
        elif part == "l":
            # This enables "last day of month" for day-of-month; elsewhere it is accepted
            # and inert.
            self.enabled_features |= _LAST
        else:
            text = part.replace("l", "L")
            if text.endswith("L") and "#" not in text:
                text = text.replace("L", "#L")
            if "#" in text and self.features & _NTH_ALL != _NTH_ALL:
                raise CronFieldError("'#' and 'nL' are only allowed in day-of-week")
            if "L" in text and self.features & _NTH_ALL != _NTH_ALL:
                raise CronFieldError("'L' here must stand alone (last day of the month)")
            self._number(text)

    @staticmethod
    def _nth_bit(value: str) -> int:
        if value.endswith(("L", "l")):
            return _LAST
        pos = value.find("#")
        if pos < 0:
            return _ALL
        nth = _parse_u8(value[pos + 1 :])
        if nth is None:
            raise CronFieldError(f"invalid '#n' in {value!r}; n must be 1-5 or L")
        if not 1 <= nth <= 5:
            raise CronFieldError(f"'#{nth}' is out of range; n must be 1-5 or L")
        return _NTH[nth]

    @staticmethod
    def _strip_nth(value: str) -> str:
        return value.split("#", 1)[0]

    def _closest_weekday(self, value: str) -> None:
        day = _parse_u8(value[: value.find("w")])
        if day is None:
            raise CronFieldError(f"{value!r}: 'W' needs a day number before it, like 15W")
        if day < self.min or day > self.max:
            raise CronFieldError(f"{value!r}: day {day} is out of range; allowed 1-31")
        self.set_bit(day, _CLOSEST_WEEKDAY)

    def _range(self, value: str) -> None:
        bit = self._nth_bit(value)
        parts = [_trim(p) for p in self._strip_nth(value).split("-")]
        if len(parts) != 2:
            raise CronFieldError(f"{value!r} is not a range like a-b")
        start, end = _parse_u8(parts[0]), _parse_u8(parts[1])
        if start is None or end is None:
            raise CronFieldError(f"{value!r} is not a range of two numbers like a-b")
        if start > end or start < self.min or end > self.max:
            raise CronFieldError(
                f"range {value!r} must go upwards within {self.allowed()} (no wrap-around)"
            )
        for v in range(start, end + 1):
            self.set_bit(v, bit)

    def _number(self, value: str) -> None:
        bit = self._nth_bit(value)
        num = _parse_u8(self._strip_nth(value))
        if num is None:
            raise CronFieldError(f"{value!r} is not a number; allowed {self.allowed()}")
        if num < self.min or num > self.max:
            raise CronFieldError(f"{num} is out of range; allowed {self.allowed()}")
        self.set_bit(num, bit)

    def _stepping(self, value: str) -> None:
        bit = self._nth_bit(value)
        parts = self._strip_nth(value).split("/")
        if len(parts) != 2:
            raise CronFieldError(f"{value!r} is not a step like */n, a-b/n or a/n")
        range_part, step_text = parts
        step = _parse_u8(step_text)
        if step is None:
            raise CronFieldError(f"{value!r}: the step must be a number 1-255")
        if step == 0:
            raise CronFieldError(f"{value!r}: the step cannot be zero")
        if range_part == "*":
            start: int | None = self.min
            end: int | None = self.max
        elif "-" in range_part:
            bounds = range_part.split("-")
            if len(bounds) != 2:
                raise CronFieldError(f"{value!r} is not a step like a-b/n")
            start, end = _parse_u8(bounds[0]), _parse_u8(bounds[1])
        else:
            start, end = _parse_u8(range_part), self.max
        if start is None or end is None:
            raise CronFieldError(f"{value!r} is not a step like */n, a-b/n or a/n")
        if start < self.min or end > self.max or start > end:
            raise CronFieldError(
                f"step range in {value!r} must go upwards within {self.allowed()}"
            )
        v = start
        while v <= end:
            self.set_bit(v, bit)
            v += step
            if v > 255:  # croner steps with u8::checked_add and fails on overflow.
                raise CronFieldError(f"{value!r}: the step overflows")


def _split_fields(pattern: str) -> list[str]:
    return [p for p in _WS_SPLIT.split(pattern) if p]


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)) else 28
    return 30 if month in (4, 6, 9, 11) else 31


class _DayRule:
    """The rule for which days of a month match, from the day-of-month, month and
    day-of-week fields.

    Expressions that differ only in their time of day (per-tenant schedules at random
    minutes and hours) share one rule, and with it the cache of matching days, so a
    distinct expression costs a few hundred bytes rather than a copy of all of this.
    """

    __slots__ = ("__weakref__", "_day_cache", "_key_cache", "dom_all", "dom_closest",
                 "dom_last", "dow_all", "dow_last", "dow_nth", "months_mask", "star_dom",
                 "star_dow")

    def __init__(self, key: tuple) -> None:
        (self.months_mask, self.star_dom, self.star_dow, self.dom_all, self.dom_closest,
         self.dom_last, self.dow_all, self.dow_last, self.dow_nth) = key
        self._key_cache: dict[tuple[int, int, int], tuple[int, ...]] = {}
        self._day_cache: dict[int, tuple[int, ...]] = {}

    def _day_set(self, length: int, first_wd: int, prev_length: int) -> tuple[int, ...]:
        """Return the matching days of a month of ``length`` days whose 1st falls on
        ``first_wd`` (0 = Sunday) and whose previous month had ``prev_length`` days."""
        key = (length, first_wd, prev_length)
        cached = self._key_cache.get(key)
        if cached is not None:
            return cached
        dom_all, closest, dow_all = self.dom_all, self.dom_closest, self.dow_all
        dow_last, dow_nth = self.dow_last, self.dow_nth
        star_dom, star_dow = self.star_dom, self.star_dow
        out = []
        for d in range(1, length + 1):
            wd = (first_wd + d - 1) % 7
            dom = dom_all[d] or (self.dom_last and d == length)
            if not dom and wd not in (0, 6):
                # croner's nearest weekday looks at the day itself, at a Sunday just before
                # (which moves forward) and at a Saturday just after (which moves back),
                # even when that neighbour belongs to the adjacent month.
                prev_day = prev_length if d == 1 else d - 1
                next_day = 1 if d == length else d + 1
                dom = (
                    closest[d]
                    or (wd == 1 and closest[prev_day])
                    or (wd == 5 and closest[next_day])
                )
            dow = dow_nth[wd][(d - 1) // 7 + 1] or (dow_last[wd] and d + 7 > length)
            dow = dow or dow_all[wd]
            # A literal '*' defers to the other field, and two restricted fields are ORed.
            if star_dom and star_dow:
                keep = True
            elif star_dom:
                keep = dow
            elif star_dow:
                keep = dom
            else:
                keep = dom or dow
            if keep:
                out.append(d)
        result = tuple(out)
        self._key_cache[key] = result
        return result

    def days(self, year: int, month: int) -> tuple[int, ...]:
        """Return the sorted matching days of ``year``-``month`` (empty if the month is
        excluded)."""
        key = year * 16 + month
        cached = self._day_cache.get(key)
        if cached is not None:
            return cached
        if not (self.months_mask >> month) & 1:
            result: tuple[int, ...] = ()
        else:
            length = _days_in_month(year, month)
            prev_length = 31 if month == 1 else _days_in_month(year, month - 1)
            first_wd = (date(year, month, 1).toordinal()) % 7  # Ordinal 1 (0001-01-01) is a Monday.
            result = self._day_set(length, first_wd, prev_length)
        if len(self._day_cache) > 50_000:
            self._day_cache.clear()
        self._day_cache[key] = result
        return result


# The live rules, by their fields. An expression keeps its rule alive, and the rule goes
# with the last expression that uses it, once the cache by texts (_day_rule_of) drops it
# too.
_DAY_RULES: weakref.WeakValueDictionary[tuple, _DayRule] = weakref.WeakValueDictionary()
# Time-of-day tuples that expressions share. A bound keeps odd inputs from growing it.
_TIMES: dict[tuple[int, ...], tuple[int, ...]] = {}
_TIMES_LIMIT = 10_000


def _day_rule(key: tuple) -> _DayRule:
    rule = _DAY_RULES.get(key)
    if rule is None:
        rule = _DAY_RULES[key] = _DayRule(key)
    return rule


def _shared(values: tuple[int, ...]) -> tuple[int, ...]:
    found = _TIMES.get(values)
    if found is not None:
        return found
    if len(_TIMES) < _TIMES_LIMIT:
        _TIMES[values] = values
    return values


_TIME_FIELDS = (("seconds", 0, 59), ("minute", 0, 59), ("hour", 0, 23))


# Fields repeat across expressions (per-tenant schedules differ in a minute and an hour),
# so each distinct field is parsed once. A field that fails to parse raises every time.
@lru_cache(maxsize=1024)
def _time_field(index: int, text: str) -> tuple[tuple[int, ...], int]:
    """Return the values of time field ``index`` (seconds, minute, hour) and their bit mask."""
    name, lo, hi = _TIME_FIELDS[index]
    comp = _Component(name, lo, hi, 0)
    comp.parse(text)
    values = _shared(tuple(v for v in range(hi + 1) if comp.bits[v] & _ALL))
    return values, sum(1 << v for v in values)


# The cache is keyed by the three texts, because the key of the rule itself is long to
# hash, and an expression with a calendar of its own still shares its day fields with
# many others.
@lru_cache(maxsize=1024)
def _day_rule_of(dom_text: str, month_text: str, dow_text: str) -> _DayRule:
    """Return the day rule of a day-of-month, month and day-of-week field."""
    return _day_rule(_days_key(dom_text, month_text, dow_text))


def _days_key(dom_text: str, month_text: str, dow_text: str) -> tuple:
    """Return the fields of the day rule of a day-of-month, month and day-of-week field,
    with the months' bit mask first."""
    days = _Component("day-of-month", 1, 31, _LAST | _CLOSEST_WEEKDAY)
    months = _Component("month", 1, 12, 0)
    dows = _Component("day-of-week", 0, 7, _LAST | _NTH_ALL)
    days.parse(dom_text)
    months.parse(month_text)
    dows.parse(dow_text)
    # Day-of-week 7 is Sunday. croner folds it to 0 for every bit except LAST, so "7L"
    # never matches.
    for bit in (_ALL, *_NTH[1:]):
        if dows.is_set(7, bit):
            dows.unset_bit(7, bit)
            dows.bits[0] |= bit
    return (
        sum(1 << v for v in range(1, 13) if months.bits[v] & _ALL),
        _trim(dom_text) == "*",
        _trim(dow_text) == "*",
        tuple(bool(days.bits[d] & _ALL) for d in range(32)),
        tuple(bool(days.bits[d] & _CLOSEST_WEEKDAY) for d in range(32)),
        bool(days.enabled_features & _LAST),
        tuple(bool(dows.bits[w] & _ALL) for w in range(7)),
        tuple(bool(dows.bits[w] & _LAST) for w in range(7)),
        tuple(tuple(bool(dows.bits[w] & _NTH[n]) for n in range(6)) for w in range(7)),
    )


@dataclass(frozen=True)
class CronFields:
    """What each field of an expression matches, for a conversion to another scheduler's
    form (``awa-beat export``). Weekdays run from 0 (Sunday) to 6."""

    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: tuple[int, ...]
    days: tuple[int, ...]
    """The days of the month that are listed (1-31), without ``L`` and ``nW``."""
    weekdays: tuple[int, ...]
    """The weekdays that are listed plainly (not as ``d#n`` or ``dL``)."""
    nth_weekdays: frozenset[tuple[int, int]]
    """The ``(weekday, n)`` of each ``d#n``."""
    any_day: bool
    """Whether the day-of-month field is exactly ``*``, so that it defers to the
    day-of-week field."""
    any_weekday: bool
    """Whether the day-of-week field is exactly ``*``."""
    last_day: bool
    """Whether the day-of-month field holds ``L``."""
    nearest_weekdays: tuple[int, ...]
    """The ``n`` of each ``nW``."""
    last_weekdays: tuple[int, ...]
    """The ``d`` of each ``dL``."""


class CronExpression:
    """A parsed Awa cron expression (croner 2.2.0 with optional seconds).

    Build one with :meth:`parse`. :meth:`next_local` finds the first matching naive wall-clock
    time at or after a given one, or ``None`` when the pattern never matches again.
    """

    __slots__ = (
        "_days_rule",
        "_hours",
        "_hours_mask",
        "_minutes",
        "_minutes_mask",
        "_never",
        "_seconds",
        "_seconds_mask",
        "source",
    )

    source: str
    _seconds: tuple[int, ...]
    _minutes: tuple[int, ...]
    _hours: tuple[int, ...]
    _seconds_mask: int
    _minutes_mask: int
    _hours_mask: int
    _days_rule: _DayRule
    _never: bool

    def __init__(self) -> None:
        raise TypeError("use CronExpression.parse(expr)")

    def __repr__(self) -> str:
        return f"CronExpression({self.source!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CronExpression) and other.source == self.source

    def __hash__(self) -> int:
        return hash(self.source)

    @classmethod
    def parse(cls, expr: str, *, cache: bool = True) -> CronExpression:
        """Parse ``expr`` exactly as Awa does, and raise :class:`InvalidCronExpression` if
        Awa would reject it (Awa then logs an error every second and never fires the row).

        ``cache=False`` parses afresh, for a caller that keeps what it parsed, because
        expressions that each appear once would only churn the shared cache."""
        if not isinstance(expr, str):
            kind = type(expr).__name__
            raise InvalidCronExpression(f"a cron expression must be text, not {kind}")
        return _parse_cached(expr) if cache else cls._build(expr)

    @classmethod
    def _build(cls, expr: str) -> CronExpression:
        if not _trim(expr):
            raise InvalidCronExpression(
                f"the cron expression is empty; {_FIELD_SHAPE}, or an alias like @daily"
            )
        pattern = expr.replace("?", "*")
        if _NUMERIC.fullmatch(pattern) is None:
            if "@" in pattern:
                trimmed = _trim(pattern)
                lowered = trimmed.lower() if trimmed.isascii() else trimmed
                pattern = _NICKNAMES.get(lowered, trimmed)
            pattern = _trim(pattern).lower()
            for name, number in _WEEKDAY_NAMES:
                pattern = pattern.replace(name, number)
            pattern = _trim(pattern)
            for name, number in _MONTH_NAMES:
                pattern = pattern.replace(name, number)
            parts = _split_fields(_trim(pattern))
        else:
            # There is no alias, case or name to rewrite, and no whitespace other than
            # ASCII spaces, on which str.split() splits as croner does.
            parts = pattern.split()
        if len(parts) not in (5, 6):
            if len(parts) == 1 and parts[0].startswith("@"):
                raise InvalidCronExpression(
                    f"{_trim(expr)!r} is not a supported alias; Awa accepts @yearly, @annually,"
                    " @monthly, @weekly, @daily and @hourly"
                )
            raise InvalidCronExpression(f"{len(parts)} fields given; {_FIELD_SHAPE}")
        if len(parts) == 5:
            parts.insert(0, "0")

        try:
            # The fields are parsed in croner's order, so the first bad field is the one
            # named.
            seconds, seconds_mask = _time_field(0, parts[0])
            minutes, minutes_mask = _time_field(1, parts[1])
            hours, hours_mask = _time_field(2, parts[2])
            days = _day_rule_of(parts[3], parts[4], parts[5])
        except CronFieldError as exc:
            raise InvalidCronExpression(f"invalid cron expression {expr!r}: {exc}") from None

        parsed = object.__new__(cls)
        parsed.source = expr
        parsed._seconds, parsed._minutes, parsed._hours = seconds, minutes, hours
        parsed._seconds_mask = seconds_mask
        parsed._minutes_mask = minutes_mask
        parsed._hours_mask = hours_mask
        parsed._days_rule = days
        parsed._never = not (seconds and minutes and hours and days.months_mask)
        return parsed

    # -- time-of-day matching ------------------------------------------------------------------

    def _time_at_or_after(self, h: int, mi: int, s: int) -> tuple[int, int, int] | None:
        hours, minutes, seconds = self._hours, self._minutes, self._seconds
        if (self._hours_mask >> h) & 1:
            if (self._minutes_mask >> mi) & 1:
                i = bisect_left(seconds, s)
                if i < len(seconds):
                    return h, mi, seconds[i]
                j = bisect_right(minutes, mi)
            else:
                j = bisect_left(minutes, mi)
            if j < len(minutes):
                return h, minutes[j], seconds[0]
            k = bisect_right(hours, h)
        else:
            k = bisect_left(hours, h)
        if k < len(hours):
            return hours[k], minutes[0], seconds[0]
        return None

    # -- search ------------------------------------------------------------------------------

    def next_fields(
        self, y: int, mo: int, d: int, h: int, mi: int, s: int
    ) -> tuple[int, int, int, int, int, int] | None:
        """Return the first matching wall-clock time at or after the given one, as a
        ``(year, month, day, hour, minute, second)`` tuple, or ``None`` if there is none
        before croner's search limit (year 5000)."""
        if self._never:
            return None
        days = self._days_rule.days(y, mo)
        i = bisect_left(days, d)
        if i < len(days) and days[i] == d:
            t = self._time_at_or_after(h, mi, s)
            if t is not None:
                return (y, mo, d, *t)
            i += 1
        first = (self._hours[0], self._minutes[0], self._seconds[0])
        if i < len(days):
            return (y, mo, days[i], *first)
        for _ in range(_CYCLE_MONTHS + 1):
            mo += 1
            if mo == 13:
                mo = 1
                y += 1
                if y >= _YEAR_LIMIT:
                    return None
            days = self._days_rule.days(y, mo)
            if days:
                return (y, mo, days[0], *first)
        # No day matches in a whole 400-year cycle, so the pattern can never fire.
        self._never = True
        return None

    def next_local(self, naive: datetime) -> datetime | None:
        """Run croner's ``find_next_occurrence(naive, inclusive=true)`` on a naive
        wall-clock time.

        Sub-seconds are dropped first, so 12:00:00.7 can yield 12:00:00. Return ``None``
        when the pattern never matches again.
        """
        found = self.next_fields(
            naive.year, naive.month, naive.day, naive.hour, naive.minute, naive.second
        )
        return None if found is None else datetime(*found)

    def matches(self, naive: datetime) -> bool:
        """Run croner's ``is_time_matching`` on a naive wall-clock time, ignoring
        sub-seconds."""
        return (
            (self._seconds_mask >> naive.second) & 1 == 1
            and (self._minutes_mask >> naive.minute) & 1 == 1
            and (self._hours_mask >> naive.hour) & 1 == 1
            and naive.day in self._days_rule.days(naive.year, naive.month)
        )

    def fields(self) -> CronFields:
        """Return what each field matches. Days of the month and weekdays are ORed when
        both are restricted, as :class:`CronFields` says."""
        rule = self._days_rule
        return CronFields(
            seconds=self._seconds, minutes=self._minutes, hours=self._hours,
            months=tuple(m for m in range(1, 13) if (rule.months_mask >> m) & 1),
            days=tuple(d for d in range(1, 32) if rule.dom_all[d]),
            weekdays=tuple(w for w in range(7) if rule.dow_all[w]),
            nth_weekdays=frozenset((w, n) for w in range(7) for n in range(1, 6)
                                   if rule.dow_nth[w][n]),
            any_day=rule.star_dom, any_weekday=rule.star_dow, last_day=rule.dom_last,
            nearest_weekdays=tuple(d for d in range(1, 32) if rule.dom_closest[d]),
            last_weekdays=tuple(w for w in range(7) if rule.dow_last[w]),
        )

    @property
    def never_fires(self) -> bool:
        """Return True once the expression is known to match no time at all."""
        if not self._never:
            self.next_fields(2000, 1, 1, 0, 0, 0)
        return self._never


@lru_cache(maxsize=4096)
def _parse_cached(expr: str) -> CronExpression:
    return CronExpression._build(expr)


class _BothDays:
    """The days on which two day rules both match. This is Celery's crontab, which
    requires the day of the month *and* the day of the week, where cron requires either."""

    __slots__ = ("_cache", "first", "months_mask", "second")

    def __init__(self, first: _DayRule, second: _DayRule) -> None:
        self.first = first
        self.second = second
        self.months_mask = first.months_mask & second.months_mask
        self._cache: dict[int, tuple[int, ...]] = {}

    def days(self, year: int, month: int) -> tuple[int, ...]:
        key = year * 16 + month
        cached = self._cache.get(key)
        if cached is None:
            theirs = set(self.second.days(year, month))
            cached = tuple(d for d in self.first.days(year, month) if d in theirs)
            if len(self._cache) > 50_000:
                self._cache.clear()
            self._cache[key] = cached
        return cached


def both_days(source: str, days: CronExpression, weekdays: CronExpression) -> CronExpression:
    """Return an expression with the time of day of ``days`` that matches only the days
    that both ``days`` and ``weekdays`` match (an AND, where cron ORs a restricted day of
    the month with a restricted day of the week). ``source`` names it (by its marker).
    Only :meth:`CronExpression.next_fields` and what relies on it are meant for the
    result."""
    parsed = object.__new__(CronExpression)
    parsed.source = source
    parsed._seconds, parsed._minutes, parsed._hours = days._seconds, days._minutes, days._hours
    parsed._seconds_mask = days._seconds_mask
    parsed._minutes_mask = days._minutes_mask
    parsed._hours_mask = days._hours_mask
    parsed._days_rule = _BothDays(days._days_rule, weekdays._days_rule)  # type: ignore[assignment]
    parsed._never = days._never or weekdays._never
    return parsed


# -- time zones ------------------------------------------------------------------------------

# zoneinfo lists these zones, but chrono-tz (Awa's zone database) does not know them.
_NOT_IN_CHRONO_TZ = frozenset({"Factory", "localtime", "posixrules"})


@lru_cache(maxsize=1)
def _listed_zones() -> frozenset[str]:
    """Return the zones that the tzdata package lists. They are one small file, which is
    cheap to read."""
    try:
        text = (Path(tzdata.__file__).parent / "zones").read_text(encoding="utf-8")
    except OSError:
        return frozenset()
    return frozenset(text.split()) - _NOT_IN_CHRONO_TZ


@lru_cache(maxsize=1)
def _known_zones() -> frozenset[str]:
    # This walks the system's zone directories too, which is far slower, so it runs only
    # for names that tzdata does not list (the answer is the same as if every name were
    # looked up here).
    return frozenset(zoneinfo.available_timezones() - _NOT_IN_CHRONO_TZ)


# The zones validated so far, by name. There are a few hundred at most.
_ZONES: dict[str, zoneinfo.ZoneInfo] = {}


def load_timezone(name: str) -> zoneinfo.ZoneInfo:
    """Return the IANA zone ``name``, validated like chrono-tz: exact, case-sensitive names
    (``UTC``, ``US/Eastern``, ``EST5EDT`` and ``Etc/GMT+5`` are fine; ``utc`` is not).

    Otherwise raise :class:`InvalidTimezone`, naming the value. Zones are cached.
    """
    zone = _ZONES.get(name) if isinstance(name, str) else None
    if zone is not None:
        return zone
    if not isinstance(name, str) or (name not in _listed_zones()
                                     and name not in _known_zones()):
        raise InvalidTimezone(
            f"unknown time zone {name!r}; use an IANA name such as 'UTC' or 'Europe/Paris'"
            " (names are case-sensitive)"
        )
    zone = _ZONES[name] = zoneinfo.ZoneInfo(name)
    return zone


def local_seconds(y: int, mo: int, d: int, h: int, mi: int, s: int) -> int:
    """Return the seconds from 1970-01-01 00:00:00 to the given wall-clock time, ignoring
    any zone."""
    return (date(y, mo, d).toordinal() - _ORDINAL_1970) * 86400 + h * 3600 + mi * 60 + s


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_SECOND = timedelta(seconds=1)


def epoch_seconds(t: datetime) -> int:
    """Return the whole seconds since the Unix epoch, rounded down (croner drops
    sub-seconds)."""
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"an aware datetime is required, got naive {t!r}")
    return (t - _EPOCH) // _ONE_SECOND


def from_epoch(seconds: int) -> datetime:
    """Return the UTC instant ``seconds`` after the Unix epoch."""
    return datetime.fromtimestamp(seconds, timezone.utc)
