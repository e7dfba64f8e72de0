"""The outbox drain: pending Celery jobs published in fire order, then marked published.

:class:`Bridge` is what the beat loop drives: :meth:`~Bridge.wake` when there may be
work, :meth:`~Bridge.due` / :meth:`~Bridge.next_wake` to know when to call
:meth:`~Bridge.drain` and :meth:`~Bridge.purge`, and :meth:`~Bridge.close`.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from concurrent.futures import Future
from datetime import timedelta
from typing import Any

from .._db.records import Fence, OutboxStats
from .._db.store import Store
from .._logs import event
from ..errors import BrokerError, StoreError, first_line
from .messages import MessageBuilder, Prepared
from .publisher import Publisher

# The logger keeps the name it had before the modules moved into layer packages, so
# logging configurations that select it by name go on working.
logger = logging.getLogger('awa_beat.bridge.outbox')

DEFAULT_RETENTION = timedelta(days=7)
#: The (fire key, job id) before every pending job.
_START = ("", 0)


class _Marker:
    """Marks the batches the broker accepted as published, on a thread of its own, so
    that the database's work overlaps the next batch's publishing.

    A daemon thread fed through a SimpleQueue: nothing here takes a lock that beat's
    SIGTERM handler (which closes the bridge from the main thread, whatever it was
    doing) could wait on. A beat stopped mid-mark leaves those jobs pending; they are
    published again, with the same task ids.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._queue: queue.SimpleQueue[tuple[Future[int], list[int], list[str]] | None] = (
            queue.SimpleQueue())
        self._thread: threading.Thread | None = None

    def stop(self) -> None:
        """Let the thread end once it has marked what it was given (safe in a signal
        handler: SimpleQueue.put is reentrant)."""
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
                future.set_result(self.store.mark_published(ids, task_ids))
            except BaseException as exc:  # handed to the drain, which reports it
                future.set_exception(exc)


