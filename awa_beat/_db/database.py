"""One PostgreSQL database through a small connection pool: how awa-beat connects, in
which session, how a driver error becomes a typed one, and which table layout it runs on.

The parts that read and write one aggregate (:mod:`.schedules`, :mod:`.evaluator`,
:mod:`.outbox`, :mod:`.outcomes`, :mod:`.cluster`) each hold a :class:`Database` and take
their connections from it. Sessions run in UTC with ISO dates, so that timestamps cast to
text in SQL come out exactly as Awa writes them (``2026-12-02 09:03:00+00``), whatever the
server's defaults are. psycopg's errors are turned into
:class:`~awa_beat.errors.StoreError` and its subclasses here, and never leak further.
"""

from __future__ import annotations

import functools
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from .._config import DEFAULT_CLOCK_TOLERANCE
from ..errors import (
    DatabaseUnavailable,
    DataRefused,
    SchemaError,
    StoreError,
    WriteNotApplied,
    first_line,
)
from . import schema
from .conninfo import redact
from .layout import STANDALONE, Layout, layout_for
from .records import Contact
from .sql import queries

if TYPE_CHECKING:
    from .cluster import ClusterStore
    from .evaluator import EvaluatorStore
    from .outbox import OutboxStore
    from .outcomes import OutcomeStore
    from .schedules import ScheduleStore


#: Seconds to wait for a pooled connection before the operation fails (and is retried).
POOL_TIMEOUT = 5.0


def keepalives(timeout: float) -> dict[str, int]:
    """Return libpq's TCP settings that give up on a silent peer after about ``timeout``
    seconds. Idle probes catch a quiet connection whose peer went away, and a user
    timeout catches data the peer never acknowledges."""
    step = max(1, round(timeout / 4))
    return {"keepalives": 1, "keepalives_idle": step, "keepalives_interval": step,
            "keepalives_count": 2, "tcp_user_timeout": int(timeout * 1000)}


#: Seconds after which a pooled connection gives up on a silent peer. A statement sent
#: into a network partition then fails, instead of waiting minutes for the operating
#: system's retransmissions to give up.
POOL_PEER_TIMEOUT = 30.0
KEEPALIVES = keepalives(POOL_PEER_TIMEOUT)


def process_identity() -> str:
    """Return ``host:pid`` for this process, the name beat uses for itself in its
    bookkeeping."""
    return f"{socket.gethostname()}:{os.getpid()}"


def configure_session(conn: psycopg.Connection, origin: str = "") -> None:
    """Make the session render timestamps as Awa renders them, whatever the server's
    defaults are, and tag it with ``origin``, which the change notifications carry."""
    conn.execute(queries["configure_session"], {"origin": origin})  # one round trip
    # Never prepare statements server-side: a prepared statement soon runs a generic plan,
    # which cannot see how long the array parameters are. For a fire batch of 2,000 that
    # plan joins row by row, many times slower; planning each statement afresh is cheap
    # next to that (docs/performance.md).
    conn.prepare_threshold = None


def connect(conninfo: str, **kwargs: Any) -> psycopg.Connection:
    """Open a dedicated autocommit connection in a UTC session. The leader lock and
    LISTEN need a connection of their own, outside the pool."""
    try:
        conn = psycopg.connect(conninfo, autocommit=True, **{**KEEPALIVES, **kwargs})
    except psycopg.Error as exc:
        raise DatabaseUnavailable(f"cannot connect to {redact(conninfo)}: {first_line(exc)}"
                                  ) from None
    configure_session(conn)
    return conn


#: The SQLSTATE classes of errors that the data causes. Class 22 is a data exception (a
#: value out of range, text that is not valid UTF-8) and class 54 a program limit (an
#: index entry or a JSON value too large, nesting too deep). psycopg files class 54 under
#: OperationalError, next to lost connections, so it is checked first: such an error
#: must not be taken for an outage.
DATA_ERROR_CLASSES = ("22", "54")


def is_data_error(exc: BaseException) -> bool:
    """Tell whether ``exc`` is PostgreSQL, or the driver encoding a parameter, refusing
    the data itself. Retrying such an error cannot help."""
    if isinstance(exc, UnicodeEncodeError):
        return True
    state = getattr(exc, "sqlstate", None)
    return isinstance(state, str) and state[:2] in DATA_ERROR_CLASSES


