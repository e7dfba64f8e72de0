"""The evaluator's reads of ``awa.cron_jobs`` and the fire statement.

The evaluator holds every row in memory, so its reads differ from the other parts': they
stream plain rows (:class:`~.records.CronRow`) from one snapshot instead of building a list,
share the repeated strings and timestamps among the rows, and read only the columns the
evaluator needs. The fire is one statement per batch: a compare-and-swap on each row's
cursor that inserts the jobs of the requests that won it.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import pq
from psycopg.adapt import Loader

from .._config import DEFAULT_CLOCK_TOLERANCE
from ..errors import DatabaseUnavailable, first_line
from .database import one_row, wrap_errors
from .records import (
    RETIRED_BY,
    WINDOW_SKIPPED,
    BufferedStart,
    CronRow,
    CronState,
    FiredJob,
    FireRequest,
    FireResult,
    TableState,
)
from .sql import queries

if TYPE_CHECKING:
    from .database import Database


def _cron_state(r: Sequence[Any]) -> CronState:
    # Expressions, zones and policies repeat across rows, so each is interned: the rows
    # share one string instead of holding one each.
    shared: list[Any] = [sys.intern(v) if type(v) is str else v for v in r[1:4]]
    return CronState(r[0], *shared, *r[4:])


#: Builds a :class:`CronRow` from the tuple the driver read. It skips the length check of
#: ``CronRow._make``, because the statements name the eight columns themselves.
_CRON_ROW: Callable[[Sequence[Any]], CronRow] = functools.partial(tuple.__new__, CronRow)


def _cron_rows(cursor: Any) -> Callable[[Sequence[Any]], CronRow]:
    """Return a psycopg row factory that makes each row of the evaluator's readers a
    :class:`CronRow` as the driver reads it."""
    return _CRON_ROW


def _opened(stream: Iterator[Any]) -> tuple[TableState, Iterator[CronRow]]:
    """Return the fingerprint that ``stream`` yields first, and the stream of rows after
    it. Starting the generator here runs its query now, while the caller waits for the
    fingerprint. A started generator that is dropped unwinds its ``with`` blocks, so its
    connection goes back to the pool even when the rows are not all read."""
    state = next(stream, None)
    assert isinstance(state, TableState)  # each reader yields its fingerprint first
    return state, stream


_TIMESTAMPTZ = psycopg.postgres.types["timestamptz"].oid


def _text_loader(oid: int) -> type[psycopg.abc.Loader]:
    loader = psycopg.adapters.get_loader(oid, pq.Format.TEXT)
    if loader is None:  # psycopg has one for every built-in type
        raise ImportError(f"psycopg has no text loader for the type of oid {oid}")
    return loader


_PARSE_TIMESTAMPTZ = _text_loader(_TIMESTAMPTZ)
#: How many distinct instants one cursor's reader remembers. Rows with timestamps of
#: their own would otherwise make it grow with the table.
SHARED_INSTANTS = 65536


class _SharedInstants(Loader):
    """psycopg's timestamptz reader, returning one object per distinct instant that the
    cursor reads. Rows synced in one statement or fired in one batch have the same
    timestamps, so the text of a repeated value is looked up instead of parsed, and the
    rows the evaluator holds share one object."""

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        self._parse = _PARSE_TIMESTAMPTZ(oid, context).load  # with the session's zone
        self._seen: dict[bytes, datetime] = {}

    def load(self, data: Any) -> datetime:
        key = bytes(data)
        instant = self._seen.get(key)
        if instant is None:
            if len(self._seen) >= SHARED_INSTANTS:
                self._seen.clear()
            instant = self._seen[key] = self._parse(data)
        return instant


def _sharing_instants(cur: Any) -> Any:
    """Make ``cur`` read each distinct timestamptz as one object
    (:class:`_SharedInstants`), and return it."""
    cur.adapters.register_loader(_TIMESTAMPTZ, _SharedInstants)
    return cur


class EvaluatorStore:
    """The evaluator's reads and the fire, on a :class:`~.database.Database`'s pool."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- the evaluator's view: lean rows, since it holds every one in memory --------------

    def cron_states(self) -> tuple[TableState, Iterator[CronRow]]:
        """The table's fingerprint and every row (the evaluator's columns), from one
        snapshot. The rows are streamed from a server-side cursor as the caller reads
        them, so that a million rows never sit in memory as a list; the connection
        goes back to the pool once the last row is read or the iterator is dropped."""
        return _opened(self._cron_states())

    def _cron_states(self) -> Iterator[TableState | CronRow]:
        with self.db.connection() as conn, wrap_errors("reading schedules"), conn.transaction():
            conn.execute(queries["repeatable_read"])
            yield TableState(*one_row(conn.execute(queries["table_fingerprint"]).fetchone(),
                                      "reading schedules"))
            with _sharing_instants(conn.cursor(name="awa_beat_cron_states",
                                               row_factory=_cron_rows)) as cur:
                cur.execute(queries["cron_states"])
                while batch := cur.fetchmany(5000):
                    yield from batch

    def cron_names(self) -> list[str]:
        """The name of every row."""
        with self.db.connection() as conn, wrap_errors("reading schedules"):
            return [r[0] for r in conn.execute(queries["cron_names"])]

    def cron_states_after(self, after: str, limit: int) -> tuple[str | None, list[CronRow]]:
        """A slice of the rows in name order (see :meth:`Engine.sweep
        <awa_beat._engine.engine.Engine.sweep>`): those after ``after``, at most
        ``limit``; with the last name read, or None when the slice reached the end."""
        with self.db.connection() as conn, wrap_errors("reading schedules"):
            rows = _sharing_instants(conn.cursor(row_factory=_cron_rows)).execute(
                queries["cron_states_after"], {"after": after, "limit": limit}).fetchall()
        return (rows[-1].name if len(rows) == limit else None), rows

    def cron_states_by_name(self, names: Sequence[str]) -> list[CronState]:
        """The rows that still exist among ``names``."""
        with self.db.connection() as conn, wrap_errors("reading schedules"):
            return [_cron_state(r) for r in conn.execute(queries["cron_states_by_name"],
                                                         {"names": list(names)})]

    def changes(self, since: datetime, seen_xmin: int | None = None,
                ) -> tuple[TableState, Iterator[CronRow]]:
        """The table's fingerprint and the rows whose ``updated_at`` is after ``since``,
        less those written by transactions below ``seen_xmin`` (the ``xmin`` of an
        earlier read's :class:`TableState`, which returned them). The rows are streamed
        as the caller reads them, as in :meth:`cron_states`: after a burst of fires,
        every fired row comes back once."""
        return _opened(self._changes(since, seen_xmin))

    def _changes(self, since: datetime, seen_xmin: int | None,
                 ) -> Iterator[TableState | CronRow]:
        make = _CRON_ROW
        state = None
        with self.db.connection() as conn, wrap_errors("reading schedule changes"):
            for r in _sharing_instants(conn.cursor()).stream(queries["changed_schedules"],
                                          {"since": since, "seen_xmin": seen_xmin}, size=500):
                if state is None:
                    # The statement's first row always carries the fingerprint.
                    state = TableState(*r[:4])
                    yield state
                if r[4] is not None:
                    yield make(r[4:])

    # -- firing --------------------------------------------------------------------------

    def fire(self, requests: Sequence[FireRequest]) -> FireResult:
        """Fire every request in one atomic statement (``fire_batch`` in queries.sql).

        A request whose compare-and-swap fails (another replica fired it, or it was
        paused meanwhile) yields no job. If the batch fails as a whole (a row that
        another deployment wrote may break an insert), each request is retried on its
        own so that one bad row cannot stop the others.
        """
        result = FireResult()
        requests = [r for r in requests if r.fire_times or r.windowed is not None]
        if not requests:
            return result
        try:
            fired = self._fire_batch(requests)
            for j, held in fired:
                if j.job_id:
                    result.jobs.append(j)
                elif not j.fire_time:
                    result.ahead.append(j.name)
                elif j.fire_time == WINDOW_SKIPPED:
                    result.windowed.append(j)
                elif held:
                    result.buffered.append(j)
                else:
                    result.skipped.append(j)
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(f"firing failed: {first_line(exc)}") from exc
        except psycopg.Error as exc:
            if len(requests) == 1:
                result.failed[requests[0].name] = first_line(exc)
                return result
            for request in requests:
                single = self.fire([request])
                result.jobs += single.jobs
                result.skipped += single.skipped
                result.buffered += single.buffered
                result.ahead += single.ahead
                result.windowed += single.windowed
                result.failed.update(single.failed)
        return result

    def _fire_batch(self, requests: Sequence[FireRequest]) -> list[tuple[FiredJob, bool]]:
        with self.db.connection() as conn:
            rows = conn.execute(self.db.layout.fire_statement,
                                fire_params(requests, self.db.clock_tolerance)).fetchall()
        return [(FiredJob(int(job_id or 0), name, fire_time or "", updated_at), held)
                for job_id, name, fire_time, updated_at, held in rows]

    def fire_buffered(self) -> BufferedStart:
        """Start the fires that overlap buffer_one holds whose blocking run has finished
        (``fire_buffered`` in queries.sql): each gets one job, across replicas, and
        becomes the run that blocks its schedule. Returns the jobs, and how many fires
        remain held (for the caller to look again while any does)."""
        with self.db.connection() as conn, wrap_errors("starting held fires"):
            rows = conn.execute(self.db.layout.statements["fire_buffered"],
                                {"retired_by": RETIRED_BY}).fetchall()
        started = BufferedStart()
        for job_id, name, fire_time, updated_at, still_held in rows:
            if job_id is None:
                started.still_held = int(still_held or 0)
            else:
                started.jobs.append(FiredJob(int(job_id), name, fire_time, updated_at))
        return started


