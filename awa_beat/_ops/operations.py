"""The operations layer: what an operator sees and does with the stored schedules.

The command line, the Python API, metrics and the dashboard all call this module; it
knows neither Celery nor click. It answers in plain records (:class:`ScheduleView`,
:class:`JobRecord`, :class:`ClusterStatus`, :class:`Check`, ...) that each caller renders
its own way, and takes the current time from an injectable clock.

The records live here, not in :mod:`awa_beat._db.records`: they are this layer's answers,
and only it and its callers use them; ``records`` holds what the store, the engine and
the runtime pass among themselves.
"""

from __future__ import annotations

import getpass
import socket
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, TypedDict

from .._config import (
    Settings,
    celery_dispatch_refused,
    database_url,
    redact,
)
from .._db.embedded import resolve_database_url
from .._db.lock import Leadership, skew_words
from .._db.records import ScheduleRow
from .._db.store import Store
from .._schedules.cron import load_timezone
from .._schedules.fire_times import (
    POLICIES,
    Calendar,
    calendar_for,
    can_fire_from,
    due_fires,
    every_seconds,
    next_fire_after,
)
from .._schedules.markers import Bounds, instant_text, is_marker, max_runs, split_bounds
from .._schedules.spec import (
    AWA_BEAT_OPTION,
    BOUND_OPTIONS,
    DEFAULT_MAX_RUNTIME,
    ScheduleSpec,
    carries_bounds,
    specs_from_beat_schedule,
)
from ..errors import (
    AwaBeatError,
    NotFound,
    ScheduleExists,
    ScheduleOwned,
    SchemaError,
    SessionLockUnsupported,
    StoreError,
    UnknownSchema,
)

if TYPE_CHECKING:
    import psycopg

    from .._beat.node import BeatNode

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def whoami() -> str:
    """``user@host``: who paused a schedule, when the caller does not say."""
    return f"{getpass.getuser()}@{socket.gethostname()}"


# -- finding the database --------------------------------------------------------------------


def settings_for(app: Any, environ: Mapping[str, str] | None = None) -> Settings:
    """awa-beat's settings of a Celery app (or of none: the environment's and defaults)."""
    if app is None:
        return Settings.from_app({}, environ)
    return Settings.from_app(app.conf, environ, app_name=app.main)


def find_database_url(explicit: str | None = None, app: Any = None,
                      environ: Mapping[str, str] | None = None) -> str:
    """The database of every operator entry point: ``explicit`` (``--database-url``), else
    $AWA_BEAT_DATABASE_URL, else the Celery ``app``'s ``awa_beat_database_url``, else the
    embedded PostgreSQL that a beat started in this directory.

    Raises :class:`~awa_beat.errors.NoDatabase` when none of them is there.
    """
    url = database_url(explicit, environ)
    if url is None and app is not None:
        url = settings_for(app, environ).database_url
    return resolve_database_url(url, create_embedded=False)


# -- records ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScheduleView:
    """A stored schedule as an operator sees it."""

    row: ScheduleRow
    next_fire: datetime | None
    """The next fire after now, or None (no further fire, or the row is invalid)."""
    problem: str | None = None
    """Why the row cannot fire (a bad expression, zone or policy), or None."""
    orphan: bool = False
    """Registered by the app's deployment, but no longer in its beat_schedule."""
    never_fires: str | None = None
    """Why a valid row that is not retired has no fire left (an end or an ``at()``
    past, an rrule spent), or None: it will never fire again."""

    @property
    def name(self) -> str:
        return self.row.name

    @property
    def invalid(self) -> bool:
        return self.problem is not None

    @property
    def paused(self) -> bool:
        """Paused (by an operator, or retired by its last run): nothing fires on its own,
        whatever :attr:`next_fire` says it would be once resumed."""
        return self.row.paused_at is not None

    @property
    def last_fire(self) -> datetime | None:
        """The fire time of its latest fire, or None when it has not fired (see
        :func:`last_fire`)."""
        return last_fire(self.row)

    @property
    def quiet_since(self) -> datetime | None:
        """When it has not fired: the instant since which it has not, if that is not its
        registration (its calendar changed then); else None."""
        cursor = self.row.last_enqueued_at
        if self.last_fire is not None or cursor is None:
            return None
        return cursor if cursor > _second(self.row.created_at) else None

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
    at: datetime
    note: str = ""
    """Set when the zone's UTC offset changed since the previous fire (DST)."""


@dataclass(frozen=True)
class JobRecord:
    """One job fired (or triggered) from a schedule."""

    job_id: int
    schedule: str | None
    fire_time: str | None
    """As stored in the job's metadata (``YYYY-MM-DD HH:MM:SS+00``); None if triggered."""
    triggered_manually: bool
    state: str
    task_id: str | None
    """The Celery task id, once the bridge published the job."""
    created_at: datetime

    @classmethod
    def from_job(cls, job: Mapping[str, Any]) -> JobRecord:
        meta = job["metadata"] or {}
        return cls(job["id"], meta.get("cron_name"), meta.get("cron_fire_time"),
                   bool(meta.get("triggered_manually")), job["state"],
                   meta.get("celery_task_id"), job["created_at"])


@dataclass(frozen=True)
class Occurrence:
    """One occurrence of a schedule (``awa-beat history NAME``): a fire and what became
    of it, a manual trigger, a fire the overlap policy skipped, or fires a coalesce left
    out."""

    kind: str
    """``fired``, ``triggered``, ``skipped`` or ``coalesced``."""
    at: datetime
    """The fire time (a trigger: when it was made; coalesced: the first fire left out)."""
    job_id: int | None = None
    task_id: str | None = None
    job_state: str | None = None
    outcome: str | None = None
    """``started``, ``succeeded``, ``failed``, ``retried``, ``revoked``, ``lost``, or None
    while nothing is known (not run yet, or the worker does not record outcomes)."""
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


#: Seconds after a fire was due before its absence makes a schedule overdue.
OVERDUE_GRACE = 30.0


