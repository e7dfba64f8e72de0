"""The beat runtime: one replica of a group, with no Celery in it.

A :class:`BeatNode` owns everything a running beat does: the store, the leadership, the
engine, the periodic re-sync of the configuration, the heartbeats that ``awa-beat
status`` reads, and the outbox (the dispatch bridge, when jobs go to Celery). Its life
is :meth:`BeatNode.open` (validate, migrate, sync, check), then :meth:`BeatNode.tick`
in a loop, each call returning how long to sleep, then :meth:`BeatNode.close`. The Celery
``Scheduler`` maps Celery's lifecycle onto these three and does nothing else.

One tick, as a standby: keep the view of the table warm, and once per election
interval (jittered) try the lock. As the leader: ping the lock's session when due,
re-assert one slice of the configuration when a re-sync is under way, run one engine
pass (fire what is due, refresh), publish what the outbox has, then either return the
time until the next thing is due or, where the schema sends change notifications, sleep
on the lock's session until a notification or that time. See docs/architecture.md for
the leadership state machine and what each step guarantees.

Every collaborator is injected (store, leadership, bridge factories, both clocks, fault
hooks), so the node's timing is tested in the unit tier against
:class:`awa_beat._testing.MemoryStore` with no database.
"""

from __future__ import annotations

import bisect
import contextlib
import heapq
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from .._config import Settings, celery_dispatch_refused
from .._db.records import Fence, FireResult
from .._engine.engine import Engine, utcnow
from .._logs import event
from .._schedules.fire_times import parse_iso
from .._schedules.spec import ScheduleSpec, check_outcome_tracking
from ..errors import AwaBeatError, DatabaseUnavailable, StoreError, UnknownSchema
from .configuration import Configuration
from .opening import Opening, default_leadership, default_store, open_connections
from .timers import Timers

if TYPE_CHECKING:
    # Only the annotations name them, so the beat's start does not load the module.
    from .._db.batches import PackedBatch
    from .protocols import LeadershipLike, NodeStore, Outbox

# The logger keeps the name it had before the modules moved into layer packages, so
# logging configurations that select it by name go on working.
logger = logging.getLogger('awa_beat.node')

#: Seconds between two heartbeats of a beat process in awa_beat.beats (`awa-beat status`
#: lists the beats seen in the last minute).
HEARTBEAT_INTERVAL = 15.0
#: Seconds between two looks for Celery jobs that this process did not fire itself, when
#: no notification tells of them (the Awa layout), and when one does (a backstop).
OUTBOX_CHECK_INTERVAL = 5.0
NOTIFIED_OUTBOX_CHECK_INTERVAL = 60.0
#: Seconds between two refreshes of the leader's view: polling, and, when notifications
#: wake it on every change, the backstop for a notification lost with its connection.
POLL_REFRESH_INTERVAL = 1.0
NOTIFIED_REFRESH_INTERVAL = 60.0
#: Seconds between two refreshes of a standby's view of the table.
STANDBY_REFRESH_INTERVAL = 5.0
#: Seconds between two purges of outcomes and occurrences past their retention by the
#: leader (workers that record outcomes purge too; occurrences exist without them).
OUTCOME_PURGE_INTERVAL = 3600.0
#: Longest sleep after a database error before the next attempt.
MAX_RETRY_WAIT = 1.0
#: Upper bounds (seconds) of the fire-lag histogram's buckets.
LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
               300.0, 3600.0)


@dataclass
class NodeHooks:
    """Fault hooks, for tests that need a crash at a precise point; none in production.

    ``after_fire`` runs once a fire batch has committed and before anything of it is
    published (a test's ``os._exit`` there leaves fired jobs unpublished).
    """

    after_fire: Callable[[FireResult], None] | None = None


@dataclass(frozen=True)
class NodeStatus:
    """What a node knows of itself: the runtime facts metrics and status show."""

    identity: str
    role: str
    """``"leader"``, ``"standby"``, or ``"closed"``."""
    leader_since: datetime | None
    last_lag: float | None
    """Seconds between the latest fire time of the last firing pass and its start."""
    database_ok: bool


