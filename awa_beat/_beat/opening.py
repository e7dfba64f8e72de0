"""A replica's database side of the start-up, run on a thread while its caller goes on.

The start-up has two halves that need nothing of each other until the sync: the client
reads and encodes the configuration (Python's work, on this process's core), and the
database side opens the lock's session and the pool, reads the layout, checks (or
migrates) the schema and refreshes the planner's statistics (mostly waits on the server).
Celery's adapter starts :class:`Opening` as soon as it knows the database, encodes the
configuration meanwhile, then hands the opening to :meth:`BeatNode.open
<awa_beat._beat.node.BeatNode.open>`, whose first attempt takes the connections from it.
A retry connects afresh, on the caller's thread, as before.

Nothing here decides anything: every check and refusal is the one the node made on its
own thread, in the same order, and its error reaches the caller unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from .._config import Settings
from .._db.database import Database
from .._db.lock import Leadership
from ..errors import SchemaError

if TYPE_CHECKING:
    from .protocols import LeadershipLike, NodeStore

#: Seconds :meth:`Opening.cancel` waits for the thread before leaving it to close what
#: it opened by itself (a signal stops the start-up while the thread waits on the server).
CANCEL_WAIT = 1.0


def default_store(url: str, origin: str) -> NodeStore:
    return Database(url, origin=origin)


def default_leadership(url: str, lock_key: int,
                       probe: Callable[[], AbstractContextManager[Any]], *,
                       lock_timeout: float, clock_tolerance: float) -> LeadershipLike:
    return Leadership(url, lock_key, probe=probe, lock_timeout=lock_timeout,
                      clock_tolerance=clock_tolerance)


def open_connections(
    settings: Settings, database_url: str, identity: str, *,
    make_store: Callable[[str, str], NodeStore] = default_store,
    make_leadership: Callable[..., LeadershipLike] = default_leadership,
    analyze: bool = False,
) -> tuple[NodeStore, LeadershipLike]:
    """The store and the leadership of a replica, connected, on a schema that is ready
    (migrated if need be); with ``analyze``, the planner's statistics refreshed where
    they are stale. Closes what it opened if anything fails.

    The lock's session reads the layout, checks the schema and refreshes the statistics
    (no connection is opened for those alone) while the pool opens its first connection.
    """
    store = make_store(database_url, identity)
    # The election checks that session locks hold with a connection of the pool: no
    # connection is opened for that alone either.
    leadership = make_leadership(database_url, settings.lock_key, store.connection,
                                 lock_timeout=settings.lock_timeout,
                                 clock_tolerance=settings.clock_tolerance)
    store.clock_tolerance = settings.clock_tolerance
    try:
        session = leadership.connection()
        store.open(conn=session, wait=False)
        try:
            store.check_schema(session)  # needs no CREATE privilege once migrated
        except SchemaError:
            store.migrate()
        if analyze:
            # Before the configuration is compared: where it is stored as configured
            # (the common restart), no sync follows to make the statistics stale again;
            # where it is not, the node refreshes them once more after the sync.
            store.schedules.analyze_if_stale(session)
        store.wait()
    except BaseException:
        leadership.resign()
        store.close()
        raise
    return store, leadership


class Opening:
    """:func:`open_connections` on a daemon thread; :meth:`result` waits for it."""

    def __init__(self, settings: Settings, database_url: str, identity: str) -> None:
        self.settings = settings
        self.database_url = database_url
        self.identity = identity
        self._result: tuple[NodeStore, LeadershipLike] | None = None
        self._error: BaseException | None = None
        self._cancelled = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="awa-beat-open", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            opened = open_connections(self.settings, self.database_url, self.identity,
                                      analyze=True)
        except BaseException as exc:  # handed to result(), on the caller's thread
            self._error = exc
            return
        with self._lock:
            if not self._cancelled:
                self._result = opened
                return
        _close(*opened)  # nobody will take them

    def result(self) -> tuple[NodeStore, LeadershipLike]:
        """The connected store and leadership, or the error that stopped the thread;
        only once (the caller owns them then)."""
        self._thread.join()
        error, self._error = self._error, None
        if error is not None:
            raise error
        opened, self._result = self._result, None
        if opened is None:
            raise RuntimeError("the opening's result was taken already or cancelled")
        return opened

    def cancel(self) -> None:
        """Close what the thread opened, now or, if it is still waiting on the server,
        when it is done; safe from a signal handler's path (a bounded wait)."""
        self._thread.join(CANCEL_WAIT)
        with self._lock:
            self._cancelled = True
            opened, self._result = self._result, None
        if opened is not None:
            _close(*opened)


def _close(store: NodeStore, leadership: LeadershipLike) -> None:
    leadership.resign()
    store.close()