#: The outcomes of a run that make its schedule "failing".
FAILED_OUTCOMES = frozenset({"failed", "lost"})


@dataclass(frozen=True)
class Overdue:
    """A schedule that is overdue, and why (:func:`overdue_reasons`)."""

    name: str
    reasons: tuple[str, ...]
    last_fire: datetime | None
    last_outcome: str | None


def overdue_reasons(*, cron_expr: str, timezone_name: str, policy: str,
                    cursor: datetime | None, created_at: datetime, paused: bool,
                    now: datetime, deadline: float | None, last_outcome: str | None,
                    cursor_outcome: str | None, cursor_finished_at: datetime | None,
                    grace: float = OVERDUE_GRACE) -> list[str]:
    """Why a schedule is overdue at ``now`` (empty: it is not). A paused schedule never is.

    * ``missed``: a fire was due more than ``grace`` seconds ago and did not happen.
    * ``failed``: its latest reported run failed or was lost.
    * ``deadline``: ``deadline`` seconds after its latest fire, that fire's run has not
      succeeded, or succeeded later than that.
    """
    if paused:
        return []
    reasons = []
    try:
        calendar = calendar_for(cron_expr, timezone_name)
    except AwaBeatError:
        return []
    if policy in POLICIES and due_fires(
            calendar, last_enqueued_at=cursor, created_at=created_at,
            now=now - timedelta(seconds=grace), policy="coalesce"):
        reasons.append("missed: a due fire did not happen")
    if last_outcome in ("failed", "lost"):
        reasons.append(f"failed: its last run {'was lost' if last_outcome == 'lost' else 'failed'}")
    # The deadline is that of a fire: a cursor still at the registration (or at a change
    # of the calendar) was never due.
    if deadline is not None and cursor is not None and cursor_is_fire(calendar, cursor,
                                                                      created_at):
        by = cursor + timedelta(seconds=deadline)
        in_time = (cursor_outcome == "succeeded" and cursor_finished_at is not None
                   and cursor_finished_at <= by)
        if now > by and not in_time:
            fired = cursor.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
            reasons.append(f"deadline: the fire of {fired} UTC did not succeed within "
                           f"{deadline:g} s")
    return reasons


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
    """Its clock against the database's at its last election or ping, in milliseconds
    (positive: the database's is ahead, the host's behind); None: not measured yet."""
    age: timedelta
    """How long ago it was seen, by the database's clock."""
    holds_lock: bool
    """Whether its leader lock is held right now."""
    publishes: bool
    """Whether it publishes its deployment's jobs for Celery (it has the dispatch bridge;
    only while it leads)."""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> BeatView:
        return cls(**{f.name: row[f.name] for f in fields(cls)})

    @property
    def clock(self) -> str:
        """Its clock against the database's, in words ("-": not measured yet)."""
        return "-" if self.clock_skew_ms is None else skew_words(self.clock_skew_ms / 1000)


@dataclass(frozen=True)
class DeploymentBacklog:
    """One deployment's jobs for Celery not yet published, and who would publish them."""

    deployment: str
    jobs: int
    oldest_age: float | None
    """Seconds since the oldest of them was fired (None: none waiting)."""
    publishers: int
    """Beats of this deployment seen in the last minute that publish Celery jobs; with
    none, the jobs wait until one runs."""


@dataclass(frozen=True)
class ClusterStatus:
    leaders: list[BeatView]
    """Leaders whose lock is really held (normally one per lock key)."""
    standbys: list[BeatView]
    backlog: int
    """Jobs for Celery the bridge has not published yet (every deployment's)."""
    overdue: list[Overdue] = field(default_factory=list)
    backlogs: list[DeploymentBacklog] = field(default_factory=list)
    """Per deployment, by name: every deployment with jobs waiting or a beat that
    publishes."""
    stranded: dict[str, int] = field(default_factory=dict)
    """Jobs left for Awa workers where Awa is not installed (nothing runs them), by
    deployment."""

    @property
    def unpublished(self) -> list[DeploymentBacklog]:
        """The deployments whose jobs wait and no beat seen publishes."""
        return [b for b in self.backlogs if b.jobs and not b.publishers]


@dataclass(frozen=True)
class Delivery:
    """Who runs the jobs of a row of one deployment and dispatch, as the cluster is now
    (:meth:`Operations.delivery`)."""

    deployment: str
    dispatch: str
    runner: str
    """Who runs its jobs, in words."""
    warning: str | None = None
    """Why they may never run (nothing seen that runs them), or None."""
    refusal: str | None = None
    """Why they will not run while others would (a mistake to refuse), or None."""


@dataclass(frozen=True)
class Check:
    """One of doctor's checks: what was checked, and how to fix it when it failed."""

    ok: bool
    what: str
    fix: str = ""
    details: tuple[str, ...] = ()
    """The offending items (schedule names, with the reason)."""


#: The list counts the rows its filter matches up to this many; past it, it says "over".
COUNT_LIMIT = 10_000


@dataclass(frozen=True)
class ScheduleFilter:
    """What the dashboard's list is narrowed to; every filter runs in SQL."""

    search: str | None = None
    """Text the name contains (case-insensitive)."""
    paused: bool | None = None
    owner: str | None = None
    """A deployment, or '' for rows no awa-beat registered."""
    owned_by: str | None = None
    """``"config"`` or ``"runtime"``: who writes the row (see :attr:`ScheduleView.owner`)."""
    names: frozenset[str] | None = None
    """A set computed elsewhere (overdue, failing schedules) to narrow to."""


class _Filters(TypedDict):
    """A :class:`ScheduleFilter` as the store's page and count take it."""

    search: str | None
    paused: bool | None
    owner: str | None
    owned_by: str | None
    names: list[str] | None


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


# -- pure helpers ----------------------------------------------------------------------------


def _second(t: datetime) -> datetime:
    return t.replace(microsecond=0)


