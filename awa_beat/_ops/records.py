"""The operations layer's answers: plain records that the command line, the Python API,
the metrics and the dashboard each render their own way.

The records live here, not in :mod:`awa_beat._db.records`, because they are this layer's
answers and only it and its callers use them; ``_db.records`` holds what the store, the
engine and the runtime pass among themselves. A record may compute a reading of its row
(the last fire, the bounds) with the pure schedule code, but it never reads the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any

from .._db.lock import skew_words
from .._db.records import ScheduleRow
from .._schedules.markers import Bounds
from .._schedules.runs import fired_at, whole_second
from .._schedules.stored_entries import split_schedule


@dataclass(frozen=True)
class ScheduleView:
    """A stored schedule as an operator sees it."""

    row: ScheduleRow
    next_fire: datetime | None
    """The next fire after now, or None when there is none (no fire is left, or the row
    is invalid)."""
    problem: str | None = None
    """Why the row cannot fire (a bad expression, zone or policy), or None."""
    orphan: bool = False
    """Whether the app's deployment registered the row but its beat_schedule no longer
    has it."""
    never_fires: str | None = None
    """Why a valid row that is not retired has no fire left (its end or its ``at()``
    instant is past, or its rrule is spent), or None. A row with a reason here will never
    fire again."""

    @property
    def name(self) -> str:
        return self.row.name

    @property
    def invalid(self) -> bool:
        return self.problem is not None

    @property
    def paused(self) -> bool:
        """Whether the row is paused, by an operator or because its last run retired it.
        Nothing fires on its own while it is paused, whatever :attr:`next_fire` says it
        would be once resumed."""
        return self.row.paused_at is not None

    @property
    def last_fire(self) -> datetime | None:
        """The fire time of its latest fire, or None when it has not fired (see
        :func:`awa_beat._schedules.runs.fired_at`)."""
        row = self.row
        return fired_at(row.cron_expr, row.timezone, row.last_enqueued_at, row.created_at)

    @property
    def quiet_since(self) -> datetime | None:
        """For a row that has not fired, the instant since which it has not, unless that
        instant is its registration; else None. A cursor past the registration marks a
        change of the row's calendar, which restarts the wait for its first fire."""
        cursor = self.row.last_enqueued_at
        if self.last_fire is not None or cursor is None:
            return None
        return cursor if cursor > whole_second(self.row.created_at) else None

    @property
    def owner(self) -> str | None:
        """``"config"`` (its deployment's beat_schedule), ``"runtime"`` (written by the
        Python API or ``awa-beat add``), or None (not written by awa-beat)."""
        return self.row.owner

    @property
    def bounds(self) -> ScheduleBounds:
        """Its bounds and outcome settings, as fields (``.bounds.max_runs``, ...)."""
        return ScheduleBounds.of(self.row)

    @property
    def owner_text(self) -> str:
        """Who owns the row, for people: ``proj``, ``runtime (via proj)``, ..."""
        row = self.row
        if row.owner == "runtime":
            return f"runtime (via {row.deployment})" if row.deployment else "runtime"
        return row.deployment or "(not awa-beat)"


@dataclass(frozen=True)
class UpcomingFire:
    """One fire to come, as ``awa-beat show`` and the dashboard list them."""

    at: datetime
    note: str = ""
    """A note that the zone's UTC offset changes before this fire (a DST change), or an
    empty string when it does not."""


@dataclass(frozen=True)
class JobRecord:
    """One job fired (or triggered) from a schedule."""

    job_id: int
    schedule: str | None
    fire_time: str | None
    """The fire time as the job's metadata stores it (``YYYY-MM-DD HH:MM:SS+00``), or None
    for a manual trigger."""
    triggered_manually: bool
    state: str
    task_id: str | None
    """The Celery task id, which the job has once the bridge has published it."""
    created_at: datetime
    backfilled: bool = False
    """Whether a backfill inserted the job (for its nominal fire time) rather than a fire."""

    @classmethod
    def from_job(cls, job: Mapping[str, Any]) -> JobRecord:
        meta = job["metadata"] or {}
        return cls(job["id"], meta.get("cron_name"), meta.get("cron_fire_time"),
                   bool(meta.get("triggered_manually")), job["state"],
                   meta.get("celery_task_id"), job["created_at"],
                   meta.get("backfilled") is True)


