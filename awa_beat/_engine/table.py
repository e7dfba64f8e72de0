"""The rows the engine holds, each packed into one ``bytes`` value, and when each is due.

This is the only module that knows how a row is packed. A row kept as Python objects
costs several hundred bytes when its calendar is its own (docs/performance.md, "One
leader, a million schedules"); packed, it is one ``bytes`` value, which the cyclic
collector does not track either. Everything outside this module sees rows as plain
objects: :class:`~awa_beat._db.records.CronState` records, or a :class:`Row` while a
row is being worked on (scheduled or fired).

A packed row holds its timestamps as integers and a key that stands for its expression,
zone and policy. Rows that share those three share one :class:`Kind`, which holds the
parsed calendar, so the calendar is parsed once per kind rather than once per row.

The table also keeps the :class:`~awa_beat._engine.due_queue.DueQueue`: every row that
can fire is queued under the instant it is next due, so that a pass costs nothing for
the rows that are not due.

Rows handled together (a load, a refresh, a burst of fires) often share their timestamps
and their calendar, so their next due instant is worked out once for all of them. That
memo is a :class:`Batch`, created by :meth:`RowTable.batch` and dropped when the block
ends, so that it never grows with the table.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

from .._db.records import CronRow, CronState, columns_of
from .._schedules.fire_times import POLICIES, Calendar, calendar_for, next_epoch_from
from ..errors import ScheduleError
from .due_queue import DueQueue

UTC = timezone.utc
#: Distinct (calendar, cursor) pairs a batch remembers before it starts afresh.
DUE_MEMO_LIMIT = 65536
#: Distinct (expression, zone, policy) triples remembered, so that the rows of a triple
#: share one kind and its calendar. Once full, the cache starts afresh, because the kinds
#: of rows edited or removed long ago would otherwise stay in it for good and later
#: triples would never share. Rows hold only their key, so a table with more triples
#: than this parses a calendar for each row it works on (a load takes longer) but holds
#: no more memory.
KIND_CACHE = 16384
#: Why a row whose job Awa would reject cannot fire. The fire statement tells the engine
#: only that such a row was not fired, so the engine keeps the row with this problem.
LIMITS_PROBLEM = ("its job would break Awa's limits (priority 1-4, at most 20 tags,"
                  " kind and queue <= 200 characters)")

# A packed row's fixed part is the due instant (epoch seconds, NaN for none), then the
# cursor, created_at, updated_at and paused_at (microseconds since the epoch, NO_TIME for
# None), then the flags. The kind's key follows it.
_HEAD = struct.Struct("<dqqqqB")
# The four timestamps of the fixed part, and where they start, so that a row read can be
# compared with a held one without unpacking it.
_TIMES = struct.Struct("<qqqq")
_TIMES_AT = struct.calcsize("<d")
_PAIR = struct.Struct("<H")
NO_TIME = -(2**63)
#: The most (zone, policy) pairs a key names by index. The index MAX_PAIRS itself means
#: that the zone and the policy follow the expression in the key, because the table of
#: pairs is full.
MAX_PAIRS = 0xFFFF
# The flags say that the row cannot fire (the problem is its kind's), and that its job
# breaks Awa's limits (a problem of the row, not of its kind).
_NO_FIRE, _LIMITS = 1, 2
_NO_DUE = struct.pack("<d", math.nan)
_NO_DUE_SIZE = len(_NO_DUE)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def _micros(t: datetime | None) -> int:
    return NO_TIME if t is None else (t - _EPOCH) // _US


def _instant(us: int) -> datetime | None:
    if us == NO_TIME:
        return None
    seconds, micros = divmod(us, 1_000_000)
    t = datetime.fromtimestamp(seconds, UTC)  # This is exact for whole seconds.
    return t.replace(microsecond=micros) if micros else t


def _micros_in(memo: dict[int, tuple[datetime, int]]) -> Callable[[datetime | None], int]:
    """Return :func:`_micros` remembering its answers in ``memo``, by the identity of the
    datetime. Rows read together share their timestamps' objects, so most answers are
    looked up rather than computed. The datetime is kept with the answer, so that no
    identity is reused while the memo lives."""
    get = memo.get

    def micros(t: datetime | None) -> int:
        if t is None:
            return NO_TIME
        known = get(id(t))
        if known is None or known[0] is not t:
            known = _bounded(memo)[id(t)] = (t, _micros(t))
        return known[1]

    return micros


def _bounded(memo: dict[Any, Any]) -> dict[Any, Any]:
    """Return ``memo``, emptied first if it is full, because rows with timestamps or
    cursors of their own would otherwise make it grow with the table."""
    if len(memo) >= DUE_MEMO_LIMIT:
        memo.clear()
    return memo


class Kind:
    """What the rows sharing an expression, a zone and a policy share: their calendar,
    or the problem that stops them from firing, and ``key``, the bytes that stand for
    all three in a packed row."""

    __slots__ = ("calendar", "cron_expr", "key", "missed_fire_policy", "problem", "timezone")

    def __init__(self, cron_expr: str, timezone: str, missed_fire_policy: str,
                 calendar: Calendar | None, problem: str | None, key: bytes) -> None:
        self.cron_expr = cron_expr
        self.timezone = timezone
        self.missed_fire_policy = missed_fire_policy
        self.calendar = calendar
        self.problem = problem
        self.key = key


class Row:
    """A row being worked on, unpacked: what the firing rules read and change.

    The expression, zone, policy, calendar and problem come from the row's kind. A
    change made to a row is kept only when the row is put back with
    :meth:`RowTable.schedule`.
    """

    __slots__ = ("created_at", "due", "kind", "last_enqueued_at", "name", "paused_at",
                 "updated_at")

    def __init__(self, name: str, kind: Kind, last_enqueued_at: datetime | None,
                 created_at: datetime, updated_at: datetime, paused_at: datetime | None,
                 ) -> None:
        self.name = name
        self.kind = kind
        self.last_enqueued_at = last_enqueued_at
        self.created_at = created_at
        self.updated_at = updated_at
        self.paused_at = paused_at
        self.due: float | None = None
        """The epoch second at which the row next has a fire due, or None when it is
        paused, invalid or never fires again."""

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

    @property
    def problem(self) -> str | None:
        return self.kind.problem


class Batch:
    """What rows handled together share, remembered for as long as they are handled.

    A batch lives for one load, one refresh or one burst of fires: :meth:`RowTable.batch`
    creates it and drops it when its block ends. Rows read together share their
    timestamps' objects, and rows synced or fired together share their calendar and
    cursor, so each answer is worked out once per batch rather than once per row.
    """

    __slots__ = ("due", "instants", "micros", "micros_of")

    def __init__(self) -> None:
        self.due: dict[tuple[Calendar, object, int], float | None] = {}
        """Next due instants by calendar and cursor."""
        self.micros: dict[int, tuple[datetime, int]] = {}
        """Instants in microseconds by the identity of the datetime. The datetime is kept
        with the answer, so that no identity is reused while the batch lives."""
        self.instants: dict[int, datetime] = {}
        """Datetimes by their instant in microseconds."""
        self.micros_of = _micros_in(self.micros)
        """:func:`_micros`, answered through :attr:`micros`."""


class RowTable:
    """Every row held, packed, by name, with the queue of when each is next due.

    Rows go in as records (:meth:`load`, :meth:`put`) and come out as records
    (:meth:`row`, :meth:`rows`) or as a :class:`Row` to work on (:meth:`get`,
    :meth:`pop_due`). :class:`~awa_beat._engine.reference_table.ReferenceTable` answers
    the same questions with plain objects, and the tests hold this class to its answers.
    """

    def __init__(self) -> None:
        self._packed: dict[str, bytes] = {}
        """Every row held, packed, by name."""
        self._kinds: dict[tuple[str, str, str], Kind] = {}
        """Kinds by triple, so that rows of one triple share one calendar while worked on."""
        self._keyed: dict[bytes, Kind] = {}
        """The same kinds by key, for the rows unpacked."""
        self._pairs: list[tuple[str, str]] = []
        """The (zone, policy) pairs met, which a packed row names by their index."""
        self._pair_index: dict[tuple[str, str], int] = {}
        self._queue = DueQueue(self._is_due_at)
        self._batch: Batch | None = None

    # -- questions -----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._packed)

    def __contains__(self, name: object) -> bool:
        return name in self._packed

    def names(self) -> list[str]:
        """The name of every row held."""
        return list(self._packed)

    def row(self, name: str) -> CronState | None:
        """The row ``name`` as held, as a record, or None if it is not held."""
        packed = self._packed.get(name)
        if packed is None:
            return None
        _, last, created, updated, paused, _ = _HEAD.unpack_from(packed)
        instant = self._instant
        return CronState(name, *self._triple(packed[_HEAD.size:]), instant(last),
                         instant(created), instant(updated), instant(paused))  # type: ignore[arg-type]

    def rows(self) -> list[CronState]:
        """Every row held, as records."""
        return [row for name in list(self._packed) if (row := self.row(name)) is not None]

    def due(self, name: str) -> float | None:
        """The epoch second at which ``name`` is next due, or None (not held, paused,
        invalid, being fired, or never due again)."""
        packed = self._packed.get(name)
        if packed is None:
            return None
        due = _HEAD.unpack_from(packed)[0]
        return None if due != due else due  # NaN stands for none.

    def next_due(self) -> float | None:
        """The epoch second of the earliest due fire held, or None."""
        return self._queue.first()

    def packed(self, name: str) -> bytes | None:
        """The row ``name`` as packed, or None. A row left alone keeps its one ``bytes``
        object, which is how the tests tell that a reload did not rebuild it."""
        return self._packed.get(name)

    def cached_kinds(self) -> int:
        """The number of kinds cached (at most KIND_CACHE)."""
        return len(self._kinds)

    def pair_count(self) -> int:
        """The number of (zone, policy) pairs that keys name by index (at most MAX_PAIRS)."""
        return len(self._pairs)

    def holds(self, row: CronRow) -> bool:
        """Whether ``row``, as read, is held exactly as it is.

        The comparison is made on the packed form, so that a refresh after a burst, which
        reads back every fired row, builds nothing for the rows it leaves alone."""
        packed = self._packed.get(row[0])
        if packed is None:
            return False
        key = self._kind(row[1], row[2], row[3]).key  # A row not held as read needs it next.
        micros = self._micros
        return (packed[_TIMES_AT:_HEAD.size - 1] == _TIMES.pack(
                    micros(row[4]), micros(row[5]), micros(row[6]), micros(row[7]))
                and packed[_HEAD.size:] == key)

    def census(self, before: float) -> tuple[int, int, int, int]:
        """Count the rows held, and of those the paused ones, the invalid ones, and the
        overdue ones (due before epoch second ``before``). It is safe to call from
        another thread, because it walks a copy."""
        rows = list(self._packed.values())  # One C-level copy, so no resize under us.
        paused = invalid = overdue = 0
        unpack = _HEAD.unpack_from
        for packed in rows:
            due, _, _, _, paused_at, flags = unpack(packed)
            if flags & _NO_FIRE:
                invalid += 1
            elif paused_at != NO_TIME:
                paused += 1
            elif due < before:  # This is False for NaN (no due instant).
                overdue += 1
        return len(rows), paused, invalid, overdue

    # -- changes -------------------------------------------------------------------------

    @contextmanager
    def batch(self) -> Iterator[Batch]:
        """Handle rows together within the block: see :class:`Batch`. A block inside
        another one shares the outer batch."""
        if self._batch is not None:
            yield self._batch
            return
        self._batch = Batch()
        try:
            yield self._batch
        finally:
            self._batch = None

    def load(self, rows: Iterable[CronRow], *, compare: bool = True) -> list[Row]:
        """Hold each row read as it arrives, and queue it. With ``compare``, the rows
        already held as they are read are left alone. Return the rows that cannot fire,
        so that the caller reports them.

        A load of the whole table comes through here for every row, so the row never
        becomes an object in between, and a load never holds the rows read, or their
        calendars, beside the packed ones."""
        invalid: list[Row] = []
        kinds, packed_rows, push = self._kinds, self._packed, self._queue.push
        first_due, pack, new_kind = self._first_due_at, self._pack_us, self._new_kind
        held, times = packed_rows.get, _TIMES.pack
        with self.batch() as batch:
            # The batch's memos are bound once here, because a load of the whole table
            # comes through this loop for every row.
            micros, due_memo = batch.micros_of, batch.due
            for row in rows:
                (name, cron_expr, timezone, missed_fire_policy, last_enqueued_at,
                 created_at, updated_at, paused_at) = row
                kind = kinds.get((cron_expr, timezone, missed_fire_policy))
                made = kind is None
                if kind is None:
                    kind = new_kind(cron_expr, timezone, missed_fire_policy)
                last_us, created_us = micros(last_enqueued_at), micros(created_at)
                updated_us, paused_us = micros(updated_at), micros(paused_at)
                if compare:
                    # This is holds(), written out with what the loop has at hand.
                    packed = held(name)
                    if (packed is not None
                            and packed[_TIMES_AT:_HEAD.size - 1] == times(
                                last_us, created_us, updated_us, paused_us)
                            and packed[_HEAD.size:] == kind.key):
                        continue
                if kind.calendar is None:
                    # An invalid row takes the long way, because it is reported.
                    invalid.append(self.schedule(Row(
                        name, kind, last_enqueued_at, created_at, updated_at, paused_at)))
                    continue
                # A kind just made has no answer in the batch's memo yet, and with a
                # calendar per row it never gets one, so the memo is not asked.
                due = (None if paused_at is not None
                       else first_due(kind.calendar, last_enqueued_at, created_at, last_us,
                                      created_us, None if made else due_memo))
                if due is not None:
                    push(due, name)
                packed_rows[name] = pack(due, kind, last_us, created_us, updated_us, paused_us)
        return invalid

    def put(self, row: CronState | CronRow, *, compare: bool = True) -> Row | None:
        """Hold ``row`` and queue it, unless ``compare`` finds it held as it is already.
        Return the row as it was taken, so that the caller can report its problem, or
        None when it was left alone."""
        columns = columns_of(row)
        if compare and self.holds(CronRow(row.name, *columns)):
            return None
        return self.schedule(self._unpacked(row.name, *columns))

    def put_limits_problem(self, row: CronState) -> Row:
        """Hold ``row`` as a row that cannot fire because its job breaks Awa's limits,
        which only the fire statement tells."""
        triple = (row.cron_expr, row.timezone, row.missed_fire_policy)
        held = Row(row.name, Kind(*triple, None, LIMITS_PROBLEM, self._key(*triple)),
                   *columns_of(row)[3:])
        self._packed[row.name] = self._pack(held)
        return held

    def schedule(self, row: Row, *, at: float | None = None) -> Row:
        """Work out when ``row`` is next due (or take ``at``), queue it, and hold it as
        it now is. Return the row."""
        if row.kind.calendar is None or row.paused_at is not None:
            row.due = None
        else:
            if at is None:
                at = self.first_due(row.kind.calendar, row.last_enqueued_at, row.created_at)
            row.due = at
            if at is not None:
                self._queue.push(at, row.name)
        self._packed[row.name] = self._pack(row)
        return row

    def remove(self, name: str) -> None:
        """Forget the row ``name``. Its queued instant goes stale and is dropped when it
        reaches the front of the queue."""
        self._packed.pop(name, None)

    def get(self, name: str) -> Row | None:
        """The row ``name`` to work on, or None if it is not held. Its kind is parsed
        again if it is no longer cached."""
        packed = self._packed.get(name)
        if packed is None:
            return None
        due, last, created, updated, paused, flags = _HEAD.unpack_from(packed)
        key = packed[_HEAD.size:]
        if flags & _LIMITS:
            kind = Kind(*self._triple(key), None, LIMITS_PROBLEM, key)
        else:
            kind = self._keyed.get(key) or self._kind(*self._triple(key), key)
        instant = self._instant
        created_at, updated_at = instant(created), instant(updated)
        if created_at is None or updated_at is None:  # Every row packed has both.
            raise AssertionError(f"schedule {name!r} was packed without its timestamps")
        row = Row(name, kind, instant(last), created_at, updated_at, instant(paused))
        row.due = None if due != due else due
        return row

    def pop_due(self, now: float) -> tuple[float, Row] | None:
        """Take the row due earliest, if it is due by epoch second ``now``, with the
        instant it was queued at. The row is held as not due from then on, so that a
        second queued copy of that instant cannot fire it twice; :meth:`schedule` queues
        it again."""
        item = self._queue.pop(now)
        if item is None:
            return None
        due, name = item
        row = self.get(name)
        assert row is not None  # The queue holds only names held at that instant.
        row.due = None
        # Only the due instant changes, so the rest of the packed row is kept as it is.
        self._packed[name] = _NO_DUE + self._packed[name][_NO_DUE_SIZE:]
        return due, row

    def first_due(self, calendar: Calendar, last_enqueued_at: datetime | None,
                  created_at: datetime) -> float | None:
        """When a row of ``calendar`` with this cursor and creation time first has a
        fire due, by Awa's rules."""
        micros = self._micros
        return self._first_due_at(calendar, last_enqueued_at, created_at,
                                  micros(last_enqueued_at), micros(created_at),
                                  None if self._batch is None else self._batch.due)

    # -- the packed form -----------------------------------------------------------------

    def _is_due_at(self, name: str, due: float) -> bool:
        """Whether a queued (due, name) still holds: the row was not changed, removed or
        fired since it was queued."""
        return self.due(name) == due

    def _key(self, cron_expr: str, timezone: str, missed_fire_policy: str) -> bytes:
        pair = (timezone, missed_fire_policy)
        index = self._pair_index.get(pair)
        if index is None:
            if len(self._pairs) < MAX_PAIRS:  # Past that, each key spells out its pair.
                index = self._pair_index[pair] = len(self._pairs)
                self._pairs.append(pair)
            else:
                index = MAX_PAIRS
        text = (cron_expr if index != MAX_PAIRS  # Text in PostgreSQL holds no NUL.
                else "\0".join((cron_expr, timezone, missed_fire_policy)))
        return _PAIR.pack(index) + text.encode()

    def _triple(self, key: bytes) -> tuple[str, str, str]:
        (index,) = _PAIR.unpack_from(key)
        text = key[_PAIR.size:].decode()
        if index == MAX_PAIRS:
            expr, zone, policy = text.split("\0")
            return expr, zone, policy
        return (text, *self._pairs[index])

    def _pack(self, row: Row) -> bytes:
        micros = self._micros
        return self._pack_us(row.due, row.kind, micros(row.last_enqueued_at),
                             micros(row.created_at), micros(row.updated_at),
                             micros(row.paused_at))

    @staticmethod
    def _pack_us(due: float | None, kind: Kind, last_us: int, created_us: int,
                 updated_us: int, paused_us: int) -> bytes:
        """Pack a row whose instants are in microseconds already, as a load has them."""
        flags = (_NO_FIRE if kind.calendar is None else 0) | (
            _LIMITS if kind.problem is LIMITS_PROBLEM else 0)
        return _HEAD.pack(math.nan if due is None else due, last_us, created_us, updated_us,
                          paused_us, flags) + kind.key

    def _micros(self, t: datetime | None) -> int:
        batch = self._batch
        return _micros(t) if batch is None else batch.micros_of(t)

    def _instant(self, us: int) -> datetime | None:
        if us == NO_TIME:
            return None
        batch = self._batch
        if batch is None:
            return _instant(us)
        t = batch.instants.get(us)
        if t is None:
            t = _bounded(batch.instants)[us] = _instant(us)
        return t

    def _unpacked(self, name: str, cron_expr: str, timezone: str, missed_fire_policy: str,
                  last_enqueued_at: datetime | None, created_at: datetime,
                  updated_at: datetime, paused_at: datetime | None) -> Row:
        return Row(name, self._kind(cron_expr, timezone, missed_fire_policy),
                   last_enqueued_at, created_at, updated_at, paused_at)

    def _kind(self, cron_expr: str, timezone: str, missed_fire_policy: str,
              key: bytes | None = None) -> Kind:
        """The kind of a triple: the cached one, or one made now (its calendar parsed)."""
        kind = self._kinds.get((cron_expr, timezone, missed_fire_policy))
        if kind is not None:
            return kind
        return self._new_kind(cron_expr, timezone, missed_fire_policy, key)

    def _new_kind(self, cron_expr: str, timezone: str, missed_fire_policy: str,
                  key: bytes | None = None) -> Kind:
        """Make and cache the kind of a triple that is not cached."""
        calendar = None
        problem = None
        try:
            # This table is the cache, so calendar_for does not keep one of its own.
            calendar = calendar_for(cron_expr, timezone, cache=False)
        except ScheduleError as exc:
            problem = str(exc)
        if problem is None and missed_fire_policy not in POLICIES:
            problem = f"unknown missed-fire policy {missed_fire_policy!r}"
        if key is None:
            key = self._key(cron_expr, timezone, missed_fire_policy)
        kind = Kind(cron_expr, timezone, missed_fire_policy,
                    calendar if problem is None else None, problem, key)
        if len(self._kinds) >= KIND_CACHE:
            # A row's kind is made again from its key when it is next needed.
            self._kinds.clear()
            self._keyed.clear()
        self._kinds[(cron_expr, timezone, missed_fire_policy)] = self._keyed[key] = kind
        return kind

    def _first_due_at(self, calendar: Calendar, last_enqueued_at: datetime | None,
                      created_at: datetime, last_us: int, created_us: int,
                      known: dict[tuple[Calendar, object, int], float | None] | None,
                      ) -> float | None:
        """Return :meth:`first_due`, given the two instants in microseconds too, and
        the batch's memo of answers (None: not asked, because there is no batch, or no
        row handled before can share the answer since its calendar is new)."""
        # Awa fires a new row's latest fire in [floor(created_at - 60 s), now], and a
        # fired row's first fire after its cursor, so the answer depends on the calendar
        # (one object per kind) and that instant alone. A datetime keeps its hash, and
        # rows read together share theirs. The fold tells apart two instants of one
        # repeated wall time, which compare equal.
        new = last_enqueued_at is None
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