def typed_error(exc: psycopg.Error, message: str) -> StoreError:
    """Return the awa-beat error for a psycopg one. Callers can then tell a lost
    database (retry it) from a missing schema (migrate it), from data the server refused
    (fix the entry) and from anything else the server refused, without importing
    psycopg."""
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
    """Turn a psycopg error raised in the block into a typed StoreError whose message
    says what awa-beat was doing."""
    try:
        yield
    except psycopg.Error as exc:
        raise typed_error(exc, f"{action} failed: {first_line(exc)}") from exc
    except UnicodeEncodeError as exc:  # the driver encoding a parameter, before sending
        raise DataRefused(f"{action} failed: a value is not text PostgreSQL stores "
                          f"({exc.reason}: {exc.object[exc.start:exc.end]!r})") from exc


def one_row(row: tuple[Any, ...] | None, action: str) -> tuple[Any, ...]:
    """Return the row of a statement that always returns one, such as an aggregate or
    ``now()``; a missing row is reported as a store error rather than a crash."""
    if row is None:
        raise StoreError(f"{action} failed: the database returned no row")
    return row


def clock_skew(sent: float, db_now: float, received: float) -> float:
    """Return how many seconds the database's clock is ahead of this host's clock (a
    negative number when it is behind). The server read its clock, ``db_now``, at some
    point between ``sent`` and ``received`` (this host's epoch seconds); taking the
    midpoint makes the error at most half the round trip."""
    return db_now - (sent + received) / 2


def read_skew(conn: psycopg.Connection, wall: Callable[[], float] = time.time) -> float:
    """Measure :func:`clock_skew` over one round trip on ``conn``; ``wall`` is this
    host's clock."""
    sent = wall()
    row = conn.execute(queries["database_clock"]).fetchone()
    received = wall()
    return clock_skew(sent, one_row(row, "reading the database clock")[0].timestamp(),
                      received)


