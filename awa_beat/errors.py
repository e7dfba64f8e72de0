"""Typed errors raised by awa-beat.

Every error a user can cause derives from :class:`AwaBeatError`; its message is
meant to be printed as-is, without a traceback.
"""

from __future__ import annotations


class AwaBeatError(Exception):
    """Base class of every awa-beat error."""


class ScheduleError(AwaBeatError):
    """A schedule definition is invalid."""


class InvalidCronExpression(ScheduleError):
    """A cron expression is not accepted by Awa's cron dialect."""


class InvalidTimezone(ScheduleError):
    """A time zone name is not a known IANA name."""


class ValidationError(ScheduleError):
    """One or more schedule entries are invalid.

    ``problems`` lists ``(entry name, field, message)`` for every bad field of
    every bad entry, so a user can fix them all in one go.
    """

    def __init__(self, problems: list[tuple[str, str, str]]) -> None:
        self.problems = problems
        lines = [f"{len(problems)} invalid schedule field(s):"]
        lines += [f"  - entry {name!r}, field {field!r}: {msg}" for name, field, msg in problems]
        super().__init__("\n".join(lines))


class StoreError(AwaBeatError):
    """The database refused or failed an operation."""


class SchemaError(StoreError):
    """The database schema is missing, too old, or not ours to change."""


class NotFound(StoreError):
    """No schedule has the given name."""


class ConfigError(AwaBeatError):
    """A configuration value is missing or invalid."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name if it has none): what
    a one-line log entry or user-facing error shows of a driver's or broker's error."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
