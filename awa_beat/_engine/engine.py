"""The evaluator: which schedules are due, and firing them. No Celery in here.

The engine keeps every row of ``awa.cron_jobs`` in memory (ours and other
deployments', as Awa's leader does), each packed into one ``bytes`` value (its
timestamps as integers, its expression as text; the parsed calendar is looked up when
the row is worked on), with the instant each one next becomes due in a queue
(:class:`~awa_beat._engine.due_queue.DueQueue`), so a pass costs nothing per schedule that is
not due:

* :meth:`Engine.run_pass` fires what is due (one batched statement per FIRE_BATCH
  schedules), refreshes from the database when the refresh interval has passed (one
  query), and returns how long to sleep: until the next due fire or the next refresh,
  whichever is first (0 while more are due). A caller told of a change (a
  notification) calls :meth:`Engine.refresh_soon` to refresh at the next pass.
* Refreshing reads only rows whose ``updated_at`` moved (pauses, resumes, edits and
  fires by anyone bump it), plus a fingerprint of the whole table (count and a hash of
  the names) that reveals inserts and deletes; when the fingerprint differs from what we
  hold, the names are read again (and the rows held nowhere, by name). The lookback
  overlaps the last read by a few seconds, so a transaction that took its ``now()``
  before that read but committed after it is still seen; rows the last read already
  returned are left out by the server (their writers ended before its snapshot), so an
  idle refresh returns nothing. A sweep of the whole table, a slice per pass at a
  bounded pace (:meth:`Engine.sweep`), catches any change committed later than the
  overlap.
* Firing follows Awa's evaluator to the second (:func:`~awa_beat._schedules.fire_times.due_fires`):
  ``coalesce`` fires the latest missed fire, ``catch_up`` every missed fire in order,
  at most ``catch_up_limit`` per schedule per pass, the rest on the next passes.
* A row whose expression, time zone or policy is invalid is logged once (again only
  when the row changes) and skipped; it never stops the others.

Time is always passed in (``clock``), so tests drive the engine with a fake clock.
"""

from __future__ import annotations

import gc
import logging
import math
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

from .._bulk import collector_paused
from .._db.records import (
    Coalesced,
    CronRow,
    CronState,
    FireRequest,
    FireResult,
    TableState,
    columns_of,
)
from .._logs import event
from .._schedules.fire_times import (
    POLICIES,
    Calendar,
    calendar_for,
    due_fires,
    fires_between,
    next_epoch_from,
    next_fire_after,
)
from .._schedules.markers import max_runs
from ..errors import ScheduleError, StoreError
from .due_queue import DueQueue

# The logger keeps the name it had before the modules moved into layer packages, so
# logging configurations that select it by name go on working.
logger = logging.getLogger('awa_beat.engine')

UTC = timezone.utc
#: How far back each refresh looks before the last read, for transactions that took
#: their ``now()`` before it but committed after it.
REFRESH_OVERLAP = timedelta(seconds=10)
#: Seconds from the start of one sweep over every row to the next, at least: the
#: backstop for commits later than the overlap.
FULL_RELOAD_INTERVAL = 300.0
#: Rows per slice of a sweep: one slice per pass, so that no pass holds up a fire for
#: longer than reading this many rows takes, whatever the table's size.
SWEEP_SLICE = 5000
#: Rows a second a sweep reads at most: a table of up to FULL_RELOAD_INTERVAL times
#: this many rows is swept every FULL_RELOAD_INTERVAL; a larger one takes longer, so
#: that the sweep's cost per minute stays level whatever the table's size.
SWEEP_RATE = 350.0
#: Delay before retrying a schedule whose fire raised a database error (Awa: 1 s).
RETRY_DELAY = 1.0
#: Schedules per fire statement; more due at once are fired over several passes, so
#: that a burst is published while the rest is fired, with bounded memory.
FIRE_BATCH = 2000
#: Schedules in the first fire statement of a burst: the bridge starts publishing those
#: while the rest are fired, rather than wait for a whole FIRE_BATCH. Each next statement
#: of the burst may fire FIRE_RAMP times as many, up to FIRE_BATCH.
FIRST_FIRE_BATCH = 50
FIRE_RAMP = 4
#: Rows held from which a load takes everything then alive out of the cyclic collector's
#: sight (gc.freeze).
FREEZE_FROM = 10_000
#: Distinct (calendar, cursor) pairs remembered while rows are applied in bulk.
DUE_MEMO_LIMIT = 65536
#: Distinct (expression, zone, policy) triples remembered, so that the rows of a triple
#: share one kind and its calendar; once full, the cache starts afresh (the kinds of
#: rows edited or removed long ago would otherwise stay in it for good, and later
#: triples never share). Rows hold only their key: a table with more triples than this
#: parses a calendar per row it works on (a load takes longer), and holds no more.
KIND_CACHE = 16384
#: A refresh due when a fire is due within this many times the last refresh's duration
#: waits until just after that fire (once in a row): each refresh reads the whole table's
#: fingerprint, which on a large table takes long enough to make the fire late.
REFRESH_PUT_OFF = 2.0
#: Fires a coalesce left out are counted up to this many (then recorded as "at least").
COALESCED_COUNT_LIMIT = 10000


def utcnow() -> datetime:
    return datetime.now(UTC)