def cursor_is_fire(calendar: Calendar, cursor: datetime | None, created_at: datetime) -> bool:
    """Whether a row's cursor (``last_enqueued_at``) is the time of a fire that happened.

    The cursor starts at the second the row was registered, and moves to the second of a
    change of its calendar: neither is a fire. A fire moves it to a fire time of the
    calendar, after the registration. A cursor before the registration is a run carried
    over by ``awa-beat import`` (or the first fire of Awa's own evaluator, which looks a
    minute back). Only a registration or a calendar change that falls on a fire time of
    the calendar itself (a calendar firing every second, say) cannot be told from a fire.
    """
    if cursor is None:
        return False
    registered = _second(created_at)
    if cursor < registered:
        return True
    return cursor > registered and calendar.next_from(cursor, inclusive=True) == cursor


def last_fire(row: ScheduleRow) -> datetime | None:
    """The fire time of ``row``'s latest fire, or None when it has not fired (as far as
    the row tells, see :func:`cursor_is_fire`; a row awa-beat cannot read keeps its
    cursor unless that is its registration)."""
    cursor = row.last_enqueued_at
    try:
        calendar = calendar_for(row.cron_expr, row.timezone)
    except AwaBeatError:
        return cursor if cursor is not None and cursor != _second(row.created_at) else None
    return cursor if cursor_is_fire(calendar, cursor, row.created_at) else None


def next_fire(row: ScheduleRow, now: datetime) -> tuple[datetime | None, str | None]:
    """The row's next fire after ``now`` (None once retired: no run is left, whatever its
    calendar says), and why it cannot fire if it cannot."""
    try:
        calendar = calendar_for(row.cron_expr, row.timezone)
    except AwaBeatError as exc:
        return None, str(exc)
    if row.missed_fire_policy not in POLICIES:
        return None, f"unknown missed-fire policy {row.missed_fire_policy!r}"
    return (None if row.retired else next_fire_after(calendar, now)), None


def never_fires_again(row: ScheduleRow, now: datetime) -> str | None:
    """Why ``row`` can never fire again, or None. A fire still due (after its cursor, or
    for a row that never fired, in the minute before it was registered) counts as one
    left; a retired row is done, as meant; an invalid one is reported as invalid."""
    if row.retired:
        return None
    try:
        calendar = calendar_for(row.cron_expr, row.timezone)
    except AwaBeatError:
        return None
    cursor = row.last_enqueued_at
    start = cursor + timedelta(seconds=1) if cursor is not None else \
        row.created_at - timedelta(seconds=60)
    if can_fire_from(calendar, min(start, now) if cursor is None else start):
        return None
    bounds = split_bounds(row.cron_expr)[1] if is_marker(row.cron_expr) else None
    if bounds is not None and bounds.end is not None and bounds.end < now:
        return f"its end_time {instant_text(bounds.end)} is past"
    if row.cron_expr.startswith("@at "):
        return f"its one fire, at {row.cron_expr[4:].partition(' ')[0]}, is past"
    return f"its calendar has no fire time after {instant_text(max(start, now))}"


def upcoming_fires(row: ScheduleRow, now: datetime, count: int) -> list[UpcomingFire]:
    """The next ``count`` fires, each noted when the zone's UTC offset changed before it."""
    try:
        calendar = calendar_for(row.cron_expr, row.timezone)
        zone = load_timezone(row.timezone)
    except AwaBeatError:
        return []
    fires: list[UpcomingFire] = []
    t = now
    previous = now.astimezone(zone).utcoffset()
    while len(fires) < count:
        nxt = next_fire_after(calendar, t)
        if nxt is None:
            break
        offset = nxt.astimezone(zone).utcoffset()
        note = (f"DST: UTC offset {offset_text(previous)} -> {offset_text(offset)}"
                if offset != previous else "")
        fires.append(UpcomingFire(nxt, note))
        previous, t = offset, nxt
    return fires


