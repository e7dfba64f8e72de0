"""What every source shares: the result types, the conversion of one Celery-style entry,
the cursor rule and the deduplication by name.

The cursor is the old scheduler's ``last_run_at`` (aware UTC, whole seconds), so the
first fire after the cutover is the next one. Nothing at or before the last run fires
again, and the slots missed during the cutover fire once (``coalesce``) or each one
fires (``catch_up``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from typing import Any, Union

from .._schedules.spec import ScheduleSpec, specs_from_beat_schedule
from ..errors import ValidationError, first_line

UTC = timezone.utc
#: Celery's result-backend cleanup, which Celery's schedulers install on their own.
BACKEND_CLEANUP = "celery.backend_cleanup"
BACKEND_CLEANUP_REASON = (
    "Celery's built-in result-backend cleanup, installed by the old scheduler itself: "
    "awa-beat's Scheduler registers it by itself when the app's result backend needs it "
    "(Celery's own rule), so an imported copy would only be a second, unmanaged row"
)


@dataclass(frozen=True)
class Imported:
    """An entry that is carried over: its schedule, its cursor and whether it starts paused."""

    spec: ScheduleSpec
    cursor: datetime | None
    """The old scheduler's last run (aware UTC, whole seconds), or None when no run is known."""
    paused_by: str | None = None
    """Why the row starts paused (the source had it disabled), or None when it is active."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def paused(self) -> bool:
        return self.paused_by is not None


@dataclass(frozen=True)
class NotCarried:
    """An entry that the import leaves out, and the reason."""

    name: str
    reason: str


Result = Union[Imported, NotCarried]  # noqa: UP007 - It is a runtime alias on Python 3.10.


def convert(name: str, entry: Mapping[str, Any], *, cursor: datetime | None = None,
            paused_by: str | None = None, default_timezone: str = "UTC",
            default_dispatch: str = "awa", default_dst: str = "awa") -> Result:
    """Convert one Celery-style entry, validated exactly as beat validates
    ``beat_schedule``. ``default_dst`` is the app's ``awa_beat_dst``, as beat reads it."""
    try:
        [spec] = specs_from_beat_schedule({name: entry}, default_timezone=default_timezone,
                                          default_dispatch=default_dispatch,
                                          default_dst=default_dst)
    except ValidationError as exc:
        return NotCarried(name, "; ".join(f"{f}: {m}" if f != "schedule" else m
                                          for _, f, m in exc.problems))
    return Imported(spec, cursor, paused_by)


def guarded(name: Any, read: Callable[[], Result]) -> Result:
    """Return ``read()``, the conversion of one row of a source. A row so odd that it fails
    in a way that no check foresaw is left out with the reason, and the rest of the import
    goes on (the import lists what it does not carry)."""
    try:
        return read()
    except Exception as exc:  # Another program's data may hold any row: report it, go on.
        return NotCarried(str(name), f"cannot be read: {type(exc).__name__}: "
                          f"{first_line(exc)}")


def utc_cursor(value: Any, naive_zone: tzinfo = UTC) -> datetime | None:
    """Return a last-run time as an aware UTC cursor in whole seconds. It is rounded
    down, which can never let a fire time at or before the run through, because fire
    times are whole seconds."""
    if not isinstance(value, datetime):
        return None
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        from celery.utils.time import make_aware  # This is Celery's rule for ambiguous times.

        value = make_aware(value, naive_zone)
    return value.astimezone(UTC).replace(microsecond=0)


def dedupe(results: Iterable[Result]) -> list[Result]:
    """Return the results in order. A later entry with a name that is already imported is
    not carried over, because a row has one definition, and which one wins must not
    depend on chance."""
    seen: set[str] = set()
    out: list[Result] = []
    for result in results:
        if isinstance(result, Imported):
            if result.name in seen:
                out.append(NotCarried(result.name, "another entry of the source has this name; "
                                      "the first one is imported"))
                continue
            seen.add(result.name)
        out.append(result)
    return out


def iso(value: datetime | None) -> str | None:
    """Return a time as ISO 8601 in UTC, for reasons, notes and ``--json``."""
    return value.astimezone(UTC).isoformat() if value is not None else None

