"""The bridge on a thread of its own, so that firing never waits on the broker.

A broker that refuses, resets or silently hangs costs the beat loop nothing: the loop
fires into ``awa.jobs`` on time and only wakes the dispatcher, which drains the outbox
(:class:`~awa_beat._bridge.outbox.Bridge`) on its own thread, backing off while the
broker is away and publishing the backlog in fire order once it is back. Every wait the
dispatcher makes on the broker has a deadline (connect, socket writes, confirms), so
it is never stuck for good either.

To the node, a :class:`Dispatcher` is an outbox whose steps all happen elsewhere: its
``due()`` is always false and ``drain()`` only hands back an error the thread met that
is neither the broker's nor the database's (a bug), so that it stops beat as loudly as
it would have on the loop's own thread.
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

#: Longest the thread sleeps with nothing to do: the node wakes it for every fire and
#: notification, and checks the outbox itself once a minute, so this is only a backstop
#: (and an idle beat should cost nothing).
IDLE_WAIT = 60.0
#: Pause after a database error before the thread tries again.
DATABASE_RETRY = 1.0
#: Seconds close() waits for a drain under way to finish marking what was published.
CLOSE_WAIT = 5.0


class Dispatcher:
    """Runs a :class:`Bridge` on a daemon thread; the node's outbox."""

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge
        # Every replica has one, standbys too: nothing is published before lead().
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
        """There may be jobs to publish."""
        self.bridge.wake()  # a drain under way sees it: the next one follows at once
        self._wake.set()

    def lead(self, fence: Fence) -> None:
        self.bridge.lead(fence)
        self._wake.set()

    def stand_down(self) -> None:
        self.bridge.stand_down()

    def due(self) -> bool:
        """Only when the thread stopped on an error for the loop to raise: the thread
        drains, the loop never waits on the broker."""
        return self._error is not None

    def next_wake(self) -> float:
        return float("inf")

    def drain(self) -> int:
        """Raise what stopped the thread, if anything did (a bug: see the module)."""
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return 0

    def purge(self) -> int:
        return 0  # the thread purges

    def stats(self) -> OutboxStats:
        return self.bridge.stats()

    def close(self) -> None:
        """Stop the thread once the batch under way is confirmed and marked (at most
        CLOSE_WAIT seconds: a hung broker's socket is then closed under it), and close
        the bridge. Safe from a signal handler: flags, an event, a bounded join."""
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
            # Stopping: a batch the last drain left in flight is confirmed and marked
            # (bounded by close(), which closes the connection under a hung broker).
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
            bridge.wake()  # whatever set the event (or the backstop) meant: look again
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
                    self._error = exc  # raised on the loop's thread at its next step
                return
            if self._outage:
                event(logger, logging.INFO, "bridge.database_recovered",
                      "bridge: database reachable again")
                self._outage = False
