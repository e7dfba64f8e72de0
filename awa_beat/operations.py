"""The operations layer: what an operator sees and does with the stored schedules.

The command line, the Python API, metrics and the dashboard all call this module; it
knows neither Celery nor click. It answers in plain records (:class:`ScheduleView`,
:class:`JobRecord`, :class:`ClusterStatus`, :class:`Check`, ...) that each caller renders
its own way, and takes the current time from an injectable clock.

The records live here, not in :mod:`awa_beat.records`: they are this layer's answers,
and only it and its callers use them; ``records`` holds what the store, the engine and
the runtime pass among themselves.
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, fields
from datetime import datetime, timedelta, timezone
from typing import Any

from .config import Settings, database_url, redact, resolve_database_url
from .cron import load_timezone
from .errors import AwaBeatError, NotFound, SessionLockUnsupported
from .fire_times import POLICIES, calendar_for, every_seconds, next_fire_after
from .leader import Leadership
from .records import ScheduleRow
from .store import Store

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

    @property
    def name(self) -> str:
        return self.row.name

    @property
    def invalid(self) -> bool:
        return self.problem is not None


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
    age: timedelta
    """How long ago it was seen, by the database's clock."""
    holds_lock: bool
    """Whether its leader lock is held right now."""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> BeatView:
        return cls(**{f.name: row[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class ClusterStatus:
    leaders: list[BeatView]
    """Leaders whose lock is really held (normally one per lock key)."""
    standbys: list[BeatView]
    backlog: int
    """Jobs for Celery the bridge has not published yet."""


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
    names: frozenset[str] | None = None
    """A set computed elsewhere (overdue, failing schedules) to narrow to."""


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


def next_fire(row: ScheduleRow, now: datetime) -> tuple[datetime | None, str | None]:
    """The row's next fire after ``now``, and why it cannot fire if it cannot."""
    try:
        calendar = calendar_for(row.cron_expr, row.timezone)
    except AwaBeatError as exc:
        return None, str(exc)
    if row.missed_fire_policy not in POLICIES:
        return None, f"unknown missed-fire policy {row.missed_fire_policy!r}"
    return next_fire_after(calendar, now), None


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


def beat_entry(row: ScheduleRow) -> dict[str, Any]:
    """The row as a Celery ``beat_schedule`` entry that would register it as it is."""
    call = row.args if isinstance(row.args, dict) else {}
    meta = dict(row.metadata or {})
    celery = meta.pop("celery", {}) or {}
    awa: dict[str, Any] = {"timezone": row.timezone, "missed_fire_policy": row.missed_fire_policy}
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
    seconds = every_seconds(row.cron_expr)
    return {
        "task": row.kind,
        "schedule": seconds if seconds is not None else row.cron_expr,
        "args": call.get("args", []), "kwargs": call.get("kwargs", {}),
        "options": {**(celery.get("options") or {}), "awa_beat": awa},
    }


# -- the operations --------------------------------------------------------------------------


class Operations:
    """What an operator does with one database's schedules, on an opened :class:`Store`.

    ``deployment`` and ``configured`` (the names in that deployment's beat_schedule, asked
    for only when needed) let it flag orphans: rows the deployment registered and no
    longer configures. Without them nothing is flagged.
    """

    def __init__(self, store: Store, *, clock: Clock = utcnow, deployment: str | None = None,
                 configured: Callable[[], Collection[str]] | None = None) -> None:
        self.store = store
        self.clock = clock
        self.deployment = deployment
        self._configured = configured

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
        return ScheduleView(row, *next_fire(row, now), orphan=orphan)

    def pause(self, name: str, by: str | None = None, note: str | None = None) -> datetime:
        """Stop ``name``'s automatic fires; ``by`` (default: ``user@host``) is shown, and
        ``note`` (why) with it while this pause lasts."""
        if note:
            return self.store.pause_with_note(name, by or whoami(), note)
        return self.store.pause(name, by or whoami())

    def resume(self, name: str) -> None:
        self.store.resume(name)

    def trigger(self, name: str) -> int:
        """Enqueue one job for ``name`` now, even while paused; the id of that job."""
        return self.store.trigger(name)

    def remove(self, name: str) -> None:
        """Delete ``name``'s row; the jobs it already fired stay."""
        if not self.store.remove(name):
            raise NotFound(f"no schedule named {name!r}")

    def history(self, name: str | None = None, limit: int = 20) -> list[JobRecord]:
        """The newest jobs of ``name`` (NotFound if there is no such schedule), or of
        every schedule."""
        if name is None:
            jobs = self.store.recent_jobs(limit)
        else:
            self.store.get(name)  # an unknown name is an error, not an empty history
            jobs = self.store.jobs(name, limit)
        return [JobRecord.from_job(j) for j in jobs]

    def upcoming(self, row: ScheduleRow, now: datetime | None = None,
                 count: int = 10) -> list[UpcomingFire]:
        """``row``'s next ``count`` fires after ``now`` (default: the clock's), DST changes
        noted."""
        return upcoming_fires(row, self.clock() if now is None else now, count)

    def export_entries(self, pattern: str | None = None) -> dict[str, dict[str, Any]]:
        """The stored schedules as a Celery ``beat_schedule``."""
        return {row.name: beat_entry(row) for row in self.store.schedules(pattern)}

    def orphans(self) -> list[str] | None:
        """Rows the deployment registered that its beat_schedule no longer has; None when
        the configuration is unknown."""
        if self._configured is None or self.deployment is None:
            return None
        configured = set(self._configured())
        return [n for n in self.store.owned_names(self.deployment) if n not in configured]

    # -- the dashboard ----------------------------------------------------------------------

    def page(self, where: ScheduleFilter = ScheduleFilter(), *, after: str | None = None,
             before: str | None = None, limit: int = 50) -> SchedulePage:
        """A page of at most ``limit`` schedules after the name ``after`` (or the page
        before ``before``), filtered and paged in SQL (keyset on the name)."""
        filters = {"search": where.search.lower() if where.search else None,
                   "paused": where.paused, "owner": where.owner,
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

    def status(self) -> ClusterStatus:
        beats = [BeatView.from_row(b) for b in self.store.beats()]
        return ClusterStatus(
            leaders=[b for b in beats if b.role == "leader" and b.holds_lock],
            standbys=[b for b in beats if b.role == "standby"],
            backlog=self.store.count_all_pending_celery_jobs())

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
        skew = (self.clock() - store.database_clock()).total_seconds()
        yield Check(abs(skew) < 1.0,
                    f"clock skew between this host and the database: {skew:+.3f} s",
                    "synchronise the clocks (NTP); fires use this host's clock, as Awa's do")
        yield timezone_data()
        try:
            rows = store.schedules()
        except AwaBeatError:
            rows = []
        now = self.clock()
        invalid = [f"{r.name}: {p}" for r in rows for p in [next_fire(r, now)[1]] if p]
        yield Check(not invalid, f"{len(rows)} schedule(s), {len(invalid)} invalid",
                    "fix the expression or time zone in beat_schedule, or "
                    "`awa-beat remove NAME`", tuple(invalid))
        orphans = self.orphans()
        if orphans is not None:
            yield Check(not orphans,
                        f"{len(orphans)} stored schedule(s) no longer in beat_schedule",
                        "`awa-beat remove NAME` for each, if no other deployment needs it",
                        tuple(orphans))


def diagnose(url: str, **kwargs: Any) -> Iterator[Check]:
    """Doctor's checks of the database at ``url`` (``kwargs`` as for
    :class:`Operations`): first whether it can be reached at all."""
    try:
        ops = Operations.open(url, **kwargs)
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