@dataclass
class NodeStats:
    """What a node counts for its metrics. Written by the loop's thread only and read
    by the scrape's: counters and whole-value assignments, no lock."""

    fires: int = 0
    """Jobs fired by this process."""
    lag_counts: list[int] = field(default_factory=lambda: [0] * (len(LAG_BUCKETS) + 1))
    """Fires per lag bucket (LAG_BUCKETS, then one past the last bound); not cumulative."""
    lag_sum: float = 0.0
    won: int = 0
    lost: int = 0
    last_pass_at: float | None = None
    """Monotonic seconds of the end of the last engine pass that succeeded."""
    back_by: float | None = None
    """Monotonic seconds by which the loop said it would take its next step (None: not
    started); ``/healthz`` fails once the loop is far past it."""

    def observe_lag(self, seconds: float) -> None:
        self.lag_counts[bisect.bisect_left(LAG_BUCKETS, seconds)] += 1
        self.lag_sum += seconds


@dataclass(frozen=True)
class _Running:
    """The parts of an open node that its loop works with. :meth:`BeatNode.open` sets it
    once every part is up and :meth:`BeatNode.close` clears it, so each step of the loop
    either has all of them or finds the node closed."""

    store: NodeStore
    leadership: LeadershipLike
    engine: Engine
    outbox: Outbox | None