class EngineStore(Protocol):
    """What the engine needs of a store: :class:`awa_beat._db.evaluator.EvaluatorStore`
    against PostgreSQL, :class:`awa_beat._testing.MemoryStore` in memory. The readers stream
    plain rows (:class:`~awa_beat._db.records.CronRow`); the engine decides what to keep
    of each as it arrives."""

    def cron_states(self) -> tuple[TableState, Iterator[CronRow]]:
        """The table's fingerprint and every row, from one snapshot."""
        ...

    def cron_names(self) -> list[str]:
        """The name of every row."""
        ...

    def cron_states_after(self, after: str, limit: int) -> tuple[str | None, list[CronRow]]:
        """Up to ``limit`` rows named after ``after``, in name order; with the last name
        read, or None if these were the last."""
        ...

    def changes(self, since: datetime, seen_xmin: int | None = None,
                ) -> tuple[TableState, Iterator[CronRow]]:
        """The fingerprint and the rows changed after ``since``."""
        ...

    def cron_states_by_name(self, names: Sequence[str]) -> list[CronState]:
        """The rows that still exist among ``names``."""
        ...

    def fire(self, requests: Sequence[FireRequest]) -> FireResult:
        """Compare-and-swap each request's cursor and insert its jobs, atomically per
        request: a request whose cursor moved meanwhile fires nothing."""
        ...


#: A packed row's fixed part: the due instant (epoch seconds; NaN: none), the cursor,
#: created_at, updated_at and paused_at (microseconds since the epoch; NO_TIME: None)
#: and flags; then the kind's key (:class:`_Kind`).
_HEAD = struct.Struct("<dqqqqB")
#: The four timestamps of the fixed part, and where they start.
_TIMES = struct.Struct("<qqqq")
_TIMES_AT = struct.calcsize("<d")
_PAIR = struct.Struct("<H")
NO_TIME = -(2**63)
#: A pair index meaning that the zone and the policy follow the expression in the key.
_NO_PAIR = 0xFFFF
#: Flags: the row cannot fire (the problem is its kind's); its job breaks Awa's limits.
_NO_FIRE, _LIMITS = 1, 2
LIMITS_PROBLEM = ("its job would break Awa's limits (priority 1-4, at most 20 tags,"
                  " kind and queue <= 200 characters)")
_NO_DUE = struct.pack("<d", math.nan)
_NO_DUE_SIZE = len(_NO_DUE)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def _micros(t: datetime | None) -> int:
    return NO_TIME if t is None else (t - _EPOCH) // _US


def _bounded(memo: dict[Any, Any]) -> dict[Any, Any]:
    """``memo``, emptied first if it is full: rows with timestamps or cursors of their own
    would otherwise make it grow with the table."""
    if len(memo) >= DUE_MEMO_LIMIT:
        memo.clear()
    return memo


def _instant(us: int) -> datetime | None:
    if us == NO_TIME:
        return None
    seconds, micros = divmod(us, 1_000_000)
    t = datetime.fromtimestamp(seconds, UTC)  # exact for whole seconds
    return t.replace(microsecond=micros) if micros else t


class _Kind:
    """What the rows sharing an expression, a zone and a policy share: their calendar,
    or why they cannot fire; and ``key``, the bytes that stand for all three in a
    packed row."""

    __slots__ = ("calendar", "cron_expr", "key", "missed_fire_policy", "problem", "timezone")

    def __init__(self, cron_expr: str, timezone: str, missed_fire_policy: str,
                 calendar: Calendar | None, problem: str | None, key: bytes) -> None:
        self.cron_expr = cron_expr
        self.timezone = timezone
        self.missed_fire_policy = missed_fire_policy
        self.calendar = calendar
        self.problem = problem
        self.key = key


class _Entry:
    """A row being worked on (read, scheduled or fired): the engine holds each row
    packed (:meth:`Engine._pack`), and unpacks it into one of these while it works on
    it; the expression, zone and policy come through the kind."""

    __slots__ = ("created_at", "due", "kind", "last_enqueued_at", "name", "paused_at",
                 "updated_at")

    def __init__(self, name: str, kind: _Kind, last_enqueued_at: datetime | None,
                 created_at: datetime, updated_at: datetime, paused_at: datetime | None,
                 ) -> None:
        self.name = name
        self.kind = kind
        self.last_enqueued_at = last_enqueued_at
        self.created_at = created_at
        self.updated_at = updated_at
        self.paused_at = paused_at
        self.due: float | None = None
        """Epoch seconds at which the row next has a fire due; None: paused, invalid,
        never."""

    @property
    def cron_expr(self) -> str:
        return self.kind.cron_expr

    @property
    def timezone(self) -> str:
        return self.kind.timezone

    @property
    def missed_fire_policy(self) -> str:
        return self.kind.missed_fire_policy

    @property
    def calendar(self) -> Calendar | None:
        return self.kind.calendar


@dataclass
class EngineStats:
    """What the engine did beyond firing, for metrics: read from another thread, so
    only counters and whole-value replacements."""

    coalesced: int = 0
    """Missed fire times folded into a later fire under ``coalesce`` (at most the
    catch-up limit counted per schedule and pass)."""
    skipped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SKIP_REASONS, 0))
    """Fire times due but not fired by this engine, by reason (:data:`SKIP_REASONS`)."""
    behind: frozenset[str] = frozenset()
    """Schedules whose last fire hit the catch-up limit: more missed fires are due."""
    watched: frozenset[str] = frozenset()
    """Schedules whose last outcome is kept in :attr:`outcomes` (a bounded set)."""
    outcomes: dict[str, str] = field(default_factory=dict)
    """The outcome of the last fire of each watched schedule (:data:`OUTCOMES`)."""


