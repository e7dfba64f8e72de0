"""Worker feedback: what became of every task awa-beat fired (docs/outcomes.md).

A Celery worker turns it on with one setting, ``awa_beat_track_outcomes = True`` (or
``AWA_BEAT_TRACK_OUTCOMES=1``). Every ``celery`` command imports awa-beat's
``celery.commands`` entry point, which connects :func:`on_worker_init`, and that calls
:func:`install` when the setting is on. A worker started some other way (from Python,
or with ``celery.contrib.testing``) calls ``awa_beat.outcomes.install(app)`` itself.

On the worker, each task that awa-beat fired is recognised by the headers that the bridge
puts on its message (job, schedule, fire time), checked against its task id (which is
derived from them), so any other task costs one attribute look-up. The task's start and
end are appended to an in-memory buffer. A background thread per process writes the
buffer in batches (one statement per batch), so a task never waits on the database, and
an outage only delays the records. They stay buffered up to a bound; beyond it, the
oldest are dropped, counted and logged once.

At most once (per schedule with ``options["awa_beat"]["at_most_once"]``, or with
``awa_beat_at_most_once`` on the worker) is the one synchronous part. Before the task
runs, one ``INSERT ... ON CONFLICT`` claims its task id, and a second delivery of a fire
whose run already started is acknowledged and not run (Celery's ``Ignore``). The claim
cannot be checked while the database is down, so the task then runs (and this is logged
once), since a database outage must never stop tasks.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any, overload

from ._bridge.messages import (
    AT_MOST_ONCE_HEADER,
    FIRE_TIME_HEADER,
    JOB_HEADER,
    SCHEDULE_HEADER,
    fire_task_id,
    parse_fire_time,
)
from ._config import Settings
from ._logs import event
from .errors import AwaBeatError, first_line

logger = logging.getLogger(__name__)

UTC = timezone.utc
#: How many seconds pass between two writes of the buffer.
FLUSH_INTERVAL = 0.5
#: How many reports one statement writes.
BATCH = 1000
#: How many reports are kept while the database is unreachable. Beyond it, the oldest are
#: dropped.
MAX_BUFFERED = 100_000
#: How many seconds pass between two purges of old outcomes by a writer.
PURGE_INTERVAL = 3600.0
#: How many seconds a claim waits for a connection before the task runs unclaimed, and
#: how many seconds after a failed claim tasks run without asking (so that an outage
#: costs one wait, not one per task).
CLAIM_TIMEOUT = 2.0
CLAIM_BACKOFF = 5.0
#: The state that Celery reports after a run, as it is recorded. None means there is
#: nothing to record (a duplicate that was skipped, or a state that is not an end).
_STATES = {"SUCCESS": "succeeded", "FAILURE": "failed", "RETRY": "retried",
           "REVOKED": "revoked", "REJECTED": "failed"}
_DUPLICATE = "awa_beat_duplicate"


def outcome_state(celery_state: str | None) -> str | None:
    """Return the recorded state for Celery's state at the end of a run."""
    return _STATES.get(celery_state or "")


@overload
def error_line(exc: BaseException) -> str: ...


@overload
def error_line(exc: BaseException | None) -> str | None: ...


def error_line(exc: BaseException | None) -> str | None:
    """Return ``Type: first line of the message``, in at most 500 characters."""
    if exc is None:
        return None
    return f"{type(exc).__name__}: {first_line(exc)}"[:500]


@dataclass(slots=True)
class Report:
    """One piece of news about one task. A None field leaves what is stored alone, except
    that a start clears ``finished_at``, ``runtime`` and ``error``."""

    task_id: str
    schedule: str
    fire_time: str | None
    job_id: int | None
    state: str
    retries: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    runtime: float | None = None
    worker: str | None = None
    error: str | None = None


def merge(reports: Iterable[Report]) -> list[Report]:
    """Return one report per task id, in first-seen order. A later report overrides the
    state and the end, and it keeps the start and the worker of an earlier report when it
    has none."""
    merged: dict[str, Report] = {}
    for r in reports:
        old = merged.get(r.task_id)
        if old is None or r.started_at is not None:  # A start begins the run afresh.
            merged[r.task_id] = r
        else:
            merged[r.task_id] = replace(r, started_at=old.started_at,
                                        worker=r.worker or old.worker,
                                        retries=max(r.retries, old.retries))
    return list(merged.values())