@dataclass(frozen=True)
class BackfillResult:
    """What a backfill did (:meth:`awa_beat.Schedules.backfill`), or would do in a dry
    run: the fire times of the range that got a job, and those skipped because they had
    one already."""

    schedule: str
    start: datetime
    end: datetime
    inserted: tuple[datetime, ...]
    """The fire times given a job, in order (in a dry run: that would be)."""
    skipped: tuple[datetime, ...]
    """The fire times left alone because they had a job already: one a backfill gave, one
    the schedule fired, or one with a reported outcome."""
    job_ids: tuple[int, ...] = ()
    """The ids of the jobs inserted, in the order of :attr:`inserted` (none in a dry
    run)."""
    dry_run: bool = False

    @property
    def inserted_count(self) -> int:
        return len(self.inserted)

    @property
    def skipped_count(self) -> int:
        return len(self.skipped)

    @property
    def fire_times(self) -> tuple[datetime, ...]:
        """Every fire time of the range, in order."""
        return tuple(sorted(self.inserted + self.skipped))

    @property
    def first(self) -> datetime | None:
        """The first fire time of the range, or None when it has none."""
        times = self.fire_times
        return times[0] if times else None

    @property
    def last(self) -> datetime | None:
        """The last fire time of the range, or None when it has none."""
        times = self.fire_times
        return times[-1] if times else None


@dataclass(frozen=True)
class Occurrence:
    """One occurrence of a schedule (``awa-beat history NAME``): a fire and what became
    of it, a manual trigger, a fire the overlap policy skipped, or fires a coalesce left
    out."""

    kind: str
    """``fired``, ``triggered``, ``backfilled``, ``skipped`` or ``coalesced``."""
    at: datetime
    """The fire time. For a trigger it is when the trigger was made, and for a coalesce
    it is the first fire left out."""
    job_id: int | None = None
    task_id: str | None = None
    job_state: str | None = None
    outcome: str | None = None
    """What became of the run (``started``, ``succeeded``, ``failed``, ``retried``,
    ``revoked`` or ``lost``), or None while nothing is known: the job has not run yet, or
    the worker does not record outcomes."""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    runtime: float | None = None
    """Seconds the last run took."""
    worker: str | None = None
    error: str | None = None
    duplicates: int = 0
    """Deliveries of this fire beyond the first that started a run."""
    last_fire_time: datetime | None = None
    """Coalesced: the last fire left out."""
    count: int = 1
    """Coalesced: how many fires were left out."""
    reason: str | None = None
    schedule: str | None = None
    """The schedule's name."""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Occurrence:
        return cls(**{f.name: row[f.name] for f in fields(cls)})


#: The outcomes of a run that make its schedule "failing".
FAILED_OUTCOMES = frozenset({"failed", "lost"})


@dataclass(frozen=True)
class Overdue:
    """A schedule that is overdue, and why (:func:`~awa_beat._schedules.runs.overdue_reasons`)."""

    name: str
    reasons: tuple[str, ...]
    last_fire: datetime | None
    last_outcome: str | None


@dataclass(frozen=True)
class BeatView:
    """A beat process seen recently (its heartbeat row)."""

    identity: str
    host: str
    pid: int
    deployment: str
    lock_key: int
    role: str
    started_at: datetime
    leader_since: datetime | None
    seen_at: datetime
    last_lag_ms: float | None
    clock_skew_ms: float | None
    """How far its clock was from the database's at its last election or ping, in
    milliseconds, or None before it was measured. A positive value means the database's
    clock is ahead and the host's behind."""
    age: timedelta
    """How long ago it was seen, by the database's clock."""
    holds_lock: bool
    """Whether its leader lock is held right now."""
    publishes: bool
    """Whether it publishes its deployment's jobs for Celery: it has the dispatch bridge,
    which publishes only while it leads."""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> BeatView:
        return cls(**{f.name: row[f.name] for f in fields(cls)})

    @property
    def clock(self) -> str:
        """How far its clock is from the database's, in words, or "-" before it was
        measured."""
        return "-" if self.clock_skew_ms is None else skew_words(self.clock_skew_ms / 1000)


@dataclass(frozen=True)
class DeploymentBacklog:
    """One deployment's jobs for Celery not yet published, and who would publish them."""

    deployment: str
    jobs: int
    oldest_age: float | None
    """Seconds since the oldest of them was fired, or None when none is waiting."""
    publishers: int
    """How many beats of this deployment, seen in the last minute, publish Celery jobs.
    With none, the jobs wait until one runs."""


@dataclass(frozen=True)
class ClusterStatus:
    """The cluster as ``awa-beat status`` and the dashboard's cluster page show it."""

    leaders: list[BeatView]
    """The leaders whose lock is really held, normally one per lock key."""
    standbys: list[BeatView]
    backlog: int
    """How many jobs for Celery the bridges have not published yet, of every
    deployment."""
    overdue: list[Overdue] = field(default_factory=list)
    backlogs: list[DeploymentBacklog] = field(default_factory=list)
    """One entry per deployment that has jobs waiting or a beat that publishes, by
    name."""
    stranded: dict[str, int] = field(default_factory=dict)
    """How many jobs wait for Awa workers where Awa is not installed, by deployment.
    Nothing runs those jobs."""

    @property
    def unpublished(self) -> list[DeploymentBacklog]:
        """The deployments whose jobs wait while no beat that was seen publishes them."""
        return [b for b in self.backlogs if b.jobs and not b.publishers]


