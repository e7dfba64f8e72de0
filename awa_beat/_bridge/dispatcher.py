"""The bridge runs on a thread of its own, so that firing never waits on the broker.

A broker that refuses, resets or silently hangs costs the beat loop nothing. The loop
fires into ``awa.jobs`` on time and only wakes the dispatcher, which drains the outbox
(:class:`~awa_beat._bridge.outbox.Bridge`) on its own thread, backing off while the
broker is away and publishing the backlog in fire order once it is back. Every wait the
dispatcher makes on the broker has a deadline (connect, socket writes, confirms), so
it is never stuck for good either.

To the node, a :class:`Dispatcher` is an outbox whose steps all happen elsewhere. Its
``due()`` is always false, and ``drain()`` only hands back an error that the thread met
and that is neither the broker's nor the database's (a bug), so that the error stops beat
as loudly as it would have on the loop's own thread.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from .._db.records import Fence, OutboxStats
from .._logs import event
from ..errors import StoreError
from .outbox import Bridge

# The logger keeps the name it had before the modules moved into layer packages, so
# logging configurations that select it by name go on working.
logger = logging.getLogger('awa_beat.bridge.dispatcher')

#: The longest time the thread sleeps with nothing to do. The node wakes it for every
#: fire and notification and checks the outbox itself once a minute, so this is only a
#: backstop (and an idle beat should cost nothing).
IDLE_WAIT = 60.0
#: How long the thread pauses after a database error before it tries again.
DATABASE_RETRY = 1.0
#: How many seconds close() waits for a drain under way to finish marking what it published.
CLOSE_WAIT = 5.0


class Dispatcher:
    """Run a :class:`Bridge` on a daemon thread. The node uses it as its outbox."""

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge
        # Every replica has one, standbys too, but nothing is published before lead().
        bridge.stand_down()
        self._wake = threading.Event()
        self._stop = False
        self._error: BaseException | None = None
        self._outage = False
        self._thread = threading.Thread(target=self._run, name="awa-beat-dispatch",
                                        daemon=True)
        self._thread.start()

    # -- the node's side ---------------------------------------------------------------

    def wake(self) -> None:
        """Say that there may be jobs to publish."""
        self.bridge.wake()  # A drain under way sees the wake, and the next drain follows at once.
        self._wake.set()

    def lead(self, fence: Fence) -> None:
        self.bridge.lead(fence)
        self._wake.set()

    def stand_down(self) -> None:
        self.bridge.stand_down()

    def due(self) -> bool:
        """Return True only when the thread stopped on an error that the loop must raise.
        The thread drains, so the loop never waits on the broker."""
        return self._error is not None

    def next_wake(self) -> float:
        return float("inf")

    def drain(self) -> int:
        """Raise the error that stopped the thread, if one did (a bug: see the module)."""
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return 0

    def purge(self) -> int:
        return 0  # The thread purges.

    def stats(self) -> OutboxStats:
        return self.bridge.stats()

    def close(self) -> None:
        """Stop the thread once the batch under way is confirmed and marked, and close
        the bridge. The wait lasts at most CLOSE_WAIT seconds; after that, a hung broker's
        socket is closed under the thread. This is safe in a signal handler, because it
        only sets flags and an event and joins with a bound."""
        self._stop = True
        self._wake.set()
        self.bridge.stand_down()
        if self._thread is not threading.current_thread():
            self._thread.join(CLOSE_WAIT)
        self.bridge.close()

    # -- the thread --------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            # The thread is stopping. A batch that the last drain left in flight is
            # confirmed and marked; close() bounds the wait, since it closes the
            # connection under a hung broker.
            with contextlib.suppress(Exception):
                self.bridge.settle()

    def _loop(self) -> None:
        bridge = self.bridge
        while not self._stop:
            timeout = IDLE_WAIT if bridge.deposed else min(
                IDLE_WAIT, max(0.0, bridge.next_wake() - time.monotonic()))
            if not bridge.due():
                self._wake.wait(timeout)
            self._wake.clear()
            if self._stop:
                break
            bridge.wake()  # Whatever set the event (or the backstop) means: look again.
            try:
                while bridge.due() and not self._stop:
                    bridge.drain()
                bridge.purge()
            except StoreError as exc:
                if self._stop:
                    break
                if not self._outage:
                    event(logger, logging.ERROR, "bridge.database_outage",
                          "bridge: database error, retrying: %s", exc, error=str(exc))
                    self._outage = True
                self._wake.wait(DATABASE_RETRY)
                continue
            except BaseException as exc:
                if not self._stop:
                    self._error = exc  # The loop's thread raises it at its next step.
                return
            if self._outage:
                event(logger, logging.INFO, "bridge.database_recovered",
                      "bridge: database reachable again")
                self._outage = False
