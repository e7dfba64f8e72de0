"""The Celery dispatch bridge: fired jobs become Celery task messages, at least once.

``awa.jobs`` is the outbox. A job whose ``metadata.celery.dispatch`` is ``"celery"``
stays ``available`` until the broker has accepted its message; then it is marked
``completed`` with its task id. So:

* a crash between the fire's commit and the publish, or a broker outage, leaves the job
  pending, and whichever replica leads publishes it later (in fire order);
* a crash between the broker's acceptance and the mark republishes the message with the
  **same task id**, derived from (schedule name, fire time), so a republish is
  recognisable: delivery is at least once, never lost.

Messages are built by Celery itself (``app.send_task`` into a producer that records
instead of sending), so routing, headers and properties are exactly what Celery's own
beat sends, including the ``celery_beat_task`` header Celery 5.7 adds; a relative
``expires`` counts from the fire time. They are then published in batches: on AMQP
with publisher confirms, waiting for the broker's acks once per batch rather than once
per message; on other transports (Redis, filesystem, ...) a returned publish is an
accepted one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import amqp
from celery.utils.saferepr import saferepr
from kombu import Connection, Producer
from kombu.common import maybe_declare
from kombu.serialization import dumps, loads, registry

from .amqp_publish import EncodedMessage, HeaderTable, coalesced_writes
from .errors import StoreError, first_line
from .fire_times import parse_iso
from .store import Store

logger = logging.getLogger("awa_beat.bridge")

UTC = timezone.utc
#: Task ids are uuid5(TASK_ID_NAMESPACE, "<cron_name>@<cron_fire_time>").
TASK_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://pypi.org/project/awa-beat/")
DEFAULT_RETENTION = timedelta(days=7)
#: The (fire key, job id) before every pending job.
_START = ("", 0)
#: Entries in the bridge's cache of (argsrepr, kwargsrepr, body) per args.
CALL_CACHE_SIZE = 512


#: apply_async options the bridge decides itself: publishing retries are its own, and
#: the task id is derived from the fire.
_BRIDGE_OWNED = ("retry", "retry_policy", "task_id", "producer", "connection", "publisher",
                 "router", "add_to_parent", "result_cls")


def task_id_for(job: dict[str, Any]) -> str:
    """The job's stable Celery task id: the same on every republish."""
    meta = job["metadata"]
    return _task_id(meta.get("cron_name"), meta.get("cron_fire_time"), job["id"])


def _task_id(cron_name: str | None, fire_time: str | None, job_id: int) -> str:
    key = f"{cron_name}@{fire_time}" if fire_time else f"job:{job_id}"
    return str(uuid.uuid5(TASK_ID_NAMESPACE, key))


@dataclass(frozen=True)
class _Plan:
    """What the bridge makes of one set of Celery options (parsed once per set)."""

    options: dict[str, Any]
    """apply_async options, less those the bridge owns and ``expires``."""
    expires: Any
    relative_expiry: bool
    """``expires`` is seconds after the fire."""
    templatable: bool
    """Messages with these options can be copied from a template."""

    @classmethod
    def parse(cls, text: str) -> _Plan:
        options = json.loads(text) or {}
        for key in _BRIDGE_OWNED:
            options.pop(key, None)
        expires = options.pop("expires", None)
        relative = isinstance(expires, (int, float)) and not isinstance(expires, bool)
        return cls(options, expires, relative,
                   "countdown" not in options and "eta" not in options)


def _call(text: str | None) -> tuple[Any, dict[str, Any]]:
    """(args, kwargs) from a job's args column, as Celery's send_task takes them."""
    call = json.loads(text) if text else {}
    if not isinstance(call, dict):
        call = {}
    return call.get("args") or (), call.get("kwargs") or {}


_PLAIN = (int, float, type(None))


def _saferepr(value: Any, maxlen: int, maxlevels: int) -> str:
    """Celery's ``saferepr``, with a shortcut for the common args: a short flat list of
    numbers (where it is plain ``repr``), and no kwargs."""
    if not value and isinstance(value, dict):
        return "{}"
    if (isinstance(value, list) and 0 < len(value) <= 32
            and all(type(v) in _PLAIN for v in value)):
        text = repr(value)
        if len(text) < maxlen:
            return text
    return saferepr(value, maxlen, maxlevels=maxlevels)


@dataclass
class Prepared:
    """One task message, serialised and routed, ready for any kombu channel."""

    job_id: int
    task_id: str
    body: Any
    priority: Any
    content_type: str
    content_encoding: str
    headers: dict[str, Any]
    properties: dict[str, Any]
    routing_key: str
    exchange: str
    declare: list[Any]
    embed: Any = None
    """The decoded body's third part (callbacks, chain, ...), kept to build copies."""
    table: HeaderTable | None = None
    """Encodes the headers of this template's copies (AMQP only)."""


