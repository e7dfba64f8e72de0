"""The firing rules: turning due rows into fire requests, and applying what was fired.

Every rule about what a fire is lives here, so that a maintainer can change one after
reading this module alone:

* Which fire times a due row fires follows Awa's evaluator to the second
  (:func:`~awa_beat._schedules.fire_times.due_fires`). ``coalesce`` fires the latest
  missed fire time and records how many it passed over (:func:`left_out`); ``catch_up``
  fires every missed one in order, at most ``catch_up_limit`` per schedule and pass, and
  the rest on the next passes.
* A schedule with a catch-up window (``window=`` in its marker, read from its calendar)
  does not fire a fire time older than the window when the engine gets to it (after
  downtime, a pause or a failover): :func:`windowed` passes over those, and the fire
  statement records them as one skipped occurrence and moves the cursor past them.
  Under ``catch_up`` the rest fire in order; under ``coalesce`` the latest fires if it
  is inside the window (the older ones are coalesced, as without one), else nothing
  fires. Without a window, Awa's rules stand.
* A schedule with a jitter (``jitter=``) fires at its nominal fire time, but each job
  is to run at the fire time plus a delay that is a function of the schedule's name and
  the fire time (:func:`~awa_beat._schedules.fire_times.run_times`), never at or past
  the next fire time. The fire time on the job stays the nominal one.
* A burst is fired in statements that grow from FIRST_FIRE_BATCH schedules up to
  FIRE_BATCH, so that the bridge publishes the first jobs while the rest are fired.
* A schedule with a run limit is read back after its fire, because the statement may
  have fired fewer runs than asked and retired it.
* A fire that overlap buffer_one holds (the fire statement says so) is started by the
  ``fire_buffered`` statement once the run before it has finished. The firing rules
  look for such fires every BUFFER_POLL seconds while any is held: from the first pass
  (a new leader does not know what its predecessor held) until none is, so that an
  idle pass with nothing held does no more than look at one attribute.
* What the database refused is retried: a statement that failed whole after
  RETRY_DELAY, one row's error after RETRY_DELAY, and a fire time ahead of the database's
  clock at its own fire time. A row that another evaluator fired first, or that was
  paused, edited or removed meanwhile, is read again and taken as the database has it.

This module sees rows only as :class:`~awa_beat._engine.table.Row` objects; how they are
held is the table's business.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from .._db.records import (
    BufferedStart,
    Coalesced,
    CronState,
    FireRequest,
    FireResult,
    Windowed,
)
from .._logs import event
from .._schedules.fire_times import (
    Calendar,
    catch_up_window,
    due_fires,
    fires_between,
    jitter_of,
    next_fire_after,
    run_times,
)
from .._schedules.markers import max_runs
from ..errors import StoreError
from .problems import RETRY_DELAY, Problems
from .table import LIMITS_PROBLEM, Row, RowTable

# The logger keeps the name it had before the engine was split into modules, so that
# logging configurations that select it by name go on working.
logger = logging.getLogger('awa_beat.engine')

#: Schedules per fire statement. When more are due at once, they are fired over several
#: passes, so that a burst is published while the rest is fired, with bounded memory.
FIRE_BATCH = 2000
#: Schedules in the first fire statement of a burst. The bridge starts publishing those
#: while the rest are fired, rather than wait for a whole FIRE_BATCH. Each next statement
#: of the burst may fire FIRE_RAMP times as many, up to FIRE_BATCH.
FIRST_FIRE_BATCH = 50
FIRE_RAMP = 4
#: Fires a coalesce left out are counted up to this many, and then recorded as "at least".
COALESCED_COUNT_LIMIT = 10000
#: Seconds between two looks for held fires (overlap buffer_one) whose run has finished,
#: while any is held: the most a held fire waits after that run ends, give or take a pass.
BUFFER_POLL = 2.0

#: Why a due fire time was not fired here: another evaluator fired it first (or the row
#: was paused, edited or removed meanwhile), the row is invalid, the database refused it
#: (it is retried a second later), its last run had not finished (``overlap: skip``), or
#: its fire time is ahead of the database's clock (this host's clock is fast, and it is
#: retried), or it was older than the schedule's catch-up window.
SKIP_REASONS: tuple[str, ...] = ("concurrent", "invalid", "failed", "overlap", "clock_ahead",
                                 "window")
#: The outcome of a schedule's last fire, as beat saw it.
OUTCOMES = ("fired", *SKIP_REASONS)


@dataclass
class EngineStats:
    """What the engine did beyond firing, for metrics. Another thread reads it, so it
    holds only counters and values that are replaced whole."""

    coalesced: int = 0
    """Missed fire times folded into a later fire under ``coalesce`` (at most the
    catch-up limit counted per schedule and pass)."""
    skipped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SKIP_REASONS, 0))
    """Fire times due but not fired by this engine, by reason (:data:`SKIP_REASONS`)."""
    behind: frozenset[str] = frozenset()
    """Schedules whose last fire hit the catch-up limit, so more missed fires are due."""
    watched: frozenset[str] = frozenset()
    """Schedules whose last outcome is kept in :attr:`outcomes` (a bounded set)."""
    outcomes: dict[str, str] = field(default_factory=dict)
    """The outcome of the last fire of each watched schedule (:data:`OUTCOMES`)."""
    buffered: int = 0
    """Fire times held by overlap buffer_one while the run before them had not finished."""
    buffered_started: int = 0
    """Held fires that got their job when the run before them finished."""


class FiringStore(Protocol):
    """What the firing rules need of a store."""

    def fire(self, requests: Sequence[FireRequest]) -> FireResult:
        """Compare-and-swap each request's cursor and insert its jobs, atomically per
        request: a request whose cursor moved meanwhile fires nothing."""
        ...

    def cron_states_by_name(self, names: Sequence[str]) -> list[CronState]:
        """The rows that still exist among ``names``."""
        ...

    def fire_buffered(self) -> BufferedStart:
        """Start the held fires (overlap buffer_one) whose run before has finished, once
        each across replicas; say how many remain held."""
        ...


class Firing:
    """Fires the rows of a :class:`~awa_beat._engine.table.RowTable` as they fall due."""

    def __init__(self, store: FiringStore, table: RowTable, problems: Problems, *,
                 catch_up_limit: int, clock: Callable[[], datetime],
                 on_fired: Callable[[FireResult], None] | None = None) -> None:
        self.store = store
        self.table = table
        self.problems = problems
        self.catch_up_limit = catch_up_limit
        self.clock = clock
        self.on_fired = on_fired
        self.stats = EngineStats()
        self.last_lag: float | None = None
        """Seconds between the latest fire time of the last firing pass and its start."""
        self.retrying: set[str] = set()
        """Schedules put off by a failed fire, whose queued instant is not their fire time."""
        self._full = 0
        """The size of the last fire statement if it was full (more may be due), else 0."""
        self.held_check_at: float | None = 0.0
        """When to look next for held fires whose run has finished (epoch seconds), or
        None while none is known to be held. It starts at 0: the first pass looks."""

    def start_held(self) -> BufferedStart | None:
        """Start the held fires whose run before them has finished, when it is time to
        look (:attr:`held_check_at`), and return what was done (None: not yet time)."""
        check_at = self.held_check_at
        if check_at is None:
            return None
        now_epoch = self.clock().timestamp()
        if now_epoch < check_at:
            return None
        # Set first, so that a database error is retried at the next look, not at once.
        self.held_check_at = now_epoch + BUFFER_POLL
        started = self.store.fire_buffered()
        if not started.still_held:
            self.held_check_at = None
        if started.jobs:
            self.stats.buffered_started += len(started.jobs)
            for job in started.jobs:
                event(logger, logging.INFO, "fire.buffered_started",
                      "beat: fired %s for %s, held until its previous run finished "
                      "(overlap=buffer_one): job %s", job.name, job.fire_time, job.job_id,
                      schedule=job.name, fire_time=job.fire_time, job_id=job.job_id)
            if self.on_fired is not None:
                self.on_fired(FireResult(jobs=started.jobs, started_held=True))
        return started

    def look_for_held(self) -> None:
        """Look for held fires at the next pass: a new leader does not know which fires
        its predecessor held."""
        self.held_check_at = 0.0

    def fire_due(self) -> FireResult:
        """Fire the schedules whose due time has come, up to FIRE_BATCH of them (fewer in
        the first statements of a burst), in one batched statement."""
        now = self.clock()
        now_epoch = now.timestamp()
        due = self.table.next_due()
        if due is None or due > now_epoch:
            # Most passes have nothing due, and they are done here.
            self._full = 0
            return FireResult()
        # The rows fired together share their timestamps, so they are handled as one batch.
        with self.table.batch():
            requests, rows = self._requests(now, now_epoch)
            if not requests:
                return FireResult()
            try:
                result = self.store.fire(requests)
            except StoreError:
                # Nothing was fired, so these are tried again shortly, not at the next
                # full reload.
                for request in requests:
                    self.table.schedule(rows[request.name], at=now_epoch + RETRY_DELAY)
                    self.retrying.add(request.name)
                if self.held_check_at is not None:
                    # Held fires are looked for when the database is tried again.
                    self.held_check_at = max(self.held_check_at, now_epoch + RETRY_DELAY)
                raise
            latest = max((r.fire_times[-1].timestamp() for r in requests if r.fire_times),
                         default=None)
            if latest is not None:
                self.last_lag = now_epoch - latest
            self._apply(requests, result, now_epoch, rows)
        if self.on_fired is not None and result.jobs:
            self.on_fired(result)
        return result

    def _requests(self, now: datetime, now_epoch: float,
                  ) -> tuple[list[FireRequest], dict[str, Row]]:
        """Take the rows due by ``now`` off the table, and return a fire request for each
        that has fire times due, with the rows by name. A row with none is queued again."""
        requests: list[FireRequest] = []
        rows: dict[str, Row] = {}
        # Rows that share a calendar, a cursor and a policy have the same fires. In a
        # burst (every tenant at midnight) that is most of a batch, so each is worked out
        # once. The calendar is keyed by identity, because the rows hold it for the whole
        # call.
        fires_of: dict[tuple[Any, ...], tuple[list[datetime], Windowed | None, bool]] = {}
        limit = min(FIRE_BATCH, self._full * FIRE_RAMP if self._full else FIRST_FIRE_BATCH)
        while len(requests) < limit:
            item = self.table.pop_due(now_epoch)
            if item is None:
                break
            due, row = item
            calendar = row.calendar
            assert calendar is not None  # Only rows that can fire are queued.
            last = row.last_enqueued_at
            policy = row.missed_fire_policy
            key = (id(calendar), last, row.created_at if last is None else None, policy)
            found = fires_of.get(key)
            if found is None:
                window = catch_up_window(calendar)
                if window is not None and last is not None:
                    fires, skipped = windowed(calendar, last, row.created_at, now, policy,
                                              window, self.catch_up_limit)
                else:
                    fires, skipped = due_fires(
                        calendar, last_enqueued_at=last, created_at=row.created_at, now=now,
                        policy=policy, limit=self.catch_up_limit), None
                found = fires_of[key] = (fires, skipped, jitter_of(calendar) is not None)
            fires, skipped, jittered = found
            if not fires and skipped is None:
                self.table.schedule(row)
                continue
            coalesced = None
            if (fires and policy == "coalesce" and last is not None
                    and (fires[-1].timestamp() > due or row.name in self.retrying)):
                # Fire times may have been missed only when the first due one is earlier,
                # or when an error put the fire off.
                coalesced = left_out(calendar, row, fires)
            requests.append(FireRequest(
                row.name, last, fires, limited=max_runs(row.cron_expr) is not None,
                coalesced=coalesced, windowed=skipped,
                run_ats=run_times(row.name, calendar, fires) if jittered else None))
            rows[row.name] = row
        self._full = limit if len(requests) >= limit else 0
        return requests, rows

    def _apply(self, requests: list[FireRequest], result: FireResult, now_epoch: float,
               rows: dict[str, Row]) -> None:
        """Apply what the fire statement did to each row it was asked to fire."""
        fired = {job.name: job.updated_at
                 for job in [*result.jobs, *result.skipped, *result.windowed,
                             *result.buffered]}
        stats = self.stats
        overlapped: dict[str, int] = {}
        held: dict[str, int] = {}
        for job in result.skipped:
            overlapped[job.name] = overlapped.get(job.name, 0) + 1
            event(logger, logging.INFO, "fire.skipped",
                  "beat: skipped %s for %s: its last run has not finished or a fire is "
                  "held (overlap)", job.name, job.fire_time, schedule=job.name,
                  fire_time=job.fire_time)
        if result.buffered:
            stats.buffered += len(result.buffered)
            for job in result.buffered:
                held[job.name] = 1
                event(logger, logging.INFO, "fire.buffered",
                      "beat: held %s for %s until its last run finishes "
                      "(overlap=buffer_one)", job.name, job.fire_time, schedule=job.name,
                      fire_time=job.fire_time)
            if self.held_check_at is None:
                self.held_check_at = now_epoch + BUFFER_POLL
        lost = []
        ahead = set(result.ahead)
        if ahead:
            self._refused_ahead(len(ahead))
        for request in requests:
            row = rows[request.name]
            if request.name in ahead:
                # The row is due again at its own fire time, not at this clock's now plus
                # a delay, because once the clock is put right that time is still to
                # come. The node measures the skew at once and stands down meanwhile.
                self._skipped(request, "clock_ahead")
                self.table.schedule(row)
                self.retrying.add(request.name)
            elif request.name in fired:
                self.retrying.discard(request.name)
                skips = overlapped.get(request.name, 0)
                if skips:
                    stats.skipped["overlap"] += skips
                if request.windowed is not None:
                    stats.skipped["window"] += request.windowed.count
                    self._window_skipped(request.name, request.windowed)
                self._outcome(request.name, "window" if not request.fire_times else
                              "overlap" if skips + held.get(request.name, 0)
                              == len(request.fire_times) else "fired")
                if request.coalesced is not None:
                    stats.coalesced += request.coalesced.count
                if request.limited:
                    # The statement may have fired fewer runs than asked and retired the
                    # row, which only the row tells, so it is read again below.
                    lost.append(request.name)
                    continue
                self._note_catch_up_limit(request)
                # The row is held as it now reads, so that the next refresh finds nothing
                # new in it.
                row.last_enqueued_at = request.cursor
                row.updated_at = fired[request.name] or row.updated_at
                self.table.schedule(row)
            elif request.name in result.failed:
                self._skipped(request, "failed")
                self.problems.failed(row.name, row.updated_at, result.failed[request.name])
                self.table.schedule(row, at=now_epoch + RETRY_DELAY)
                self.retrying.add(request.name)
            else:
                lost.append(request.name)
        if lost:
            self._read_again(lost, requests, fired)

    def _note_catch_up_limit(self, request: FireRequest) -> None:
        stats = self.stats
        limited = len(request.fire_times) >= self.catch_up_limit
        if limited != (request.name in stats.behind):
            stats.behind = (stats.behind | {request.name} if limited
                            else stats.behind - {request.name})
        if limited:
            event(logger, logging.WARNING, "fire.catch_up_limit",
                  "beat: schedule %r hit the catch-up limit of %s fires in one "
                  "pass; the rest follow in the next passes",
                  request.name, self.catch_up_limit, schedule=request.name)

    def _read_again(self, lost: list[str], requests: list[FireRequest],
                    fired: dict[str, datetime | None]) -> None:
        """Take the database's word for rows the statement did not fire as asked.

        Either another evaluator fired first, or the row was paused, edited or removed
        meanwhile. A schedule with a run limit is read again whether it fired or not,
        because the statement may have fired fewer runs than asked and retired it."""
        read = {row.name: row for row in self.store.cron_states_by_name(lost)}
        by_name = {r.name: r for r in requests}
        for name in lost:
            row = read.get(name)
            expected = by_name[name].expected
            invalid = (row is not None and row.last_enqueued_at == expected
                       and row.paused_at is None)
            if name not in fired:
                self._skipped(by_name[name], "invalid" if invalid else "concurrent")
            if row is None:
                self.table.remove(name)
            elif invalid:
                # The row is unchanged and not paused, yet was not fired, so its job breaks
                # Awa's limits (priority 1-4, at most 20 tags, kind and queue at most 200
                # characters).
                held = self.table.put_limits_problem(row)
                self.problems.invalid(name, held.updated_at, LIMITS_PROBLEM)
            else:
                taken = self.table.put(row, compare=False)
                if taken is not None and taken.problem is not None:
                    self.problems.invalid(name, taken.updated_at, taken.problem)

    @staticmethod
    def _refused_ahead(count: int) -> None:
        event(logger, logging.WARNING, "fire.clock_ahead",
              "beat: the database refused to fire %d schedule(s): their fire times are "
              "later than its clock plus awa_beat_clock_tolerance (this host's clock is "
              "fast)", count, schedules=count)

    @staticmethod
    def _window_skipped(name: str, skipped: Windowed) -> None:
        event(logger, logging.INFO, "fire.window",
              "beat: skipped %s fire time(s) of %s from %s to %s: older than its catch-up "
              "window of %g s", skipped.count, name, skipped.first.isoformat(),
              skipped.last.isoformat(), skipped.window, schedule=name,
              first=skipped.first.isoformat(), last=skipped.last.isoformat(),
              count=skipped.count)

    def _skipped(self, request: FireRequest, reason: str) -> None:
        self.stats.skipped[reason] += len(request.fire_times)
        self._outcome(request.name, reason)

    def _outcome(self, name: str, outcome: str) -> None:
        if name in self.stats.watched:
            self.stats.outcomes[name] = outcome


def left_out(calendar: Calendar, row: Row | CronState, fires: Sequence[datetime],
             ) -> Coalesced | None:
    """Return the fires a coalesce passed over before ``fires``. A normal fire passes
    over none (one calendar step), so they are counted only after downtime or a pause."""
    if row.missed_fire_policy != "coalesce" or row.last_enqueued_at is None:
        return None
    first = next_fire_after(calendar, row.last_enqueued_at)
    if first is None or first >= fires[0]:
        return None
    missed = fires_between(calendar, row.last_enqueued_at,
                           fires[0] - timedelta(microseconds=1), COALESCED_COUNT_LIMIT)
    if not missed:
        return None
    return Coalesced(missed[0], missed[-1], len(missed),
                     capped=len(missed) >= COALESCED_COUNT_LIMIT)


def windowed(calendar: Calendar, last: datetime, created_at: datetime, now: datetime,
             policy: str, window: float, limit: int,
             ) -> tuple[list[datetime], Windowed | None]:
    """Return the fires due at ``now`` for a row whose cursor is ``last`` and whose
    calendar has a catch-up window of ``window`` seconds, and the fire times passed over
    as older than it (``now - window``), or None when none is.

    Under ``catch_up``, the fires from the window's start on fire in order (at most
    ``limit``). Under ``coalesce``, the latest fire fires if it is inside the window,
    the older ones left to :func:`left_out` as without a window; if it is outside, none
    fires and all are passed over. A fire exactly ``window`` seconds old still fires."""
    cutoff = now - timedelta(seconds=window)
    first = next_fire_after(calendar, last)
    if first is None or first >= cutoff:
        return due_fires(calendar, last_enqueued_at=last, created_at=created_at, now=now,
                         policy=policy, limit=limit), None
    if policy == "coalesce":
        fires = due_fires(calendar, last_enqueued_at=last, created_at=created_at, now=now,
                          policy=policy, limit=limit)
        if fires and fires[-1] >= cutoff:
            return fires, None
        return [], _passed_over(calendar, last, first, fires[-1] if fires else first,
                                window)
    # Fires are whole seconds, so the latest one older than the window is the latest at
    # or before the microsecond before the cutoff: a coalesce's search finds it without
    # stepping through every fire in between.
    older = due_fires(calendar, last_enqueued_at=last, created_at=created_at,
                      now=cutoff - timedelta(microseconds=1), policy="coalesce")
    latest_old = older[-1] if older else first
    fires = due_fires(calendar, last_enqueued_at=latest_old, created_at=created_at, now=now,
                      policy=policy, limit=limit)
    return fires, _passed_over(calendar, last, first, latest_old, window)


def _passed_over(calendar: Calendar, last: datetime, first: datetime, latest: datetime,
                 window: float) -> Windowed:
    """The fire times in ``(last, latest]`` (``first`` is the first of them), counted up
    to COALESCED_COUNT_LIMIT."""
    count = len(fires_between(calendar, last, latest, COALESCED_COUNT_LIMIT))
    return Windowed(first, latest, count, window, capped=count >= COALESCED_COUNT_LIMIT)