class Database:
    """One database, through a small connection pool, and the parts that use it.

    Call :meth:`open` (or use ``with``) before anything else: it reads which table layout
    the database has (:attr:`layout`), which decides how jobs are inserted and whether
    changes are announced. Each part (:attr:`evaluator`, :attr:`schedules`, :attr:`outbox`,
    :attr:`outcomes`, :attr:`cluster`) is made on first use and shares this pool; a caller
    keeps the part it uses and never needs the others.
    """

    def __init__(self, conninfo: str, *, min_size: int = 1, max_size: int = 4,
                 timeout: float = POOL_TIMEOUT, origin: str = "") -> None:
        self.conninfo = conninfo
        self.origin = origin
        """Tags this database's writes in change notifications (see :attr:`change_channel`)."""
        self.max_size = max_size
        """The most connections the pool opens, which bounds how many statements run at once."""
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
        self.layout: Layout = STANDALONE
        """The table layout, read by :meth:`open` (and again by :meth:`migrate`)."""
        self.clock_tolerance = DEFAULT_CLOCK_TOLERANCE
        """Seconds past the database's now() a fire may be dated (the fire statement
        refuses later ones, whatever this host's clock says)."""
        self.contact = Contact(time.monotonic)
        """When an operation last reached the database, or failed to (``/readyz``)."""

    @property
    def awa_owned(self) -> bool:
        """Whether Awa owns the ``awa`` tables (:attr:`layout`)."""
        return self.layout.awa_owned

    @property
    def change_channel(self) -> str | None:
        """The channel NOTIFYed when ``awa.cron_jobs`` changes or a job is inserted (the
        payload: the table's name, a space, the writer's origin), or None where Awa owns
        those tables and they carry no trigger of ours."""
        return self.layout.change_channel

    # The parts are imported when first asked for: each part's module imports this one for
    # its connections, so importing them at the top would be circular.

    @functools.cached_property
    def evaluator(self) -> EvaluatorStore:
        """The evaluator's reads of every row, and the fire statement."""
        from .evaluator import EvaluatorStore

        return EvaluatorStore(self)

    @functools.cached_property
    def schedules(self) -> ScheduleStore:
        """Schedule reads and writes: the configuration's sync, runtime writes, imports."""
        from .schedules import ScheduleStore

        return ScheduleStore(self)

    @functools.cached_property
    def outbox(self) -> OutboxStore:
        """The jobs waiting for Celery's broker, which the dispatch bridge publishes."""
        from .outbox import OutboxStore

        return OutboxStore(self)

    @functools.cached_property
    def outcomes(self) -> OutcomeStore:
        """What workers report of the runs, and the history read from it."""
        from .outcomes import OutcomeStore

        return OutcomeStore(self)

    @functools.cached_property
    def cluster(self) -> ClusterStore:
        """The beats' heartbeats, the audit log, the dashboard's logins and pages."""
        from .cluster import ClusterStore

        return ClusterStore(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {redact(self.conninfo)}>"

    def open(self, *, timeout: float = 10.0, conn: psycopg.Connection | None = None,
             wait: bool = True) -> Database:
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
                    # Every surface opens a database (beat, the CLI, the API, the
                    # dashboard): each refuses here, in one line, a table it does not know.
                    self.layout = layout_for(schema.check_layout(direct) is not None)
            except BaseException:
                self._pool.close()
                raise
        if wait:
            self.wait(timeout)
        return self

    def wait(self, timeout: float = 10.0) -> None:
        """Wait for the pool's first connection after ``open(wait=False)``. If none
        comes in time, the pool is closed and :class:`DatabaseUnavailable` is raised."""
        try:
            self._pool.wait(timeout)
        except Exception as exc:
            self._pool.close()
            raise DatabaseUnavailable(f"cannot connect to {redact(self.conninfo)}: {exc}"
                                      ) from None

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> Database:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connection(self) -> AbstractContextManager[psycopg.Connection]:
        """Lend a connection of the pool for the ``with`` block. A
        :class:`DatabaseUnavailable` error is raised when none can be had."""
        return self._conn()

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection]:
        # Every statement of every part passes here, so that /readyz learns whether the
        # database answered, refused, or could not be reached.
        try:
            with self._pool.connection() as conn:
                yield conn
        except (PoolTimeout, PoolClosed) as exc:
            # No connection could be had: the database is down, or the pool was closed.
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

    def on(self, conn: psycopg.Connection | None) -> AbstractContextManager[psycopg.Connection]:
        """Use the caller's ``conn`` if one is given, so that the statement joins the
        caller's transaction when one is open; otherwise lend a connection of the pool."""
        return nullcontext(conn) if conn is not None else self._conn()

    # -- schema ------------------------------------------------------------------------

    def migrate(self) -> schema.SchemaInfo:
        """Create or upgrade awa-beat's tables. Migrating may install the standalone
        layout, so the layout is read again from what the migration found."""
        with self._conn() as conn:
            info = schema.migrate(conn)
        self.layout = layout_for(info.awa_owned)
        return info

    def check_layout(self) -> None:
        """Check the table layout again, since Awa may have been migrated after
        :meth:`open`; an unknown layout raises :class:`~awa_beat.errors.UnknownSchema`."""
        with self._conn() as conn, wrap_errors("checking the schema"):
            schema.check_layout(conn)

    def check_schema(self, conn: psycopg.Connection | None = None) -> schema.SchemaInfo:
        """Check that the schema is migrated, on ``conn`` if one is given (an autocommit
        connection, which is left open) or else on a connection of the pool."""
        with self.on(conn) as c, wrap_errors("checking the schema"):
            return schema.check(c)

    @contextmanager
    def transaction(self, conn: psycopg.Connection | None = None
                    ) -> Iterator[psycopg.Connection]:
        """Run the ``with`` block in a transaction, on a connection of the pool or on
        the caller's ``conn``. On the caller's connection the block joins the open
        transaction as a savepoint, so that an error of awa-beat's undoes only its own
        writes; with no transaction open, the block commits at its end.

        The caller's connection keeps its session as it is, without
        ``configure_session``, because the statements run here depend on no session
        setting.
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

    # -- the database's clock -----------------------------------------------------------

    def clock_skew(self) -> float:
        """Measure :func:`clock_skew` on a connection of its own, because a caller may
        hold the pool's only connection in a transaction."""
        with connect(self.conninfo, connect_timeout=5) as conn, \
                wrap_errors("reading the database clock"):
            return read_skew(conn)

    def database_clock(self) -> datetime:
        """Read the database's ``now()``, the clock that fire times are checked against."""
        with self._conn() as conn, wrap_errors("reading the database clock"):
            row = conn.execute(queries["database_clock"]).fetchone()
        return one_row(row, "reading the database clock")[0]