def outcome_params(reports: list[Report]) -> dict[str, list[Any]]:
    """Return the bind parameters of ``record_outcomes``."""
    return {
        "task_ids": [r.task_id for r in reports], "schedules": [r.schedule for r in reports],
        "fire_times": [r.fire_time for r in reports], "job_ids": [r.job_id for r in reports],
        "states": [r.state for r in reports], "retries": [r.retries for r in reports],
        "started": [r.started_at for r in reports],
        "finished": [r.finished_at for r in reports],
        "runtimes": [r.runtime for r in reports], "workers": [r.worker for r in reports],
        "errors": [r.error for r in reports],
    }


class Buffer:
    """The reports waiting to be written. Tasks append them, and the writer takes them.
    The buffer is bounded: past ``limit``, the oldest are dropped and counted."""

    def __init__(self, limit: int = MAX_BUFFERED) -> None:
        self.limit = limit
        self._items: collections.deque[Report] = collections.deque()
        self._lock = threading.Lock()
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._items)

    def append(self, report: Report) -> None:
        # deque.append is atomic. The bound is checked here without the lock, and the
        # writer's take() and put_back() enforce it exactly.
        self._items.append(report)
        if len(self._items) > self.limit:
            with self._lock:
                while len(self._items) > self.limit:
                    self._items.popleft()
                    self.dropped += 1

    def take(self, count: int) -> list[Report]:
        out: list[Report] = []
        items = self._items
        with self._lock:
            while items and len(out) < count:
                out.append(items.popleft())
        return out

    def put_back(self, reports: list[Report]) -> None:
        """Put back the reports that could not be written, ahead of the newer ones."""
        with self._lock:
            self._items.extendleft(reversed(reports))
            while len(self._items) > self.limit:
                self._items.popleft()
                self.dropped += 1


