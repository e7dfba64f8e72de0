"""The outbox drain: it publishes pending Celery jobs in fire order, then marks them
published.

The beat loop drives :class:`Bridge`. It calls :meth:`~Bridge.wake` when there may be
work, asks :meth:`~Bridge.due` and :meth:`~Bridge.next_wake` when to call
:meth:`~Bridge.drain` and :meth:`~Bridge.purge`, and ends with :meth:`~Bridge.close`.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from concurrent.futures import Future
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .._db.records import Fence, OutboxStats
from .._logs import event
from ..errors import BrokerError, StoreError, first_line
from .messages import MessageBuilder, Prepared
from .publisher import Publisher

if TYPE_CHECKING:
    from .._db.outbox import OutboxStore

# The logger keeps the name it had before the modules moved into layer packages, so
# logging configurations that select it by name go on working.
logger = logging.getLogger('awa_beat.bridge.outbox')

DEFAULT_RETENTION = timedelta(days=7)
#: This (fire key, job id) sorts before every pending job.
_START = ("", 0)


class _Marker:
    """Mark the batches that the broker accepted as published, on a thread of its own, so
    that the database's work overlaps the next batch's publishing.

    The thread is a daemon fed through a SimpleQueue, so nothing here takes a lock that
    beat's SIGTERM handler could wait on (the handler closes the bridge from the main
    thread, whatever that thread was doing). A beat stopped in the middle of a mark
    leaves those jobs pending, and they are published again with the same task ids.
    """

    def __init__(self, outbox: OutboxStore) -> None:
        self.outbox = outbox
        self._queue: queue.SimpleQueue[tuple[Future[int], list[int], list[str]] | None] = (
            queue.SimpleQueue())
        self._thread: threading.Thread | None = None

    def stop(self) -> None:
        """Let the thread end once it has marked what it was given. This is safe in a
        signal handler, because SimpleQueue.put is reentrant."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread = None

    def submit(self, ids: list[int], task_ids: list[str]) -> Future[int]:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="awa-beat-bridge-mark",
                                            daemon=True)
            self._thread.start()
        future: Future[int] = Future()
        self._queue.put((future, ids, task_ids))
        return future

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            future, ids, task_ids = item
            try:
                future.set_result(self.outbox.mark_published(ids, task_ids))
            except BaseException as exc:  # The drain gets the error and reports it.
                future.set_exception(exc)


