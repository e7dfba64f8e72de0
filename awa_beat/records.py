"""The records that pass between the store, the engine, the runtime and the operations
layer: plain data, no database and no Celery.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


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


@dataclass(frozen=True)
class FireRequest:
    """Fire ``fire_times`` (in order) for one schedule if its cursor is still ``expected``.

    On success the cursor moves to the last fire time and one job per fire is inserted,
    all in the same statement as every other request of the batch.
    """

    name: str
    expected: datetime | None
    fire_times: Sequence[datetime]
    coalesced: Coalesced | None = None
    """The fires a coalesce left out before ``fire_times``, recorded with the fire."""


@dataclass(frozen=True)
class Coalesced:
    """Fire times a coalesce passed over: the first and last of them, and how many
    (counted up to a limit: ``capped`` when there were more)."""

    first: datetime
    last: datetime
    count: int
    capped: bool = False


@dataclass(frozen=True)
class FiredJob:
    job_id: int
    name: str
    fire_time: str
    """As stored in the job's metadata: ``YYYY-MM-DD HH:MM:SS+00``."""
    updated_at: datetime | None = None
    """The schedule row's ``updated_at`` after the fire."""


@dataclass
class FireResult:
    jobs: list[FiredJob] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """Schedules whose fire raised a database error, with the error's first line."""
    skipped: list[FiredJob] = field(default_factory=list)
    """Fires the overlap policy passed over (cursor moved, no job): ``job_id`` is 0."""


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


@dataclass(frozen=True)
class SyncResult:
    inserted: int
    updated: int
    unchanged: int


@dataclass(frozen=True)
class Fence:
    """The lock a leader's outbox publishes under: the server's pid of the session that
    holds ``lock_key``. Reads of jobs to publish return nothing once that session no
    longer holds it."""

    backend_pid: int
    lock_key: int