class BeatNode:
    """One beat replica: leads or stands by, fires, re-syncs, publishes. Not
    thread-safe, except :meth:`close`, which may run from a signal handler between two
    steps of :meth:`tick` only through the caller's own care (see the Celery adapter)."""

    #: The longest a step waits or asks its caller to wait (``celery beat
    #: --max-interval``); steps come sooner whenever a fire or a duty is due.
    max_wait: float = float("inf")

    def __init__(
        self,
        settings: Settings,
        specs: Sequence[ScheduleSpec],
        *,
        database_url: str,
        identity: str | None = None,
        clock: Callable[[], datetime] = utcnow,
        monotonic: Callable[[], float] = time.monotonic,
        make_store: Callable[[str, str], NodeStore] = default_store,
        make_leadership: Callable[..., LeadershipLike] = default_leadership,
        make_outbox: Callable[[NodeStore], Outbox] | None = None,
        hooks: NodeHooks | None = None,
        sleep: Callable[[float], None] = time.sleep,
        opening: Opening | None = None,
    ) -> None:
        """``specs`` is the validated configuration; ``make_outbox`` builds the dispatch
        bridge when any job goes to Celery. With an injected ``clock`` the caller drives
        time, so :meth:`tick` never sleeps on a notification in real time. ``opening``,
        started by the caller for this database (see :mod:`awa_beat._beat.opening`), gives
        the first attempt of :meth:`open` its connections."""
        from .._db.database import process_identity

        self.settings = settings
        self.database_url = database_url
        self.identity = identity or process_identity()
        self.clock = clock
        self._monotonic = monotonic
        self._may_block = clock is utcnow
        self._make_store = make_store
        self._make_leadership = make_leadership
        self._make_outbox = make_outbox
        self.hooks = hooks or NodeHooks()
        self._sleep = sleep
        self._opening = opening
        # Refused before anything is synced: a pause on failure that no worker's report
        # could ever trigger.
        check_outcome_tracking(specs, settings.track_outcomes)
        self.configuration = Configuration(specs, settings.deployment)
        """The configuration, packed, and its start-up sync."""
        self._celery_entries = [s.name for s in specs if s.dispatch == "celery"]
        # What probes, metrics and status read. open() sets each as it comes up, so they
        # see the store during a long start-up sync; close() clears the store and the
        # outbox and keeps the engine and the leadership, whose last state stays readable.
        self.store: NodeStore | None = None
        self.leadership: LeadershipLike | None = None
        self.engine: Engine | None = None
        self.outbox: Outbox | None = None
        self._running: _Running | None = None
        self.timers = Timers.new()
        self._resync: list[PackedBatch] = []
        self._elected_once = False
        self._leading = False
        self._outage = False
        self._started_at = datetime.now(timezone.utc)
        self.stats = NodeStats()
        # The entries that opt in (options.awa_beat.metrics), else all; by name, bounded.
        # (Names of a beat_schedule are unique; the first few are picked without a sort
        # of them all.)
        chosen = [s.name for s in specs if s.metrics] or [s.name for s in specs]
        self.watched = heapq.nsmallest(settings.metrics_schedule_limit, chosen)
        """The schedules with series of their own in the metrics (a bounded set)."""
        if len(chosen) > len(self.watched) > 0:
            logger.info("beat: per-schedule metrics for the first %d of %d schedules by "
                        "name (awa_beat_metrics_schedule_limit)", len(self.watched),
                        len(chosen))
        self._outcome_purge_at = 0.0

    def __repr__(self) -> str:
        return f"<BeatNode {self.identity} {self.status().role}>"

    # -- life ------------------------------------------------------------------------------

    def open(self) -> BeatNode:
        """Connect, migrate if need be, refuse a layout the configuration cannot use,
        sync the whole configuration and get ready to fire. Closes what it opened if
        anything (a signal included) interrupts it.

        While the database cannot be reached, start-up is retried with back-off (1 s
        doubling to 30 s), a log line each time, for up to ``startup_timeout`` seconds;
        any other error (a configuration the database refuses) is raised at once.
        """
        give_up = self._monotonic() + self.settings.startup_timeout
        # Alive while it starts: retries end within the start-up timeout.
        self.stats.back_by = give_up
        attempt = 0
        while True:
            attempt += 1
            try:
                self._open()
                return self
            except DatabaseUnavailable as exc:
                self.close()
                delay = min(30.0, 2.0 ** (attempt - 1))
                left = give_up - self._monotonic()
                if left <= 0:
                    raise
                delay = min(delay, left)
                event(logger, logging.WARNING, "startup.retry",
                      "beat: database unreachable at start-up (%s); attempt %d failed, "
                      "retrying in %.0f s (awa_beat_startup_timeout: %.0f s left)",
                      exc, attempt, delay, left, error=str(exc), attempt=attempt)
                self._sleep(delay)
            except BaseException:
                self.close()
                raise

    def _open(self) -> None:
        settings = self.settings
        opening, self._opening = self._opening, None
        if opening is not None:
            self.store, self.leadership = store, leadership = opening.result()
        else:
            self.store, self.leadership = store, leadership = open_connections(
                settings, self.database_url, self.identity, make_store=self._make_store,
                make_leadership=self._make_leadership, analyze=True)
        if self._celery_entries or settings.dispatch == "celery":
            if store.awa_owned:
                raise celery_dispatch_refused(
                    self._celery_entries, "give awa-beat a database of its own, or dispatch "
                    "to Awa workers (awa_beat_dispatch = 'awa')")
            if self._make_outbox is not None:
                self.outbox = self._make_outbox(store)
        self.configuration.sync_all(store)
        self.engine = engine = Engine(store.evaluator, catch_up_limit=settings.catch_up_limit,
                                      clock=self.clock, on_fired=self._on_fired)
        engine.stats.watched = frozenset(self.watched)
        self._running = _Running(store, leadership, engine, self.outbox)

    def close(self) -> None:
        """Close the outbox, resign, say goodbye in the heartbeat table, close the
        store; idempotent."""
        self._running = None  # first, so that no step of the loop uses what closes below
        if self._opening is not None:  # closed before open() took the connections
            self._opening.cancel()
            self._opening = None
        if self.outbox is not None:
            # Before resigning: a batch on its way is confirmed and marked first (within
            # the outbox's bound), so the next leader does not publish it again.
            self.outbox.close()
            self.outbox = None
        if self.leadership is not None:
            self.leadership.resign()  # then at once: a standby may take over
        if self.store is not None and self.leadership is not None:
            with contextlib.suppress(AwaBeatError):
                self.store.cluster.beat_gone(self.leadership.identity)
        if self.store is not None:
            self.store.close()
            self.store = None

    @property
    def closed(self) -> bool:
        return self.store is None

    @property
    def elected_once(self) -> bool:
        """Whether the node has stood for election at least once (its role is known)."""
        return self._elected_once

    def status(self) -> NodeStatus:
        leading = bool(self.leadership is not None and self.leadership.is_leader)
        since = None
        if leading and self.leadership is not None and self.leadership.since is not None:
            since = datetime.now(timezone.utc) - timedelta(
                seconds=self._monotonic() - self.leadership.since)
        role = "closed" if self.closed else ("leader" if leading else "standby")
        lag = self.engine.last_lag if (leading and self.engine is not None) else None
        return NodeStatus(self.identity, role, since, lag, not self._outage)

    @property
    def clock_skew(self) -> float | None:
        """Seconds the database's clock was ahead of this host's at the last measure
        (negative: behind); None before the first, or where nothing measures it."""
        return getattr(self.leadership, "skew", None)

    @property
    def clock_problem(self) -> str | None:
        """Why this host's clock keeps this replica from leading, or None."""
        return getattr(self.leadership, "clock_problem", None)

    # -- the loop --------------------------------------------------------------------------

    def tick(self, now: float | None = None) -> float:
        """One step; returns seconds until the next step is needed.

        ``now`` is monotonic seconds (default: the node's monotonic clock). Database
        errors are reported once per outage and retried; an error that makes running
        pointless (session locks that do not hold) is raised, with the node closed.
        """
        wait = self._step(now)
        self.stats.back_by = self._monotonic() + wait
        return wait

    def _step(self, now: float | None) -> float:
        run = self._running
        if run is None:
            return MAX_RETRY_WAIT  # closed (a caller may tick once more on its way out)
        if now is None:
            now = self._monotonic()
        if self._elected_once:
            # Not before the first election: its outcome is what `status` should show,
            # and the first fire should not wait for it.
            self._heartbeat(run, now)
        if not run.leadership.is_leader:
            if self._leading:
                self._lost(run)
            standing_by = self._stand_by(run, now)
            if standing_by is not None:
                return standing_by
        if self.timers.ping.due(now):
            self.timers.ping.set(now, self.settings.ping_interval)
            if not run.leadership.ping():
                return 0.0
        engine = run.engine
        ahead = engine.stats.skipped["clock_ahead"]
        try:
            self._resync_slice(run, now)
            engine.run_pass()
            if engine.stats.skipped["clock_ahead"] > ahead:
                # The database refused fires dated past its clock: measure the skew at
                # the next step, which stands down if it is beyond the tolerance.
                self.timers.ping.expire()
            self.stats.last_pass_at = self._monotonic()
            more = self._dispatch(run, now)
        except UnknownSchema:  # not an outage: running on makes no sense
            self.close()
            raise
        except StoreError as exc:
            return self._store_failed(run, exc)
        if self._outage:
            event(logger, logging.INFO, "database.recovered", "beat: database reachable again")
            self._outage = False
        if more or self._resync:
            return 0.0
        return self._idle(run)

    def _stand_by(self, run: _Running, now: float) -> float | None:
        """A standby's step: the seconds to sleep, or None when it just took over."""
        election = self.timers.election
        if self._elected_once or not election.due(now):
            # Not before the first election: the view is loaded once, by the winner if
            # it wins. After it, every tick (a lone standby wakes when its election is
            # due), so that a takeover costs one refresh, not a load of every row.
            self._warm_standby(run, now)
        if not election.due(now):
            return self._standby_wait(run, now)
        # Jitter, so that standbys started together do not try in lockstep.
        election.set(now, self.settings.election_interval * random.uniform(0.8, 1.2))
        self._elected_once = True
        try:
            won = run.leadership.try_acquire()
        except AwaBeatError:  # session locks do not hold here (PgBouncer pooling)
            self.close()
            raise
        if not won:
            return max(0.0, election.left(now))
        self._took_over(run, now)
        try:
            run.engine.refresh()  # warm already (but at start): one cheap query
        except StoreError as exc:
            return self._store_failed(run, exc)
        return None

    def _took_over(self, run: _Running, now: float) -> None:
        self.timers.ping.set(now, self.settings.ping_interval)
        self.timers.sync.set(now, self.settings.sync_interval)
        self.timers.heartbeat.expire()  # tell `awa-beat status` of the new leader now
        self._listen(run)  # before the refresh, so no change falls between the two
        self._leading = True
        run.engine.look_for_held()
        self.stats.won += 1
        if run.outbox is not None:
            # Publish only under this lock (the last leader may have left jobs
            # unpublished: the outbox looks at once).
            run.outbox.lead(Fence(run.leadership.backend_pid or 0, run.leadership.lock_key))

    def _lost(self, run: _Running) -> None:
        """Leadership ended (a failed ping or wait): publish nothing more."""
        self._leading = False
        self.stats.lost += 1
        if run.outbox is not None:
            run.outbox.stand_down()

    def _resync_slice(self, run: _Running, now: float) -> None:
        """Re-assert the configuration every sync interval, one slice per tick, so that a
        large schedule never holds up firing; the refresh picks up what changed."""
        if self.timers.sync.due(now):
            self.timers.sync.set(now, self.settings.sync_interval)
            # Awa may have been migrated under a running beat: a table it no longer knows
            # stops the leader, as it would have stopped it at start-up.
            run.store.check_layout()
            self._resync = list(self.configuration.batches)
        if self._resync:
            synced = run.store.schedules.sync(self._resync.pop().unpack())
            if synced.inserted or synced.updated:
                run.engine.refresh_soon()  # our own writes notify no one

    def _idle(self, run: _Running) -> float:
        """Nothing to do right now: the seconds to sleep, or sleep here on the lock's
        session until a notification (then 0)."""
        # Measured after publishing, so time spent on the broker does not delay fires.
        now = self._monotonic()
        timers = self.timers
        wait = min(run.engine.wait(), timers.ping.left(now), timers.sync.left(now),
                   self.max_wait)
        if not run.leadership.listening:
            return max(0.0, wait)  # the caller sleeps; the engine polls every second
        # Sleep on the lock's connection instead of in the caller's loop: a change to
        # the table or an inserted job wakes beat at once, so it polls nothing while idle.
        wait = min(wait, timers.heartbeat.left(now))
        if run.outbox is not None:
            wait = min(wait, timers.outbox_check.left(now), run.outbox.next_wake() - now)
        # Our own writes are passed over: the engine holds what it fired, the outbox
        # knows its own jobs are pending, and a resync that changed rows said so above.
        self.stats.back_by = now + wait
        changed = {table for table, _, origin in
                   (payload.partition(" ") for payload in run.leadership.wait(wait))
                   if origin != run.store.origin}
        if "cron_jobs" in changed:
            run.engine.refresh_soon()
        if "jobs" in changed and run.outbox is not None:
            run.outbox.wake()
        return 0.0

    # -- duties ----------------------------------------------------------------------------

    def _listen(self, run: _Running) -> None:
        """As a new leader, wake on notifications rather than poll, where the schema
        sends them and the clock is real."""
        channel = run.store.change_channel
        notified = (self._may_block and channel is not None
                    and run.leadership.listen(channel))
        run.engine.set_refresh_interval(NOTIFIED_REFRESH_INTERVAL if notified
                                         else POLL_REFRESH_INTERVAL)

    def _warm_standby(self, run: _Running, now: float) -> None:
        """Keep a standby's view of the table current, so that taking over costs one
        refresh, not a full load of every row, and so that the view of every replica
        follows a change at once: LISTEN on the lock's session where the schema
        notifies (a refresh follows each change, in :meth:`_standby_wait`), with a
        refresh every STANDBY_REFRESH_INTERVAL as the backstop for a notification lost
        with its connection, and the only means where Awa owns the tables."""
        channel = run.store.change_channel
        if (self._may_block and channel is not None and not run.leadership.subscribed
                and run.leadership.listen(channel)):
            # A change may have committed between the last refresh and the LISTEN.
            self.timers.standby_refresh.expire()
        if not self.timers.standby_refresh.due(now):
            return
        self._standby_refresh(run, now)

    def _standby_wait(self, run: _Running, now: float) -> float:
        """Until the next election: the seconds to sleep, or sleep here on the lock's
        session (then 0) and refresh the view on a change to the table, so that it
        never lags the leader's by more than a notification's delivery."""
        timers = self.timers
        if not run.leadership.subscribed:
            return min(timers.election.left(now), self.max_wait)
        wait = min(timers.election.left(now), timers.standby_refresh.left(now), self.max_wait)
        if self._elected_once:  # no heartbeat is written before the first election
            wait = min(wait, timers.heartbeat.left(now))
        # Our own writes are passed over (a standby writes only its heartbeat); the
        # leader's fires notify too, and the refresh picks up their cursors.
        payloads = run.leadership.wait(max(0.0, wait))
        if any(table == "cron_jobs" and origin != run.store.origin
               for table, _, origin in (p.partition(" ") for p in payloads)):
            self._standby_refresh(run, self._monotonic())
        return 0.0

    def _standby_refresh(self, run: _Running, now: float) -> None:
        """Refresh a standby's view, next in STANDBY_REFRESH_INTERVAL; if the database
        fails it, again in MAX_RETRY_WAIT, since the change a notification announced is
        still to be seen (the election reports the database's trouble)."""
        self.timers.standby_refresh.set(now, STANDBY_REFRESH_INTERVAL)
        try:
            run.engine.refresh()
        except StoreError:
            self.timers.standby_refresh.set(self._monotonic(), MAX_RETRY_WAIT)

    def _heartbeat(self, run: _Running, now: float) -> None:
        """Tell `awa-beat status` who runs, every HEARTBEAT_INTERVAL; never fatal."""
        if not self.timers.heartbeat.due(now):
            return
        self.timers.heartbeat.set(now, HEARTBEAT_INTERVAL)
        status = self.status()
        host, _, pid = self.identity.rpartition(":")
        # Never fatal: the tick's real work reports database trouble.
        with contextlib.suppress(StoreError):
            run.store.cluster.heartbeat(
                identity=self.identity, host=host, pid=int(pid),
                deployment=self.settings.deployment, lock_key=self.settings.lock_key,
                role=status.role, started_at=self._started_at,
                leader_since=status.leader_since, publishes=run.outbox is not None,
                last_lag_ms=None if status.last_lag is None else status.last_lag * 1000,
                clock_skew_ms=None if self.clock_skew is None else self.clock_skew * 1000)
        purge = getattr(run.store, "purge_outcomes", None)
        if status.role == "leader" and purge is not None and now >= self._outcome_purge_at:
            self._outcome_purge_at = now + OUTCOME_PURGE_INTERVAL
            with contextlib.suppress(StoreError):
                purge(timedelta(days=self.settings.outcome_retention))

    def _store_failed(self, run: _Running, exc: StoreError) -> float:
        if not self._outage:
            event(logger, logging.ERROR, "database.outage",
                  "beat: database error, retrying: %s", exc, error=str(exc))
            self._outage = True
        run.leadership.ping()
        return min(self.settings.election_interval, MAX_RETRY_WAIT)

    def _on_fired(self, result: FireResult) -> None:
        stats = self.stats
        stats.fires += len(result.jobs)
        now = self.clock().timestamp()
        epochs: dict[str, float] = {}  # a burst shares few fire times: parse each once
        for job in () if result.started_held else result.jobs:
            at = epochs.get(job.fire_time)
            if at is None:
                at = epochs[job.fire_time] = parse_iso(job.fire_time).timestamp()
            stats.observe_lag(max(0.0, now - at))
        if logger.isEnabledFor(logging.INFO):
            for job in result.jobs:
                event(logger, logging.INFO, "fire", "beat: fired %s for %s (job %s)",
                      job.name, job.fire_time, job.job_id, schedule=job.name,
                      fire_time=job.fire_time, job_id=job.job_id)
        if self.hooks.after_fire is not None:
            self.hooks.after_fire(result)
        if self.outbox is not None:
            self.outbox.wake()

    def _dispatch(self, run: _Running, now: float) -> bool:
        """Publish what the outbox has pending; True when more is waiting right now."""
        outbox = run.outbox
        if outbox is None:
            return False
        if self.timers.outbox_check.due(now):
            # Jobs fired by another process (a manual trigger, another deployment's
            # leader) are found this way; our own fires wake the outbox at once.
            self.timers.outbox_check.set(now, NOTIFIED_OUTBOX_CHECK_INTERVAL
                                         if run.leadership.listening
                                         else OUTBOX_CHECK_INTERVAL)
            outbox.wake()
        if outbox.due():
            outbox.drain()
        outbox.purge()
        return outbox.due()
