"""The operations layer: what an operator sees and does with the stored schedules.

The command line, the Python API, metrics and the dashboard all call this module; it
knows neither Celery nor click. :class:`Operations` answers in the plain records of
:mod:`awa_beat._ops.records`, which each caller renders its own way, and takes the current
time from an injectable clock. What it knows of the beats lives in
:mod:`awa_beat._ops.cluster` (its :attr:`Operations.cluster`), doctor's checks in
:mod:`awa_beat._ops.doctor`, and the readings of one row in :mod:`awa_beat._ops.rows`.
"""

from __future__ import annotations

import contextlib
import getpass
import socket
import time
from collections.abc import Callable, Collection, Mapping
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, TypedDict

from .._config import Settings, celery_dispatch_refused
from .._db.conninfo import Connection, database_url, settings_from_app
from .._db.database import Database
from .._db.embedded import resolve_database_url
from .._db.records import ScheduleRow
from .._schedules.backfill import BACKFILL_LIMIT, BACKFILL_MAX_LIMIT, OVERLAPS, fires_in_range
from .._schedules.explain import Explanation, fire_time_of, instant_problem
from .._schedules.fire_times import calendar_for
from .._schedules.markers import max_runs
from .._schedules.preview import Preview
from .._schedules.runs import overdue_reasons, whole_second
from .._schedules.spec import (
    DEFAULT_MAX_RUNTIME,
    ScheduleSpec,
    check_outcome_tracking,
    specs_from_beat_schedule,
)
from .._schedules.stored_entries import merge_entry
from ..errors import (
    AwaBeatError,
    BackfillRefused,
    NotFound,
    ScheduleExists,
    ScheduleOwned,
    StoreError,
    ValidationError,
)
from .cluster import Cluster
from .records import (
    COUNT_LIMIT,
    FAILED_OUTCOMES,
    AuditEntry,
    BackfillResult,
    Delivery,
    JobRecord,
    Occurrence,
    Overdue,
    ScheduleFilter,
    SchedulePage,
    ScheduleView,
    UpcomingFire,
)
from .rows import beat_entry, explain_of, preview_of, upcoming_fires, view_of

if TYPE_CHECKING:
    from .._beat.node import BeatNode

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _iso(t: datetime | None) -> str:
    return "-" if t is None else t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _iso_or_text(t: Any) -> str:
    """An instant as the audit log keeps it (what was given, if it is not one)."""
    if isinstance(t, datetime) and t.tzinfo is not None and t.utcoffset() is not None:
        return _iso(t)
    return repr(t)


def whoami() -> str:
    """``user@host``: who paused a schedule, when the caller does not say."""
    return f"{getpass.getuser()}@{socket.gethostname()}"


# -- finding the database --------------------------------------------------------------------


def settings_for(app: Any, environ: Mapping[str, str] | None = None) -> Settings:
    """awa-beat's settings of a Celery app (or of none: the environment's and defaults)."""
    if app is None:
        return settings_from_app({}, environ)
    return settings_from_app(app.conf, environ, app_name=app.main)


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




#: The dashboard's list unfiltered (a default argument made once).
_ALL = ScheduleFilter()


