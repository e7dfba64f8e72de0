"""All of awa-beat's database access: schedules in ``awa.cron_jobs``, jobs in ``awa.jobs``.

Every statement is a named query from ``sql/queries.sql`` with bound parameters.
Sessions run in UTC with ISO dates, so timestamps cast to text in SQL come out
exactly as Awa writes them (``2026-12-02 09:03:00+00``) whatever the server's
defaults are. psycopg errors are turned into :class:`~awa_beat.errors.StoreError`
here and never leak further.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import pickle
import socket
import sys
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import psycopg
import psycopg.types.json
from psycopg import pq
from psycopg.adapt import Loader
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from .._config import DEFAULT_CLOCK_TOLERANCE, redact
from ..errors import (
    DatabaseUnavailable,
    DataRefused,
    NotFound,
    SchemaError,
    StoreError,
    WriteNotApplied,
    first_line,
)
from . import schema
from .records import (
    RETIRED_BY,
    Contact,
    CronRow,
    CronState,
    Fence,
    FiredJob,
    FireRequest,
    FireResult,
    OutboxBacklog,
    ScheduleRow,
    SyncResult,
    TableState,
)
from .sql import queries, statements

if TYPE_CHECKING:
    from typing_extensions import LiteralString

# The logger keeps the name it had before the modules moved into layer packages, so
# logging configurations that select it by name go on working.
logger = logging.getLogger('awa_beat.store')


#: Seconds to wait for a pooled connection before the operation fails (and is retried).
POOL_TIMEOUT = 5.0
#: Connections a start-up sync compares its batches on at once (the pool has four).
SYNC_CONNECTIONS = 3


def keepalives(timeout: float) -> dict[str, int]:
    """libpq's TCP settings under which a peer that stopped answering is given up on
    after about ``timeout`` seconds: idle probes for a quiet connection, a user timeout
    for data the peer never acknowledges."""
    step = max(1, round(timeout / 4))
    return {"keepalives": 1, "keepalives_idle": step, "keepalives_interval": step,
            "keepalives_count": 2, "tcp_user_timeout": int(timeout * 1000)}


#: Seconds after which a pooled connection's silent peer is given up on: a statement
#: sent into a partition fails instead of waiting for the OS's retransmissions (minutes).
POOL_PEER_TIMEOUT = 30.0
KEEPALIVES = keepalives(POOL_PEER_TIMEOUT)


def process_identity() -> str:
    """``host:pid`` of this process: how beat names itself in its bookkeeping."""
    return f"{socket.gethostname()}:{os.getpid()}"


def configure_session(conn: psycopg.Connection, origin: str = "") -> None:
    """Make timestamps render as Awa renders them, whatever the server defaults are, and
    tag the session with ``origin`` (the change notifications carry it)."""
    conn.execute(queries["configure_session"], {"origin": origin})  # one round trip
    # Never prepare statements server-side: a prepared statement soon runs a generic plan,
    # which cannot see how long the array parameters are. For a fire batch of 2,000 that
    # plan joins row by row, many times slower; planning each statement afresh is cheap
    # next to that (docs/performance.md).
    conn.prepare_threshold = None


def connect(conninfo: str, **kwargs: Any) -> psycopg.Connection:
    """A dedicated autocommit connection in a UTC session (for locks and LISTEN)."""
    try:
        conn = psycopg.connect(conninfo, autocommit=True, **{**KEEPALIVES, **kwargs})
    except psycopg.Error as exc:
        raise DatabaseUnavailable(f"cannot connect to {redact(conninfo)}: {first_line(exc)}"
                                  ) from None
    configure_session(conn)
    return conn


#: SQLSTATE classes of errors the data causes: 22 data exception (a value out of range,
#: text that is not valid UTF-8), 54 program limit exceeded (an index entry or a JSON
#: value too large, nesting too deep). psycopg files class 54 under OperationalError,
#: with lost connections: such an error must not read as an outage.
DATA_ERROR_CLASSES = ("22", "54")


def is_data_error(exc: BaseException) -> bool:
    """Whether ``exc`` is PostgreSQL (or the driver, encoding a parameter) refusing the
    data itself: retrying cannot help."""
    if isinstance(exc, UnicodeEncodeError):
        return True
    state = getattr(exc, "sqlstate", None)
    return isinstance(state, str) and state[:2] in DATA_ERROR_CLASSES


def typed_error(exc: psycopg.Error, message: str) -> StoreError:
    """The awa-beat error for a psycopg one: callers tell a lost database (retry) from a
    missing schema (migrate) from data the server refused (fix the entry) from anything
    else the server refused, without psycopg."""
    if isinstance(exc, (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName)):
        return SchemaError(message)
    if isinstance(exc, psycopg.errors.ObjectNotInPrerequisiteState):
        # SQLSTATE 55000: the row is in a state that forbids the write (a newer Awa's
        # trigger refuses to delete a row another owner holds). Checked first: psycopg
        # files it under OperationalError, which would read as an outage to retry.
        return WriteNotApplied(message)
    if is_data_error(exc):
        return DataRefused(message)
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return DatabaseUnavailable(message)
    return StoreError(message)


@contextmanager
def wrap_errors(action: str) -> Iterator[None]:
    """Turn a psycopg error into a typed StoreError that says what we were doing."""
    try:
        yield
    except psycopg.Error as exc:
        raise typed_error(exc, f"{action} failed: {first_line(exc)}") from exc
    except UnicodeEncodeError as exc:  # the driver encoding a parameter, before sending
        raise DataRefused(f"{action} failed: a value is not text PostgreSQL stores "
                          f"({exc.reason}: {exc.object[exc.start:exc.end]!r})") from exc


def one_row(row: tuple[Any, ...] | None, action: str) -> tuple[Any, ...]:
    """The row of a statement that always returns one (an aggregate, ``now()``)."""
    if row is None:
        raise StoreError(f"{action} failed: the database returned no row")
    return row


def clock_skew(sent: float, db_now: float, received: float) -> float:
    """Seconds the database's clock is ahead of this host's (negative: behind), from one
    round trip: the server read its clock, ``db_now``, between ``sent`` and ``received``
    (this host's epoch seconds), taken as their midpoint; the error is at most half the
    round trip."""
    return db_now - (sent + received) / 2


def read_skew(conn: psycopg.Connection, wall: Callable[[], float] = time.time) -> float:
    """:func:`clock_skew` over one round trip on ``conn``, ``wall`` this host's clock."""
    sent = wall()
    row = conn.execute(queries["database_clock"]).fetchone()
    received = wall()
    return clock_skew(sent, one_row(row, "reading the database clock")[0].timestamp(),
                      received)


def changed(conn: psycopg.Connection, row: Any, name: str, action: str) -> Any:
    """``row``, what a write that must change ``name``'s row returned. When it is None
    the write changed nothing: :class:`NotFound` if no such row exists, else
    :class:`WriteNotApplied` (a trigger or rule of the database skipped it), never a
    silent success."""
    if row is not None:
        return row
    if conn.execute(queries["schedule_exists"], {"name": name}).fetchone() is None:
        raise NotFound(f"no schedule named {name!r}")
    raise WriteNotApplied(f"{action} {name!r} changed nothing: the database skipped the "
                          "write (a trigger or rule on awa.cron_jobs); nothing was written")


def _json(value: Any) -> Any:
    """A JSON column read as text (``::text``): a caller's connection may load JSON its
    own way (Django's leaves it as a string)."""
    return json.loads(value) if isinstance(value, str) else value


def _cron_state(r: Sequence[Any]) -> CronState:
    # Expressions, zones and policies repeat across rows: one string each, not one per row.
    shared: list[Any] = [sys.intern(v) if type(v) is str else v for v in r[1:4]]
    return CronState(r[0], *shared, *r[4:])


#: Builds a :class:`CronRow` from the tuple the driver read, without the length check of
#: ``CronRow._make``: the statements name the eight columns themselves.
_CRON_ROW: Callable[[Sequence[Any]], CronRow] = functools.partial(tuple.__new__, CronRow)


def _cron_rows(cursor: Any) -> Callable[[Sequence[Any]], CronRow]:
    """A psycopg row factory that makes each row of the evaluator's readers a
    :class:`CronRow` as the driver reads it."""
    return _CRON_ROW


def _opened(stream: Iterator[Any]) -> tuple[TableState, Iterator[CronRow]]:
    """The fingerprint that ``stream`` yields first, and the stream of rows after it.
    Starting the generator here runs its query now, while the caller waits for the
    fingerprint; a started generator that is dropped unwinds its ``with`` blocks, so
    its connection goes back to the pool even when the rows are not all read."""
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
#: Distinct instants one cursor's reader remembers; rows with timestamps of their own
#: would otherwise make it grow with the table.
SHARED_INSTANTS = 65536


class _SharedInstants(Loader):
    """psycopg's timestamptz reader, returning one object per distinct instant read by
    the cursor. Rows synced in one statement or fired in one batch have the same
    timestamps: the text of a repeated value is looked up instead of parsed, and the
    rows held share its object."""

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
    """``cur``, reading each distinct timestamptz as one object (:class:`_SharedInstants`)."""
    cur.adapters.register_loader(_TIMESTAMPTZ, _SharedInstants)
    return cur


#: See migration 0007; the payload is the table's name.
CHANGE_CHANNEL = "awa_beat_changes"


class Store:
    """Schedules and jobs in one PostgreSQL database, through a small connection pool.

    Call :meth:`open` (or use ``with``) before anything else; it finds out whether Awa
    owns the ``awa`` schema, which decides how jobs are inserted.
    """

    def __init__(self, conninfo: str, *, min_size: int = 1, max_size: int = 4,
                 timeout: float = POOL_TIMEOUT, origin: str = "") -> None:
        self.conninfo = conninfo
        self.origin = origin
        """Tags this store's writes in change notifications (see :attr:`change_channel`)."""
        self._pool = ConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            open=False,
            configure=functools.partial(configure_session, origin=origin),
            kwargs={"autocommit": True, **KEEPALIVES},
            timeout=timeout,
            name="awa-beat",
        )
        self.awa_owned = False
        self.clock_tolerance = DEFAULT_CLOCK_TOLERANCE
        """Seconds past the database's now() a fire may be dated (the fire statement
        refuses later ones, whatever this host's clock says)."""
        self.contact = Contact(time.monotonic)
        """When an operation last reached the database, or failed to (``/readyz``)."""

    @property
    def change_channel(self) -> str | None:
        """The channel NOTIFYed when ``awa.cron_jobs`` changes or a job is inserted (the
        payload: the table's name, a space, the writer's origin), or None where Awa owns
        those tables and they carry no trigger of ours."""
        return None if self.awa_owned else CHANGE_CHANNEL

    def __repr__(self) -> str:
        return f"<Store {redact(self.conninfo)}>"

    def open(self, *, timeout: float = 10.0, conn: psycopg.Connection | None = None,
             wait: bool = True) -> Store:
        """Find out the layout, then open the pool.

        The layout is read on ``conn`` if given (an autocommit connection to the same
        database, left open), else on a direct connection opened for it. Either way
        a database that cannot be reached fails here, at once and with the server's
        own reason, where the pool would retry quietly until its timeout. The pool's
        first connection opens while the layout is read; with ``wait`` false, open
        returns without waiting for it (see :meth:`wait`).
        """
        with (nullcontext(conn) if conn is not None else
              connect(self.conninfo, connect_timeout=max(1, int(timeout)))) as direct:
            # The server answers: the pool starts connecting (no earlier, so that an
            # unreachable database is reported once, by the direct connection).
            self._pool.open(wait=False)
            try:
                with wrap_errors("reading the schema"):
                    # Every surface opens a store (beat, the CLI, the API, the dashboard):
                    # each refuses here, in one line, a table it does not know.
                    self.awa_owned = schema.check_layout(direct) is not None
            except BaseException:
                self._pool.close()
                raise
        if wait:
            self.wait(timeout)
        return self

    def wait(self, timeout: float = 10.0) -> None:
        """Wait for the pool's first connection (after ``open(wait=False)``);
        :class:`DatabaseUnavailable`, with the pool closed, if none comes in time."""
        try:
            self._pool.wait(timeout)
        except Exception as exc:
            self._pool.close()
            raise DatabaseUnavailable(f"cannot connect to {redact(self.conninfo)}: {exc}"
                                      ) from None

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> Store:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connection(self) -> AbstractContextManager[psycopg.Connection]:
        """A connection of the pool, for the ``with`` block (:class:`StoreError` if none
        can be had)."""
        return self._conn()

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection]:
        try:
            with self._pool.connection() as conn:
                yield conn
        except (PoolTimeout, PoolClosed) as exc:
            # No connection could be had (the database is down, or the store was closed).
            self.contact.failed()
            raise DatabaseUnavailable(f"no database connection: {first_line(exc)}") from exc
        except (DatabaseUnavailable, psycopg.OperationalError, psycopg.InterfaceError) as exc:
            if is_data_error(exc):  # refused by a server that answers
                self.contact.refused()
            else:
                self.contact.failed()
            raise
        except (StoreError, psycopg.Error):
            # A refused statement came back from a server that answers: an error, but
            # the database is reachable.
            self.contact.refused()
            raise
        self.contact.ok()

    def _on(self, conn: psycopg.Connection | None) -> AbstractContextManager[psycopg.Connection]:
        """The caller's ``conn`` (its statement joins the caller's transaction, if one is
        open), else a connection of the pool."""
        return nullcontext(conn) if conn is not None else self._conn()

    # -- schema ----------------------------------------------------------------------

    def migrate(self) -> schema.SchemaInfo:
        with self._conn() as conn:
            info = schema.migrate(conn)
        self.awa_owned = info.awa_owned
        return info

    def check_layout(self) -> None:
        """:func:`schema.check_layout` again: Awa may have been migrated since :meth:`open`
        (:class:`~awa_beat.errors.UnknownSchema`)."""
        with self._conn() as conn, wrap_errors("checking the schema"):
            schema.check_layout(conn)

    def check_schema(self, conn: psycopg.Connection | None = None) -> schema.SchemaInfo:
        """:func:`schema.check`, on ``conn`` if given (an autocommit connection, left
        open), else on a connection of the pool."""
        with self._on(conn) as c, wrap_errors("checking the schema"):
            return schema.check(c)

    # -- schedules ---------------------------------------------------------------------

    def sync(self, rows: Sequence[dict[str, Any]] | SyncBatch, *,
             deployment: str | None = None) -> SyncResult:
        """Upsert schedule rows (``awa.cron_jobs`` columns, or a :class:`SyncBatch` of
        them) in one round trip; never deletes."""
        if isinstance(rows, SyncBatch):
            batch = rows
        elif deployment is None:
            raise TypeError("sync() needs the deployment that registers the rows")
        else:
            batch = SyncBatch.encode(rows, deployment)
        if not batch.size:
            return SyncResult(0, 0, 0)
        with self._conn() as conn, wrap_errors("syncing schedules"):
            row = conn.execute(queries["upsert_schedules"], batch.params).fetchone()
        assert row is not None  # an aggregate: always one row
        inserted, updated = int(row[0]), int(row[1])
        return SyncResult(inserted, updated, batch.size - inserted - updated, int(row[2]))

    def sync_all(self, batches: Sequence[SyncBatch], *,
                 connections: int = SYNC_CONNECTIONS) -> SyncResult:
        """:meth:`sync` every batch of one configuration (their names are disjoint), on
        up to ``connections`` of the pool at once. Comparing a batch with the stored
        rows is the server's work, one backend per statement: a large configuration is
        compared on as many server cores, where one connection used one. Each batch
        commits on its own, as :meth:`sync` does; the first error stops the rest."""
        workers = min(connections, len(batches), self._pool.max_size)
        if workers <= 1:
            results = [self.sync(batch) for batch in batches]
        else:
            from concurrent.futures import ThreadPoolExecutor  # a large start-up sync only

            pool = ThreadPoolExecutor(workers, thread_name_prefix="awa-beat-sync")
            try:
                results = list(pool.map(self.sync, batches))
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
        return SyncResult.total(results)

    def config_in_force(self, deployment: str, digest: str) -> bool:
        """Whether ``deployment``'s rows are stored as its last start-up sync of the
        configuration ``digest`` left them (nothing written to a definition or an owner
        since): a start with that configuration would write nothing."""
        with self._conn() as conn, wrap_errors("reading the stored configuration"):
            row = conn.execute(queries["config_in_force"],
                               {"deployment": deployment, "digest": digest}).fetchone()
        return bool(row and row[0])

    def record_config(self, deployment: str, digest: str, synced: SyncResult) -> None:
        """After a whole sync of the configuration ``digest`` (``synced``: its total), for
        :meth:`config_in_force` at the next start."""
        with self._conn() as conn, wrap_errors("recording the synced configuration"):
            conn.execute(queries["record_config_sync"], {
                "deployment": deployment, "digest": digest, "row_count": synced.rows,
                "fingerprint": synced.fingerprint})

    def analyze_if_stale(self, conn: psycopg.Connection | None = None) -> bool:
        """Refresh the planner's statistics of ``awa.cron_jobs`` when they are missing or
        far from the table's size; True if it did. Where this role may not ANALYZE the
        table, autovacuum will, in time. On ``conn`` if given (an autocommit connection,
        left open), else on a connection of the pool.

        After a bulk insert and before autovacuum gets to it, the planner takes the table
        for nearly empty and can join a fire batch against it row by row, which on a
        large table makes each batch orders of magnitude slower (docs/performance.md).
        """
        try:
            with self._on(conn) as c:
                (stale,) = one_row(c.execute(queries["cron_jobs_stats_stale"]).fetchone(),
                                   "reading the table's statistics")
                if stale:
                    c.execute(queries["analyze_cron_jobs"])
        except psycopg.Error as exc:  # not the table's owner
            logger.info("awa-beat: cannot ANALYZE awa.cron_jobs (%s); relying on autovacuum",
                        first_line(exc))
            return False
        return bool(stale)

    def schedules(self, pattern: str | None = None) -> list[ScheduleRow]:
        """Every schedule (``pattern`` is a SQL LIKE pattern on the name), by name."""
        with self._conn() as conn, wrap_errors("listing schedules"):
            cur = conn.cursor(row_factory=dict_row)
            return [ScheduleRow(**r) for r in cur.execute(queries["list_schedules"],
                                                          {"pattern": pattern})]

    # -- the evaluator's view: lean rows, since it holds every one in memory --------------

    def cron_states(self) -> tuple[TableState, Iterator[CronRow]]:
        """The table's fingerprint and every row (the evaluator's columns), from one
        snapshot. The rows are streamed from a server-side cursor as the caller reads
        them, so that a million rows never sit in memory as a list; the connection
        goes back to the pool once the last row is read or the iterator is dropped."""
        return _opened(self._cron_states())

    def _cron_states(self) -> Iterator[TableState | CronRow]:
        with self._conn() as conn, wrap_errors("reading schedules"), conn.transaction():
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
        with self._conn() as conn, wrap_errors("reading schedules"):
            return [r[0] for r in conn.execute(queries["cron_names"])]

    def cron_states_after(self, after: str, limit: int) -> tuple[str | None, list[CronRow]]:
        """A slice of the rows in name order (see :meth:`Engine.sweep
        <awa_beat._engine.engine.Engine.sweep>`): those after ``after``, at most
        ``limit``; with the last name read, or None when the slice reached the end."""
        with self._conn() as conn, wrap_errors("reading schedules"):
            rows = _sharing_instants(conn.cursor(row_factory=_cron_rows)).execute(
                queries["cron_states_after"], {"after": after, "limit": limit}).fetchall()
        return (rows[-1].name if len(rows) == limit else None), rows

    def cron_states_by_name(self, names: Sequence[str]) -> list[CronState]:
        """The rows that still exist among ``names``."""
        with self._conn() as conn, wrap_errors("reading schedules"):
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
        with self._conn() as conn, wrap_errors("reading schedule changes"):
            for r in _sharing_instants(conn.cursor()).stream(queries["changed_schedules"],
                                          {"since": since, "seen_xmin": seen_xmin}, size=500):
                if state is None:
                    # The statement's first row always carries the fingerprint.
                    state = TableState(*r[:4])
                    yield state
                if r[4] is not None:
                    yield make(r[4:])

    def orphaned_names(self, deployment: str, configured: Sequence[str]) -> list[str]:
        """Names that ``deployment`` registered from its configuration and that are not
        among ``configured`` (rows its beat_schedule no longer has)."""
        with self._conn() as conn, wrap_errors("reading schedules"):
            return [r[0] for r in conn.execute(queries["orphaned_names"], {
                "deployment": deployment, "names": list(configured)})]

    def runtime_owned_names(self, names: Sequence[str]) -> list[str]:
        """Which of ``names`` were written at run time (a beat's sync skips those)."""
        with self._conn() as conn, wrap_errors("reading schedule owners"):
            return [r[0] for r in conn.execute(queries["runtime_owned_names"],
                                               {"names": list(names)})]

    # -- runtime writes (the Python API, `awa-beat add/edit`) ------------------------------

    @contextmanager
    def transaction(self, conn: psycopg.Connection | None = None
                    ) -> Iterator[psycopg.Connection]:
        """A transaction for the ``with`` block: on a connection of the pool, or on the
        caller's ``conn``, joined to its transaction when one is open (as a savepoint,
        so that an error of ours undoes only our writes) and committed at the end of
        the block otherwise.

        The caller's connection keeps its session as it is (no ``configure_session``):
        the statements run here depend on no session setting.
        """
        if conn is None:
            with self._conn() as own, wrap_errors("writing schedules"), own.transaction():
                yield own
            return
        with wrap_errors("writing schedules"):
            if (not conn.autocommit
                    and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE):
                # A transaction block opened on an idle non-autocommit connection (Django
                # inside atomic() before its first query) would COMMIT the caller's
                # transaction at its end; start that transaction first, so the block is
                # a savepoint inside it.
                psycopg.Cursor(conn).execute(queries["ping"], prepare=False)
            with conn.transaction():
                yield conn

    @staticmethod
    def lock_schedules(conn: psycopg.Connection, names: Sequence[str]) -> list[ScheduleRow]:
        """The stored rows among ``names``, with their owners, locked FOR UPDATE in
        ``conn``'s transaction (see :meth:`transaction`)."""
        # A cursor of psycopg's own, whatever the caller's connection makes (Django's
        # binds client-side, which binary parameters do not allow), and never a
        # prepared statement: a generic plan cannot see the arrays' lengths.
        cur = psycopg.Cursor(conn, row_factory=dict_row)
        rows = cur.execute(queries["lock_schedules"], {"names": list(names)},
                           prepare=False).fetchall()
        return [ScheduleRow(**{**r, "args": _json(r["args"]), "metadata": _json(r["metadata"])})
                for r in rows]

    @staticmethod
    def upsert_runtime(conn: psycopg.Connection, rows: Sequence[dict[str, Any]], *,
                       deployment: str, replace: bool) -> SyncResult:
        """Write schedule rows as owner 'runtime' in ``conn``'s transaction, one round
        trip. Without ``replace`` an existing name is skipped (counted as unchanged)."""
        if not rows:
            return SyncResult(0, 0, 0)
        params = {**sync_params(rows, deployment), "replace": replace}
        row = psycopg.Cursor(conn).execute(queries["upsert_runtime_schedules"], params,
                                           prepare=False).fetchone()
        inserted, updated, skipped = (int(row[0]), int(row[1]), row[2]) if row else (0, 0, [])
        if replace and skipped:
            # Every row is written when replacing: one that was not, the database skipped.
            raise WriteNotApplied(
                f"writing {', '.join(map(repr, skipped))} changed nothing: the database "
                "skipped the write (a trigger or rule on awa.cron_jobs); nothing was written")
        return SyncResult(inserted, updated, len(rows) - inserted - updated)

    @staticmethod
    def unretire(conn: psycopg.Connection, name: str) -> bool:
        """Resume the retired schedule ``name`` in ``conn``'s transaction if runs are left
        under its run limit (or it has none); whether it was."""
        with wrap_errors(f"resuming retired {name!r}"):
            row = psycopg.Cursor(conn).execute(
                queries["unretire_schedule"], {"name": name, "retired_by": RETIRED_BY},
                prepare=False).fetchone()
        return row is not None

    def get_many(self, names: Sequence[str]) -> list[ScheduleRow]:
        """The full rows that exist among ``names`` (in no particular order)."""
        with self._conn() as conn, wrap_errors("reading schedules"):
            cur = conn.cursor(row_factory=dict_row)
            return [ScheduleRow(**r) for r in cur.execute(queries["get_schedules"],
                                                          {"names": list(names)})]

    def get(self, name: str) -> ScheduleRow:
        with self._conn() as conn, wrap_errors(f"reading schedule {name!r}"):
            cur = conn.cursor(row_factory=dict_row)
            row = cur.execute(queries["get_schedule"], {"name": name}).fetchone()
        if row is None:
            raise NotFound(f"no schedule named {name!r}")
        return ScheduleRow(**row)

    def pause(self, name: str, by: str | None = None, *,
              conn: psycopg.Connection | None = None) -> datetime:
        with self._on(conn) as c, wrap_errors(f"pausing {name!r}"):
            row = c.execute(queries["pause_schedule"], {"name": name, "by": by}).fetchone()
            return changed(c, row, name, "pausing")[0]

    def resume(self, name: str, *, conn: psycopg.Connection | None = None) -> None:
        with self._on(conn) as c, wrap_errors(f"resuming {name!r}"):
            row = c.execute(queries["resume_schedule"], {"name": name}).fetchone()
            changed(c, row, name, "resuming")

    def trigger(self, name: str, *, conn: psycopg.Connection | None = None) -> int:
        """Insert one job for ``name`` now, even while paused; the cursor is left alone."""
        query = statements("awa" if self.awa_owned else "standalone")["trigger"]
        with self._on(conn) as c, wrap_errors(f"triggering {name!r}"):
            row = c.execute(query, {"name": name}).fetchone()
        if row is None:
            raise NotFound(f"no schedule named {name!r}")
        return int(row[0])

    def remove(self, name: str, *, conn: psycopg.Connection | None = None) -> bool:
        """Delete the schedule row; jobs it already fired stay. False if there was none;
        :class:`WriteNotApplied` if there is one and the database kept it."""
        with self._on(conn) as c, wrap_errors(f"removing {name!r}"):
            row = c.execute(queries["remove_schedule"], {"name": name}).fetchone()
            if not (row and row[0]):
                try:
                    changed(c, None, name, "removing")  # raises: which of the two?
                except NotFound:
                    return False
        return True

    def jobs(self, name: str, limit: int = 10) -> list[dict[str, Any]]:
        """The newest jobs fired (or triggered) for ``name``."""
        with self._conn() as conn, wrap_errors(f"reading jobs of {name!r}"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["jobs_for_schedule"],
                               {"name": name, "limit": limit}).fetchall()

    def recent_jobs(self, limit: int = 20) -> list[dict[str, Any]]:
        """The newest jobs fired or triggered from any schedule."""
        with self._conn() as conn, wrap_errors("reading jobs"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["recent_jobs"], {"limit": limit}).fetchall()

    def import_schedules(self, rows: Sequence[dict[str, Any]],
                         cursors: Sequence[datetime | None], paused_by: Sequence[str | None],
                         *, deployment: str, force: bool = False) -> list[dict[str, Any]]:
        """Upsert imported schedule rows (``awa-beat import``) in one round trip.

        As :meth:`sync`, plus each row's cursor from the old scheduler (``None``: unknown)
        and pause reason (``None``: active). New rows start at that cursor (else now) and
        are paused when a reason is given; existing rows get the new definition and their
        cursor only ever moves forward; their pause is left alone. One dict per row, by
        name: ``name, inserted, changed, cursor_before, cursor_after``. A row written at
        run time is left alone unless ``force``, which makes it configuration again.
        """
        if not rows:
            return []
        params = {**sync_params(rows, deployment), "cursors": list(cursors),
                  "paused_by": list(paused_by), "force": force}
        with self._conn() as conn, wrap_errors("importing schedules"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["import_schedules"], params).fetchall()

    # -- Celery dispatch bridge ------------------------------------------------------------

    def pending_celery_jobs(self, deployment: str, limit: int,
                            after: tuple[str, int] = ("", 0), fence: Fence | None = None,
                            ) -> list[dict[str, Any]]:
        """``deployment``'s jobs for Celery not yet accepted by the broker, in fire order,
        from the key after ``after``: the ``(fire_key, id)`` of the last job of the
        previous page. With a ``fence``, none unless its session still holds the lock."""
        with self._conn() as conn, wrap_errors("reading unpublished jobs"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["pending_celery_jobs"], {
                "deployment": deployment, "limit": limit, "after_fire": after[0],
                "after_id": after[1], "leader_pid": fence.backend_pid if fence else None,
                "lock_key": fence.lock_key if fence else None}).fetchall()

    def mark_published(self, ids: Sequence[int], task_ids: Sequence[str]) -> int:
        with self._conn() as conn, wrap_errors("marking jobs published"):
            cur = conn.execute(queries["mark_published"],
                               {"ids": list(ids), "task_ids": list(task_ids)})
            return cur.rowcount

    def mark_unpublishable(self, job_id: int, error: str) -> None:
        with self._conn() as conn, wrap_errors("marking a job failed"):
            conn.execute(queries["mark_unpublishable"], {"id": job_id, "error": error})

    def purge_published(self, retention: timedelta, limit: int) -> int:
        with self._conn() as conn, wrap_errors("deleting published jobs"):
            cur = conn.execute(queries["purge_published"],
                               {"retention": retention, "limit": limit})
            return cur.rowcount

    # -- outcomes (awa_beat/outcomes.py) ------------------------------------------------

    def record_outcomes(self, columns: dict[str, list[Any]]) -> None:
        """Upsert workers' reports: parallel arrays, one row per task id (see
        :func:`awa_beat.outcomes.outcome_params`)."""
        with self._conn() as conn, wrap_errors("recording outcomes"):
            conn.execute(queries["record_outcomes"], columns)

    def claim_outcome(self, **run: Any) -> bool:
        """Start the run of ``run["task_id"]`` unless one started already (at most once);
        a refused claim is counted as a duplicate delivery."""
        with self._conn() as conn, wrap_errors("claiming a run"):
            claimed = conn.execute(queries["claim_outcome"], run).fetchone() is not None
            if not claimed:
                conn.execute(queries["count_duplicate"], {"task_id": run["task_id"]})
        return claimed

    def purge_outcomes(self, retention: timedelta, limit: int = 5000) -> int:
        with self._conn() as conn, wrap_errors("deleting old outcomes"):
            row = conn.execute(queries["purge_outcomes"],
                               {"retention": retention, "limit": limit}).fetchone()
        return int(row[0]) if row else 0

    def schedule_history(self, name: str | None, limit: int, default_max_runtime: float
                         ) -> list[dict[str, Any]]:
        """Every occurrence of ``name`` (None: of every schedule), newest first (see
        ``schedule_history``)."""
        what = "the history" if name is None else f"the history of {name!r}"
        with self._conn() as conn, wrap_errors(f"reading {what}"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["schedule_history"], {
                "name": name, "limit": limit,
                "default_max_runtime": default_max_runtime}).fetchall()

    def overdue_candidates(self, default_max_runtime: float) -> list[dict[str, Any]]:
        with self._conn() as conn, wrap_errors("reading the last runs"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["overdue_candidates"],
                               {"default_max_runtime": default_max_runtime}).fetchall()

    # -- beats (for `awa-beat status`) -----------------------------------------------------

    def heartbeat(self, **beat: Any) -> None:
        with self._conn() as conn, wrap_errors("recording the heartbeat"):
            conn.execute(queries["beat_heartbeat"],
                         {"publishes": False, "clock_skew_ms": None, **beat})

    def beat_gone(self, identity: str) -> None:
        with self._conn() as conn, wrap_errors("removing the heartbeat"):
            conn.execute(queries["beat_gone"], {"identity": identity})

    def beats(self, window: timedelta = timedelta(seconds=60)) -> list[dict[str, Any]]:
        with self._conn() as conn, wrap_errors("reading beats"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["list_beats"], {"window": window}).fetchall()

    def outbox_backlogs(self) -> list[OutboxBacklog]:
        """Every deployment's jobs waiting for the broker, by deployment (none where Awa
        owns the tables: Celery dispatch is refused there)."""
        if self.awa_owned:
            return []
        with self._conn() as conn, wrap_errors("reading the outbox's backlog"):
            return [OutboxBacklog(*row) for row in conn.execute(queries["outbox_backlogs"])]

    def stranded_awa_jobs(self) -> dict[str, int]:
        """Jobs left for Awa workers where Awa is not installed, by deployment (none
        where Awa owns the tables: its workers run them)."""
        if self.awa_owned:
            return {}
        with self._conn() as conn, wrap_errors("counting jobs left for Awa workers"):
            return dict(conn.execute(queries["count_stranded_awa_jobs"]).fetchall())

    def clock_skew(self) -> float:
        """:func:`clock_skew` measured on a connection of its own (a caller may hold the
        pool's only one, in a transaction)."""
        with connect(self.conninfo, connect_timeout=5) as conn, \
                wrap_errors("reading the database clock"):
            return read_skew(conn)

    def database_clock(self) -> datetime:
        with self._conn() as conn, wrap_errors("reading the database clock"):
            row = conn.execute(queries["database_clock"]).fetchone()
        return one_row(row, "reading the database clock")[0]

    # -- the dashboard (awa-beat web, the Django admin) ----------------------------------

    def schedules_page(self, *, after: str | None = None, before: str | None = None,
                       limit: int = 50, search: str | None = None,
                       paused: bool | None = None, owner: str | None = None,
                       owned_by: str | None = None, names: Sequence[str] | None = None,
                       ) -> list[tuple[ScheduleRow, str | None]]:
        """Up to ``limit`` rows in name order after ``after`` (or the ones just before
        ``before``), each with its pause note, filtered in SQL: ``search`` lower-case
        text the name contains, ``paused``, ``owner`` a deployment ('' for rows no
        awa-beat registered), ``owned_by`` 'config' or 'runtime', ``names`` a set to
        narrow to."""
        params = {"after": after, "before": before, "limit": limit, "search": search,
                  "paused": paused, "owner": owner, "owned_by": owned_by,
                  "names": list(names) if names is not None else None}
        query = queries["schedules_page" if before is None else "schedules_page_before"]
        with self._conn() as conn, wrap_errors("listing schedules"):
            rows = conn.cursor(row_factory=dict_row).execute(query, params).fetchall()
        if before is not None:
            rows.reverse()
        return [(ScheduleRow(**{k: v for k, v in r.items() if k != "pause_note"}),
                 r["pause_note"]) for r in rows]

    def count_schedules(self, *, search: str | None = None, paused: bool | None = None,
                        owner: str | None = None, owned_by: str | None = None,
                        names: Sequence[str] | None = None, cap: int = 10_001) -> int:
        """How many rows :meth:`schedules_page`'s filters match, at most ``cap``."""
        params = {"search": search, "paused": paused, "owner": owner, "owned_by": owned_by,
                  "cap": cap,
                  "names": list(names) if names is not None else None}
        with self._conn() as conn, wrap_errors("counting schedules"):
            row = conn.execute(queries["count_schedules_page"], params).fetchone()
        return int(row[0]) if row else 0

    def deployments(self) -> list[str]:
        with self._conn() as conn, wrap_errors("reading deployments"):
            return [r[0] for r in conn.execute(queries["deployments"])]

    def paused_queues(self, queues: Sequence[str]) -> list[dict[str, Any]]:
        """Awa's paused queues among ``queues``; none where Awa's queue table is absent
        (the standalone layout)."""
        with self._conn() as conn, wrap_errors("reading queue pauses"):
            (present,) = one_row(conn.execute(queries["has_queue_meta"]).fetchone(),
                              "reading queue pauses")
            if not present:
                return []
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["paused_queues"], {"queues": list(queues)}).fetchall()

    def pause_with_note(self, name: str, by: str | None, note: str, *,
                        conn: psycopg.Connection | None = None) -> datetime:
        with self._on(conn) as c, wrap_errors(f"pausing {name!r}"):
            row = c.execute(queries["pause_schedule_with_note"],
                            {"name": name, "by": by, "note": note}).fetchone()
            return changed(c, row, name, "pausing")[0]

    def pause_note(self, name: str) -> str | None:
        """The note of ``name``'s current pause, if it was given one."""
        with self._conn() as conn, wrap_errors(f"reading the pause note of {name!r}"):
            row = conn.execute(queries["pause_note"], {"name": name}).fetchone()
        return row[0] if row else None

    def runs_used(self, name: str) -> int:
        """Runs of ``name`` counted against its run limit (0 when none fired)."""
        with self._conn() as conn, wrap_errors(f"reading the runs of {name!r}"):
            row = conn.execute(queries["runs_used"], {"name": name}).fetchone()
        return int(row[0]) if row else 0

    def record_audit(self, **entry: Any) -> tuple[int, datetime]:
        """One row of ``awa_beat.audit_log`` (see migration 0011); its id and instant."""
        with self._conn() as conn, wrap_errors("recording the action"):
            row = conn.execute(queries["record_audit"], {
                **entry, "detail": psycopg.types.json.Jsonb(entry.get("detail") or {})}
                ).fetchone()
        row = one_row(row, "recording the action")
        return int(row[0]), row[1]

    def audit_log(self, *, limit: int = 50, before_id: int | None = None,
                  schedule: str | None = None) -> list[dict[str, Any]]:
        with self._conn() as conn, wrap_errors("reading the audit log"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["audit_log"], {
                "limit": limit, "before_id": before_id, "schedule": schedule}).fetchall()

    # -- the dashboard's logins (migration 0014) ------------------------------------------

    def web_secret(self) -> tuple[bytes, str] | None:
        """The secret that signs the dashboard's session cookies, and the fingerprint of
        the password it was made for; None before a dashboard with a password ran."""
        with self._conn() as conn, wrap_errors("reading the dashboard's secret"):
            row = conn.execute(queries["web_secret"]).fetchone()
        return (bytes(row[0]), str(row[1])) if row else None

    def save_web_secret(self, secret: bytes, fingerprint: str, *,
                        replaces: str | None) -> None:
        """Store the first secret (``replaces`` None), or replace the one whose
        fingerprint is ``replaces`` and end every session it signed."""
        values = {"secret": secret, "fingerprint": fingerprint, "replaces": replaces}
        with self._conn() as conn, wrap_errors("storing the dashboard's secret"), \
                conn.transaction():
            if replaces is None:
                conn.execute(queries["create_web_secret"], values)
            elif conn.execute(queries["replace_web_secret"], values).rowcount:
                conn.execute(queries["end_web_sessions"])

    def start_web_session(self, id_digest: str, username: str, lifetime: float) -> None:
        """A logged-in session for ``lifetime`` seconds; expired ones are deleted."""
        with self._conn() as conn, wrap_errors("starting a session"), conn.transaction():
            conn.execute(queries["prune_web_sessions"])
            conn.execute(queries["start_web_session"], {
                "id_digest": id_digest, "username": username, "lifetime": lifetime})

    def web_session_user(self, id_digest: str) -> str | None:
        """Who logged in with the session, while it has neither ended nor expired."""
        with self._conn() as conn, wrap_errors("reading a session"):
            row = conn.execute(queries["web_session_user"], {"id_digest": id_digest}
                               ).fetchone()
        return str(row[0]) if row else None

    def end_web_session(self, id_digest: str) -> None:
        with self._conn() as conn, wrap_errors("ending a session"):
            conn.execute(queries["end_web_session"], {"id_digest": id_digest})

    # -- firing --------------------------------------------------------------------------

    def fire(self, requests: Sequence[FireRequest]) -> FireResult:
        """Fire every request in one atomic statement (``fire_batch`` in queries.sql).

        A request whose compare-and-swap fails (another replica fired it, or it was
        paused meanwhile) yields no job. If the batch fails as a whole (a row that
        another deployment wrote may break an insert), each request is retried on its
        own so that one bad row cannot stop the others.
        """
        result = FireResult()
        requests = [r for r in requests if r.fire_times]
        if not requests:
            return result
        try:
            fired = self._fire_batch(requests)
            result.jobs = [j for j in fired if j.job_id]
            result.skipped = [j for j in fired if not j.job_id and j.fire_time]
            result.ahead = [j.name for j in fired if not j.fire_time]
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
                result.ahead += single.ahead
                result.failed.update(single.failed)
        return result

    def _fire_batch(self, requests: Sequence[FireRequest]) -> list[FiredJob]:
        with self._conn() as conn:
            rows = conn.execute(fire_query(self.awa_owned),
                                fire_params(requests, self.clock_tolerance)).fetchall()
        return [FiredJob(int(job_id or 0), name, fire_time or "", updated_at)
                for job_id, name, fire_time, updated_at in rows]