class Bridge:
    """Publishes the leader's pending Celery jobs; call :meth:`drain` from the beat loop."""

    def __init__(
        self,
        app: Any,
        store: Store,
        *,
        deployment: str,
        batch_size: int = 1000,
        retention: timedelta = DEFAULT_RETENTION,
        purge_every: float = 60.0,
        budget: float = 2.0,
    ) -> None:
        self.app = app
        self.store = store
        self.deployment = deployment
        self.batch_size = batch_size
        self.retention = retention
        self.purge_every = purge_every
        self.budget = budget
        self._pending = True
        self._publisher = Publisher(app)
        self._messages = MessageBuilder(app)
        self._marker = _Marker(store)
        self._resume_after = _START
        """Where the next drain starts: the key after the last job a drain published."""
        self._marks: list[Future[int]] = []
        self._carried: tuple[list[Prepared], int] | None = None
        """A batch the last drain sent and left for the next one to confirm: the beat
        fired meanwhile, so the next drain sends its first batch before waiting."""
        self._woken = 0
        """Wakes so far (from any thread): a drain that sees it move knows of new fires."""
        self._failures = 0
        self._published = 0
        self._publish_errors = 0
        self._retry_at = 0.0
        self._next_purge = 0.0
        self._fence: Fence | None = None
        self._deposed = False
        self._warm = False
        """Open the broker connection at the next drain that finds nothing to send."""

    @property
    def pending(self) -> bool:
        """Whether jobs may be waiting (set by :meth:`wake`, cleared by a drain that found
        the outbox empty)."""
        return self._pending

    def wake(self) -> None:
        """Jobs may be waiting (a fire, a leadership won, a notification, a periodic
        check): the next :meth:`due` says so. Safe from any thread."""
        self._pending = True
        self._woken += 1

    def lead(self, fence: Fence) -> None:
        """Publish from now on only while ``fence``'s session holds the lock: what a node
        calls when it wins. (A bridge never told is unfenced, for tests and tools.)"""
        self._fence, self._deposed = fence, False
        # A new leader's first drain finds the outbox empty, then connects to the broker
        # on this thread while the node loads and fires on its own; otherwise the first
        # fire's messages would wait for the connection.
        self._warm = True
        self.wake()

    @property
    def deposed(self) -> bool:
        """Told to stand down and not told to lead again."""
        return self._deposed

    def stand_down(self) -> None:
        """Publish nothing until :meth:`lead` again: the node lost (or may have lost)
        its lock."""
        self._deposed = True

    def close(self) -> None:
        self._carried = None  # unconfirmed: published again by the next drain, same ids
        self._publisher.close()
        self._marker.stop()
        self._messages.close()

    def settle(self) -> int:
        """Confirm and mark the batch the last drain left in flight, if any; publish
        nothing new (what a stopping or deposed bridge does). Returns how many."""
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
        """Counters for metrics (safe to read from any thread)."""
        return OutboxStats(self._published, self._publish_errors, self._failures == 0)

    # -- the loop's entry point --------------------------------------------------------------

    def due(self) -> bool:
        if self._carried is not None:
            return True  # to be confirmed, deposed or not
        return self._pending and not self._deposed and time.monotonic() >= self._retry_at

    def next_wake(self) -> float:
        """Monotonic time by which the loop should call :meth:`drain` or :meth:`purge`."""
        return min(self._next_purge, self._retry_at) if self._pending else self._next_purge

    def drain(self) -> int:
        """Publish pending jobs in fire order for up to ``budget`` seconds; count published.

        A backlog longer than the budget is resumed by the next drain where this one
        stopped (every job before that point is published), so a pass over a large
        backlog reads each job once. A pass that ended somewhere past the start asks for
        one more from the start, for jobs that arrived with an earlier key meanwhile (a
        manual trigger, a replayed missed fire).

        A broker failure (a :class:`BrokerError` from the publisher) is logged once per
        outage and retried with backoff (1 s doubling to 30 s); database errors
        (:class:`StoreError`) and anything else propagate to the caller.
        """
        if self._deposed:
            return self.settle()
        if time.monotonic() < self._retry_at:
            return 0
        published = 0
        deadline = time.monotonic() + self.budget
        woken = self._woken
        # Pipelined: while the broker confirms one batch, the next is read and built, and
        # the batches it accepted are marked published on another connection meanwhile;
        # a batch the last drain left in flight is confirmed after this one's first send.
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
                    break  # told mid-drain that the lock may be gone
                jobs = self.store.pending_celery_jobs(self.deployment, self.batch_size,
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
                    break  # let beat fire; the rest follows on the next tick
            if in_flight is not None:
                if (self._woken != woken and not self._deposed
                        and len(jobs) < self.batch_size):
                    # The beat fired while this drain ran: rather than wait here for the
                    # broker's confirms, the next drain, which follows at once, sends
                    # those jobs first. The batch stays unmarked until then; a beat
                    # stopped meanwhile publishes it again, with the same task ids.
                    self._carried, in_flight = in_flight, None
                else:
                    published += self._confirmed(*in_flight)
                    in_flight = None
        except StoreError:
            if carried is not None and in_flight is carried:
                # Nothing was sent after it: still the next drain's to confirm, from
                # where this one began (not from the start: it would be sent again).
                self._carried, self._resume_after = carried, began_after
            self._marked()
            raise  # the database's trouble is the beat loop's to report
        except BrokerError as exc:  # publish again later
            self._broker_failed(exc)
            self._marked()
            return published
        except Exception:
            # Neither the broker's trouble nor the database's: a bug, not to be retried
            # as an outage. The connection may be mid-batch, so it goes; the batches the
            # broker accepted are still marked (one that fails is simply published again).
            self._publisher.close()
            with contextlib.suppress(StoreError):
                self._marked()
            raise
        if len(jobs) >= self.batch_size or self._carried is not None:
            # The budget ran out, or the last batch is unmarked yet: go on from here
            # (set before the marks are awaited: a failed mark must not send it again).
            self._resume_after = after
        self._marked()
        self._pending = len(jobs) >= self.batch_size or resumed or self._carried is not None
        if self._warm and not self._deposed:
            self._warm = False  # once per lead: a broker that is away is the sends' to report
            self._publisher.warm()
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
            except Exception as exc:  # a message Celery refuses to build: any error of its
                error = f"{type(exc).__name__}: {exc}"
                event(logger, logging.ERROR, "bridge.unpublishable",
                      "bridge: cannot build the message of job %s (%s): %s; marked failed",
                      job["id"], job["kind"], exc, job_id=job["id"], task=job["kind"],
                      error=error)
                self.store.mark_unpublishable(job["id"], error)
        return batch

    def _confirmed(self, batch: list[Prepared], mark: int) -> int:
        """Wait for the broker to accept ``batch``, then have it marked published."""
        # Not cut short by stand_down(): a batch on its way is better confirmed and
        # marked, or the next leader publishes it again.
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
        self._carried = None  # its marks were on the connection that just failed
        self._publisher.close()
        if self._deposed:
            return  # closed under a drain (beat is stopping): no outage to report
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
            n = self.store.purge_published(self.retention, 1000)
            removed += n
            if n < 1000:
                break
        return removed
