"""Leadership: one beat is active per lock key, with any number of standbys.

The states and the steps between them::

    follower --try_acquire() wins--> leader --ping() fails / resign()--> follower

* The lock is a session-level ``pg_try_advisory_lock`` on a dedicated connection that
  no pool can recycle, so it lives exactly as long as that connection.
* A follower calls :meth:`Leadership.try_acquire` every election interval.
* A leader calls :meth:`Leadership.ping` every ping interval. A failed ping means that
  the session (and so the lock) may be gone, so leadership ends at once.
* Time comes from the database. Each election attempt and each ping first measures this
  host's clock against the server's (:func:`~awa_beat._db.database.clock_skew`). Beyond the
  clock tolerance, a follower does not try for the lock and a leader stands down, so that
  a standby whose clock is right takes over. (The fire statement refuses fires dated
  past the database's clock anyway; this rule keeps a skewed beat from holding the lock
  idle.)
* :meth:`Leadership.resign` unlocks and closes the connection, so a standby takes over
  within its election interval.
* A leader may :meth:`Leadership.listen` on the same connection and sleep in
  :meth:`Leadership.wait` until a notification or a timeout, so that it needs no
  wake-up to notice changes. A connection that fails there ends leadership too. A
  follower may do the same between its elections (the connection is open anyway), so
  that its warm view follows changes as they commit.

The lock only keeps standbys idle. Correctness never rests on it: every fire is a
compare-and-swap on the schedule's cursor, so even two beats that both believe they
lead cannot enqueue the same fire twice.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import psycopg
import psycopg.sql

from .._config import (
    AWA_MAIN_LOCK_KEY,
    DEFAULT_CLOCK_TOLERANCE,
    DEFAULT_LOCK_KEY,
    DEFAULT_LOCK_TIMEOUT,
)
from .._logs import event
from ..errors import AwaBeatError, ConfigError, SessionLockUnsupported, StoreError, first_line
from .conninfo import redact
from .database import (
    connect,
    keepalives,
    one_row,
    process_identity,
    read_skew,
    typed_error,
)
from .sql import queries

# The logger keeps the name it had before the modules moved into layer packages, so
# logging configurations that select it by name go on working.
logger = logging.getLogger('awa_beat.leader')


def skew_words(skew: float) -> str:
    """Describe a skew (see :func:`clock_skew`) in words: ``"3600.0 s ahead of the
    database's"``."""
    way = "behind" if skew > 0 else "ahead of"
    return f"{abs(skew):.1f} s {way} the database's"


def skew_problem(skew: float, tolerance: float) -> str | None:
    """Return why a host whose clock is ``skew`` seconds behind the database's (a negative
    skew means ahead) may not lead, or None when the skew is within ``tolerance`` seconds."""
    if abs(skew) <= tolerance:
        return None
    return (f"this host's clock is {skew_words(skew)} "
            f"(awa_beat_clock_tolerance: {tolerance:g} s)")