@dataclass(frozen=True, slots=True)
class SyncBatch:
    """Schedule rows encoded as the bind parameters of ``upsert_schedules`` (a beat keeps
    its configuration this way, packed: :class:`PackedBatch`)."""

    columns: dict[str, Any]
    """The parameters, except that a column whose every value is one object is held as
    that object in a :class:`_Same` (most columns of a generated configuration)."""
    size: int

    @classmethod
    def encode(cls, rows: Sequence[dict[str, Any]], deployment: str) -> SyncBatch:
        columns = sync_params(rows, deployment)
        for key, values in columns.items():
            if not isinstance(values, list) or key == "names":  # names never repeat
                continue
            first = values[0] if values else None
            columns[key] = (_Same(first) if values and all(v == first for v in values)
                            else values)
        return cls(columns, len(rows))

    @property
    def params(self) -> dict[str, Any]:
        """The bind parameters of ``upsert_schedules``."""
        return {key: [value.value] * self.size if isinstance(value, _Same) else value
                for key, value in self.columns.items()}

    @property
    def names(self) -> list[str]:
        return self.columns["names"]


@dataclass(frozen=True, slots=True)
class _Same:
    """A column of a :class:`SyncBatch` whose every row has this value."""

    value: Any


@dataclass(frozen=True, slots=True)
class PackedBatch:
    """A :class:`SyncBatch` held compressed. A beat keeps its configuration for the
    resyncs, which send one batch at a time: as packed batches it takes a fraction of
    the memory (a column of names or arguments is one string, not an object a row),
    and each is unpacked as it is sent."""

    blob: bytes
    size: int

    @classmethod
    def pack(cls, batch: SyncBatch) -> PackedBatch:
        # Plain values only (_Same as a flag): nothing of ours has to be unpicklable.
        columns = [(k, isinstance(v, _Same), v.value if isinstance(v, _Same) else v)
                   for k, v in batch.columns.items()]
        return cls(zlib.compress(pickle.dumps(columns, pickle.HIGHEST_PROTOCOL), 1),
                   batch.size)

    def unpack(self) -> SyncBatch:
        columns = pickle.loads(zlib.decompress(self.blob))  # our own bytes
        return SyncBatch({k: _Same(v) if same else v for k, same, v in columns}, self.size)


