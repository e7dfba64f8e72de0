"""A calendar in words: ``0 9 * * 1-5`` is "at 09:00, on Monday through Friday".

Pure, for Awa's dialect as :mod:`awa_beat.cron` parses it. Six fields put the seconds
first (``sec min hour dom mon dow``), which Awa's own UI gets wrong by reading every
expression as five fields. Day of month and day of week, when both are restricted, are
ORed as Awa does, and the description says "or".
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..errors import AwaBeatError
from ..fire_times import calendar_for, every_seconds

_NICKNAMES = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@hourly": "0 * * * *",
}
_WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday",
             "Sunday")
_MONTHS = ("", "January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
_DAY_NAMES = (("-sun", "-7"), ("sun", "0"), ("mon", "1"), ("tue", "2"), ("wed", "3"),
              ("thu", "4"), ("fri", "5"), ("sat", "6"))
_MONTH_NAMES = tuple((m[:3].lower(), str(i)) for i, m in enumerate(_MONTHS) if m)
_STEP = re.compile(r"(\*|\d+)(?:-(\d+))?(?:/(\d+))?")


def describe(expr: str) -> str | None:
    """``expr`` in words, or None when Awa would refuse it (the caller shows why)."""
    try:
        calendar_for(expr, "UTC")
    except AwaBeatError:
        return None
    seconds = every_seconds(expr)
    if seconds is not None:
        return f"every {duration(seconds)}"
    text = expr.strip().lower().replace("?", "*")
    text = _NICKNAMES.get(text, text)
    for name, number in _DAY_NAMES + _MONTH_NAMES:
        text = text.replace(name, number)  # as croner does: substrings, whole pattern
    fields = text.split()
    if len(fields) == 5:
        fields.insert(0, "0")
    sec, minute, hour, dom, month, dow = fields
    parts = [_time(sec, minute, hour)]
    days = _days(dom, dow)
    if days:
        parts.append(days)
    elif month == "*" and re.match(r"at \d\d:\d\d", parts[0]):
        parts.append("every day")
    if month != "*":
        parts.append("in " + _join(_items(month, "month", _month_name, ordinal=True)))
    return ", ".join(p for p in parts if p)


def duration(seconds: int) -> str:
    """``90`` as ``90 seconds (1 min 30 s)``; whole minutes, hours and days by name."""
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds % size == 0:
            count = seconds // size
            return unit if count == 1 else f"{count} {unit}s"
    if seconds < 60:
        return "second" if seconds == 1 else f"{seconds} seconds"
    minutes, rest = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    shown = (f"{hours} h " if hours else "") + (f"{minutes} min " if minutes else "")
    return f"{seconds} seconds ({shown}{rest} s)"


def _single(field: str) -> int | None:
    return int(field) if field.isdigit() else None


def _time(sec: str, minute: str, hour: str) -> str:
    s, m, h = _single(sec), _single(minute), _single(hour)
    if s is not None and m is not None and h is not None:
        return f"at {h:02d}:{m:02d}" + (f":{s:02d}" if s else "")
    hours = [int(x) for x in hour.split(",")] if all(x.isdigit() for x in hour.split(",")) else []
    if s is not None and m is not None and hours and len(hours) <= 6:
        return "at " + _join([f"{x:02d}:{m:02d}" + (f":{s:02d}" if s else "") for x in hours])
    parts = []
    if sec == "*":
        parts.append("every second")
    elif s != 0:
        parts.append(_phrase(sec, "second"))
    if minute == "*":
        if s is not None:  # a step or list of seconds already says how often
            parts.append("every minute")
    else:
        parts.append(_phrase(minute, "minute"))
    if hour != "*":
        parts.append(_phrase(hour, "hour", "in hour"))
    elif minute != "*" and _single(minute) is not None:
        parts.append("every hour")
    return ", ".join(parts)


def _phrase(field: str, unit: str, label: str | None = None) -> str:
    """A time field: ``*/15`` is "every 15 minutes", ``30`` "at minute 30"."""
    items = _items(field, unit, str)
    plain = [i for i in items if not i.startswith("every")]
    if not plain:
        return _join(items)
    if len(plain) == len(items):
        many = len(plain) > 1 or " through " in plain[0]
        return f"{label or 'at ' + unit}{'s' if many else ''} {_join(plain)}"
    return f"{unit}s " + _join(items)


def _items(field: str, unit: str, name: Callable[[str], str],
           ordinal: bool = False) -> list[str]:
    out = []
    for item in field.split(","):
        match = _STEP.fullmatch(item)
        if not match:
            out.append(item)
            continue
        start, end, step = match.groups()
        if step is None:
            out.append("every " + unit if start == "*" else
                       name(start) if end is None else f"{name(start)} through {name(end)}")
            continue
        n = int(step)
        every = (f"every {unit}" if n == 1 else
                 f"every {_ordinal(n)} {unit}" if ordinal else f"every {n} {unit}s")
        if start == "*":
            out.append(every)
        elif end is None:
            out.append(f"{every} from {name(start)}")
        else:
            out.append(f"{every} from {name(start)} through {name(end)}")
    return out


def _days(dom: str, dow: str) -> str:
    """Days of month and of week; Awa ORs them when both are restricted."""
    parts = []
    if dom != "*":
        parts.append(_month_days(dom))
    if dow != "*":
        parts.append(_week_days(dow))
    return " or ".join(parts)


def _month_days(field: str) -> str:
    words = []
    for item in field.split(","):
        if item == "l":
            words.append("the last day of the month")
        elif item.endswith("w") and item[:-1].isdigit():
            words.append(f"the weekday nearest day {int(item[:-1])} of the month")
        else:
            words.append(_join(_items(item, "day", str, ordinal=True)))
    plain = all(w[0].isdigit() for w in words)
    if plain:
        return f"on day{'s' if len(words) > 1 or ' through ' in words[0] else ''} " \
               f"{_join(words)} of the month"
    return "on " + _join([w if not w[0].isdigit() else f"day {w}" for w in words]) \
        + ("" if all("month" in w for w in words) else " of the month")


def _week_days(field: str) -> str:
    words = []
    for item in field.split(","):
        if "#" in item:
            day, nth = item.split("#", 1)
            words.append(f"the last {_day_name(day)} of the month" if nth == "l" else
                         f"the {_ordinal(int(nth))} {_day_name(day)} of the month")
        elif item.endswith("l") and item[:-1].isdigit():
            words.append(f"the last {_day_name(item[:-1])} of the month")
        elif item == "l":
            words.append("(never: a bare L in day of week)")
        else:
            words.append(_join(_items(item, "day of the week", _day_name, ordinal=True)))
    return "on " + _join(words)


def _day_name(text: str) -> str:
    return _WEEKDAYS[int(text)] if text.isdigit() and int(text) <= 7 else text


def _month_name(text: str) -> str:
    return _MONTHS[int(text)] if text.isdigit() and 1 <= int(text) <= 12 else text


def _ordinal(n: int) -> str:
    if n == 1:
        return "1st"
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
