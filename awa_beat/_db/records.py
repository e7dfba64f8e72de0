"""The records that pass between the store, the engine, the runtime and the operations
layer: plain data, no database and no Celery.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol

#: ``paused_by`` of a schedule whose last allowed run fired (``runs=``, ``at``). The fire
#: statement sets it, with ``paused_at``, when the run count reaches the limit, so it is a
#: value of the table: the store binds it into its statements and every reader compares
#: with it.
RETIRED_BY = "awa-beat: retired (its last run fired)"
#: Who pauses a schedule after its ``pause_after_failures`` failed runs in a row.
FAILURES_PAUSED_BY = "awa-beat"
#: How much of the last error a pause after failures keeps in its note.
PAUSE_ERROR_LIMIT = 300


@dataclass(frozen=True)
class ScheduleRow:
    """One row of ``awa.cron_jobs`` as stored (ours or another deployment's)."""

    name: str
    cron_expr: str
    timezone: str
    kind: str
    queue: str
    args: Any
    priority: int
    max_attempts: int
    tags: list[str]
    metadata: Any
    missed_fire_policy: str
    last_enqueued_at: datetime | None
    created_at: datetime
    updated_at: datetime
    paused_at: datetime | None
    paused_by: str | None
    deployment: str | None = None
    """The awa-beat deployment that registered the row; None for rows we did not write."""
    owner: str | None = None
    """``"config"`` (a deployment's beat_schedule), ``"runtime"`` (the Python API or
    ``awa-beat add``), or None for rows awa-beat did not write."""

    @property
    def retired(self) -> bool:
        """Its last allowed run fired (an ``at``, one-off or ``max_runs`` schedule): the
        fire statement paused it, by :data:`RETIRED_BY`."""
        return self.paused_at is not None and self.paused_by == RETIRED_BY


@dataclass(frozen=True)
class FireRequest:
    """Fire ``fire_times`` (in order) for one schedule if its cursor is still ``expected``.

    On success the cursor moves to the last fire time and one job per fire is inserted,
    all in the same statement as every other request of the batch.
    """

    name: str
    expected: datetime | None
    fire_times: Sequence[datetime]
    limited: bool = False
    """The schedule has a run limit (``runs=`` in its marker): the statement counts its
    runs and fires no more than are left."""
    coalesced: Coalesced | None = None
    """The fires a coalesce left out before ``fire_times``, recorded with the fire."""
    windowed: Windowed | None = None
    """The fires older than the schedule's catch-up window, not fired: recorded with the
    fire as one skipped occurrence, the cursor moved past them. With it,
    ``fire_times`` may be empty."""
    run_ats: Sequence[datetime] | None = None
    """With a jitter, when each fire's job is to run (the fire time plus its delay), in
    the order of ``fire_times``; None without one."""

    @property
    def cursor(self) -> datetime:
        """Where the cursor moves: the last fire time, or, when every due fire was older
        than the window, the last of those."""
        if self.fire_times:
            return self.fire_times[-1]
        assert self.windowed is not None, "a fire request with no fire time and no skip"
        return self.windowed.last


@dataclass(frozen=True)
class Coalesced:
    """Fire times a coalesce passed over: the first and last of them, and how many
    (counted up to a limit: ``capped`` when there were more)."""

    first: datetime
    last: datetime
    count: int
    capped: bool = False


@dataclass(frozen=True)
class Windowed:
    """Fire times older than a schedule's catch-up window (``window`` seconds), skipped:
    the first and last of them, and how many (counted up to a limit: ``capped`` when
    there were more)."""

    first: datetime
    last: datetime
    count: int
    window: float
    capped: bool = False

    @property
    def reason(self) -> str:
        """The occurrence's reason, as history shows it; it starts "catch-up window"."""
        count = f"at least {self.count}" if self.capped else str(self.count)
        fires = "fire time" if self.count == 1 and not self.capped else "fire times"
        window = f"{self.window:g}"
        return (f"catch-up window: {count} missed {fires} older than the {window} s "
                "window, not fired")


#: The fire time the fire statement gives back, with no job id, for a schedule whose
#: catch-up window skip it recorded (:attr:`FireResult.windowed`).
WINDOW_SKIPPED = "window"


@dataclass(frozen=True)
class FiredJob:
    job_id: int
    name: str
    fire_time: str
    """As stored in the job's metadata: ``YYYY-MM-DD HH:MM:SS+00``, with the fraction of a
    second (its trailing zeros dropped) when the fire time has one."""
    updated_at: datetime | None = None
    """The schedule row's ``updated_at`` after the fire."""


@dataclass
class FireResult:
    jobs: list[FiredJob] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """Schedules whose fire raised a database error, with the error's first line."""
    skipped: list[FiredJob] = field(default_factory=list)
    """Fires the overlap policy passed over (cursor moved, no job): ``job_id`` is 0."""
    ahead: list[str] = field(default_factory=list)
    """Schedules not fired because their fire time is later than the database's clock
    plus the tolerance: this host's clock runs ahead of the database's."""
    windowed: list[FiredJob] = field(default_factory=list)
    """Schedules whose fires older than the catch-up window were recorded as skipped
    (their cursor moved): ``job_id`` is 0 and ``fire_time`` is :data:`WINDOW_SKIPPED`."""
    started_held: bool = False
    """The jobs are fires that overlap buffer_one held and started once the run before
    them finished: late on purpose, so their delay is not beat's lag."""
    buffered: list[FiredJob] = field(default_factory=list)
    """Fires that overlap buffer_one holds until the run before them finishes (cursor
    moved, no job yet): ``job_id`` is 0. The engine then starts them
    (:meth:`~awa_beat._db.evaluator.EvaluatorStore.fire_buffered`)."""


@dataclass
class BufferedStart:
    """What one run of ``fire_buffered`` did: the jobs of the held fires it started, and
    how many fires remain held."""

    jobs: list[FiredJob] = field(default_factory=list)
    still_held: int = 0


@dataclass(frozen=True)
class TableState:
    """A cheap fingerprint of ``awa.cron_jobs``: any insert or delete changes it."""

    total: int
    fingerprint: int
    db_now: datetime
    """The server's clock when it was read."""
    xmin: int | None = None
    """The xmin of the read's snapshot: every transaction below it had ended."""


@dataclass(frozen=True, slots=True)
class CronState:
    """What the evaluator needs of a row; about a fifth of a full row's memory."""

    name: str
    cron_expr: str
    timezone: str
    missed_fire_policy: str
    last_enqueued_at: datetime | None
    created_at: datetime
    updated_at: datetime
    paused_at: datetime | None


class CronRow(NamedTuple):
    """A row as the evaluator's readers stream it: the columns of :class:`CronState`, in
    its order, as a plain tuple. The readers make one per row of a million-row table, so
    it is the cheapest record with names that Python has; whoever keeps the rows keeps
    them in a form of its own."""

    name: str
    cron_expr: str
    timezone: str
    missed_fire_policy: str
    last_enqueued_at: datetime | None
    created_at: datetime
    updated_at: datetime
    paused_at: datetime | None


class EvaluatorColumns(Protocol):
    """A row's evaluator columns, however its holder keeps them (a :class:`CronState`,
    or the engine's own entry)."""

    @property
    def cron_expr(self) -> str: ...
    @property
    def timezone(self) -> str: ...
    @property
    def missed_fire_policy(self) -> str: ...
    @property
    def last_enqueued_at(self) -> datetime | None: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def updated_at(self) -> datetime: ...
    @property
    def paused_at(self) -> datetime | None: ...


#: A row's columns after its name, in the order of :class:`CronState`'s fields.
Columns = tuple[str, str, str, "datetime | None", datetime, datetime, "datetime | None"]
def columns_of(row: EvaluatorColumns) -> Columns:
    """The row's columns after its name, to compare with a row read."""
    return (row.cron_expr, row.timezone, row.missed_fire_policy, row.last_enqueued_at,
            row.created_at, row.updated_at, row.paused_at)


@dataclass(frozen=True)
class SyncResult:
    inserted: int
    updated: int
    unchanged: int
    fingerprint: int = 0
    """What the rows synced come to once stored (``config_in_force``): a sum of hashes,
    so that batches add up."""

    @property
    def rows(self) -> int:
        return self.inserted + self.updated + self.unchanged

    @classmethod
    def total(cls, results: Iterable[SyncResult]) -> SyncResult:
        """The sum of several batches' results."""
        inserted = updated = unchanged = fingerprint = 0
        for r in results:
            inserted, updated, unchanged = (inserted + r.inserted, updated + r.updated,
                                            unchanged + r.unchanged)
            fingerprint += r.fingerprint
        return cls(inserted, updated, unchanged, fingerprint)


@dataclass(frozen=True)
class Fence:
    """The lock a leader's outbox publishes under: the server's pid of the session that
    holds ``lock_key``. Reads of jobs to publish return nothing once that session no
    longer holds it."""

    backend_pid: int
    lock_key: int


class Contact:
    """When a store last reached its database, and when it last failed to: what
    ``/readyz`` and the database metrics read, from another thread, without a query.

    Written by the thread that ran the operation, read by any: single attribute
    assignments, so a reader sees each value whole.
    """

    __slots__ = ("clock", "errors", "failed_at", "ok_at")

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.ok_at: float | None = None
        """Monotonic seconds of the last operation that reached the database."""
        self.failed_at: float | None = None
        """Monotonic seconds of the last operation that failed on a database error."""
        self.errors = 0
        """Operations that failed on a database error (either kind), since the store
        was made."""

    def ok(self) -> None:
        self.ok_at = self.clock()

    def failed(self) -> None:
        """The database could not be reached (or the connection was lost)."""
        self.errors += 1
        self.failed_at = self.clock()

    def refused(self) -> None:
        """The database answered with an error."""
        self.errors += 1
        self.ok_at = self.clock()

    @property
    def reachable(self) -> bool:
        """Whether the latest operation reached the database (False before any)."""
        return self.ok_at is not None and (self.failed_at is None
                                           or self.ok_at > self.failed_at)


@dataclass(frozen=True)
class OutboxBacklog:
    """One deployment's jobs for Celery that no broker has accepted yet."""

    deployment: str
    """Whose beat publishes them ('' for jobs that name none)."""
    jobs: int
    oldest_age: float | None
    """Seconds since the oldest of them was fired, by the database's clock."""


@dataclass(frozen=True)
class OutboxStats:
    """What the dispatch bridge has done, for metrics."""

    published: int
    """Messages the broker accepted."""
    publish_errors: int
    """Failed attempts to publish (each is retried with back-off)."""
    broker_up: bool
    """False while publishing fails (an outage), True otherwise."""