class _Filters(TypedDict):
    """A :class:`ScheduleFilter` as the store's page and count take it."""

    search: str | None
    paused: bool | None
    owner: str | None
    owned_by: str | None
    names: list[str] | None



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

    def __init__(self, store: Database) -> None:
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
    """What an operator does with one database's schedules, on an opened
    :class:`~awa_beat._db.database.Database`.

    ``deployment`` and ``configured`` (the names in that deployment's beat_schedule, asked
    for only when needed) let it flag orphans: rows the deployment registered and no
    longer configures. Without them nothing is flagged.

    ``settings`` (an app's, see :func:`settings_for`) decide how runtime writes
    (:meth:`add`, :meth:`update`) read an entry, exactly as that app's beat reads its
    beat_schedule: the default time zone and dispatch, and the deployment whose bridge
    publishes the jobs dispatched to Celery.
    """

    def __init__(self, store: Database, *, clock: Clock | None = None,
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
        # Only an app's (or the environment's) settings say whether its workers record
        # outcomes; the dashboard and the Django admin have neither, so they cannot tell.
        self._knows_tracking = settings is not None
        self.cluster = Cluster(store, overdue=self.overdue)
        """The beats sharing this database, their backlogs and who runs what."""

    @classmethod
    def open(cls, url: str, **kwargs: Any) -> Operations:
        """Operations on the database at ``url``, with a store of its own (close it, or
        use ``with``)."""
        store = Database(url, max_size=1)
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
        rows = self.store.schedules.list_all(pattern)
        orphans = set(self.orphans() or ())
        now = self.clock()
        return [view_of(row, now, row.name in orphans) for row in rows]

    def get(self, name: str) -> ScheduleView:
        """The schedule ``name`` (:class:`~awa_beat.errors.NotFound` if there is none)."""
        row = self.store.schedules.get(name)
        return view_of(row, self.clock(), name in (self.orphans() or ()))

    def pause(self, name: str, by: str | None = None, note: str | None = None, *,
              conn: Connection[Any] | None = None) -> datetime:
        """Stop ``name``'s automatic fires; ``by`` (default: ``user@host``) is shown, and
        ``note`` (why) with it while this pause lasts. ``conn``: the caller's connection,
        to join its transaction (also below)."""
        if note:
            return self.store.schedules.pause_with_note(name, by or whoami(), note, conn=conn)
        return self.store.schedules.pause(name, by or whoami(), conn=conn)

    def resume(self, name: str, *, conn: Connection[Any] | None = None) -> None:
        self.store.schedules.resume(name, conn=conn)

    def trigger(self, name: str, *, conn: Connection[Any] | None = None) -> int:
        """Enqueue one job for ``name`` now, even while paused; the id of that job."""
        return self.store.schedules.trigger(name, conn=conn)

    def backfill(self, name: str, start: datetime, end: datetime, *,
                 overlap: str = "allow", limit: int | None = None, dry_run: bool = False,
                 actor: str | None = None, source: str = "api",
                 remote_addr: str | None = None) -> BackfillResult:
        """Give one job to each fire time of ``name``'s calendar in ``[start, end]``, in
        order, as if it had fired then (docs/operating-time.md), and say which fire times
        got one and which were skipped because they had one already. The cursor is not
        moved; a paused schedule may be backfilled.

        Refused with :class:`BackfillRefused`, nothing written: a naive or reversed
        range, a range with more than ``limit`` fire times (default
        :data:`BACKFILL_LIMIT`, at most :data:`BACKFILL_MAX_LIMIT`), fire times after the
        cursor (the schedule's own to fire), an ``overlap`` other than ``allow`` and
        ``skip``, or under ``skip`` a run of the schedule that has not finished.
        ``dry_run`` writes nothing. A call that is not a dry run is recorded in the
        audit log (action ``backfill``) by ``actor`` (default ``user@host``) through
        ``source``, whether it succeeded or was refused."""
        audit: dict[str, Any] = {
            "actor": actor or whoami(), "source": source, "remote_addr": remote_addr,
            "action": "backfill", "schedule": name,
            "detail": {"from": _iso_or_text(start), "to": _iso_or_text(end),
                       "overlap": overlap}}
        try:
            return self._backfill(name, start, end, overlap=overlap, limit=limit,
                                  dry_run=dry_run, audit=audit)
        except AwaBeatError as exc:
            if not dry_run:
                with contextlib.suppress(StoreError):  # the refusal is what the caller needs
                    self.record_action(**{**audit, "outcome": f"error: {exc}"})
            raise

    def _backfill(self, name: str, start: datetime, end: datetime, *, overlap: str,
                  limit: int | None, dry_run: bool, audit: dict[str, Any]) -> BackfillResult:
        def refused(why: str) -> BackfillRefused:
            return BackfillRefused(f"backfill of {name!r} refused: {why}; nothing was written")

        for field, value in (("start", start), ("end", end)):
            if not isinstance(value, datetime):
                raise refused(f"{field} must be a datetime, not {value!r}")
            if value.tzinfo is None or value.utcoffset() is None:
                raise refused(f"{field} ({value.isoformat()}) has no time zone: give an "
                              "aware datetime (with an offset, or Z)")
        if start > end:
            raise refused(f"start ({_iso(start)}) is after end ({_iso(end)})")
        if overlap not in OVERLAPS:
            raise refused(f"overlap must be one of {', '.join(OVERLAPS)}, not {overlap!r}")
        if limit is None:
            limit = BACKFILL_LIMIT
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise refused(f"limit must be a whole number from 1 to {BACKFILL_MAX_LIMIT}, "
                          f"not {limit!r}")
        if limit > BACKFILL_MAX_LIMIT:
            raise refused(f"limit {limit} is above the maximum of {BACKFILL_MAX_LIMIT}; "
                          "backfill the range in parts")
        row = self.store.schedules.get(name)
        calendar = calendar_for(row.cron_expr, row.timezone)
        fires = fires_in_range(calendar, start, end, limit + 1)
        if len(fires) > limit:
            raise refused(f"the range {_iso(start)} to {_iso(end)} has more than {limit} "
                          "fire times (the limit of one call); backfill a shorter range, or "
                          "raise the limit")
        # The cursor is where the schedule's own fires stand: what is after it, it fires
        # itself. Without one (a row Awa wrote that never fired), its first fire is the
        # latest one from a minute before it was written.
        cursor = row.last_enqueued_at
        boundary = cursor if cursor is not None \
            else whole_second(row.created_at) - timedelta(seconds=61)
        late = [f for f in fires if f > boundary]
        if late:
            where = (f"its cursor ({_iso(cursor)}), the last fire time it reached"
                     if cursor is not None else
                     f"the first fire time it may fire itself (it has not fired; it was "
                     f"written {_iso(row.created_at)})")
            raise refused(f"{len(late)} fire time(s) of the range, from {_iso(late[0])}, "
                          f"are after {where}: those are the schedule's own to fire; end "
                          f"the range at or before {_iso(boundary)}")
        if overlap == "skip":
            running = self.store.schedules.run_in_progress(name)
            if running is not None:
                job = f"job {running['job_id']}, " if running["job_id"] is not None else ""
                raise refused(f"overlap 'skip': its run of fire time "
                              f"{running['fire_time'] or '(a manual trigger)'} ({job}"
                              f"{running['state']}) has not finished")
        if dry_run:
            wanted = self.store.schedules.backfill_plan(name, fires)
            fresh = set(wanted)
            return BackfillResult(name, start, end, tuple(wanted),
                                  tuple(f for f in fires if f not in fresh), dry_run=True)
        if not fires:
            self.record_action(**{**audit, "outcome": "ok",
                                  "detail": {**audit["detail"], "inserted": 0, "skipped": 0}})
            return BackfillResult(name, start, end, (), ())
        done = self.store.schedules.backfill(name, fires, by=audit["actor"],
                                             audit={**audit, "outcome": "ok"})
        given = {f for f, _ in done}
        return BackfillResult(name, start, end, tuple(f for f, _ in done),
                              tuple(f for f in fires if f not in given),
                              tuple(i for _, i in done))

    def remove(self, name: str, *, conn: Connection[Any] | None = None) -> None:
        """Delete ``name``'s row; the jobs it already fired stay."""
        if not self.store.schedules.remove(name, conn=conn):
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
        if self._knows_tracking:
            check_outcome_tracking(specs, settings.track_outcomes)
        celery = [s.name for s in specs if s.dispatch == "celery"]
        if celery and self.store.awa_owned:
            raise celery_dispatch_refused(celery, "dispatch them to Awa workers "
                                          "(options.awa_beat.dispatch = 'awa', --dispatch awa)")
        return specs

    def add(self, entries: Mapping[str, Any], *, replace: bool = False, force: bool = False,
            conn: Connection[Any] | None = None) -> list[ScheduleSpec]:
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
            existing = self.store.schedules.lock_schedules(c, [s.name for s in specs])
            if existing and not replace:
                raise ScheduleExists(
                    f"schedule(s) {_names_text(sorted(r.name for r in existing))} exist "
                    "already; pass replace=True (--replace) to overwrite them")
            check_owners(existing, force)
            written = self.store.schedules.upsert_runtime(c, [s.row(deployment) for s in specs],
                                                          deployment=deployment, replace=replace)
            if written.unchanged:
                # Only a concurrent writer can add a name between the lock and the write;
                # the transaction block undoes ours.
                raise ScheduleExists(f"{written.unchanged} schedule(s) were added by "
                                     "another writer meanwhile; nothing was written")
        return specs

    def update(self, name: str, changes: Mapping[str, Any], *, force: bool = False,
               deployment: str | None = None, conn: Connection[Any] | None = None
               ) -> ScheduleSpec:
        """Change only the given parts of ``name``'s entry (``task``, ``schedule``,
        ``args``, ``kwargs``, ``options``; see :func:`merge_entry`), validated as a
        beat_schedule entry. :class:`NotFound` if there is no such schedule,
        :class:`ScheduleOwned` as for :meth:`add` with ``replace``. ``deployment``: whose
        bridge publishes its Celery jobs (default: the row's, else the settings')."""
        with self.store.transaction(conn) as c:
            rows = self.store.schedules.lock_schedules(c, [name])
            if not rows:
                raise NotFound(f"no schedule named {name!r}")
            (row,) = rows
            check_owners(rows, force)
            entry = merge_entry(beat_entry(row), changes)
            (spec,) = self.specs({name: entry})
            deployment = self._deployment_of(row, deployment)
            self.store.schedules.upsert_runtime(c, [spec.row(deployment)], deployment=deployment,
                                                replace=True)
            if row.retired and max_runs(row.cron_expr) != max_runs(spec.cron_expr):
                # Its run limit was what retired it: with runs left under the new limit
                # (or none), it fires again, from the write on (the changed expression
                # moved its cursor there).
                self.store.schedules.unretire(c, name)
        return spec

    def _deployment_of(self, row: ScheduleRow, deployment: str | None) -> str:
        """The deployment whose bridge publishes ``row``'s jobs after an update: the one
        given, else the row's own (it stays), else the settings'."""
        celery = (row.metadata or {}).get("celery") or {}
        return deployment or celery.get("deployment") or self.settings.deployment

    def edit_delivery(self, name: str, *, deployment: str | None = None,
                      dispatch: str | None = None) -> Delivery:
        """:meth:`Cluster.delivery` of ``name`` once :meth:`update` gives it ``deployment`` or
        ``dispatch`` (None: its own stays)."""
        row = self.store.schedules.get(name)
        celery = (row.metadata or {}).get("celery") or {}
        return self.cluster.delivery(self._deployment_of(row, deployment),
                             dispatch or celery.get("dispatch") or self.settings.dispatch
                             or "awa")

    def history(self, name: str | None = None, limit: int = 20) -> list[JobRecord]:
        """The newest jobs of ``name`` (NotFound if there is no such schedule), or of
        every schedule."""
        if name is None:
            jobs = self.store.schedules.recent_jobs(limit)
        else:
            self.store.schedules.get(name)  # an unknown name is an error, not an empty history
            jobs = self.store.schedules.jobs(name, limit)
        return [JobRecord.from_job(j) for j in jobs]

    def occurrences(self, name: str | None, limit: int = 20) -> list[Occurrence]:
        """``name``'s occurrences (None: every schedule's), newest first: fires with their
        outcome and run time, manual triggers, fires skipped by the overlap policy, fires
        a coalesce left out (NotFound if there is no such schedule)."""
        if name is not None:
            self.store.schedules.get(name)
        return [Occurrence.from_row(r) for r in
                self.store.outcomes.schedule_history(name, limit, DEFAULT_MAX_RUNTIME)]

    def overdue(self) -> list[Overdue]:
        """Every overdue schedule, by name (see :func:`overdue_reasons`)."""
        return self.run_report()[0]

    def run_report(self) -> tuple[list[Overdue], dict[str, str]]:
        """The overdue schedules, and the outcome of each schedule's latest reported run
        (by name; schedules with none are left out), from one read."""
        now = self.clock()
        found = []
        last: dict[str, str] = {}
        for r in self.store.outcomes.overdue_candidates(DEFAULT_MAX_RUNTIME):
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
        return [r["name"] for r in self.store.outcomes.overdue_candidates(DEFAULT_MAX_RUNTIME)
                if r["last_outcome"] in FAILED_OUTCOMES]

    def upcoming(self, row: ScheduleRow, now: datetime | None = None,
                 count: int = 10) -> list[UpcomingFire]:
        """``row``'s next ``count`` fires after ``now`` (default: the clock's), DST changes
        noted; no more than the runs it has left (a one-off, ``max_runs``), and none once
        retired."""
        left = self.runs_left(row)
        return upcoming_fires(row, self.clock() if now is None else now,
                              count if left is None else min(count, left))

    def preview(self, name: str, *, count: int | None = None, until: datetime | None = None,
                now: datetime | None = None) -> Preview:
        """The stored schedule ``name``'s next fires after ``now`` (default: the clock's),
        ``count`` of them (default 10) or all up to ``until``, with DST changes marked
        and warnings about its calendar. Its state is respected: no more than the runs
        it has left, none once retired, and a paused schedule's fires are those it would
        have if resumed (its notices say which)."""
        row = self.get(name).row
        return preview_of(row, self.clock() if now is None else now,
                          runs_left=self.runs_left(row), count=count, until=until)

    def explain(self, name: str, at: datetime, *, now: datetime | None = None
                ) -> Explanation:
        """What happened or will happen to ``name`` at the instant ``at`` (an aware
        datetime), and why, as of ``now`` (default: the clock's); see
        :mod:`awa_beat._schedules.explain`. Read only. Raises
        :class:`~awa_beat.errors.NotFound`, or :class:`~awa_beat.errors.ValidationError`
        naming ``at`` for a naive datetime or one outside 1970 to 9999."""
        problem = instant_problem(at) if isinstance(at, datetime) else "must be a datetime"
        if problem:
            raise ValidationError([(name, "at", problem)])
        row = self.store.schedules.get(name)
        now = self.clock() if now is None else now
        fire = fire_time_of(row.cron_expr, row.timezone, at)
        second = at.astimezone(timezone.utc).replace(microsecond=0)
        records = self.store.outcomes.explain_records(name, fire, second,
                                                      DEFAULT_MAX_RUNTIME)
        note = self.pause_note(name) if row.paused_at is not None else None
        return explain_of(row, at, now, records, note)

    def runs_left(self, row: ScheduleRow) -> int | None:
        """How many more times ``row`` may fire: its run limit less the runs counted
        (0 once retired), or None when it has no limit."""
        limit = max_runs(row.cron_expr)
        if row.retired:
            return 0
        if limit is None:
            return None
        return max(limit - self.store.schedules.runs_used(row.name), 0)

    def export_entries(self, pattern: str | None = None) -> dict[str, dict[str, Any]]:
        """The stored schedules as a Celery ``beat_schedule``."""
        return {row.name: beat_entry(row) for row in self.store.schedules.list_all(pattern)}

    def export_rows(self, pattern: str | None = None) -> list[ScheduleRow]:
        """The stored schedules, by name, for an export (:mod:`awa_beat._exporting`)."""
        return self.store.schedules.list_all(pattern)

    def orphans(self) -> list[str] | None:
        """Rows the deployment registered that its beat_schedule no longer has; None when
        the configuration is unknown."""
        if self._configured is None or self.deployment is None:
            return None
        return self.store.schedules.orphaned_names(self.deployment, list(self._configured()))

    # -- the dashboard ----------------------------------------------------------------------

    def page(self, where: ScheduleFilter = _ALL, *, after: str | None = None,
             before: str | None = None, limit: int = 50) -> SchedulePage:
        """A page of at most ``limit`` schedules after the name ``after`` (or the page
        before ``before``), filtered and paged in SQL (keyset on the name)."""
        filters: _Filters = {
            "search": where.search.lower() if where.search else None,
            "paused": where.paused, "owner": where.owner, "owned_by": where.owned_by,
            "names": sorted(where.names) if where.names is not None else None}
        rows = self.store.cluster.schedules_page(after=after, before=before, limit=limit + 1,
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
            views=[view_of(row, now, row.name in orphans) for row, _ in rows],
            notes={row.name: note for row, note in rows if note},
            total=self.store.cluster.count_schedules(**filters, cap=COUNT_LIMIT + 1),
            has_next=has_next, has_previous=has_previous)

    def deployments(self) -> list[str]:
        """The deployments that registered schedules here."""
        return self.store.cluster.deployments()

    def pause_note(self, name: str) -> str | None:
        return self.store.schedules.pause_note(name)

    def record_action(self, *, actor: str, source: str, action: str, outcome: str,
                      schedule: str | None = None, remote_addr: str | None = None,
                      detail: Mapping[str, Any] | None = None) -> int:
        """Record an action taken through a dashboard; the entry's id."""
        entry_id, _ = self.store.cluster.record_audit(
            actor=actor, source=source, remote_addr=remote_addr, action=action,
            schedule=schedule, detail=dict(detail or {}), outcome=outcome)
        return entry_id

    def audit_log(self, *, limit: int = 50, before_id: int | None = None,
                  schedule: str | None = None) -> list[AuditEntry]:
        """The newest recorded actions (before the entry ``before_id``), of one schedule
        or of all."""
        return [AuditEntry(**r) for r in self.store.cluster.audit_log(
            limit=limit, before_id=before_id, schedule=schedule)]


def node_run_report(node: BeatNode) -> Callable[[], tuple[list[Overdue], dict[str, str]]]:
    """:meth:`Operations.run_report` on ``node``'s store as it is at
    each call: the endpoint starts before the node opens its store (probes answer while
    it starts) and lives on while the node reconnects or closes."""

    def report() -> tuple[list[Overdue], dict[str, str]]:
        store = node.store
        if not isinstance(store, Database):
            raise StoreError("the beat is not connected to its database")
        return Operations(store).run_report()

    return report