class _Recorder(Producer):
    """A producer that keeps what Celery would publish instead of publishing it."""

    recorded: tuple[Any, ...] | None = None

    def _publish(self, body: Any, priority: Any, content_type: str, content_encoding: str,
                 headers: dict[str, Any], properties: dict[str, Any], routing_key: str,
                 mandatory: bool, immediate: bool, exchange: str, declare: list[Any],
                 *args: Any, **kwargs: Any) -> None:
        self.recorded = (body, priority, content_type, content_encoding, headers,
                         dict(properties), routing_key, exchange, list(declare))


class BrokerError(Exception):
    """The broker refused, dropped or did not confirm a batch."""


class _Publisher:
    """One broker connection, publishing batches and returning once they are accepted."""

    def __init__(self, app: Any, confirm_timeout: float = 30.0) -> None:
        self.app = app
        self.confirm_timeout = confirm_timeout
        self.conn: Connection | None = None
        self.channel: Any = None
        self.confirms = False
        self.encodes = False
        """py-amqp channel: the bridge encodes message properties itself."""
        self._declared: set[Any] = set()
        self._tag = 0
        self._confirmed = 0
        """Every delivery tag up to this one is confirmed."""
        self._confirmed_above: set[int] = set()
        """Tags above ``_confirmed`` confirmed singly (out of order)."""
        self._nacked = False

    def open(self) -> None:
        if self.conn is not None:
            return
        conn = self.app.connection_for_write()
        try:
            conn.ensure_connection(max_retries=1)
            channel = conn.channel()
            self.confirms = conn.transport.driver_type == "amqp" and hasattr(
                channel, "confirm_select")
            self.encodes = isinstance(channel, amqp.Channel)
            if self.confirms:
                channel.confirm_select()
                # py-amqp polls the socket before every publish to see whether the broker
                # blocked the connection; a block shows up in the confirm wait anyway.
                props = conn.connection.client_properties
                props["capabilities"] = {**props.get("capabilities", {}),
                                         "connection.blocked": False}
                channel.events["basic_ack"].add(self._on_ack)
                channel.events["basic_nack"].add(self._on_nack)
        except Exception:
            conn.release()
            raise
        self.conn, self.channel = conn, channel
        self._declared.clear()
        self._tag = self._confirmed = 0
        self._confirmed_above.clear()

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):  # a dead connection is fine to drop
                self.conn.release()
        self.conn = self.channel = None

    def _on_ack(self, tag: int, multiple: bool) -> None:
        # Tags rise one by one on a channel, so "confirmed up to" plus the few acked out
        # of order is all the state needed; no per-message set to scan.
        if multiple:
            self._confirmed = max(self._confirmed, tag)
        elif tag > self._confirmed:
            self._confirmed_above.add(tag)
        above = self._confirmed_above
        while self._confirmed + 1 in above:
            self._confirmed += 1
        above.difference_update([t for t in above if t <= self._confirmed])

    def _on_nack(self, tag: int, multiple: bool, *args: Any) -> None:
        self._nacked = True
        self._on_ack(tag, multiple)

    def send(self, messages: Sequence[Prepared]) -> int:
        """Publish ``messages`` without waiting; returns the mark to pass to :meth:`wait`."""
        self.open()
        assert self.conn is not None
        channel = self.channel
        for m in messages:
            # Before publishing anything: a declare waits for the broker's answer, which
            # must not sit behind writes that are being gathered.
            for entity in m.declare:
                if entity not in self._declared:
                    maybe_declare(entity, channel, retry=False)
                    self._declared.add(entity)
        with (coalesced_writes(self.conn.connection.transport) if self.encodes
              else contextlib.nullcontext()):
            for m in messages:
                if self.encodes and m.table is not None:
                    # py-amqp's channel: the headers a copy shares with its template are
                    # encoded once (what prepare_message builds, with cheaper encoding).
                    message = EncodedMessage(m.body, m.table, priority=m.priority,
                                             content_type=m.content_type,
                                             content_encoding=m.content_encoding,
                                             application_headers=m.headers, **m.properties)
                else:
                    message = channel.prepare_message(m.body, m.priority, m.content_type,
                                                      m.content_encoding, m.headers,
                                                      m.properties)
                channel.basic_publish(message, exchange=m.exchange,
                                      routing_key=m.routing_key)
        if self.confirms:
            self._tag += len(messages)
        return self._tag

    def wait(self, mark: int) -> None:
        """Return once the broker confirmed every message sent up to ``mark``."""
        if not self.confirms:
            return  # a returned publish was an accepted one
        assert self.conn is not None
        deadline = time.monotonic() + self.confirm_timeout
        while self._confirmed < mark:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrokerError(f"the broker did not confirm {mark - self._confirmed} "
                                  f"message(s) within {self.confirm_timeout:g} s")
            try:
                self.conn.drain_events(timeout=min(left, 1.0))
            except TimeoutError:
                continue
        if self._nacked:
            raise BrokerError("the broker refused (nacked) messages")

    def publish(self, messages: Sequence[Prepared]) -> None:
        """Publish every message; return only once the broker accepted all of them."""
        self.wait(self.send(messages))


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
        self.pending = True
        """Whether jobs may be waiting (set by fires and elections, cleared by a drain)."""
        self._publisher = _Publisher(app)
        self._recorder: _Recorder | None = None
        self._prepared: dict[int, Prepared] = {}
        self._templates: dict[tuple[str, str], Prepared] = {}
        self._plans: dict[tuple[str, str], _Plan] = {}
        self._calls: dict[tuple[int, str], tuple[str, str, Any]] = {}
        self._repr_limits: tuple[int, int, int] | None = None
        self._marker = _Marker(store)
        self._resume_after = _START
        """Where the next drain starts: the key after the last job a drain published."""
        self._marks: list[Future[int]] = []
        self._failures = 0
        self._retry_at = 0.0
        self._next_purge = 0.0

    def close(self) -> None:
        self._publisher.close()
        self._marker.stop()
        if self._recorder is not None:
            self._recorder.connection.release()
            self._recorder = None

    # -- building messages -------------------------------------------------------------------

    def prepare(self, job: dict[str, Any]) -> Prepared:
        """Build the job's message exactly as Celery's beat would send it.

        ``job`` is a row of :meth:`Store.pending_celery_jobs`: its args and Celery options
        as JSON text, so that they key the caches below without being parsed again.

        Celery builds the first message for each task and set of options; the others
        are copies with their own task id, expiry, args and kwargs (body and the
        ``argsrepr``/``kwargsrepr`` headers), the only parts of a Celery message that
        differ between two sends with the same options (checked against Celery itself
        in the tests). Messages that depend on the time of sending (``countdown``,
        ``eta``) or are compressed are always built by Celery.
        """
        cached = self._prepared.get(job["id"])
        if cached is not None:
            return cached
        key = (job["kind"], job["options"] or "{}")
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = _Plan.parse(key[1])
        expires = plan.expires
        if plan.relative_expiry:
            # Relative to the fire, not to the publish: a late publish does not extend it.
            fired = _parse_fire_time(job["cron_fire_time"]) or job["created_at"]
            expires = fired + timedelta(seconds=plan.expires)
        task_id = _task_id(job["cron_name"], job["cron_fire_time"], job["id"])
        template = self._templates.get(key) if plan.templatable else None
        if template is None:
            args, kwargs = _call(job["args"])
            prepared = self._build(job["id"], job["kind"], args, kwargs, dict(plan.options),
                                   expires, task_id)
            if plan.templatable and "compression" not in prepared.headers:
                self._templates[key] = prepared
        else:
            prepared = self._copy(template, job["id"], task_id, expires, job["args"] or "{}")
        self._prepared[job["id"]] = prepared
        return prepared

    def _copy(self, template: Prepared, job_id: int, task_id: str, expires: Any,
              call: str) -> Prepared:
        """``template`` for another job, set the way Celery sets those fields."""
        headers = dict(template.headers)
        headers["id"] = headers["root_id"] = task_id
        headers["argsrepr"], headers["kwargsrepr"], body = self._call_parts(template, call)
        properties = dict(template.properties)
        properties["correlation_id"] = task_id
        if isinstance(expires, datetime):
            headers["expires"] = expires.isoformat()
            # Celery turns the expiry into the message's TTL, counted from the send.
            left = max(0.0, (expires - datetime.now(UTC)).total_seconds())
            properties["expiration"] = str(int(left * 1000))
        if template.table is None:
            template.table = HeaderTable(template.headers)
        return Prepared(job_id, task_id, body, template.priority, template.content_type,
                        template.content_encoding, headers, properties, template.routing_key,
                        template.exchange, template.declare, template.embed, template.table)

    def _call_parts(self, template: Prepared, call: str) -> tuple[str, str, Any]:
        """argsrepr, kwargsrepr and body for the JSON ``call``, cached: a schedule sends
        the same args every time it fires."""
        key = (id(template), call)
        parts = self._calls.get(key)
        if parts is not None:
            return parts
        args, kwargs = _call(call)
        if self._repr_limits is None:
            # Read once: each look-up in Celery's settings costs a few microseconds.
            # task_repr_maxlevels is new in Celery 5.7; older versions use saferepr's
            # default.
            amqp = self.app.amqp
            self._repr_limits = (amqp.argsrepr_maxsize, amqp.kwargsrepr_maxsize,
                                 self.app.conf.get("task_repr_maxlevels", 3))
        args_max, kwargs_max, levels = self._repr_limits
        if template.embed is None:
            template.embed = loads(template.body, template.content_type,
                                   template.content_encoding)[2]
        _, _, body = dumps((args, kwargs, template.embed),
                           serializer=registry.type_to_name[template.content_type])
        parts = (_saferepr(args, args_max, levels), _saferepr(kwargs, kwargs_max, levels),
                 body)
        if len(self._calls) >= CALL_CACHE_SIZE:
            self._calls.clear()
        self._calls[key] = parts
        return parts

    def _build(self, job_id: int, kind: str, args: Any, kwargs: dict[str, Any],
               options: dict[str, Any], expires: Any, task_id: str) -> Prepared:
        if self._recorder is None:
            self._recorder = _Recorder(self.app.connection_for_write(), auto_declare=False)
        headers = dict(options.pop("headers", None) or {})
        headers["celery_beat_task"] = True
        self._recorder.recorded = None
        self.app.send_task(kind, args, kwargs, task_id=task_id, producer=self._recorder,
                           expires=expires, headers=headers, retry=False, **options)
        recorded = self._recorder.recorded
        assert recorded is not None, "Celery did not publish through the producer"
        return Prepared(job_id, task_id, *recorded)

    # -- the loop's entry point --------------------------------------------------------------

    def due(self) -> bool:
        return self.pending and time.monotonic() >= self._retry_at

    def next_wake(self) -> float:
        """Monotonic time by which the loop should call :meth:`drain` or :meth:`purge`."""
        return min(self._next_purge, self._retry_at) if self.pending else self._next_purge

    def drain(self) -> int:
        """Publish pending jobs in fire order for up to ``budget`` seconds; count published.

        A backlog longer than the budget is resumed by the next drain where this one
        stopped (every job before that point is published), so a pass over a large
        backlog reads each job once. A pass that ended somewhere past the start asks for
        one more from the start, for jobs that arrived with an earlier key meanwhile (a
        manual trigger, a replayed missed fire).

        A broker failure is logged once per outage and retried with backoff (1 s doubling
        to 30 s); database errors propagate to the caller.
        """
        if time.monotonic() < self._retry_at:
            return 0
        published = 0
        deadline = time.monotonic() + self.budget
        # Pipelined: while the broker confirms one batch, the next is read and built, and
        # the batches it accepted are marked published on another connection meanwhile.
        in_flight: tuple[list[Prepared], int] | None = None
        resumed = self._resume_after != _START
        after, self._resume_after = self._resume_after, _START
        self._marks = []
        try:
            while True:
                jobs = self.store.pending_celery_jobs(self.deployment, self.batch_size,
                                                      after=after)
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
                published += self._confirmed(*in_flight)
                in_flight = None
        except StoreError:
            self._marked()
            raise  # the database's trouble is the beat loop's to report
        except Exception as exc:  # any broker failure: publish again later
            self._broker_failed(exc)
            self._marked()
            return published
        self._marked()
        if len(jobs) >= self.batch_size:
            self._resume_after = after  # the budget ran out: go on from here next time
        self.pending = len(jobs) >= self.batch_size or resumed
        if self._failures:
            logger.info("bridge: broker reachable again; published the backlog")
            self._failures = 0
        return published

    def _prepare_batch(self, jobs: list[dict[str, Any]]) -> list[Prepared]:
        batch = []
        for job in jobs:
            try:
                batch.append(self.prepare(job))
            except Exception as exc:  # a message Celery refuses to build
                logger.error("bridge: cannot build the message of job %s (%s): %s; "
                             "marked failed", job["id"], job["kind"], exc)
                self.store.mark_unpublishable(job["id"], f"{type(exc).__name__}: {exc}")
        return batch

    def _confirmed(self, batch: list[Prepared], mark: int) -> int:
        """Wait for the broker to accept ``batch``, then have it marked published."""
        self._publisher.wait(mark)
        self._marks.append(self._marker.submit([m.job_id for m in batch],
                                               [m.task_id for m in batch]))
        for m in batch:
            self._prepared.pop(m.job_id, None)
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

    def _broker_failed(self, exc: BaseException) -> None:
        self._publisher.close()
        if self._failures == 0:
            logger.error("bridge: cannot publish to the broker (%s); jobs keep firing into "
                         "awa.jobs and will be published in order when it is back",
                         first_line(exc))
        self._failures += 1
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


def _parse_fire_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return parse_iso(text).astimezone(UTC)  # Awa's text form: "YYYY-MM-DD HH:MM:SS+00"