def offset_text(delta: timedelta | None) -> str:
    """A UTC offset as ``+HH:MM``."""
    minutes = int((delta or timedelta()).total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def split_schedule(cron_expr: str) -> tuple[str, Bounds]:
    """A stored expression as the schedule an entry gives (an Awa expression for
    ``@cron``) and its bounds, which an entry gives in ``options["awa_beat"]``. ``at()``
    keeps its one run: it is part of what ``at`` means, not a bound of its own."""
    if not is_marker(cron_expr) or cron_expr.startswith("@at "):
        return cron_expr, Bounds()
    try:
        base, bounds = split_bounds(cron_expr)
    except AwaBeatError:
        return cron_expr, Bounds()  # an invalid row stays as stored
    if base.startswith("@cron "):
        base = base[len("@cron "):]
    return base, bounds


def bound_options(bounds: Bounds) -> dict[str, Any]:
    """``bounds`` as ``options["awa_beat"]`` settings: instants in ISO 8601, one run as
    ``one_off`` (the two say the same)."""
    out: dict[str, Any] = {}
    if bounds.start is not None:
        out["start_time"] = bounds.start.isoformat()
    if bounds.end is not None:
        out["end_time"] = bounds.end.isoformat()
    if bounds.runs == 1:
        out["one_off"] = True
    elif bounds.runs is not None:
        out["max_runs"] = bounds.runs
    return out


@dataclass(frozen=True)
class ScheduleBounds:
    """When a schedule may fire and what it expects of its runs, as fields: the bounds
    (``start_time``, ``end_time``, ``max_runs``, ``one_off``) and the outcome settings
    ``overlap`` and ``deadline`` (seconds)."""

    start_time: datetime | None = None
    end_time: datetime | None = None
    max_runs: int | None = None
    """The run limit in all (1 for a one-off and ``at``), or None."""
    one_off: bool = False
    overlap: str = "allow"
    deadline: float | None = None

    @classmethod
    def of(cls, row: ScheduleRow) -> ScheduleBounds:
        if row.cron_expr.startswith("@at "):
            bounds = Bounds(runs=1)
        else:
            bounds = split_schedule(row.cron_expr)[1]
        outcomes = (row.metadata or {}).get("awa_beat") or {}
        deadline = outcomes.get("deadline")
        return cls(bounds.start, bounds.end, bounds.runs, bounds.runs == 1,
                   str(outcomes.get("overlap") or "allow"),
                   float(deadline) if isinstance(deadline, (int, float)) else None)


def beat_entry(row: ScheduleRow) -> dict[str, Any]:
    """The row as a Celery ``beat_schedule`` entry that would register it as it is: the
    bounds of its marker come back as ``options["awa_beat"]`` settings, so that a change
    of the schedule keeps them and a change of one of them (None: removed) is a change
    of that one alone."""
    call = row.args if isinstance(row.args, dict) else {}
    meta = dict(row.metadata or {})
    celery = meta.pop("celery", {}) or {}
    outcome_options = meta.pop("awa_beat", {}) or {}
    schedule, bounds = split_schedule(row.cron_expr)
    awa: dict[str, Any] = {"timezone": row.timezone, "missed_fire_policy": row.missed_fire_policy,
                           **outcome_options, **bound_options(bounds)}
    if row.queue != "default":
        awa["queue"] = row.queue
    if row.priority != 2:
        awa["priority"] = row.priority
    if row.max_attempts != 25:
        awa["max_attempts"] = row.max_attempts
    if row.tags:
        awa["tags"] = row.tags
    if meta:
        awa["metadata"] = meta
    if celery.get("dispatch"):
        awa["dispatch"] = celery["dispatch"]
    seconds = every_seconds(schedule)
    return {
        "task": row.kind,
        "schedule": seconds if seconds is not None else schedule,
        "args": call.get("args", []), "kwargs": call.get("kwargs", {}),
        "options": {**(celery.get("options") or {}), "awa_beat": awa},
    }


def merge_entry(entry: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``entry`` (a beat_schedule entry) with ``changes`` applied: the keys given replace
    the entry's, except ``options`` and its ``awa_beat`` dict, which are merged key by
    key, a value of None removing the key.

    ``max_runs`` and ``one_off`` are one setting, the run limit, said two ways: a
    ``max_runs`` given replaces ``one_off``, and ``one_off=True`` replaces ``max_runs``.
    A schedule given that says its own bounds (``at()``, a marker ending in bounds)
    replaces the entry's bounds, unless the changes give them too."""
    merged = dict(entry)
    if carries_bounds(changes.get("schedule")):
        options = dict(merged.get("options") or {})
        awa = {k: v for k, v in (options.get(AWA_BEAT_OPTION) or {}).items()
               if k not in BOUND_OPTIONS}
        merged["options"] = {**options, AWA_BEAT_OPTION: awa}
    for key, value in changes.items():
        if key != "options" or not isinstance(value, Mapping):
            merged[key] = value
            continue
        options = dict(merged.get("options") or {})
        for option, setting in value.items():
            if option == AWA_BEAT_OPTION and isinstance(setting, Mapping):
                awa = dict(options.get(AWA_BEAT_OPTION) or {})
                if "max_runs" in setting:
                    awa.pop("one_off", None)
                if setting.get("one_off"):
                    awa.pop("max_runs", None)
                awa.update(setting)
                options[AWA_BEAT_OPTION] = {k: v for k, v in awa.items() if v is not None}
            elif setting is None:
                options.pop(option, None)
            else:
                options[option] = setting
        merged["options"] = options
    return merged


def _names_text(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def check_owners(rows: Collection[ScheduleRow], force: bool) -> None:
    """Refuse a runtime write over rows that a deployment's beat_schedule (or a writer
    other than awa-beat) owns, unless ``force``."""
    if force:
        return
    configured = sorted(r.name for r in rows if r.owner == "config")
    foreign = sorted(r.name for r in rows if r.owner is None)
    if configured:
        deployments = sorted({r.deployment or "?" for r in rows if r.owner == "config"})
        raise ScheduleOwned(
            f"schedule(s) {_names_text(configured)} belong to the beat_schedule of "
            f"deployment {', '.join(deployments)}: change them there, or take them over "
            "at run time with force=True (--force); that beat then leaves them alone and "
            "reports the conflict at start-up")
    if foreign:
        raise ScheduleOwned(
            f"schedule(s) {_names_text(foreign)} were not written by awa-beat (Awa's own "
            "cron, or another tool maintains them); overwrite them with force=True (--force)")


# -- the operations --------------------------------------------------------------------------


class DatabaseClock:
    """The database's clock, read as this host's plus the skew between the two: measured
    on first use and again every :data:`SKEW_TTL` seconds, so that a page or a command
    costs no query per reading and a reading never waits for a pooled connection."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._skew = 0.0
        self._measured_at: float | None = None

    def __call__(self) -> datetime:
        now = time.monotonic()
        if self._measured_at is None or now - self._measured_at > SKEW_TTL:
            self._skew = self.store.clock_skew()
            self._measured_at = now
        return utcnow() + timedelta(seconds=self._skew)


#: Seconds a :class:`DatabaseClock` trusts its last measure of the skew.
SKEW_TTL = 60.0


class Operations:
    """What an operator does with one database's schedules, on an opened :class:`Store`.

    ``deployment`` and ``configured`` (the names in that deployment's beat_schedule, asked
    for only when needed) let it flag orphans: rows the deployment registered and no
    longer configures. Without them nothing is flagged.

    ``settings`` (an app's, see :func:`settings_for`) decide how runtime writes
    (:meth:`add`, :meth:`update`) read an entry, exactly as that app's beat reads its
    beat_schedule: the default time zone and dispatch, and the deployment whose bridge
    publishes the jobs dispatched to Celery.
    """

    def __init__(self, store: Store, *, clock: Clock | None = None,
                 deployment: str | None = None,
                 configured: Callable[[], Collection[str]] | None = None,
                 settings: Settings | None = None) -> None:
        self.store = store
        # Time comes from the database, as the fire statement takes it: next fires read
        # from a host whose clock is wrong would be fires that cannot happen.
        self.clock: Clock = clock if clock is not None else DatabaseClock(store)
        self.deployment = deployment
        self._configured = configured
        self.settings = settings or Settings(deployment=deployment or "default")

    @classmethod
    def open(cls, url: str, **kwargs: Any) -> Operations:
        """Operations on the database at ``url``, with a store of its own (close it, or
        use ``with``)."""
        store = Store(url, max_size=1)
        store.open()
        return cls(store, **kwargs)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Operations:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schedules ------------------------------------------------------------------------

    def schedules(self, pattern: str | None = None) -> list[ScheduleView]:
        """Every schedule (``pattern``: a SQL LIKE pattern on the name), by name."""
        rows = self.store.schedules(pattern)
        orphans = set(self.orphans() or ())
        now = self.clock()
        return [self._view(row, now, row.name in orphans) for row in rows]

    def get(self, name: str) -> ScheduleView:
        """The schedule ``name`` (:class:`~awa_beat.errors.NotFound` if there is none)."""
        row = self.store.get(name)
        return self._view(row, self.clock(), name in (self.orphans() or ()))

    @staticmethod
    def _view(row: ScheduleRow, now: datetime, orphan: bool) -> ScheduleView:
        fire, problem = next_fire(row, now)
        never = never_fires_again(row, now) if fire is None and problem is None else None
        return ScheduleView(row, fire, problem, orphan=orphan, never_fires=never)

    def pause(self, name: str, by: str | None = None, note: str | None = None, *,
              conn: psycopg.Connection | None = None) -> datetime:
        """Stop ``name``'s automatic fires; ``by`` (default: ``user@host``) is shown, and
        ``note`` (why) with it while this pause lasts. ``conn``: the caller's connection,
        to join its transaction (also below)."""
        if note:
            return self.store.pause_with_note(name, by or whoami(), note, conn=conn)
        return self.store.pause(name, by or whoami(), conn=conn)

    def resume(self, name: str, *, conn: psycopg.Connection | None = None) -> None:
        self.store.resume(name, conn=conn)

    def trigger(self, name: str, *, conn: psycopg.Connection | None = None) -> int:
        """Enqueue one job for ``name`` now, even while paused; the id of that job."""
        return self.store.trigger(name, conn=conn)

    def remove(self, name: str, *, conn: psycopg.Connection | None = None) -> None:
        """Delete ``name``'s row; the jobs it already fired stay."""
        if not self.store.remove(name, conn=conn):
            raise NotFound(f"no schedule named {name!r}")

    # -- runtime writes -------------------------------------------------------------------

    def specs(self, entries: Mapping[str, Any]) -> list[ScheduleSpec]:
        """``entries`` (a beat_schedule) validated exactly as this app's beat validates
        its own (:class:`~awa_beat.errors.ValidationError` listing every problem)."""
        settings = self.settings
        # A write made now: a schedule with no fire from now on is refused.
        specs = specs_from_beat_schedule(entries, default_timezone=settings.default_timezone,
                                         default_dispatch=settings.dispatch or "awa",
                                         default_dst=settings.dst, now=self.clock())
        celery = [s.name for s in specs if s.dispatch == "celery"]
        if celery and self.store.awa_owned:
            raise celery_dispatch_refused(celery, "dispatch them to Awa workers "
                                          "(options.awa_beat.dispatch = 'awa', --dispatch awa)")
        return specs

    def add(self, entries: Mapping[str, Any], *, replace: bool = False, force: bool = False,
            conn: psycopg.Connection | None = None) -> list[ScheduleSpec]:
        """Store ``entries`` (a beat_schedule: name -> entry) as runtime schedules, all
        or none, in one transaction (joined to the caller's with ``conn``).

        A name that exists already is refused (:class:`ScheduleExists`) unless
        ``replace``; replacing a row that a deployment's beat_schedule owns (or that
        awa-beat did not write) is refused (:class:`ScheduleOwned`) unless ``force``.
        """
        specs = self.specs(entries)
        if not specs:
            return []
        deployment = self.settings.deployment
        with self.store.transaction(conn) as c:
            existing = self.store.lock_schedules(c, [s.name for s in specs])
            if existing and not replace:
                raise ScheduleExists(
                    f"schedule(s) {_names_text(sorted(r.name for r in existing))} exist "
                    "already; pass replace=True (--replace) to overwrite them")
            check_owners(existing, force)
            written = self.store.upsert_runtime(c, [s.row(deployment) for s in specs],
                                                deployment=deployment, replace=replace)
            if written.unchanged:
                # Only a concurrent writer can add a name between the lock and the write;
                # the transaction block undoes ours.
                raise ScheduleExists(f"{written.unchanged} schedule(s) were added by "
                                     "another writer meanwhile; nothing was written")
        return specs

    def update(self, name: str, changes: Mapping[str, Any], *, force: bool = False,
               deployment: str | None = None, conn: psycopg.Connection | None = None
               ) -> ScheduleSpec:
        """Change only the given parts of ``name``'s entry (``task``, ``schedule``,
        ``args``, ``kwargs``, ``options``; see :func:`merge_entry`), validated as a
        beat_schedule entry. :class:`NotFound` if there is no such schedule,
        :class:`ScheduleOwned` as for :meth:`add` with ``replace``. ``deployment``: whose
        bridge publishes its Celery jobs (default: the row's, else the settings')."""
        with self.store.transaction(conn) as c:
            rows = self.store.lock_schedules(c, [name])
            if not rows:
                raise NotFound(f"no schedule named {name!r}")
            (row,) = rows
            check_owners(rows, force)
            entry = merge_entry(beat_entry(row), changes)
            (spec,) = self.specs({name: entry})
            deployment = self._deployment_of(row, deployment)
            self.store.upsert_runtime(c, [spec.row(deployment)], deployment=deployment,
                                      replace=True)
            if row.retired and max_runs(row.cron_expr) != max_runs(spec.cron_expr):
                # Its run limit was what retired it: with runs left under the new limit
                # (or none), it fires again, from the write on (the changed expression
                # moved its cursor there).
                self.store.unretire(c, name)
        return spec

    def _deployment_of(self, row: ScheduleRow, deployment: str | None) -> str:
        """The deployment whose bridge publishes ``row``'s jobs after an update: the one
        given, else the row's own (it stays), else the settings'."""
        celery = (row.metadata or {}).get("celery") or {}
        return deployment or celery.get("deployment") or self.settings.deployment

    def edit_delivery(self, name: str, *, deployment: str | None = None,
                      dispatch: str | None = None) -> Delivery:
        """:meth:`delivery` of ``name`` once :meth:`update` gives it ``deployment`` or
        ``dispatch`` (None: its own stays)."""
        row = self.store.get(name)
        celery = (row.metadata or {}).get("celery") or {}
        return self.delivery(self._deployment_of(row, deployment),
                             dispatch or celery.get("dispatch") or self.settings.dispatch
                             or "awa")

    def history(self, name: str | None = None, limit: int = 20) -> list[JobRecord]:
        """The newest jobs of ``name`` (NotFound if there is no such schedule), or of
        every schedule."""
        if name is None:
            jobs = self.store.recent_jobs(limit)
        else:
            self.store.get(name)  # an unknown name is an error, not an empty history
            jobs = self.store.jobs(name, limit)
        return [JobRecord.from_job(j) for j in jobs]

    def occurrences(self, name: str | None, limit: int = 20) -> list[Occurrence]:
        """``name``'s occurrences (None: every schedule's), newest first: fires with their
        outcome and run time, manual triggers, fires skipped by the overlap policy, fires
        a coalesce left out (NotFound if there is no such schedule)."""
        if name is not None:
            self.store.get(name)
        return [Occurrence.from_row(r) for r in
                self.store.schedule_history(name, limit, DEFAULT_MAX_RUNTIME)]

    def overdue(self) -> list[Overdue]:
        """Every overdue schedule, by name (see :func:`overdue_reasons`)."""
        return self.run_report()[0]

    def run_report(self) -> tuple[list[Overdue], dict[str, str]]:
        """The overdue schedules, and the outcome of each schedule's latest reported run
        (by name; schedules with none are left out), from one read."""
        now = self.clock()
        found = []
        last: dict[str, str] = {}
        for r in self.store.overdue_candidates(DEFAULT_MAX_RUNTIME):
            if r["last_outcome"] is not None:
                last[r["name"]] = r["last_outcome"]
            reasons = overdue_reasons(
                cron_expr=r["cron_expr"], timezone_name=r["timezone"],
                policy=r["missed_fire_policy"], cursor=r["last_enqueued_at"],
                created_at=r["created_at"], paused=r["paused_at"] is not None, now=now,
                deadline=r["deadline"], last_outcome=r["last_outcome"],
                cursor_outcome=r["cursor_outcome"],
                cursor_finished_at=r["cursor_finished_at"])
            if reasons:
                found.append(Overdue(r["name"], tuple(reasons), r["last_enqueued_at"],
                                     r["last_outcome"]))
        return found, last

    def failing(self) -> list[str]:
        """The schedules whose latest reported run failed or was lost, by name."""
        return [r["name"] for r in self.store.overdue_candidates(DEFAULT_MAX_RUNTIME)
                if r["last_outcome"] in FAILED_OUTCOMES]

    def upcoming(self, row: ScheduleRow, now: datetime | None = None,
                 count: int = 10) -> list[UpcomingFire]:
        """``row``'s next ``count`` fires after ``now`` (default: the clock's), DST changes
        noted; no more than the runs it has left (a one-off, ``max_runs``), and none once
        retired."""
        left = self.runs_left(row)
        return upcoming_fires(row, self.clock() if now is None else now,
                              count if left is None else min(count, left))

    def runs_left(self, row: ScheduleRow) -> int | None:
        """How many more times ``row`` may fire: its run limit less the runs counted
        (0 once retired), or None when it has no limit."""
        limit = max_runs(row.cron_expr)
        if row.retired:
            return 0
        if limit is None:
            return None
        return max(limit - self.store.runs_used(row.name), 0)

    def export_entries(self, pattern: str | None = None) -> dict[str, dict[str, Any]]:
        """The stored schedules as a Celery ``beat_schedule``."""
        return {row.name: beat_entry(row) for row in self.store.schedules(pattern)}

    def export_rows(self, pattern: str | None = None) -> list[ScheduleRow]:
        """The stored schedules, by name, for an export (:mod:`awa_beat._exporting`)."""
        return self.store.schedules(pattern)

    def orphans(self) -> list[str] | None:
        """Rows the deployment registered that its beat_schedule no longer has; None when
        the configuration is unknown."""
        if self._configured is None or self.deployment is None:
            return None
        return self.store.orphaned_names(self.deployment, list(self._configured()))

    # -- the dashboard ----------------------------------------------------------------------

    def page(self, where: ScheduleFilter = ScheduleFilter(), *, after: str | None = None,
             before: str | None = None, limit: int = 50) -> SchedulePage:
        """A page of at most ``limit`` schedules after the name ``after`` (or the page
        before ``before``), filtered and paged in SQL (keyset on the name)."""
        filters: _Filters = {
            "search": where.search.lower() if where.search else None,
            "paused": where.paused, "owner": where.owner, "owned_by": where.owned_by,
            "names": sorted(where.names) if where.names is not None else None}
        rows = self.store.schedules_page(after=after, before=before, limit=limit + 1,
                                         **filters)
        if before is not None:
            has_previous, has_next = len(rows) > limit, True
            rows = rows[-limit:]
        else:
            has_previous, has_next = after is not None, len(rows) > limit
            rows = rows[:limit]
        orphans = set(self.orphans() or ())
        now = self.clock()
        return SchedulePage(
            views=[self._view(row, now, row.name in orphans) for row, _ in rows],
            notes={row.name: note for row, note in rows if note},
            total=self.store.count_schedules(**filters, cap=COUNT_LIMIT + 1),
            has_next=has_next, has_previous=has_previous)

    def deployments(self) -> list[str]:
        """The deployments that registered schedules here."""
        return self.store.deployments()

    def queue_pauses(self, queues: Collection[str]) -> dict[str, QueuePause]:
        """Awa's paused queues among ``queues``, by queue (none in the standalone layout,
        which has no queue pauses)."""
        if not queues:
            return {}
        return {r["queue"]: QueuePause(r["queue"], r["paused_at"], r["paused_by"])
                for r in self.store.paused_queues(sorted(queues))}

    def pause_note(self, name: str) -> str | None:
        return self.store.pause_note(name)

    def record_action(self, *, actor: str, source: str, action: str, outcome: str,
                      schedule: str | None = None, remote_addr: str | None = None,
                      detail: Mapping[str, Any] | None = None) -> int:
        """Record an action taken through a dashboard; the entry's id."""
        entry_id, _ = self.store.record_audit(
            actor=actor, source=source, remote_addr=remote_addr, action=action,
            schedule=schedule, detail=dict(detail or {}), outcome=outcome)
        return entry_id

    def audit_log(self, *, limit: int = 50, before_id: int | None = None,
                  schedule: str | None = None) -> list[AuditEntry]:
        """The newest recorded actions (before the entry ``before_id``), of one schedule
        or of all."""
        return [AuditEntry(**r) for r in self.store.audit_log(
            limit=limit, before_id=before_id, schedule=schedule)]

    # -- the cluster ----------------------------------------------------------------------

    def beats(self) -> list[BeatView]:
        """The beats seen in the last minute."""
        return [BeatView.from_row(b) for b in self.store.beats()]

    def status(self) -> ClusterStatus:
        beats = self.beats()
        backlogs = self.backlogs(beats)
        return ClusterStatus(
            leaders=[b for b in beats if b.role == "leader" and b.holds_lock],
            standbys=[b for b in beats if b.role == "standby"],
            backlog=sum(b.jobs for b in backlogs), overdue=self.overdue(),
            backlogs=backlogs, stranded=self.store.stranded_awa_jobs())

    def backlogs(self, beats: list[BeatView] | None = None) -> list[DeploymentBacklog]:
        """Per deployment, the jobs for Celery not yet published and the beats that
        publish them (``beats``: those seen, if already read)."""
        if beats is None:
            beats = self.beats()
        publishers = Counter(b.deployment for b in beats if b.publishes)
        waiting = {b.deployment: b for b in self.store.outbox_backlogs()}
        return [DeploymentBacklog(d, w.jobs if w else 0, w.oldest_age if w else None,
                                  publishers[d])
                for d in sorted({*waiting, *publishers}) for w in [waiting.get(d)]]

    def delivery(self, deployment: str, dispatch: str) -> Delivery:
        """Who would run the jobs of a row of ``deployment`` dispatched to ``dispatch``:
        refused when nothing would while the beats seen show what would (another
        deployment's beat publishes Celery jobs), a warning when no beat is seen that
        would (none may have started yet)."""
        publishing = sorted({b.deployment for b in self.beats() if b.publishes})
        others = ", ".join(repr(d) for d in publishing)
        if dispatch == "celery":
            runner = f"published to Celery by the beat of deployment {deployment!r}"
            if deployment in publishing:
                return Delivery(deployment, dispatch, runner)
            gone = (f"no beat of deployment {deployment!r} publishes Celery jobs, so its "
                    "jobs would wait in awa.jobs")
            if publishing:
                return Delivery(deployment, dispatch, runner, refusal=(
                    f"{gone} for ever; beats of deployment {others} do: give --deployment "
                    f"{publishing[0]} (or add it with `celery -A <app> awa add`), or start "
                    f"a beat of {deployment!r} with awa_beat_dispatch = 'celery' first"))
            return Delivery(deployment, dispatch, runner, warning=(
                f"{gone} until one runs (no beat that publishes was seen in the last "
                "minute)"))
        runner = "left in awa.jobs for Awa workers"
        if self.store.awa_owned:
            return Delivery(deployment, dispatch, runner)
        gone = ("Awa is not installed in this database, so no Awa worker runs its jobs: "
                "they would pile up in awa.jobs")
        if publishing:
            return Delivery(deployment, dispatch, runner, refusal=(
                f"dispatch awa: {gone}; beats of deployment {others} publish Celery jobs: "
                f"give --dispatch celery --deployment {publishing[0]}"))
        return Delivery(deployment, dispatch, runner, warning=(
            f"dispatch awa: {gone} (give --dispatch celery for Celery workers)"))

    # -- doctor ---------------------------------------------------------------------------

    def checks(self) -> Iterator[Check]:
        """Doctor's checks of this (reachable) database and of this host, one at a time."""
        store = self.store
        yield Check(True, f"database reachable ({redact(store.conninfo)})")
        try:
            info = store.check_schema()
            layout = (f"Awa schema v{info.awa_version}" if info.awa_owned
                      else "standalone awa schema")
            yield Check(True, f"awa-beat schema v{info.version}, {layout}")
        except AwaBeatError as exc:
            yield Check(False, f"schema: {exc}",
                        "run `awa-beat migrate` (and Awa's own migrations)")
        yield session_locks_hold(store.conninfo)
        yield from self._clock_checks()
        yield timezone_data()
        try:
            rows = store.schedules()
        except AwaBeatError:
            rows = []
        now = self.clock()
        views = [self._view(r, now, False) for r in rows]
        invalid = [f"{v.name}: {v.problem}" for v in views if v.problem]
        yield Check(not invalid, f"{len(rows)} schedule(s), {len(invalid)} invalid",
                    "fix the expression or time zone in beat_schedule, or "
                    "`awa-beat remove NAME`", tuple(invalid))
        spent = [f"{v.name}: {v.never_fires}" for v in views if v.never_fires]
        yield Check(not spent, f"{len(spent)} schedule(s) that can never fire again",
                    "give each a calendar with fires to come (beat_schedule, `awa-beat edit "
                    "NAME`), or `awa-beat remove NAME`", tuple(spent))
        try:
            overdue = self.overdue()
        except AwaBeatError as exc:
            yield Check(False, f"overdue schedules: {exc}", "run `awa-beat migrate`")
        else:
            yield Check(not overdue, f"{len(overdue)} overdue schedule(s)",
                        "see `awa-beat history NAME`: is beat running, do the tasks fail?",
                        tuple(f"{o.name}: {'; '.join(o.reasons)}" for o in overdue))
        yield from self._backlog_checks()
        orphans = self.orphans()
        if orphans is not None:
            yield Check(not orphans,
                        f"{len(orphans)} stored schedule(s) no longer in beat_schedule",
                        "`awa-beat remove NAME` for each, if no other deployment needs it",
                        tuple(orphans))


    def _clock_checks(self) -> Iterator[Check]:
        """This host's clock and every beat's, against the database's: a beat beyond the
        tolerance does not lead (and fails /readyz)."""
        tolerance = self.settings.clock_tolerance
        skew = self.store.clock_skew()
        fix = (f"synchronise the clocks (NTP); a beat whose clock is more than "
               f"awa_beat_clock_tolerance ({tolerance:g} s) off does not lead")
        yield Check(abs(skew) <= tolerance, f"this host's clock: {skew_words(skew)}", fix)
        try:
            beats = self.beats()
        except AwaBeatError:
            return
        measured = [(b, b.clock_skew_ms / 1000) for b in beats if b.clock_skew_ms is not None]
        off = [f"{b.host} pid {b.pid}: {skew_words(s)}" for b, s in measured
               if abs(s) > tolerance]
        yield Check(not off, f"{len(measured)} beat(s) measured their clock, {len(off)} "
                    f"beyond {tolerance:g} s (those cannot lead)", fix, tuple(off))

    def _backlog_checks(self) -> Iterator[Check]:
        """Jobs that nothing publishes or runs: a deployment's Celery jobs with no beat of
        it seen, and jobs for Awa workers where Awa is not installed."""
        try:
            cluster = self.status()
        except AwaBeatError as exc:
            yield Check(False, f"outbox backlog: {exc}", "run `awa-beat migrate`")
            return
        per = ", ".join(f"{b.deployment or '(none)'}: {b.jobs}" for b in cluster.backlogs)
        yield Check(not cluster.unpublished,
                    f"{cluster.backlog} unpublished Celery job(s)" + (f" ({per})" if per else ""),
                    "start a beat of that deployment with awa_beat_dispatch = 'celery' (or "
                    "move its schedules: `awa-beat edit NAME --deployment D`)",
                    tuple(f"deployment {b.deployment or '(none)'}: {b.jobs} job(s) wait, "
                          "no beat of it publishes them" for b in cluster.unpublished))
        stranded = cluster.stranded
        total = sum(stranded.values())
        yield Check(not total, f"{total} job(s) left for Awa workers where Awa is not "
                    "installed", "dispatch them to Celery: `awa-beat edit NAME --dispatch "
                    "celery --deployment D` (or options.awa_beat.dispatch)",
                    tuple(f"deployment {d or '(none)'}: {n} job(s) wait, nothing runs them"
                          for d, n in stranded.items()))


def diagnose(url: str, **kwargs: Any) -> Iterator[Check]:
    """Doctor's checks of the database at ``url`` (``kwargs`` as for
    :class:`Operations`): first whether it can be reached at all."""
    try:
        ops = Operations.open(url, **kwargs)
    except SchemaError as exc:  # it answered: what it holds is what awa-beat cannot use
        yield Check(True, f"database reachable ({redact(url)})")
        yield Check(False, f"schema: {exc}", "run `awa-beat migrate` (and Awa's own "
                    "migrations)" if not isinstance(exc, UnknownSchema) else
                    "keep an awa-beat release that supports this Awa schema")
        return
    except AwaBeatError as exc:
        yield Check(False, f"database reachable: {exc}",
                    "check the URL, that PostgreSQL runs and accepts connections from here")
        return
    with ops:
        yield from ops.checks()


def session_locks_hold(conninfo: str) -> Check:
    """Whether a session advisory lock holds here (no PgBouncer transaction pooling),
    checked exactly as a beat checks it when it wins the election."""
    fix = ("connect to PostgreSQL directly or through session pooling, not PgBouncer in "
           "transaction or statement pooling")
    probe = Leadership(conninfo, int.from_bytes(b"AWA_DOCT", "big"))
    try:
        if not probe.try_acquire():
            return Check(False, "session advisory locks: could not take a test lock", fix)
    except SessionLockUnsupported:
        return Check(False, "session advisory locks do NOT hold on this connection", fix)
    finally:
        probe.resign()
    return Check(True, "session advisory locks hold across transactions", fix)


def timezone_data() -> Check:
    """Whether the IANA time-zone data is there, and where it comes from."""
    import zoneinfo

    fix = "`pip install tzdata`"
    try:
        zones = zoneinfo.available_timezones()
        load_timezone("America/New_York")
    except Exception as exc:  # any failure means the data is unusable
        return Check(False, f"time-zone data: {exc}", fix)
    try:
        from importlib.metadata import version

        source = f"tzdata {version('tzdata')}"
    except Exception:  # the system zoneinfo is fine too
        source = "system zoneinfo"
    return Check(bool(zones), f"time-zone data present ({len(zones)} zones, {source})", fix)


def node_run_report(node: BeatNode) -> Callable[[], tuple[list[Overdue], dict[str, str]]]:
    """:meth:`Operations.run_report` on ``node``'s store as it is at
    each call: the endpoint starts before the node opens its store (probes answer while
    it starts) and lives on while the node reconnects or closes."""

    def report() -> tuple[list[Overdue], dict[str, str]]:
        store = node.store
        if not isinstance(store, Store):
            raise StoreError("the beat is not connected to its database")
        return Operations(store).run_report()

    return report