def sync_params(rows: Sequence[dict[str, Any]], deployment: str) -> dict[str, Any]:
    """Bind parameters of ``upsert_schedules``: one array per column."""
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    texts: dict[int, str] = {}

    def once(value: Any) -> str:
        # Rows may share one object (ScheduleSpec.row): encoded once. ``rows`` holds
        # every value for the whole call, so no id is reused meanwhile.
        text = texts.get(id(value))
        if text is None:
            text = texts[id(value)] = dumps(value)
        return text

    return {
        "names": [r["name"] for r in rows],
        "cron_exprs": [r["cron_expr"] for r in rows],
        "timezones": [r["timezone"] for r in rows],
        "kinds": [r["kind"] for r in rows],
        "queues": [r["queue"] for r in rows],
        "args": [dumps(r["args"]) for r in rows],
        "priorities": [r["priority"] for r in rows],
        "max_attempts": [r["max_attempts"] for r in rows],
        "tags": [once(r["tags"]) for r in rows],
        "metadata": [once(r["metadata"]) for r in rows],
        "policies": [r["missed_fire_policy"] for r in rows],
        "deployment": deployment,
    }


def fire_query(awa_owned: bool) -> LiteralString:
    """The batched atomic fire statement for the database's layout."""
    return statements("awa" if awa_owned else "standalone")["fire_batch"]


def fire_params(requests: Sequence[FireRequest],
                clock_tolerance: float = DEFAULT_CLOCK_TOLERANCE) -> dict[str, Any]:
    """Bind parameters of :func:`fire_query`: parallel arrays, one round trip in all;
    no fire is dated later than the database's now() plus ``clock_tolerance`` seconds."""
    coalesced = [(r.name, r.coalesced) for r in requests if r.coalesced is not None]
    return {
        "names": [r.name for r in requests],
        "expected": [r.expected for r in requests],
        "cursors": [r.fire_times[-1] for r in requests],
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
        "clock_tolerance": float(clock_tolerance),
    }