class Bridge:
    """Publish the leader's pending Celery jobs. The beat loop calls :meth:`drain`."""

    def __init__(
        self,
        app: Any,
        outbox: OutboxStore,
        *,
        deployment: str,
        batch_size: int = 1000,
        retention: timedelta = DEFAULT_RETENTION,
        purge_every: float = 60.0,
        budget: float = 2.0,
    ) -> None:
        self.app = app
        self.outbox = outbox
        """The database's outbox, the only part of the database the bridge uses."""
        self.deployment = deployment
        self.batch_size = batch_size
        self.retention = retention
        self.purge_every = purge_every
        self.budget = budget
        self._pending = True
        self._publisher = Publisher(app)
        self._messages = MessageBuilder(app)
        self._marker = _Marker(outbox)
        self._resume_after = _START
        """The key where the next drain starts: the key after the last job that a drain
        published."""
        self._marks: list[Future[int]] = []
        self._carried: tuple[list[Prepared], int] | None = None
        """A batch that the last drain sent and left for the next drain to confirm. The
        beat fired meanwhile, so the next drain sends its first batch before it waits."""
        self._woken = 0
        """The number of wakes so far, from any thread. A drain that sees it change knows
        that there are new fires."""
        self._failures = 0
        self._published = 0
        self._publish_errors = 0
        self._retry_at = 0.0
        self._next_purge = 0.0
        self._fence: Fence | None = None
        self._deposed = False
        self._warm = False
        """Whether the next drain that finds nothing to send opens the broker connection."""

    @property
    def pending(self) -> bool:
        """Whether jobs may be waiting. :meth:`wake` sets the flag, and a drain that
        finds the outbox empty clears it."""
        return self._pending

    def wake(self) -> None:
        """Say that jobs may be waiting (after a fire, a won leadership, a notification or
        a periodic check), so that the next :meth:`due` returns True. Any thread may call
        this."""
        self._pending = True
        self._woken += 1

    def lead(self, fence: Fence) -> None:
        """From now on, publish only while ``fence``'s session holds the lock. A node
        calls this when it wins the election. A bridge that is never told this is
        unfenced, which tests and tools rely on."""
        self._fence, self._deposed = fence, False
        # A new leader's first drain finds the outbox empty and then connects to the
        # broker and loads Celery's message machinery on this thread, while the node loads
        # and fires on its own. Otherwise the first fire's messages would wait for both.
        self._warm = True
        self.wake()

    @property
    def deposed(self) -> bool:
        """Whether the bridge was told to stand down and not told to lead again."""
        return self._deposed

    def stand_down(self) -> None:
        """Publish nothing until :meth:`lead` is called again, because the node lost (or
        may have lost) its lock."""
        self._deposed = True

    def close(self) -> None:
        self._carried = None  # It is unconfirmed: the next drain publishes it again, same ids.
        self._publisher.close()
        self._marker.stop()
        self._messages.close()

    def settle(self) -> int:
        """Confirm and mark the batch that the last drain left in flight, if there is
        one, and publish nothing new, as a stopping or deposed bridge must. Return how
        many jobs were marked."""
        carried, self._carried = self._carried, None
        if carried is None:
            return 0
        try:
            count = self._confirmed(*carried)
        except BrokerError as exc:
            self._broker_failed(exc)
            return 0
        finally:
            self._marked()
        return count

    def stats(self) -> OutboxStats:
        """Return the counters for metrics. Any thread may read them."""
        return OutboxStats(self._published, self._publish_errors, self._failures == 0)

    # -- the loop's entry point --------------------------------------------------------------

    def due(self) -> bool:
        if self._carried is not None:
            return True  # The batch must be confirmed, whether the bridge is deposed or not.
        return self._pending and not self._deposed and time.monotonic() >= self._retry_at

    def next_wake(self) -> float:
        """Return the monotonic time by which the loop should call :meth:`drain` or
        :meth:`purge`."""
        return min(self._next_purge, self._retry_at) if self._pending else self._next_purge

    def drain(self) -> int:
        """Publish pending jobs in fire order for up to ``budget`` seconds, and return how
        many were published.

        When a backlog is longer than the budget, the next drain resumes where this one
        stopped (every job before that point is published), so a pass over a large
        backlog reads each job once. A pass that ended somewhere past the start asks for
        one more pass from the start, for jobs that arrived with an earlier key meanwhile
        (a manual trigger, a replayed missed fire).

        A broker failure (a :class:`BrokerError` from the publisher) is logged once per
        outage and retried with backoff (1 s, doubling up to 30 s). Database errors
        (:class:`StoreError`) and anything else propagate to the caller.
        """
        if self._deposed:
            return self.settle()
        if time.monotonic() < self._retry_at:
            return 0
        published = 0
        deadline = time.monotonic() + self.budget
        woken = self._woken
        # The drain is pipelined. While the broker confirms one batch, the next one is
        # read and built, and the batches that it accepted are marked published on
        # another connection meanwhile. A batch that the last drain left in flight is
        # confirmed after this drain's first send.
        carried = in_flight = self._carried
        self._carried = None
        resumed = self._resume_after != _START
        after, self._resume_after = self._resume_after, _START
        began_after = after
        self._marks = []
        jobs: list[dict[str, Any]] = []
        try:
            while True:
                if self._deposed:
                    break  # The drain was told that the lock may be gone.
                jobs = self.outbox.pending_celery_jobs(self.deployment, self.batch_size,
                                                       after=after, fence=self._fence)
                if jobs:
                    after = (jobs[-1]["fire_key"], jobs[-1]["id"])
                batch = self._prepare_batch(jobs)
                mark = self._publisher.send(batch) if batch else None
                if in_flight is not None:
                    published += self._confirmed(*in_flight)
                    in_flight = None
                if mark is not None:
                    in_flight = (batch, mark)
                if len(jobs) < self.batch_size:
                    break
                if time.monotonic() >= deadline:
                    break  # Beat gets to fire; the rest follows on the next tick.
            if in_flight is not None:
                if (self._woken != woken and not self._deposed
                        and len(jobs) < self.batch_size):
                    # The beat fired while this drain ran. Rather than wait here for the
                    # broker's confirms, the next drain, which follows at once, sends
                    # those jobs first. The batch stays unmarked until then, and a beat
                    # stopped meanwhile publishes it again with the same task ids.
                    self._carried, in_flight = in_flight, None
                else:
                    published += self._confirmed(*in_flight)
                    in_flight = None
        except StoreError:
            if carried is not None and in_flight is carried:
                # Nothing was sent after the batch, so the next drain still confirms it,
                # starting from where this drain began (not from the start, or the batch
                # would be sent again).
                self._carried, self._resume_after = carried, began_after
            self._marked()
            raise  # The beat loop reports the database's trouble.
        except BrokerError as exc:  # The jobs are published again later.
            self._broker_failed(exc)
            self._marked()
            return published
        except Exception:
            # This is neither the broker's trouble nor the database's but a bug, which must
            # not be retried as an outage. The connection may be in the middle of a batch,
            # so it is dropped. The batches that the broker accepted are still marked (a
            # batch whose mark fails is simply published again).
            self._publisher.close()
            with contextlib.suppress(StoreError):
                self._marked()
            raise
        if len(jobs) >= self.batch_size or self._carried is not None:
            # The budget ran out, or the last batch is not marked yet, so the next drain
            # goes on from here. This is set before the marks are awaited, so that a
            # failed mark does not send the batch again.
            self._resume_after = after
        self._marked()
        self._pending = len(jobs) >= self.batch_size or resumed or self._carried is not None
        if self._warm and not self._deposed:
            self._warm = False  # Once per lead: the sends report a broker that is away.
            self._publisher.warm()
            self._messages.warm()
        if self._failures:
            event(logger, logging.INFO, "bridge.recovered",
                  "bridge: broker reachable again; published the backlog",
                  failures=self._failures)
            self._failures = 0
        return published

    def _prepare_batch(self, jobs: list[dict[str, Any]]) -> list[Prepared]:
        batch = []
        for job in jobs:
            try:
                batch.append(self._messages.prepare(job))
            except Exception as exc:  # Celery refused to build a message, with any error.
                error = f"{type(exc).__name__}: {exc}"
                event(logger, logging.ERROR, "bridge.unpublishable",
                      "bridge: cannot build the message of job %s (%s): %s; marked failed",
                      job["id"], job["kind"], exc, job_id=job["id"], task=job["kind"],
                      error=error)
                self.outbox.mark_unpublishable(job["id"], error)
        return batch

    def _confirmed(self, batch: list[Prepared], mark: int) -> int:
        """Wait for the broker to accept ``batch``, then have it marked published."""
        # stand_down() does not cut this short: a batch on its way is better confirmed
        # and marked, or the next leader publishes it again.
        self._publisher.wait(mark)
        self._published += len(batch)
        event(logger, logging.DEBUG, "bridge.published",
              "bridge: the broker accepted %d message(s)", len(batch), count=len(batch))
        self._marks.append(self._marker.submit([m.job_id for m in batch],
                                               [m.task_id for m in batch]))
        self._messages.forget(batch)
        return len(batch)

    def _marked(self) -> None:
        """Wait until every batch the broker accepted in this drain is marked published.

        A mark that fails leaves its jobs pending: they are published again, with the
        same task ids.
        """
        marks, self._marks = self._marks, []
        errors = [exc for exc in (f.exception() for f in marks) if exc is not None]
        if errors:
            raise errors[0]

    def _broker_failed(self, exc: BrokerError) -> None:
        self._carried = None  # Its marks were on the connection that just failed.
        self._publisher.close()
        if self._deposed:
            return  # Beat is stopping and closed this under a drain: there is no outage.
        if self._failures == 0:
            event(logger, logging.ERROR, "bridge.outage",
                  "bridge: cannot publish to the broker (%s); jobs keep firing into "
                  "awa.jobs and will be published in order when it is back",
                  first_line(exc), error=first_line(exc))
        self._failures += 1
        self._publish_errors += 1
        delay = min(30.0, 2.0 ** (self._failures - 1))
        self._retry_at = time.monotonic() + delay
        logger.debug("bridge: retrying in %.0f s", delay)

    def purge(self, *, max_batches: int = 10) -> int:
        """Delete published jobs older than the retention, in bounded batches."""
        now = time.monotonic()
        if now < self._next_purge:
            return 0
        self._next_purge = now + self.purge_every
        removed = 0
        for _ in range(max_batches):
            n = self.outbox.purge_published(self.retention, 1000)
            removed += n
            if n < 1000:
                break
        return removed
