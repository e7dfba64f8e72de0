"""Typed errors raised by awa-beat.

Every error a user can cause derives from :class:`AwaBeatError`; its message is
meant to be printed as-is, without a traceback. The few internal errors at the end are
raised and caught inside the package; they live here too, so that every error class of
awa-beat is found in one module (the dashboard's ``HTTPError``, which is its response to a
request, stays with the dashboard).
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
        if len(problems) == 1:
            # One problem, one line: what a command prints after "error: ".
            ((name, field, msg),) = problems
            super().__init__(f"invalid schedule field: entry {name!r}, field {field!r}: {msg}")
            return
        lines = [f"{len(problems)} invalid schedule field(s):"]
        lines += [f"  - entry {name!r}, field {field!r}: {msg}" for name, field, msg in problems]
        super().__init__("\n".join(lines))


class ConfigError(AwaBeatError):
    """A configuration value is missing or invalid."""


class DispatchUnserved(ConfigError):
    """A schedule whose jobs nothing would run: no beat of its deployment publishes them
    to Celery, or no Awa worker can take them, while the beats seen would run another
    choice (``awa-beat add`` refuses it)."""


class NoDatabase(ConfigError):
    """No database is configured and no embedded one was started here; the operator
    commands end in one line and exit code 1, as every other mistake does."""


class StoreError(AwaBeatError):
    """The database refused or failed an operation.

    The store raises one of the subclasses where it can tell what went wrong; a plain
    ``StoreError`` is any other error the server returned.
    """


class DatabaseUnavailable(StoreError):
    """No connection to the database could be had, or it was lost mid-operation: worth
    retrying, unlike the other store errors."""


class DataRefused(StoreError):
    """PostgreSQL refused a value being written (too large for an index or a column, not
    text it can store, out of range): the data's fault, not the database's, so never
    retried as an outage is. Validation refuses such values first, naming the entry."""


class SchemaError(StoreError):
    """The database schema is missing, too old, or not ours to change."""


class UnknownSchema(SchemaError):
    """``awa.cron_jobs`` has columns, triggers or rules this awa-beat does not know (a
    newer Awa's, or a change by hand): awa-beat would misread its rows or take a write
    the database skipped for done, so it refuses to use the database at all."""


class WriteNotApplied(StoreError):
    """A write that had to change a schedule's row changed none: something in the
    database (a trigger, a rule) skipped it. Nothing of that write was kept."""


class NotFound(StoreError):
    """No schedule has the given name."""


class ScheduleConflict(AwaBeatError):
    """A runtime write (the Python API, ``awa-beat add/edit``) was refused; nothing was
    written."""


class ScheduleExists(ScheduleConflict):
    """A schedule of that name exists already (add it with ``replace=True`` /
    ``--replace`` to overwrite it)."""


class ScheduleOwned(ScheduleConflict):
    """The schedule belongs to a deployment's ``beat_schedule`` (or to a writer other
    than awa-beat): change it there, or take it over with ``force=True`` / ``--force``."""


class BackfillRefused(ScheduleConflict):
    """A backfill was refused (a bad range, more fire times than its limit, fire times
    after the schedule's cursor, or a run in progress under overlap ``skip``); nothing
    was written."""


class SessionLockUnsupported(StoreError):
    """Session advisory locks do not hold on this connection (transaction pooling?)."""


class EndpointError(ConfigError):
    """An HTTP endpoint (beat's metrics and probes, the dashboard) cannot listen where it
    was told to: a busy port, an address this host does not have."""


class BrokerError(AwaBeatError):
    """The broker refused, dropped or did not confirm a batch (or cannot be reached)."""


class SourceError(AwaBeatError):
    """The source of an import cannot be read (unreachable, missing, malformed)."""


# -- internal errors: raised and caught inside the package, never seen by a user --------


class FieldRefused(Exception):
    """One field of a schedule entry cannot be read. The entry parser raises it while it
    reads a field and turns it into a :class:`ValidationError` that names the entry."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class NestedTooDeep(Exception):
    """A value given as JSON text is nested deeper than the entry parser reads; the parser
    reports it as a refusal of the field that carried it."""


class CronFieldError(Exception):
    """One field of a cron expression cannot be parsed. The cron parser reports it as an
    :class:`InvalidCronExpression` naming the expression; its message is in lower case."""


class WaitTimeout(AssertionError, TimeoutError):
    """The test helper ``wait_for`` gave up. It is an assertion failure to a test and a
    timeout to a script, so each reports it the way it reports its own failures."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name if it has none): what
    a one-line log entry or user-facing error shows of a driver's or broker's error."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