class Writer:
    """Write one process's buffer in batches on a daemon thread, and claim runs.

    ``connect`` returns an opened store. It is called on the writer's thread (or by the
    first claim), and again after a failure, so a worker started while the database is
    down begins recording once the database is back.
    """

    def __init__(self, connect: Callable[[], Any], *, retention: timedelta,
                 flush_interval: float = FLUSH_INTERVAL, buffer_limit: int = MAX_BUFFERED,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._connect = connect
        self.retention = retention
        self.flush_interval = flush_interval
        self.buffer = Buffer(buffer_limit)
        self.clock = clock
        self._store: Any = None
        self._store_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._outage = False
        self._reported_dropped = 0
        self._next_purge = 0.0
        self.written = 0
        self.claim_failures = 0
        self._claim_retry_at = 0.0

    # -- called by the tasks ------------------------------------------------------------

    def add(self, report: Report) -> None:
        if self._pid != os.getpid():  # This is the first report, or a forked pool process.
            self._start()
        self.buffer.append(report)

    def claim(self, report: Report) -> bool:
        """Claim a run synchronously, and return False for a duplicate. When the database
        cannot be asked, the run goes ahead, and its start is recorded later."""
        if self.clock() < self._claim_retry_at:
            self.add(report)
            return True
        try:
            store = self._opened()
            return bool(store.outcomes.claim(
                task_id=report.task_id, schedule=report.schedule, fire_time=report.fire_time,
                job_id=report.job_id, retries=report.retries, started_at=report.started_at,
                worker=report.worker))
        except AwaBeatError as exc:
            self._claim_retry_at = self.clock() + CLAIM_BACKOFF
            self.claim_failures += 1
            if self.claim_failures == 1:
                event(logger, logging.ERROR, "outcomes.claim_failed",
                      "awa-beat: cannot claim task %s (%s); at-most-once is not enforced "
                      "until the database is back, tasks run", report.task_id, exc,
                      error=str(exc))
            self.add(report)
            return True

    # -- the thread ---------------------------------------------------------------------

    def _start(self) -> None:
        self._pid = os.getpid()
        self._store = None  # A connection inherited through fork is not ours to use.
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="awa-beat-outcomes",
                                        daemon=True)
        self._thread.start()

    def _opened(self) -> Any:
        with self._store_lock:
            if self._store is None:
                self._store = self._connect()
            return self._store

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self.flush_interval)
            self._wake.clear()
            self.flush()

    def flush(self) -> bool:
        """Write everything buffered, and return False if the database refused (the reports
        are kept for later)."""
        while len(self.buffer):
            batch = merge(self.buffer.take(BATCH))
            try:
                paused = self._opened().outcomes.record(outcome_params(batch))
            except AwaBeatError as exc:
                self.buffer.put_back(batch)
                self._lost_database(exc)
                return False
            self.written += len(batch)
            for name, note in paused or ():
                event(logger, logging.WARNING, "schedule.paused_after_failures",
                      "awa-beat: paused schedule %r: %s", name, note, schedule=name,
                      note=note)
            if self._outage:
                self._outage = False
                event(logger, logging.INFO, "outcomes.recovered",
                      "awa-beat: recording outcomes again")
        self._report_dropped()
        self._purge()
        return True

    def _lost_database(self, exc: AwaBeatError) -> None:
        with self._store_lock:
            store, self._store = self._store, None
        if store is not None:
            with contextlib.suppress(Exception):  # The pool may be gone with the database.
                store.close()
        if not self._outage:
            self._outage = True
            event(logger, logging.ERROR, "outcomes.outage",
                  "awa-beat: cannot record outcomes (%s); they are buffered (at most %s) "
                  "and written when the database is back", exc, self.buffer.limit,
                  error=str(exc))
        self._report_dropped()

    def _report_dropped(self) -> None:
        dropped = self.buffer.dropped
        if dropped > self._reported_dropped:
            event(logger, logging.ERROR, "outcomes.dropped",
                  "awa-beat: %s outcome report(s) dropped: the buffer was full",
                  dropped - self._reported_dropped, count=dropped - self._reported_dropped)
            self._reported_dropped = dropped

    def _purge(self) -> None:
        now = self.clock()
        if now < self._next_purge:
            return
        self._next_purge = now + PURGE_INTERVAL
        try:
            self._opened().outcomes.purge(self.retention)
        except AwaBeatError as exc:
            logger.info("awa-beat: purging old outcomes failed: %s", exc)

    def close(self) -> None:
        """Write what is buffered (once) and stop the thread."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None and self._pid == os.getpid():
            self._thread.join(5)
        self.flush()
        with self._store_lock:
            store, self._store = self._store, None
        if store is not None:
            store.close()


@dataclass(frozen=True, slots=True)
class Fire:
    """What the headers say about an awa-beat task."""

    job_id: int
    schedule: str
    fire_time: str | None
    at_most_once: bool


def identify(task_id: str | None, headers: Mapping[str, Any] | Any) -> Fire | None:
    """Return the fire that a task belongs to, if awa-beat fired it. The bridge's headers
    are checked against the task id that they derive, so a forged or stale header does
    not count as ours."""
    get = headers.get if isinstance(headers, Mapping) else (
        lambda key, default=None: getattr(headers, key, default))
    job = get(JOB_HEADER, None)
    if job is None or task_id is None:
        return None
    schedule = get(SCHEDULE_HEADER, "") or ""
    fire_time = get(FIRE_TIME_HEADER, "") or None
    try:
        job_id = int(job)
    except (TypeError, ValueError):
        return None
    if fire_task_id(schedule or None, fire_time, job_id) != task_id:
        return None
    return Fire(job_id, schedule, fire_time, get(AT_MOST_ONCE_HEADER, "0") == "1")


def _request_fire(request: Any) -> Fire | None:
    """Read a header from a task's request (Context). Custom headers are its attributes
    in protocol 2, or they are in ``request.headers`` under some transports and versions."""
    found = identify(getattr(request, "id", None), request)
    if found is None and isinstance(getattr(request, "headers", None), Mapping):
        found = identify(request.id, request.headers)
    return found


def fire_time(task_or_request: object) -> datetime | None:
    """Return the fire time that a task's job stands for, as an aware UTC datetime.

    This is the nominal fire time of the schedule (the instant its calendar named), not
    the moment the job was created, published or started: a fire that runs late, or one
    caught up after downtime, still answers the instant it stands for. Task code can
    process "the window ending at the fire time" with it, and de-duplicate on
    (schedule, fire time).

    ``task_or_request`` is any of:

    * a bound Celery task (``self`` in a task declared with ``bind=True``), or its
      ``request`` (the task's Context), or the worker's ``Request`` of the task;
    * an Awa job (``awa.Job``, or anything with a ``metadata`` mapping), for schedules
      dispatched to Awa's workers, whose jobs carry ``metadata["cron_fire_time"]``.

    It returns None for a task awa-beat did not fire (a plain ``.delay()`` or
    ``apply_async``), and for a manual trigger (``awa-beat trigger``, the dashboard's or
    the admin's Trigger), which runs the task now and stands for no fire time of the
    calendar. A Celery message's awa-beat headers count only when the task id is the
    one they derive, so a copied or forged header is not taken for a fire.
    """
    metadata = getattr(task_or_request, "metadata", None)
    if isinstance(metadata, Mapping):
        text = metadata.get("cron_fire_time")
        return parse_fire_time(text) if isinstance(text, str) else None
    # A task's request is its Context; anything without one is taken to be a request.
    request = getattr(task_or_request, "request", task_or_request)
    fire = _request_fire(request) or identify(
        getattr(request, "id", None), getattr(request, "request_dict", None) or {})
    return parse_fire_time(fire.fire_time) if fire is not None else None


class Tracker:
    """The signal handlers of one app. They put reports into a :class:`Writer`."""

    def __init__(self, writer: Writer, *, at_most_once: bool = False,
                 host: str | None = None) -> None:
        self.writer = writer
        self.at_most_once = at_most_once
        self.host = host or socket.gethostname()
        self._running: dict[str, tuple[Fire, float]] = {}
        self._errors: dict[str, str] = {}
        self.duplicates = 0

    def prerun(self, task_id: str, task: Any, **_: Any) -> None:
        request = task.request
        fire = _request_fire(request)
        if fire is None:
            return
        self._running[task_id] = (fire, time.perf_counter())
        report = Report(task_id, fire.schedule, fire.fire_time, fire.job_id, "started",
                        int(getattr(request, "retries", 0) or 0), datetime.now(UTC),
                        worker=getattr(request, "hostname", None) or self.host)
        if not (fire.at_most_once or self.at_most_once):
            self.writer.add(report)
        elif not self.writer.claim(report):
            self._running.pop(task_id, None)
            setattr(request, _DUPLICATE, True)  # The guarded before_start raises Ignore.
            self.duplicates += 1
            event(logger, logging.WARNING, "outcomes.duplicate_skipped",
                  "awa-beat: task %s (schedule %r, fire %s) already ran or runs; this "
                  "delivery is acknowledged and not run (at most once)", task_id,
                  fire.schedule, fire.fire_time, task_id=task_id, schedule=fire.schedule,
                  fire_time=fire.fire_time)

    def failure(self, task_id: str | None = None, exception: BaseException | None = None,
                **_: Any) -> None:
        if task_id is not None and task_id in self._running:
            self._errors[task_id] = error_line(exception) or "failed"

    def retry(self, request: Any = None, reason: Any = None, **_: Any) -> None:
        task_id = getattr(request, "id", None)
        if task_id is not None and task_id in self._running:
            self._errors[task_id] = (error_line(reason) if isinstance(reason, BaseException)
                                     else str(reason)[:500] if reason else "retry")

    def postrun(self, task_id: str, task: Any, state: str | None = None, **_: Any) -> None:
        running = self._running.pop(task_id, None)
        error = self._errors.pop(task_id, None)
        if running is None:
            return
        recorded = outcome_state(state)
        if recorded is None:
            return
        fire, started = running
        self.writer.add(Report(task_id, fire.schedule, fire.fire_time, fire.job_id, recorded,
                               int(getattr(task.request, "retries", 0) or 0),
                               finished_at=datetime.now(UTC),
                               runtime=time.perf_counter() - started,
                               error=error if recorded != "succeeded" else None))

    def revoked(self, request: Any = None, terminated: bool = False, expired: bool = False,
                **_: Any) -> None:
        """Report a revoked task (one that never started, or that was terminated while it
        ran, maybe in a pool process). The worker's main process reports it from its
        request."""
        task_id = getattr(request, "id", None)
        # Celery passes the task's Context, with the headers as attributes; older versions
        # pass the worker's Request, whose headers are in request_dict.
        fire = _request_fire(request) or identify(
            task_id, getattr(request, "request_dict", None) or {})
        if fire is None or task_id is None:  # identify() needs a task id.
            return
        self._running.pop(task_id, None)
        self.writer.add(Report(task_id, fire.schedule, fire.fire_time, fire.job_id, "revoked",
                               finished_at=datetime.now(UTC),
                               worker=getattr(request, "hostname", None) or self.host,
                               error="expired" if expired else
                               "terminated" if terminated else "revoked"))

    def close(self, **_: Any) -> None:
        self.writer.close()


def _guard_tasks(app: Any) -> None:
    """Make every task of ``app`` skip its run when the claim found a duplicate.

    A signal handler cannot stop a task (Celery logs what it raises), but ``before_start``
    runs inside the task's trace, where ``Ignore`` acknowledges the message and skips the
    run. Celery builds each task's tracer after ``worker_init``, and it calls
    ``before_start`` only when a task class defines one, so the method is wrapped on every
    class.
    """
    from celery.exceptions import Ignore

    for task in list(app.tasks.values()):
        cls = type(task)
        if cls.__dict__.get("_awa_beat_guarded"):
            continue
        original = cls.before_start

        def before_start(self: Any, task_id: str, args: Any, kwargs: Any,
                         _original: Any = original) -> Any:
            if getattr(self.request, _DUPLICATE, False):
                raise Ignore()
            return _original(self, task_id, args, kwargs)

        cls.before_start = before_start
        cls._awa_beat_guarded = True


_installed: dict[int, Tracker] = {}


def install(app: Any, settings: Settings | None = None,
            connect: Callable[[], Any] | None = None) -> Tracker:
    """Record the outcomes of the tasks that awa-beat fired and that ``app``'s worker runs.
    Call it before the worker starts consuming (``worker_init``). Calling it again for the
    same app does nothing."""
    from celery import signals

    from ._db.conninfo import settings_from_app

    tracker = _installed.get(id(app))
    if tracker is not None:
        return tracker
    settings = settings or settings_from_app(app.conf, app_name=app.main)
    if connect is None:
        connect = _store_factory(settings)
    writer = Writer(connect, retention=timedelta(days=settings.outcome_retention))
    tracker = Tracker(writer, at_most_once=settings.at_most_once)
    _guard_tasks(app)
    uid = f"awa_beat.outcomes.{id(app)}"
    signals.task_prerun.connect(tracker.prerun, weak=False, dispatch_uid=uid + ".prerun")
    signals.task_postrun.connect(tracker.postrun, weak=False, dispatch_uid=uid + ".postrun")
    signals.task_failure.connect(tracker.failure, weak=False, dispatch_uid=uid + ".failure")
    signals.task_retry.connect(tracker.retry, weak=False, dispatch_uid=uid + ".retry")
    signals.task_revoked.connect(tracker.revoked, weak=False, dispatch_uid=uid + ".revoked")
    signals.worker_process_shutdown.connect(tracker.close, weak=False,
                                            dispatch_uid=uid + ".process_shutdown")
    signals.worker_shutdown.connect(tracker.close, weak=False, dispatch_uid=uid + ".shutdown")
    _installed[id(app)] = tracker
    logger.info("awa-beat: recording the outcomes of awa-beat's tasks%s",
                " (at most once)" if settings.at_most_once else "")
    return tracker


def _store_factory(settings: Settings) -> Callable[[], Any]:
    from ._db.database import Database
    from ._db.embedded import resolve_database_url

    url = resolve_database_url(settings.database_url, create_embedded=False)

    def connect() -> Any:
        return Database(url, min_size=1, max_size=2, timeout=CLAIM_TIMEOUT,
                     origin="outcomes").open(timeout=CLAIM_TIMEOUT)

    return connect


def on_worker_init(sender: Any = None, **_: Any) -> None:
    """On ``worker_init``, install the recorder when the worker's app has
    ``awa_beat_track_outcomes`` on."""
    app = getattr(sender, "app", None)
    if app is None:
        return
    # Imported here, as the store is: a worker that records nothing never loads the driver.
    from ._db.conninfo import settings_from_app

    try:
        settings = settings_from_app(app.conf, app_name=app.main)
        if settings.track_outcomes:
            install(app, settings)
    except AwaBeatError as exc:
        event(logger, logging.ERROR, "outcomes.disabled",
              "awa-beat: outcomes are not recorded: %s", exc, error=str(exc))