@dataclass(frozen=True)
class Delivery:
    """Who runs the jobs of a row of one deployment and dispatch, as the cluster is now
    (:meth:`~awa_beat._ops.cluster.Cluster.delivery`)."""

    deployment: str
    dispatch: str
    runner: str
    """Who runs its jobs, in words."""
    warning: str | None = None
    """Why its jobs may never run, because nothing that runs them was seen, or None."""
    refusal: str | None = None
    """Why its jobs will not run while other jobs would, or None. The command line refuses
    such a write, because it can only be a mistake."""


@dataclass(frozen=True)
class Check:
    """One of doctor's checks: what was checked, and how to fix it when it failed."""

    ok: bool
    what: str
    fix: str = ""
    details: tuple[str, ...] = ()
    """The offending items, such as schedule names with the reason for each."""


#: The list counts the rows its filter matches up to this many, and says "over" past it,
#: so that a count never scans a whole large table.
COUNT_LIMIT = 10_000


@dataclass(frozen=True)
class ScheduleFilter:
    """What the dashboard's list is narrowed to; every filter runs in SQL."""

    search: str | None = None
    """Text the name contains (case-insensitive)."""
    paused: bool | None = None
    owner: str | None = None
    """A deployment, or '' for the rows that no awa-beat registered."""
    owned_by: str | None = None
    """Who writes the row, ``"config"`` or ``"runtime"`` (see :attr:`ScheduleView.owner`)."""
    names: frozenset[str] | None = None
    """Names computed elsewhere (the overdue or failing schedules) to narrow the list to."""


@dataclass(frozen=True)
class SchedulePage:
    """One page of the list, in name order."""

    views: list[ScheduleView]
    notes: dict[str, str]
    """The note of each paused schedule's pause, where one was given."""
    total: int
    """Rows the filter matches, counted up to :data:`COUNT_LIMIT` + 1 (more: "over")."""
    has_next: bool
    has_previous: bool


@dataclass(frozen=True)
class QueuePause:
    """An Awa queue that is paused (``awa.queue_meta``): its jobs wait, fires pile up."""

    queue: str
    paused_at: datetime | None
    paused_by: str | None


@dataclass(frozen=True)
class AuditEntry:
    """One action taken through a dashboard (``awa_beat.audit_log``)."""

    id: int
    at: datetime
    actor: str
    source: str
    remote_addr: str | None
    action: str
    schedule: str | None
    detail: dict[str, Any]
    outcome: str


@dataclass(frozen=True)
class ScheduleBounds:
    """When a schedule may fire and what it expects of its runs, as fields: the bounds
    (``start_time``, ``end_time``, ``max_runs``, ``one_off``), the outcome settings
    ``overlap``, ``deadline`` (seconds) and ``pause_after_failures``, and the catch-up
    window and the jitter (seconds)."""

    start_time: datetime | None = None
    end_time: datetime | None = None
    max_runs: int | None = None
    """The run limit in all (1 for a one-off and ``at``), or None."""
    one_off: bool = False
    overlap: str = "allow"
    deadline: float | None = None
    catch_up_window: float | None = None
    """Seconds: a missed fire older than this is skipped, not fired."""
    jitter: float | None = None
    """Seconds: each job runs up to this long after its fire time."""
    pause_after_failures: int | None = None
    """How many failed runs in a row pause the schedule, or None: never."""

    @classmethod
    def of(cls, row: ScheduleRow) -> ScheduleBounds:
        bounds = split_schedule(row.cron_expr)[1]
        if row.cron_expr.startswith("@at "):
            bounds = Bounds(runs=1, window=bounds.window, jitter=bounds.jitter)
        outcomes = (row.metadata or {}).get("awa_beat") or {}
        deadline = outcomes.get("deadline")
        failures = outcomes.get("pause_after_failures")
        return cls(bounds.start, bounds.end, bounds.runs, bounds.runs == 1,
                   str(outcomes.get("overlap") or "allow"),
                   float(deadline) if isinstance(deadline, (int, float)) else None,
                   catch_up_window=bounds.window, jitter=bounds.jitter,
                   pause_after_failures=failures if isinstance(failures, int)
                   and not isinstance(failures, bool) else None)


