"""``celery beat -S awa_beat.Scheduler``: Celery's beat loop driving the awa-beat engine.

A thin adapter. Celery calls :meth:`Scheduler.tick` in a loop and sleeps for what it
returns; each tick either stands for election (standby) or runs one engine pass
(leader). Where the schema sends change notifications, a leader does its sleeping
inside the tick instead, on its lock session, so that a change wakes it at once and
nothing is polled while it is idle.

Start-up validates the whole ``beat_schedule`` (every problem at once, then exit 1
without a traceback), migrates, and syncs (additive: rows for entries that left the
config are kept, and reported).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any, NoReturn

from celery import beat

from .bridge import Bridge
from .config import Settings, celery_dispatch_refused, redact, resolve_database_url
from .embedded import default_data_dir
from .engine import Engine, utcnow
from .errors import AwaBeatError, SchemaError, StoreError
from .leader import Leadership
from .records import FireResult
from .spec import specs_from_beat_schedule
from .store import Store, SyncBatch, process_identity

logger = logging.getLogger("awa_beat.beat")
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
#: Rows per statement when beat syncs its configuration (at start, then every sync
#: interval, one slice per tick so that a large schedule never holds up firing).
RESYNC_SLICE = 2000
#: Seconds between two refreshes of a standby's view of the table.
STANDBY_REFRESH_INTERVAL = 5.0


def _refuse(message: str, *, hard: bool = False) -> NoReturn:
    """Exit 1 with ``message`` and no traceback."""
    logger.critical("awa-beat %s", message)
    sys.stderr.write(f"awa-beat: {message}\n")
    sys.stderr.flush()
    if hard:
        os._exit(1)
    raise SystemExit(1)


#: A scheduler of this process is in setup_schedule() (see Scheduler.__init__).
_starting = False
#: Fault injection for tests only ("exit-after-fire"); never set it in production.
_FAULT = os.environ.get("AWA_BEAT_TEST_FAULT")


def configured_entries(app: Any, settings: Settings) -> dict[str, Any]:
    """The app's ``beat_schedule`` plus what Celery's own beat adds: the result backend's
    nightly cleanup, when results expire and the backend cannot expire them itself.

    That entry is added only when jobs are dispatched to Celery (Awa workers have no such
    task), and named per deployment so that deployments sharing a database do not
    overwrite each other's row.
    """
    entries = dict(app.conf.beat_schedule or {})
    conf = app.conf
    if (settings.dispatch == "celery" and conf.result_expires
            and not any(e.get("task") == "celery.backend_cleanup" for e in entries.values()
                        if isinstance(e, dict))
            and not app.backend.supports_autoexpire):
        from celery.schedules import crontab

        entries[f"{settings.deployment}.celery.backend_cleanup"] = {
            "task": "celery.backend_cleanup", "schedule": crontab("0", "4", "*"),
            "options": {"expires": 12 * 3600}}
    return entries


class Scheduler(beat.Scheduler):
    """Celery beat scheduler backed by PostgreSQL, safe to run as many replicas."""

    #: Celery's banner shows this; our real cadence is per pass (see tick()).
    max_interval = 1.0

    def __init__(self, app: Any, *args: Any, lazy: bool = False,
                 clock: Callable[[], datetime] = utcnow, **kwargs: Any) -> None:
        if _starting:
            # Celery's SIGTERM handler, run while this process's scheduler starts, reads
            # Service.scheduler, which is not set yet, so Celery builds a second
            # scheduler inside the handler. That one must stay empty: a second start-up
            # would wait forever on the first one's migration lock, or at best run twice.
            lazy = True
        self.clock = clock
        # With an injected clock the caller drives time, so tick() must never sleep in
        # real time waiting for a notification.
        self._may_block = clock is utcnow
        try:
            self.settings = Settings.from_app(app.conf, app_name=app.main)
        except AwaBeatError as exc:
            _refuse(f"invalid configuration: {exc}")
        self.database_url = self.settings.database_url
        self.store: Store | None = None
        self.bridge: Bridge | None = None
        self.engine: Engine | None = None
        self.leadership: Leadership | None = None
        self._next_election = 0.0
        self._next_ping = 0.0
        self._next_sync = 0.0
        self._outage = False
        self._next_heartbeat = 0.0
        self._next_outbox_check = 0.0
        self._next_standby_refresh = 0.0
        self._resync: list[SyncBatch] = []
        self._batches: list[SyncBatch] = []
        """The configuration, encoded once at start-up (the specs are not kept)."""
        self._started_at = datetime.now(timezone.utc)
        self._ticking = False
        self._stopping = False
        """close() was called during a tick (Celery's SIGTERM handler): the tick closes."""
        kwargs.pop("max_interval", None)
        super().__init__(app, *args, lazy=lazy, max_interval=self.max_interval, **kwargs)

    # -- Celery's contract ----------------------------------------------------------------------

    def setup_schedule(self) -> None:
        global _starting
        _starting = True
        try:
            self._start()
        except AwaBeatError as exc:
            self._close()
            # A user mistake or an unreachable database: say so and exit, no traceback.
            _refuse(f"cannot start: {exc}")
        except BaseException:
            self._close()  # stopped by a signal mid-start: leave no session behind
            raise
        finally:
            _starting = False

    def tick(self, *args: Any, **kwargs: Any) -> float:
        """One step of the beat loop; returns seconds until the next step is needed."""
        self._ticking = True
        try:
            return self._tick()
        finally:
            self._ticking = False
            if self._stopping:
                self._close()
                raise SystemExit  # whatever the tick raised or returned: beat is stopping

    def _tick(self) -> float:
        if self.store is None:
            return self.max_interval  # closed (Celery may tick once more on its way out)
        assert self.leadership is not None and self.engine is not None
        now = time.monotonic()
        if self._next_election:
            # Not before the first election: its outcome is what `status` should show,
            # and the first fire should not wait for it.
            self._heartbeat(now)
        if not self.leadership.is_leader:
            if now < self._next_election or self.engine.loaded:
                # Not at the first tick: a first election loads the view if it wins.
                self._warm_standby(now)
            if now < self._next_election:
                return self._next_election - now
            # Jitter, so that standbys started together do not try in lockstep.
            self._next_election = now + self.settings.election_interval * random.uniform(
                0.8, 1.2)
            try:
                won = self.leadership.try_acquire()
            except AwaBeatError as exc:  # e.g. PgBouncer transaction pooling
                self._close()
                # Celery's loop swallows SystemExit (and would exit 0): leave with 1.
                _refuse(f"cannot lead: {exc}", hard=True)
            if not won:
                return max(0.0, self._next_election - now)
            self._next_ping = now + self.settings.ping_interval
            self._next_sync = now + self.settings.sync_interval
            self._next_heartbeat = 0.0  # tell `awa-beat status` of the new leader now
            self._listen()  # before the refresh, so no change falls between the two
            if self.bridge is not None:
                self.bridge.wake()  # the last leader may have left jobs unpublished
            try:
                self.engine.refresh()  # warm already (but at start): one cheap query
            except StoreError as exc:
                return self._store_failed(exc)
        if now >= self._next_ping:
            self._next_ping = now + self.settings.ping_interval
            if not self.leadership.ping():
                return 0.0
        try:
            if now >= self._next_sync:
                self._next_sync = now + self.settings.sync_interval
                # Re-assert the configuration in slices, one per tick, so that a large
                # schedule never holds up firing; the refresh picks up what changed.
                self._resync = list(self._batches)
            if self._resync:
                synced = self.store.sync(self._resync.pop())
                if synced.inserted or synced.updated:
                    self.engine.refresh_soon()  # our own writes notify no one
            self.engine.run_pass()
            more = self._dispatch(now)
        except StoreError as exc:
            return self._store_failed(exc)
        if self._outage:
            logger.info("beat: database reachable again")
            self._outage = False
        if more or self._resync:
            return 0.0
        # Measured after publishing, so time spent on the broker does not delay fires.
        now = time.monotonic()
        wait = min(self.engine.wait(), self._next_ping - now, self._next_sync - now)
        if not self.leadership.listening:
            return max(0.0, wait)  # Celery sleeps; the engine polls every second
        # Sleep on the lock's connection instead of in Celery's loop: a change to the
        # table or an inserted job wakes beat at once, so it polls nothing while idle.
        wait = min(wait, self._next_heartbeat - now)
        if self.bridge is not None:
            wait = min(wait, self._next_outbox_check - now, self.bridge.next_wake() - now)
        # Our own writes are passed over: the engine holds what it fired, the bridge
        # knows its own jobs are pending, and a resync that changed rows said so above.
        changed = {table for table, _, origin in
                   (payload.partition(" ") for payload in self.leadership.wait(wait))
                   if origin != self.store.origin}
        if "cron_jobs" in changed:
            self.engine.refresh_soon()
        if "jobs" in changed and self.bridge is not None:
            self.bridge.wake()
        return 0.0

    def close(self) -> None:
        if self._ticking:
            # Celery's SIGTERM and SIGINT handler calls this in the middle of a tick (a
            # signal handler runs between two bytecodes of whatever it interrupted),
            # then raises SystemExit. Sockets closed under the tick would replace that
            # SystemExit with their own error (py-amqp's confirm wait resets the timeout
            # of its socket in a `finally`: EBADF), which the tick would take for a
            # broker outage and survive, leaving beat running, closed, for good. The
            # tick closes everything on its way out instead, a moment later.
            self._stopping = True
            return
        self._close()

    def _close(self) -> None:
        if self.leadership is not None:
            self.leadership.resign()  # first: a standby may take over right away
        if self.store is not None and self.leadership is not None:
            with contextlib.suppress(AwaBeatError):
                self.store.beat_gone(self.leadership.identity)
        if self.bridge is not None:
            self.bridge.close()
        if self.store is not None:
            self.store.close()
            self.store = None

    def should_sync(self) -> bool:
        return False  # every fire is already durable; there is nothing to save

    def get_schedule(self) -> dict[str, Any]:
        return {}

    def set_schedule(self, schedule: dict[str, Any]) -> None:
        pass

    schedule = property(get_schedule, set_schedule)

    @property
    def info(self) -> str:
        url = redact(self.database_url) if self.database_url else "embedded PostgreSQL"
        return (f"awa-beat: database {url}, lock key {self.settings.lock_key}, "
                f"deployment {self.settings.deployment!r}")

    # -- internals ------------------------------------------------------------------------------

    def _start(self) -> None:
        entries = configured_entries(self.app, self.settings)
        specs = specs_from_beat_schedule(
            entries, default_timezone=self.settings.default_timezone,
            default_dispatch=self.settings.dispatch or "awa")
        del entries
        deployment = self.settings.deployment
        shared: dict[Any, Any] = {}
        self._batches = [
            SyncBatch.encode([spec.row(deployment) for spec in specs[i:i + RESYNC_SLICE]],
                             deployment, shared)
            for i in range(0, len(specs), RESYNC_SLICE)]
        celery_entries = [s.name for s in specs if s.dispatch == "celery"]
        del specs, shared
        if self.database_url is None:
            self.database_url = resolve_database_url(None)
            logger.warning("beat: no awa_beat_database_url / AWA_BEAT_DATABASE_URL set; using "
                           "an embedded PostgreSQL in %s, for trying things out only",
                           default_data_dir())
        self.store = Store(self.database_url, origin=process_identity())
        # The lock's session (its connection) reads the layout; the election checks
        # that session locks hold with a connection of the pool: no connection is
        # opened for either alone.
        self.leadership = Leadership(self.database_url, self.settings.lock_key,
                                     probe=self.store.connection)
        self.store.open(conn=self.leadership.connection())
        try:
            self.store.check_schema()  # needs no CREATE privilege once migrated
        except SchemaError:
            self.store.migrate()
        if celery_entries or self.settings.dispatch == "celery":
            if self.store.awa_owned:
                raise celery_dispatch_refused(
                    celery_entries, "give awa-beat a database of its own, or dispatch to Awa "
                    "workers (awa_beat_dispatch = 'awa')")
            self.bridge = Bridge(self.app, self.store, deployment=self.settings.deployment)
        self._sync()
        self.engine = Engine(self.store, catch_up_limit=self.settings.catch_up_limit,
                             clock=self.clock, on_fired=self._on_fired)

    def _sync(self) -> None:
        """The start-up sync, every slice before the first fire: a fire must not use a
        definition the configuration has changed."""
        assert self.store is not None
        inserted = updated = unchanged = 0
        for batch in self._batches:
            result = self.store.sync(batch)
            inserted += result.inserted
            updated += result.updated
            unchanged += result.unchanged
        logger.info("beat: synced %d schedule(s): %d new, %d changed, %d unchanged",
                    inserted + updated + unchanged, inserted, updated, unchanged)
        self.store.analyze_if_stale()  # before the first fire plans against the table
        self._warn_orphans()

    def _warn_orphans(self) -> None:
        assert self.store is not None
        configured = {name for batch in self._batches for name in batch.names}
        orphans = [n for n in self.store.owned_names(self.settings.deployment)
                   if n not in configured]
        for name in orphans:
            logger.warning("beat: schedule %r is stored (deployment %r) but no longer in "
                           "beat_schedule; it keeps firing until removed: "
                           "`awa-beat remove %s`", name, self.settings.deployment, name)

    def _listen(self) -> None:
        """As a new leader, wake on notifications rather than poll, where the schema
        sends them and the clock is real."""
        assert self.store is not None and self.leadership is not None
        assert self.engine is not None
        channel = self.store.change_channel
        notified = (self._may_block and channel is not None
                    and self.leadership.listen(channel))
        self.engine.refresh_interval = (NOTIFIED_REFRESH_INTERVAL if notified
                                        else POLL_REFRESH_INTERVAL)

    def _warm_standby(self, now: float) -> None:
        """Keep a standby's view of the table current, so that taking over costs one
        refresh, not a full load of every row."""
        assert self.engine is not None
        if now < self._next_standby_refresh:
            return
        self._next_standby_refresh = now + STANDBY_REFRESH_INTERVAL
        with contextlib.suppress(StoreError):  # the election reports database trouble
            self.engine.refresh()

    def _heartbeat(self, now: float) -> None:
        """Tell `awa-beat status` who runs, every HEARTBEAT_INTERVAL; never fatal."""
        if now < self._next_heartbeat or self.store is None or self.leadership is None:
            return
        self._next_heartbeat = now + HEARTBEAT_INTERVAL
        leading = self.leadership.is_leader and self.leadership.since is not None
        since = (datetime.now(timezone.utc) - timedelta(
            seconds=now - self.leadership.since)) if leading else None
        lag = self.engine.last_lag if (leading and self.engine is not None) else None
        host, _, pid = self.leadership.identity.rpartition(":")
        # Never fatal: the tick's real work reports database trouble.
        with contextlib.suppress(StoreError):
            self.store.heartbeat(
                identity=self.leadership.identity, host=host, pid=int(pid),
                deployment=self.settings.deployment, lock_key=self.settings.lock_key,
                role="leader" if leading else "standby", started_at=self._started_at,
                leader_since=since, last_lag_ms=None if lag is None else lag * 1000)

    def _store_failed(self, exc: StoreError) -> float:
        if not self._outage:
            logger.error("beat: database error, retrying: %s", exc)
            self._outage = True
        assert self.leadership is not None
        self.leadership.ping()
        return min(self.settings.election_interval, 1.0)

    def _on_fired(self, result: FireResult) -> None:
        for job in result.jobs:
            logger.info("beat: fired %s for %s (job %s)", job.name, job.fire_time, job.job_id)
        if _FAULT == "exit-after-fire":
            # Test hook: die between the fire's commit and the publish.
            os._exit(3)
        if self.bridge is not None:
            self.bridge.wake()

    def _dispatch(self, now: float) -> bool:
        """Publish what the bridge has pending; True when more is waiting right now."""
        if self.bridge is None:
            return False
        if now >= self._next_outbox_check:
            # Jobs fired by another process (a manual trigger, another deployment's
            # leader) are found this way; our own fires set `pending` at once.
            assert self.leadership is not None
            self._next_outbox_check = now + (NOTIFIED_OUTBOX_CHECK_INTERVAL
                                             if self.leadership.listening
                                             else OUTBOX_CHECK_INTERVAL)
            self.bridge.wake()
        if self.bridge.due():
            self.bridge.drain()
        self.bridge.purge()
        return self.bridge.due()