class Leadership:
    """Hold (or wait for) the session advisory lock ``lock_key``."""

    def __init__(self, conninfo: str, lock_key: int = DEFAULT_LOCK_KEY, *,
                 probe: Callable[[], AbstractContextManager[psycopg.Connection]] | None = None,
                 lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                 clock_tolerance: float = DEFAULT_CLOCK_TOLERANCE,
                 wall: Callable[[], float] = time.time) -> None:
        """``probe`` lends another connection to the same database (a pool's, say) for
        the check that session locks hold. Without it, a connection is opened for the
        check.

        ``lock_timeout`` is the number of seconds after which the server drops the lock's
        session of a leader that stopped answering (a dead host, a silent partition), so
        that a standby can take over. The leader's own side gives up on the server as
        fast.

        ``clock_tolerance`` is the number of seconds by which this host's clock (``wall``,
        in epoch seconds) may differ from the database's while the host leads."""
        if lock_key == AWA_MAIN_LOCK_KEY:
            raise ConfigError("awa_beat_lock_key must not be Awa's own lock key (AWA_MAIN)")
        self.conninfo = conninfo
        self.lock_key = lock_key
        self.lock_timeout = lock_timeout
        self._probe = probe or (lambda: connect(self.conninfo, connect_timeout=5))
        self.identity = process_identity()
        self._conn: psycopg.Connection | None = None
        self._channel: str | None = None
        self.since: float | None = None
        """The monotonic time when leadership was won, or None while following."""
        self.backend_pid: int | None = None
        """The server's pid of the lock's session while leading. The outbox's fence checks
        the lock against it."""
        self.clock_tolerance = clock_tolerance
        self._wall = wall
        self.skew: float | None = None
        """How many seconds the database's clock was ahead of this host's at the last
        measure (a negative value means behind), or None before the first measure."""
        self.clock_problem: str | None = None
        """Why this host's clock keeps it from leading, or None when it does not."""

    def __repr__(self) -> str:
        state = "leader" if self.is_leader else "follower"
        return f"<Leadership {self.identity} key={self.lock_key} {state}>"

    @property
    def is_leader(self) -> bool:
        return self.since is not None

    def try_acquire(self) -> bool:
        """Make one non-blocking attempt, and return True when this process now leads."""
        if self.is_leader:
            return True
        try:
            conn = self.connection()
            if self._clock_refuses(conn, "will not lead"):
                return False
            row = conn.execute(queries["try_advisory_lock"], {"key": self.lock_key}).fetchone()
            if not (row and row[0]):
                return False
            backend_pid = self._check_session_lock(conn)
        except SessionLockUnsupported:
            raise
        except (psycopg.Error, StoreError) as exc:
            self._drop_connection()
            event(logger, logging.WARNING, "leader.election_failed",
                  "beat: election attempt failed on %s: %s", redact(self.conninfo),
                  first_line(exc), error=first_line(exc))
            return False
        self.since = time.monotonic()
        self.backend_pid = backend_pid
        event(logger, logging.INFO, "leader.won", "beat: %s is now the leader (lock key %s)",
              self.identity, self.lock_key, identity=self.identity, lock_key=self.lock_key)
        return True

    def ping(self) -> bool:
        """Check that the lock's session is alive. On a failure, stop leading at once."""
        if not self.is_leader or self._conn is None:
            return False
        try:
            # Reading the clock is the ping, so one round trip checks the session and
            # measures the skew.
            if self._clock_refuses(self._conn, "stands down"):
                self._lose()
                return False
        except psycopg.Error as exc:
            event(logger, logging.WARNING, "leader.lost",
                  "beat: %s lost leadership (lock key %s): ping failed: %s", self.identity,
                  self.lock_key, first_line(exc), identity=self.identity,
                  lock_key=self.lock_key, error=first_line(exc))
            self._lose()
            return False
        return True

    def _clock_refuses(self, conn: psycopg.Connection, action: str) -> bool:
        """Measure the skew on ``conn``, and return True when it is beyond the tolerance.
        The problem is logged once, when it starts."""
        self.skew = read_skew(conn, self._wall)
        problem = skew_problem(self.skew, self.clock_tolerance)
        if problem is not None and self.clock_problem is None:
            event(logger, logging.ERROR, "leader.clock_skew", "beat: %s %s: %s",
                  self.identity, action, problem, identity=self.identity,
                  skew=round(self.skew, 3), tolerance=self.clock_tolerance)
        elif problem is None and self.clock_problem is not None:
            event(logger, logging.INFO, "leader.clock_ok",
                  "beat: %s: this host's clock is within %g s of the database's again",
                  self.identity, self.clock_tolerance, identity=self.identity,
                  skew=round(self.skew, 3))
        self.clock_problem = problem
        return problem is not None

    @property
    def listening(self) -> bool:
        """Return whether this leader wakes on notifications."""
        return self._channel is not None and self.is_leader

    @property
    def subscribed(self) -> bool:
        """Return whether the lock's session LISTENs, whether it leads or not."""
        return self._channel is not None and self._conn is not None

    def listen(self, channel: str) -> bool:
        """LISTEN on the lock's session, so that :meth:`wait` wakes on ``channel``'s
        notifications. Return False if that failed, and the caller should then poll. A
        follower opens the session if need be, and it keeps the LISTEN when it wins."""
        if self.subscribed and self._channel == channel:
            return True
        try:
            conn = self.connection() if not self.is_leader else self._conn
            if conn is None:
                return False
            conn.execute(psycopg.sql.SQL(queries["listen"]).format(
                channel=psycopg.sql.Identifier(channel)))
        except StoreError as exc:  # A follower could not open the session.
            logger.debug("beat: cannot LISTEN on %s yet: %s", channel, first_line(exc))
            return False
        except psycopg.Error as exc:
            if not self.is_leader:
                self._drop_connection()
                logger.debug("beat: cannot LISTEN on %s yet: %s", channel, first_line(exc))
                return False
            event(logger, logging.WARNING, "leader.listen_failed",
                  "beat: cannot LISTEN on %s, polling instead: %s", channel,
                  first_line(exc), error=first_line(exc))
            return False
        self._channel = channel
        return True

    def wait(self, timeout: float) -> set[str]:
        """Sleep up to ``timeout`` seconds, less if a notification arrives, and return the
        payloads received. The result is empty when the wait timed out or leadership was
        lost meanwhile.

        Notifications received while another statement ran on this connection were
        kept by psycopg and are returned at once.
        """
        conn = self._conn
        if not self.subscribed or conn is None:
            return set()
        deadline = time.monotonic() + timeout
        try:
            while True:
                # With timeout=0 this returns what psycopg kept, plus what the socket
                # already holds.
                got = {n.payload for n in conn.notifies(timeout=0)}
                remaining = deadline - time.monotonic()
                if got or remaining <= 0:
                    return got
                # This is our own wait, not notifies(timeout=...), because psycopg's wait
                # wakes every 100 ms: ten wake-ups a second in an idle process. It uses a
                # selector, not select(), which refuses descriptors above 1023.
                with selectors.DefaultSelector() as selector:
                    selector.register(conn.fileno(), selectors.EVENT_READ)
                    selector.select(remaining)
        except psycopg.Error as exc:
            if not self.is_leader:
                # This was a follower's session: the next election opens another, and the
                # node listens again on it.
                logger.debug("beat: standby's lock session failed: %s", first_line(exc))
                self._drop_connection()
                return set()
            event(logger, logging.WARNING, "leader.lost",
                  "beat: %s lost leadership (lock key %s): connection failed: %s",
                  self.identity, self.lock_key, first_line(exc), identity=self.identity,
                  lock_key=self.lock_key, error=first_line(exc))
            self._lose()
            return set()

    def resign(self) -> None:
        """Release the lock now, so that a standby can take over. Calling it again does
        nothing.

        Closing the session releases the lock. No query is sent: this runs from
        Celery's SIGTERM handler, possibly while the main thread is using the same
        connection.
        """
        if self._conn is not None and self.is_leader:
            event(logger, logging.INFO, "leader.resigned",
                  "beat: %s resigned leadership (lock key %s)", self.identity,
                  self.lock_key, identity=self.identity, lock_key=self.lock_key)
        self._lose()

    close = resign

    def _lose(self) -> None:
        self.since = None
        self.backend_pid = None
        self._channel = None
        self._drop_connection()

    def connection(self) -> psycopg.Connection:
        """Return the lock's session, and open it if need be (raising :class:`StoreError`
        if it cannot be opened).

        The session is lent out before the first election too, so that start-up reads
        the schema on it instead of opening a connection of its own. The borrower must
        leave it open, with no transaction open.
        """
        if self._conn is None or self._conn.closed:
            probes = keepalives(self.lock_timeout)
            conn = connect(self.conninfo, connect_timeout=5,
                           application_name=f"awa-beat leader {os.getpid()}", **probes)
            try:
                conn.execute(queries["lock_session_keepalives"], {
                    "idle": str(probes["keepalives_idle"]),
                    "interval": str(probes["keepalives_interval"]),
                    "count": str(probes["keepalives_count"]),
                    "user_timeout_ms": str(probes["tcp_user_timeout"])})
            except psycopg.Error as exc:
                conn.close()
                raise typed_error(exc, "cannot set up the lock session on "
                                  f"{redact(self.conninfo)}: {first_line(exc)}") from None
            self._conn = conn
        return self._conn

    def _drop_connection(self) -> None:
        self._channel = None  # A LISTEN ends with its session.
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
        self._conn = None

    def _check_session_lock(self, conn: psycopg.Connection) -> int:
        """Refuse a session where the lock would not hold, and return the session's pid."""
        # Behind PgBouncer in transaction or statement pooling, the next statement may
        # run on another server session, where this lock is not held, and other clients
        # may run on ours, so beat refuses to run. There are two signs: our session
        # changes between statements, or another client connection is handed our session
        # while we idle.
        pids = {_backend_pid(conn) for _ in range(2)}
        shared = False
        with contextlib.suppress(AwaBeatError, psycopg.Error), self._probe() as probe:
            shared = any(_backend_pid(probe) in pids for _ in range(3))
        row = conn.execute(queries["session_lock_held"], {"key": self.lock_key}).fetchone()
        if len(pids) != 1 or shared or not row or row[0] != 1:
            conn.execute(queries["advisory_unlock_all"])
            raise SessionLockUnsupported(
                "session advisory locks do not hold on this connection: is it going through "
                "PgBouncer in transaction or statement pooling? Point awa_beat_database_url "
                "at PostgreSQL directly or at a session-pooling PgBouncer"
            )
        return int(next(iter(pids)))


def _backend_pid(conn: psycopg.Connection) -> int:
    return int(one_row(conn.execute(queries["backend_pid"]).fetchone(),
                       "reading the session's pid")[0])