#: Why a due fire time was not fired here: another evaluator fired it first (or the row
#: was paused, edited or removed meanwhile), the row is invalid, the database refused it
#: (retried a second later), its last run had not finished (``overlap: skip``), or its
#: fire time is ahead of the database's clock (this host's clock is fast; retried).
SKIP_REASONS: tuple[str, ...] = ("concurrent", "invalid", "failed", "overlap", "clock_ahead")
#: The outcome of a schedule's last fire, as beat saw it.
OUTCOMES = ("fired", *SKIP_REASONS)


@dataclass(frozen=True)
class Census:
    """The rows the engine holds, counted at one instant."""

    total: int
    paused: int
    invalid: int
    """Rows that cannot fire: a bad expression, zone or policy, or a job Awa would reject."""
    overdue: int
    """Rows whose next fire time is further in the past than the census's grace."""


@dataclass
class PassReport:
    """What one pass did, for logs and tests."""

    fired: FireResult
    refreshed: bool
    wait: float
    """Seconds until the engine wants its next pass."""


class Engine:
    """Evaluates and fires every schedule of one database. Not thread-safe."""

    def __init__(
        self,
        store: EngineStore,
        *,
        catch_up_limit: int = 1000,
        refresh_interval: float = 1.0,
        clock: Callable[[], datetime] = utcnow,
        on_fired: Callable[[FireResult], None] | None = None,
    ) -> None:
        self.store = store
        self.catch_up_limit = catch_up_limit
        self.refresh_interval = refresh_interval
        self.clock = clock
        self.on_fired = on_fired
        self._entries: dict[str, bytes] = {}
        """Every row held, packed (:meth:`_pack`), by name."""
        self._kinds: dict[tuple[str, str, str], _Kind] = {}
        """Kinds by triple, so that rows of one triple share one calendar while worked on."""
        self._keyed: dict[bytes, _Kind] = {}
        """The same kinds by key, for the rows unpacked."""
        self._pairs: list[tuple[str, str]] = []
        """The (zone, policy) pairs met, which a packed row names by their index."""
        self._pair_index: dict[tuple[str, str], int] = {}
        self._queue = DueQueue(self._is_due_at)
        self._state: TableState | None = None
        self._since = datetime.min.replace(tzinfo=UTC)
        self._next_refresh = 0.0
        self._refresh_seconds = 0.0
        """How long the last refresh's query took, by the engine's clock."""
        self._put_off = False
        """Whether the refresh due was put off for a fire (it is not put off twice in a row)."""
        self._next_sweep = 0.0
        self._sweep_after: str | None = None
        """While a sweep runs: the name its next slice starts after."""
        self._next_slice = 0.0
        self._reported: dict[str, tuple[datetime, str]] = {}
        self._due_memo: dict[tuple[Calendar, object, int], float | None] | None = None
        """Next due instants by calendar and cursor, while rows are handled together."""
        self._micros_memo: dict[int, tuple[datetime, int]] | None = None
        """Instants in microseconds by the identity of the datetime (kept alive with the
        answer, so no identity is reused), while rows are handled together: the rows of
        a read or a fire share their timestamps' objects."""
        self._instants: dict[int, datetime] | None = None
        """The other way round, while rows are handled together."""
        self.last_lag: float | None = None
        """Seconds between the latest fire time of the last firing pass and its start."""
        self.stats = EngineStats()
        self._retrying: set[str] = set()
        """Schedules put off by a failed fire (their queued instant is not their fire time)."""
        self._batch = 0
        """The size of the last fire statement if it was full (more may be due), else 0."""

    # -- loading -----------------------------------------------------------------------------

    def state(self, name: str) -> CronState | None:
        """The row ``name`` as this engine last read it (None: not in its view)."""
        return self._held(name)

    @property
    def loaded(self) -> bool:
        """Whether every row has been read once."""
        return self._state is not None

    def load(self) -> None:
        """Read every row afresh, in one snapshot (at start); rows that did not change
        keep their place. Later, :meth:`refresh` sweeps the table slice by slice."""
        # Rows held as they are stored are dropped as they arrive: a reload of a large
        # table never holds it twice.
        first = self._state is None
        started = time.perf_counter()
        with collector_paused():
            state, rows = self.store.cron_states()
            self._take(rows, compare=bool(self._entries))
        # Every stored row now has an entry, so more entries than rows means some were
        # deleted; the names are read again only then (deletions are rare).
        if len(self._entries) > state.total:
            self._reconcile()
        self._adopt_state(state)
        now = self._now_epoch()
        self._next_refresh = now + self.refresh_interval
        self._next_sweep = now + FULL_RELOAD_INTERVAL
        self._sweep_after = None
        if len(self._entries) >= FREEZE_FROM:
            # Out of the collector's sight from now on: the rows, packed, are not tracked,
            # but what the load left is (the kinds and calendars cached, the imports'
            # objects), and a full collection would walk it all. What the process held in
            # cycles before this point is never collected, so a small table, whose
            # collections are short, is left alone.
            gc.freeze()
        if first:  # a replica is ready to fire from here on (the later reloads are routine)
            event(logger, logging.INFO, "engine.loaded",
                  "beat: holding %d schedule(s), read in %.1f s", len(self._entries),
                  time.perf_counter() - started, schedules=len(self._entries))

    def refresh(self) -> None:
        """Pick up what others changed since the last refresh (one query), and take the
        next slice of a sweep that is due or under way."""
        if self._state is None:
            self.load()
            return
        started = self._now_epoch()
        state, rows = self.store.changes(self._since, self._state.xmin)
        self._take(rows)
        if (state.total, state.fingerprint) != (len(self._entries), self._state.fingerprint):
            self._reconcile()  # rows were inserted or deleted
        self._adopt_state(state)
        self._refresh_seconds = self._now_epoch() - started
        self.sweep()

    def _reconcile(self) -> None:
        """Rows were inserted or deleted: read the names alone, drop what is gone, read
        the rows held nowhere (an insert the lookback did not return). A later snapshot
        than the refresh's is as good: a row deleted since is gone, one added since is
        read whole."""
        present = set(self.store.cron_names())
        for name in [n for n in self._entries if n not in present]:
            del self._entries[name]  # its queued instant goes stale and is dropped
        missing = [n for n in present if n not in self._entries]
        for start in range(0, len(missing), SWEEP_SLICE):
            self._apply([self._entry(row) for row in self.store.cron_states_by_name(
                missing[start:start + SWEEP_SLICE])])

    @property
    def sweeping(self) -> bool:
        """Whether a sweep over every row is under way (a slice per pass)."""
        return self._sweep_after is not None

    def sweep(self) -> None:
        """Every FULL_RELOAD_INTERVAL (or, for a table of more than FULL_RELOAD_INTERVAL
        x SWEEP_RATE rows, at SWEEP_RATE rows a second), read every row again,
        SWEEP_SLICE rows a slice (in name order), and apply those that differ from the
        held ones: the backstop for a change committed later than the refresh's
        lookback. One slice at a time never holds up a fire for long."""
        now = self._now_epoch()
        if self._sweep_after is None:
            if now < self._next_sweep:
                return
            self._sweep_after = ""
            self._next_sweep = now + FULL_RELOAD_INTERVAL
            self._next_slice = now
        if now < self._next_slice:
            return
        last, rows = self.store.cron_states_after(self._sweep_after, SWEEP_SLICE)
        self._take(rows)
        self._sweep_after = last  # None after the last slice
        self._next_slice = now + SWEEP_SLICE / SWEEP_RATE

    # -- the packed form ---------------------------------------------------------------------
    # A row as Python objects costs several hundred bytes when its calendar is its own
    # (docs/performance.md, "One leader, a million schedules"); packed, it is one bytes
    # value, which the cyclic collector does not track either.

    def _key(self, cron_expr: str, timezone: str, missed_fire_policy: str) -> bytes:
        pair = (timezone, missed_fire_policy)
        index = self._pair_index.get(pair)
        if index is None:
            if len(self._pairs) < _NO_PAIR:  # past that, each key spells out its pair
                index = self._pair_index[pair] = len(self._pairs)
                self._pairs.append(pair)
            else:
                index = _NO_PAIR
        text = (cron_expr if index != _NO_PAIR
                else "\0".join((cron_expr, timezone, missed_fire_policy)))  # no NUL in text
        return _PAIR.pack(index) + text.encode()

    def _triple(self, key: bytes) -> tuple[str, str, str]:
        (index,) = _PAIR.unpack_from(key)
        text = key[_PAIR.size:].decode()
        if index == _NO_PAIR:
            expr, zone, policy = text.split("\0")
            return expr, zone, policy
        return (text, *self._pairs[index])

    def _pack(self, entry: _Entry) -> bytes:
        return self._packed(entry.due, entry.kind, entry.last_enqueued_at, entry.created_at,
                            entry.updated_at, entry.paused_at)

    def _packed(self, due: float | None, kind: _Kind, last_enqueued_at: datetime | None,
                created_at: datetime, updated_at: datetime,
                paused_at: datetime | None) -> bytes:
        micros = self._micros
        return self._packed_us(due, kind, micros(last_enqueued_at), micros(created_at),
                               micros(updated_at), micros(paused_at))

    @staticmethod
    def _packed_us(due: float | None, kind: _Kind, last_us: int, created_us: int,
                   updated_us: int, paused_us: int) -> bytes:
        """:meth:`_packed` with the instants in microseconds already (a load has them)."""
        flags = (_NO_FIRE if kind.calendar is None else 0) | (
            _LIMITS if kind.problem is LIMITS_PROBLEM else 0)
        return _HEAD.pack(math.nan if due is None else due, last_us, created_us, updated_us,
                          paused_us, flags) + kind.key

    def _micros(self, t: datetime | None) -> int:
        if t is None:
            return NO_TIME
        memo = self._micros_memo
        if memo is None:
            return _micros(t)
        known = memo.get(id(t))
        if known is None or known[0] is not t:
            known = _bounded(memo)[id(t)] = (t, _micros(t))
        return known[1]

    def _instant(self, us: int) -> datetime | None:
        if us == NO_TIME:
            return None
        memo = self._instants
        if memo is None:
            return _instant(us)
        t = memo.get(us)
        if t is None:
            t = _bounded(memo)[us] = _instant(us)
        return t

    def _put(self, entry: _Entry) -> None:
        self._entries[entry.name] = self._pack(entry)

    def _get(self, name: str) -> _Entry | None:
        """The row ``name`` unpacked with its kind (parsed again if no longer cached)."""
        packed = self._entries.get(name)
        if packed is None:
            return None
        due, last, created, updated, paused, flags = _HEAD.unpack_from(packed)
        key = packed[_HEAD.size:]
        if flags & _LIMITS:
            kind = _Kind(*self._triple(key), None, LIMITS_PROBLEM, key)
        else:
            kind = self._keyed.get(key) or self._kind(*self._triple(key), key)
        instant = self._instant
        created_at, updated_at = instant(created), instant(updated)
        if created_at is None or updated_at is None:  # every row packed has both
            raise AssertionError(f"schedule {name!r} was packed without its timestamps")
        entry = _Entry(name, kind, instant(last), created_at, updated_at, instant(paused))
        entry.due = None if due != due else due  # NaN: none
        return entry

    def _holds(self, row: Sequence[Any]) -> bool:
        """Whether the row read (its name, then its columns) is held as it is: compared
        packed, so that a refresh after a burst (every fired row read back) builds
        nothing for the rows it drops."""
        packed = self._entries.get(row[0])
        if packed is None:
            return False
        key = self._kind(row[1], row[2], row[3]).key  # a row not held as read needs it next
        micros = self._micros
        return (packed[_TIMES_AT:_HEAD.size - 1] == _TIMES.pack(
                    micros(row[4]), micros(row[5]), micros(row[6]), micros(row[7]))
                and packed[_HEAD.size:] == key)

    def _held(self, name: str) -> CronState | None:
        """The row ``name`` as held, as a record (for :meth:`state`, :meth:`schedule`
        and :meth:`rows`; the readers compare rows read through :meth:`_holds`)."""
        packed = self._entries.get(name)
        if packed is None:
            return None
        _, last, created, updated, paused, _ = _HEAD.unpack_from(packed)
        instant = self._instant
        return CronState(name, *self._triple(packed[_HEAD.size:]), instant(last),
                         instant(created), instant(updated), instant(paused))  # type: ignore[arg-type]

    def _due(self, name: str) -> float | None:
        packed = self._entries.get(name)
        if packed is None:
            return None
        due = _HEAD.unpack_from(packed)[0]
        return None if due != due else due

    def _make(self, name: str, cron_expr: str, timezone: str, missed_fire_policy: str,
              last_enqueued_at: datetime | None, created_at: datetime, updated_at: datetime,
              paused_at: datetime | None) -> _Entry:
        """A row read, unpacked."""
        return _Entry(name, self._kind(cron_expr, timezone, missed_fire_policy),
                      last_enqueued_at, created_at, updated_at, paused_at)

    def _take(self, rows: Iterable[CronRow], *, compare: bool = True) -> None:
        """Apply each row read as it arrives, leaving alone those held as they are
        (``compare`` False: none is held yet), so that a load never holds the rows
        read, or their calendars, beside the packed ones."""
        kinds, entries, push = self._kinds, self._entries, self._queue.push
        micros, first_due, packed = self._micros, self._first_due_at, self._packed_us
        holds = self._holds
        with self._together():
            for row in rows:
                if compare and holds(row):
                    continue
                (name, cron_expr, timezone, missed_fire_policy, last_enqueued_at,
                 created_at, updated_at, paused_at) = row
                # The cache is looked up here first, because a load comes here for
                # every row.
                kind = kinds.get((cron_expr, timezone, missed_fire_policy))
                made = kind is None
                if kind is None:
                    kind = self._new_kind(cron_expr, timezone, missed_fire_policy)
                if kind.calendar is None:  # reported as invalid: the long way
                    self._set(_Entry(name, kind, last_enqueued_at, created_at, updated_at,
                                     paused_at))
                    continue
                # This does what _set then _schedule do, without the row as an object in
                # between, because a load goes through here for every row. A kind just
                # made has no answer in the first-due memo yet, and with a calendar per
                # row it never gets one.
                last_us, created_us = micros(last_enqueued_at), micros(created_at)
                due = (None if paused_at is not None
                       else first_due(kind.calendar, last_enqueued_at, created_at, last_us,
                                      created_us, memo=not made))
                if due is not None:
                    push(due, name)
                entries[name] = packed(due, kind, last_us, created_us, micros(updated_at),
                                       micros(paused_at))

    def _entry(self, row: CronState) -> _Entry:
        return self._make(row.name, *columns_of(row))

    def _kind(self, cron_expr: str, timezone: str, missed_fire_policy: str,
              key: bytes | None = None) -> _Kind:
        """The kind of a triple: the cached one, or made (its calendar parsed)."""
        kind = self._kinds.get((cron_expr, timezone, missed_fire_policy))
        if kind is not None:
            return kind
        return self._new_kind(cron_expr, timezone, missed_fire_policy, key)

    def _new_kind(self, cron_expr: str, timezone: str, missed_fire_policy: str,
                  key: bytes | None = None) -> _Kind:
        """The kind of a triple not cached, made and cached."""
        calendar = None
        problem = None
        try:
            calendar = calendar_for(cron_expr, timezone, cache=False)  # this is the cache
        except ScheduleError as exc:
            problem = str(exc)
        if problem is None and missed_fire_policy not in POLICIES:
            problem = f"unknown missed-fire policy {missed_fire_policy!r}"
        if key is None:
            key = self._key(cron_expr, timezone, missed_fire_policy)
        kind = _Kind(cron_expr, timezone, missed_fire_policy,
                     calendar if problem is None else None, problem, key)
        if len(self._kinds) >= KIND_CACHE:
            # A row's kind is made again from its key when it is next needed.
            self._kinds.clear()
            self._keyed.clear()
        self._kinds[(cron_expr, timezone, missed_fire_policy)] = self._keyed[key] = kind
        return kind

    def _adopt_state(self, state: TableState) -> None:
        self._state = state
        # Anchored on the server's clock at the read, not on the newest change seen:
        # rows changed long ago must not come back on every refresh.
        self._since = max(self._since, state.db_now - REFRESH_OVERLAP)

    @contextmanager
    def _together(self) -> Iterator[None]:
        """Rows handled together often share their calendar and cursor (schedules
        synced or fired in the same second): within the block their next due instant
        is worked out once."""
        outer = self._due_memo is not None
        if not outer:
            self._due_memo, self._micros_memo, self._instants = {}, {}, {}
        try:
            yield
        finally:
            if not outer:
                self._due_memo = self._micros_memo = self._instants = None

    def _apply(self, rows: Iterable[_Entry]) -> None:
        with self._together():
            for entry in rows:
                if not self._holds((entry.name, *columns_of(entry))):
                    self._set(entry)

    def _set(self, entry: _Entry) -> None:
        if entry.kind.problem is not None:
            self._report_invalid(entry, entry.kind.problem)
        self._schedule(entry)

    def _report_invalid(self, row: _Entry, problem: str) -> None:
        key = (row.updated_at, problem)
        if self._reported.get(row.name) != key:
            self._reported[row.name] = key
            event(logger, logging.ERROR, "schedule.invalid",
                  "beat: schedule %r is invalid and is skipped until it changes: %s",
                  row.name, problem, schedule=row.name, problem=problem)

    def _report_failed(self, row: _Entry, error: str) -> None:
        key = (row.updated_at, error)
        if self._reported.get(row.name) != key:
            self._reported[row.name] = key
            event(logger, logging.ERROR, "fire.failed",
                  "beat: firing schedule %r failed, retrying every %.0f s: %s",
                  row.name, RETRY_DELAY, error, schedule=row.name, error=error)

    def _schedule(self, entry: _Entry, *, at: float | None = None) -> None:
        """Work out when the row is next due (or take ``at``), queue it, and hold it."""
        if entry.kind.calendar is None or entry.paused_at is not None:
            entry.due = None
        else:
            if at is None:
                at = self._first_due(entry)
            entry.due = at
            if at is not None:
                self._queue.push(at, entry.name)
        self._put(entry)

    def _first_due(self, entry: _Entry) -> float | None:
        """When the row first has something due, by Awa's rules."""
        assert entry.kind.calendar is not None
        return self._first_due_of(entry.kind.calendar, entry.last_enqueued_at,
                                  entry.created_at)

    def _first_due_of(self, calendar: Calendar, last_enqueued_at: datetime | None,
                      created_at: datetime) -> float | None:
        micros = self._micros
        return self._first_due_at(calendar, last_enqueued_at, created_at,
                                  micros(last_enqueued_at), micros(created_at))

    def _first_due_at(self, calendar: Calendar, last_enqueued_at: datetime | None,
                      created_at: datetime, last_us: int, created_us: int, *,
                      memo: bool = True) -> float | None:
        """:meth:`_first_due_of`, given the two instants in microseconds too; ``memo``
        False when no row handled before can share the answer (its calendar is new)."""
        # Awa fires a new row's latest fire in [floor(created_at - 60 s), now], and a
        # fired row's first fire after its cursor: the answer depends on the calendar
        # (one object per kind) and that instant alone. A datetime keeps its hash, and
        # rows read together share theirs; the fold tells apart two instants of one
        # repeated wall time, which compare equal.
        new = last_enqueued_at is None
        known = self._due_memo if memo else None
        if known is not None:
            key = ((calendar, (created_at,), created_at.fold) if new
                   else (calendar, last_enqueued_at, last_enqueued_at.fold))  # type: ignore[union-attr]
            if key in known:
                return known[key]
        second = created_us // 1_000_000 - 60 if new else last_us // 1_000_000
        found = next_epoch_from(calendar, second, after=not new)
        due = None if found is None else float(found)
        if known is not None:
            _bounded(known)[key] = due
        return due

    # -- passes ------------------------------------------------------------------------------

    def _now_epoch(self) -> float:
        return self.clock().timestamp()

    def next_due(self) -> float | None:
        """Epoch seconds of the earliest due fire held, or None."""
        return self._queue.first()

    def _is_due_at(self, name: str, due: float) -> bool:
        """Whether a queued (due, name) still holds (the row was not changed, removed or
        fired since it was queued)."""
        return self._due(name) == due

    def run_pass(self) -> PassReport:
        """Fire what is due, refresh if it is time; return how long to sleep."""
        if not self.loaded:
            self.load()
        fired = self.fire_due()
        refreshed = False
        now = self._now_epoch()
        if now >= self._next_refresh:
            due = self.next_due()
            if (not self._put_off and due is not None
                    and due < now + REFRESH_PUT_OFF * self._refresh_seconds):
                # After the fire, not across it; only once in a row, or a refresh that
                # takes longer than the gap between fires would never run.
                self._next_refresh = due
                self._put_off = True
            else:
                self.refresh()
                self._next_refresh = self._now_epoch() + self.refresh_interval
                self._put_off = False
                refreshed = True
        else:
            self.sweep()  # when one is due or under way
        return PassReport(fired, refreshed, self.wait())

    def set_refresh_interval(self, seconds: float) -> None:
        """Refresh every ``seconds`` from the next refresh on: often when polling is the
        only way to see changes, rarely when notifications announce them."""
        self.refresh_interval = seconds

    def refresh_soon(self) -> None:
        """Refresh at the next pass (told that the table changed)."""
        self._next_refresh = 0.0

    def wait(self) -> float:
        now = self._now_epoch()
        until = self._next_refresh
        due = self.next_due()
        if due is not None:
            until = min(until, due)
        if self.sweeping:
            until = min(until, self._next_slice)
        return max(0.0, until - now)

    def fire_due(self) -> FireResult:
        """Fire the schedules whose due time has come, up to FIRE_BATCH of them (fewer
        in the first statements of a burst), in one batched statement; :meth:`wait` is
        0 while more are due."""
        with self._together():  # the rows fired together share their timestamps
            return self._fire_due()

    def _fire_due(self) -> FireResult:
        now = self.clock()
        now_epoch = now.timestamp()
        requests: list[FireRequest] = []
        # Rows that share a calendar, a cursor and a policy have the same fires: in a burst
        # (every tenant at midnight) that is most of a batch, so each is worked out once.
        # The calendar is keyed by identity: the entries hold it for the whole call.
        fires_of: dict[tuple[Any, ...], list[datetime]] = {}
        limit = min(FIRE_BATCH, self._batch * FIRE_RAMP if self._batch else FIRST_FIRE_BATCH)
        entries: dict[str, _Entry] = {}
        while len(requests) < limit:
            item = self._queue.pop(now_epoch)
            if item is None:
                break
            due, name = item
            entry = self._get(name)
            assert entry is not None  # the queue holds only names held at that instant
            entry.due = None
            row = entry
            assert entry.calendar is not None
            last = row.last_enqueued_at
            key = (id(entry.calendar), last, row.created_at if last is None else None,
                   row.missed_fire_policy)
            fires = fires_of.get(key)
            if fires is None:
                fires = fires_of[key] = due_fires(
                    entry.calendar, last_enqueued_at=last, created_at=row.created_at,
                    now=now, policy=row.missed_fire_policy, limit=self.catch_up_limit)
            if fires:
                coalesced = None
                if (row.missed_fire_policy == "coalesce" and row.last_enqueued_at is not None
                        and (fires[-1].timestamp() > due or name in self._retrying)):
                    # Only where fire times may have been missed: the first due one is
                    # earlier, or the fire was put off by an error.
                    coalesced = _left_out(entry.calendar, row, fires)
                requests.append(FireRequest(name, row.last_enqueued_at, fires,
                                            limited=max_runs(row.cron_expr) is not None,
                                            coalesced=coalesced))
                entries[name] = entry
                # Not due while it is being fired (a second queued copy of this instant
                # must not fire it twice): the due instant alone, not a whole repack.
                self._entries[name] = _NO_DUE + self._entries[name][_NO_DUE_SIZE:]
            else:
                self._schedule(entry)
        self._batch = limit if len(requests) >= limit else 0
        if not requests:
            return FireResult()
        try:
            result = self.store.fire(requests)
        except StoreError:
            # Nothing was fired: try these again shortly, not at the next full reload.
            for request in requests:
                self._schedule(entries[request.name], at=now_epoch + RETRY_DELAY)
                self._retrying.add(request.name)
            raise
        self.last_lag = now_epoch - max(r.fire_times[-1].timestamp() for r in requests)
        self._after_fire(requests, result, now_epoch, entries)
        if self.on_fired is not None and result.jobs:
            self.on_fired(result)
        return result

    def _after_fire(self, requests: list[FireRequest], result: FireResult,
                    now_epoch: float, entries: dict[str, _Entry]) -> None:
        with self._together():
            self._after_fire_rows(requests, result, now_epoch, entries)

    def _after_fire_rows(self, requests: list[FireRequest], result: FireResult,
                         now_epoch: float, entries: dict[str, _Entry]) -> None:
        fired = {job.name: job.updated_at for job in [*result.jobs, *result.skipped]}
        stats = self.stats
        overlapped: dict[str, int] = {}
        for job in result.skipped:
            overlapped[job.name] = overlapped.get(job.name, 0) + 1
            event(logger, logging.INFO, "fire.skipped",
                  "beat: skipped %s for %s: its last run has not finished (overlap=skip)",
                  job.name, job.fire_time, schedule=job.name, fire_time=job.fire_time)
        lost = []
        ahead = set(result.ahead)
        if ahead:
            self._refused_ahead(len(ahead))
        for request in requests:
            entry = entries[request.name]
            if request.name in ahead:
                # Due again at its own fire time, not at this clock's now plus a delay:
                # once the clock is put right, that time is still to come. The node
                # measures the skew at once and stands down meanwhile.
                self._skipped(request, "clock_ahead")
                self._schedule(entry)
                self._retrying.add(request.name)
            elif request.name in fired:
                self._retrying.discard(request.name)
                skips = overlapped.get(request.name, 0)
                if skips:
                    stats.skipped["overlap"] += skips
                self._outcome(request.name, "overlap" if skips == len(request.fire_times)
                              else "fired")
                if request.coalesced is not None:
                    stats.coalesced += request.coalesced.count
                if request.limited:
                    # The statement may have fired fewer runs than asked and retired the
                    # row, which only the row tells: re-read below.
                    lost.append(request.name)
                    continue
                limited = len(request.fire_times) >= self.catch_up_limit
                if limited != (request.name in stats.behind):
                    stats.behind = (stats.behind | {request.name} if limited
                                    else stats.behind - {request.name})
                if limited:
                    event(logger, logging.WARNING, "fire.catch_up_limit",
                          "beat: schedule %r hit the catch-up limit of %s fires in one "
                          "pass; the rest follow in the next passes",
                          request.name, self.catch_up_limit, schedule=request.name)
                # As the row now reads, so that the next refresh finds nothing new in it.
                entry.last_enqueued_at = request.fire_times[-1]
                entry.updated_at = fired[request.name] or entry.updated_at
                self._schedule(entry)
            elif request.name in result.failed:
                self._skipped(request, "failed")
                self._report_failed(entry, result.failed[request.name])
                self._schedule(entry, at=now_epoch + RETRY_DELAY)
                self._retrying.add(request.name)
            else:
                lost.append(request.name)
        if lost:
            # Another evaluator fired first, or the row was paused, edited or removed
            # meanwhile: take the database's word for it. So too for a schedule with a
            # run limit, whether it fired or not: the statement may have fired fewer
            # runs than asked and retired it, which only the row tells.
            rows = {row.name: row for row in self.store.cron_states_by_name(lost)}
            by_name = {r.name: r for r in requests}
            for name in lost:
                row = rows.get(name)
                expected = by_name[name].expected
                invalid = (row is not None and row.last_enqueued_at == expected
                           and row.paused_at is None)
                if name not in fired:
                    self._skipped(by_name[name], "invalid" if invalid else "concurrent")
                if row is None:
                    self._entries.pop(name, None)
                elif invalid:
                    # Unchanged and not paused, yet not fired: its job breaks Awa's limits
                    # (priority 1-4, at most 20 tags, kind and queue at most 200 characters).
                    triple = (row.cron_expr, row.timezone, row.missed_fire_policy)
                    held = _Entry(name, _Kind(*triple, None, LIMITS_PROBLEM,
                                              self._key(*triple)), *columns_of(row)[3:])
                    self._report_invalid(held, LIMITS_PROBLEM)
                    self._put(held)
                else:
                    self._set(self._entry(row))

    @staticmethod
    def _refused_ahead(count: int) -> None:
        event(logger, logging.WARNING, "fire.clock_ahead",
              "beat: the database refused to fire %d schedule(s): their fire times are "
              "later than its clock plus awa_beat_clock_tolerance (this host's clock is "
              "fast)", count, schedules=count)

    def _skipped(self, request: FireRequest, reason: str) -> None:
        self.stats.skipped[reason] += len(request.fire_times)
        self._outcome(request.name, reason)

    def _outcome(self, name: str, outcome: str) -> None:
        if name in self.stats.watched:
            self.stats.outcomes[name] = outcome

    # -- introspection -----------------------------------------------------------------------

    def census(self, overdue_after: float) -> Census:
        """Count the rows held: paused, invalid, and overdue (next fire more than
        ``overdue_after`` seconds ago). Safe from another thread: it walks a copy."""
        rows = list(self._entries.values())  # one C-level copy: no resize under us
        before = self._now_epoch() - overdue_after
        paused = invalid = overdue = 0
        unpack = _HEAD.unpack_from
        for packed in rows:
            due, _, _, _, paused_at, flags = unpack(packed)
            if flags & _NO_FIRE:
                invalid += 1
            elif paused_at != NO_TIME:
                paused += 1
            elif due < before:  # False for NaN (no due instant)
                overdue += 1
        return Census(len(rows), paused, invalid, overdue)

    def schedule(self, name: str) -> tuple[CronState, float | None] | None:
        """The row held for ``name`` and the epoch second of its next due fire (None:
        paused, invalid or no further fire), or None if no such row is held."""
        row = self._held(name)
        return None if row is None else (row, self._due(name))

    def __len__(self) -> int:
        return len(self._entries)

    def rows(self) -> list[CronState]:
        return [row for name in list(self._entries) if (row := self._held(name)) is not None]


def _left_out(calendar: Calendar, row: _Entry, fires: Sequence[datetime]
              ) -> Coalesced | None:
    """The fires a coalesce passed over before ``fires``: one calendar step when there
    were none (every normal fire), counted only after downtime or a pause."""
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