def fire_params(requests: Sequence[FireRequest],
                clock_tolerance: float = DEFAULT_CLOCK_TOLERANCE) -> dict[str, Any]:
    """Bind parameters of the fire statement: parallel arrays, one round trip in all;
    no fire is dated later than the database's now() plus ``clock_tolerance`` seconds."""
    coalesced = [(r.name, r.coalesced) for r in requests if r.coalesced is not None]
    windowed = [(r.name, r.windowed) for r in requests if r.windowed is not None]
    # Nearly every batch has no jitter: its run times are then one NULL, which the
    # statement pads, rather than an array as long as the fires.
    run_ats: list[datetime | None] | None = None
    if any(r.run_ats is not None for r in requests):
        run_ats = [t for r in requests
                   for t in (r.run_ats if r.run_ats is not None
                             else [None] * len(r.fire_times))]
    return {
        "names": [r.name for r in requests],
        "expected": [r.expected for r in requests],
        "cursors": [r.cursor for r in requests],
        "counts": [len(r.fire_times) for r in requests],
        "fire_names": [r.name for r in requests for _ in r.fire_times],
        "fire_times": [t for r in requests for t in r.fire_times],
        "fire_seqs": [i for r in requests for i in range(1, len(r.fire_times) + 1)],
        "limited": [r.name for r in requests if r.limited],
        "retired_by": RETIRED_BY,
        "coalesced_names": [name for name, _ in coalesced],
        "coalesced_first": [c.first for _, c in coalesced],
        "coalesced_last": [c.last for _, c in coalesced],
        "coalesced_counts": [c.count for _, c in coalesced],
        "fire_run_ats": run_ats,
        "window_names": [name for name, _ in windowed],
        "window_first": [w.first for _, w in windowed],
        "window_last": [w.last for _, w in windowed],
        "window_counts": [w.count for _, w in windowed],
        "window_reasons": [w.reason for _, w in windowed],
        "clock_tolerance": float(clock_tolerance),
    }
