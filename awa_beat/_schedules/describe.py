"""A calendar in words: ``0 9 * * 1-5`` is "at 09:00, on Monday through Friday".

The module is pure, and it reads Awa's dialect as :mod:`awa_beat._schedules.cron` parses
it. Six fields put the seconds first (``sec min hour dom mon dow``), which Awa's own UI
gets wrong by reading every expression as five fields. When day of month and day of week
are both restricted, they are ORed as Awa does, and the description says "or".

awa-beat's markers are described too. ``@solar sunrise 48.85 2.35`` is "at sunrise at
48.85, 2.35". ``@crontab 0 9 1-7 * 1`` (Celery's crontab, which ANDs the two day fields)
is "at 09:00, on days 1 through 7 of the month, if it falls on Monday".
``@at 2027-01-01T00:00:00Z | runs=1`` is "once, at 2027-01-01 00:00 UTC". An rrule is
described by its frequency, days, time, start, count and end. Bounds follow after a
semicolon ("...; from 2027-01-01 00:00 UTC until 2027-06-30 00:00 UTC, at most 3 runs").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from ..errors import AwaBeatError
from .fire_times import calendar_for, every_seconds
from .markers import Bounds, is_marker, seconds_text, split_bounds

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
    """Return ``expr`` in words, or None when Awa would refuse it (the caller shows why).

    Every kind of stored calendar is described: Awa cron expressions and awa-beat's
    markers (:mod:`awa_beat._schedules.markers`: intervals, solar events, ``at``, rrules,
    and the bounds that any of them may carry). The function never raises, because a
    page lists every row, whatever the row holds.
    """
    try:
        calendar_for(expr, "UTC")
    except AwaBeatError:
        return None
    try:
        return _words(expr)
    except Exception:
        # A row that the calendar accepts but that no rule here puts in words must still
        # be listed, and the expression itself is shown beside the words.
        return f"as written: {expr}"


def _words(expr: str) -> str:
    if not is_marker(expr):
        return _cron(expr)
    head, bounds = split_bounds(expr)
    kind, _, rest = head.partition(" ")
    if kind == "@every":
        seconds = every_seconds(head)
        words = f"every {duration(seconds)}" if seconds is not None else head
    elif kind == "@cron":
        words = _cron(rest)
    elif kind == "@crontab":
        fields, _, dst = rest.partition(" dst=")
        words = _cron(fields, both_days=True) + (
            " (Celery's steps over clock changes)" if dst == "celery" else "")
    elif kind == "@solar":
        words = _solar(rest)
    elif kind == "@at":
        words = "once, at " + _instant(
            datetime.strptime(rest, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc))
        if bounds.runs == 1:  # "once" says it: an at() carries runs=1 to retire itself.
            bounds = Bounds(bounds.start, bounds.end, None, bounds.window, bounds.jitter)
    else:
        words = _rrule(rest)
    limits = _bounds(bounds)
    return f"{words}; {limits}" if limits else words


def _bounds(bounds: Bounds) -> str:
    """Describe bounds as ``from 2027-01-01 00:00 UTC until 2027-06-30 00:00 UTC, at most
    3 runs``."""
    parts = []
    if bounds.start is not None:
        parts.append(f"from {_instant(bounds.start)}")
    if bounds.end is not None:
        parts.append(f"until {_instant(bounds.end)}")
    text = " ".join(parts)
    if bounds.runs is not None:
        runs = "at most 1 run (one-off)" if bounds.runs == 1 else \
            f"at most {bounds.runs} runs"
        text = f"{text}, {runs}" if text else runs
    for value, words in ((bounds.window, "missed fires older than {} skipped"),
                         (bounds.jitter, "each run up to {} late (jitter)")):
        if value is not None:
            said = words.format(_seconds(value))
            text = f"{text}, {said}" if text else said
    return text


def _seconds(value: float) -> str:
    """Describe a window or a jitter: ``5 minutes``, ``90 seconds (1 min 30 s)``,
    ``0.5 s``."""
    if value.is_integer():
        whole = duration(int(value))
        return whole if whole[:1].isdigit() else f"1 {whole}"
    return f"{seconds_text(value)} s"


def _instant(t: datetime) -> str:
    """Describe an instant in UTC, with the seconds only when there are some."""
    t = t.astimezone(timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M" + (":%S" if t.second else "")) + " UTC"


_SOLAR_WORDS = {
    "dawn_astronomical": "astronomical dawn", "dawn_nautical": "nautical dawn",
    "dawn_civil": "civil dawn", "sunrise": "sunrise", "solar_noon": "solar noon",
    "sunset": "sunset", "dusk_civil": "civil dusk", "dusk_nautical": "nautical dusk",
    "dusk_astronomical": "astronomical dusk",
}


def _solar(rest: str) -> str:
    event, lat, lon = rest.split(" ")
    return f"at {_SOLAR_WORDS.get(event, event)} at {lat}, {lon}"


_FREQ_UNITS = {"YEARLY": "year", "MONTHLY": "month", "WEEKLY": "week", "DAILY": "day",
               "HOURLY": "hour", "MINUTELY": "minute", "SECONDLY": "second"}
_RRULE_DAYS = {"MO": "Monday", "TU": "Tuesday", "WE": "Wednesday", "TH": "Thursday",
               "FR": "Friday", "SA": "Saturday", "SU": "Sunday"}


def _rrule(rest: str) -> str:
    """Describe an RFC 5545 rule in words: how often, on which days, at what time, from
    when, how many times, and until when. Parts that have no words here are quoted as
    written."""
    parts = dict(part.partition("=")[::2] for part in rest.split(";"))
    freq = parts.pop("FREQ")
    unit = _FREQ_UNITS[freq]
    interval = int(parts.pop("INTERVAL", "1"))
    words = [f"every {unit}" if interval == 1 else f"every {interval} {unit}s"]
    start = parts.pop("DTSTART")
    local = datetime.strptime(start[:15], "%Y%m%dT%H%M%S")
    offset = f" {start[15:18]}:{start[18:]}" if len(start) > 15 else ""
    days = parts.pop("BYDAY", None)
    if days:
        words.append("on " + _join([_rrule_day(d) for d in days.split(",")]))
    month_days = parts.pop("BYMONTHDAY", None)
    if month_days:
        words.append("on " + _join([_rrule_month_day(int(d)) for d in month_days.split(",")])
                     + " of the month")
    months = parts.pop("BYMONTH", None)
    if months:
        words.append("in " + _join([_month_name(m) for m in months.split(",")]))
    at = _rrule_time(freq, local, parts.pop("BYHOUR", None), parts.pop("BYMINUTE", None),
                     parts.pop("BYSECOND", None))
    if at:
        words.append(at)
    words.append(f"from {local:%Y-%m-%d %H:%M}{f':{local.second:02d}' if local.second else ''}"
                 f"{offset}")
    count = parts.pop("COUNT", None)
    if count is not None:
        words.append("once" if count == "1" else f"{count} times")
    until = parts.pop("UNTIL", None)
    if until is not None:
        words.append("until " + _instant(
            datetime.strptime(until, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)))
    words += [f"{key}={value}" for key, value in parts.items()]
    return ", ".join(words)


def _rrule_day(item: str) -> str:
    nth, day = item[:-2], _RRULE_DAYS[item[-2:]]
    if not nth:
        return day
    n = int(nth)
    return f"the last {day}" if n == -1 else \
        f"the {_ordinal(n)} {day}" if n > 0 else f"the {_ordinal(-n)} last {day}"


def _rrule_month_day(n: int) -> str:
    return f"day {n}" if n > 0 else "the last day" if n == -1 else \
        f"the {_ordinal(-n)} last day"


def _rrule_time(freq: str, local: datetime, hours: str | None, minutes: str | None,
                seconds: str | None) -> str:
    """Describe the time of its period at which a rule fires: its BYHOUR, BYMINUTE and
    BYSECOND, or else the start's (as dateutil takes them), for the parts coarser than its
    frequency."""
    order = list(_FREQ_UNITS)
    coarse = order.index(freq)
    hour = hours or (str(local.hour) if coarse <= order.index("DAILY") else None)
    minute = minutes or (str(local.minute) if coarse <= order.index("HOURLY") else None)
    second = seconds or (str(local.second) if coarse <= order.index("MINUTELY") else None)
    if hour is not None and minute is not None and second is not None \
            and "," not in minute and "," not in second:
        s = int(second)
        return "at " + _join([f"{int(h):02d}:{int(minute):02d}" + (f":{s:02d}" if s else "")
                              for h in hour.split(",")])
    parts = []
    if hour is not None:
        parts.append(("at hours " if "," in hour else "at hour ") + _join(hour.split(",")))
    if minute is not None:
        parts.append(("at minutes " if "," in minute else "at minute ")
                     + _join(minute.split(",")))
    if second is not None and second != "0":
        parts.append(("at seconds " if "," in second else "at second ")
                     + _join(second.split(",")))
    return ", ".join(parts)


def _cron(expr: str, *, both_days: bool = False) -> str:
    """Describe an Awa cron expression (five or six fields, or an alias) in words. With
    ``both_days``, a day must match the day of the month *and* the day of the week
    (Celery's rule)."""
    seconds = every_seconds(expr)
    if seconds is not None:
        return f"every {duration(seconds)}"
    text = expr.strip().lower().replace("?", "*")
    text = _NICKNAMES.get(text, text)
    for name, number in _DAY_NAMES + _MONTH_NAMES:
        text = text.replace(name, number)  # croner replaces substrings of the whole pattern too.
    fields = text.split()
    if len(fields) == 5:
        fields.insert(0, "0")
    sec, minute, hour, dom, month, dow = fields
    parts = [_time(sec, minute, hour)]
    days = _days(dom, dow, both_days)
    if days:
        parts.append(days)
    elif month == "*" and re.match(r"at \d\d:\d\d", parts[0]):
        parts.append("every day")
    if month != "*":
        parts.append("in " + _join(_items(month, "month", _month_name, ordinal=True)))
    return ", ".join(p for p in parts if p)


def duration(seconds: int) -> str:
    """Describe ``90`` as ``90 seconds (1 min 30 s)``, and whole minutes, hours and days
    by name."""
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
        if s is not None:  # A step or list of seconds already says how often.
            parts.append("every minute")
    else:
        parts.append(_phrase(minute, "minute"))
    if hour != "*":
        parts.append(_phrase(hour, "hour", "in hour"))
    elif minute != "*" and _single(minute) is not None:
        parts.append("every hour")
    return ", ".join(parts)


def _phrase(field: str, unit: str, label: str | None = None) -> str:
    """Describe a time field: ``*/15`` is "every 15 minutes", and ``30`` is "at minute 30"."""
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


def _days(dom: str, dow: str, both: bool = False) -> str:
    """Describe the days of the month and of the week. Awa ORs them when both are
    restricted, and Celery's crontab (``both``) ANDs them."""
    parts = []
    if dom != "*":
        parts.append(_month_days(dom))
    if dow != "*":
        parts.append(_week_days(dow))
    if both and len(parts) == 2:
        return f"{parts[0]}, if it falls {parts[1]}"
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


def offset_text(delta: timedelta | None) -> str:
    """Write a UTC offset as ``+HH:MM``. No offset reads as ``+00:00``."""
    minutes = int((delta or timedelta()).total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
