"""The Celery task message of each fired job, which Celery itself builds.

Celery builds the first message for a task and a set of options (``app.send_task`` into
a producer that records instead of sending), so its routing, headers and properties are
exactly what Celery's own beat sends. The other messages are copies of it with their own
task id, expiry and args. The task id is derived from the fire, so a message that is
published again carries the same one.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from hashlib import sha1
from typing import Any

from celery.utils.saferepr import saferepr
from kombu import Producer
from kombu.serialization import dumps, loads, registry
from kombu.utils import json as kombu_json

from .._schedules.fire_times import parse_iso
from .._schedules.spec import BRIDGE_OWNED_OPTIONS
from .amqp import HeaderTable

UTC = timezone.utc
#: Task ids are uuid5(TASK_ID_NAMESPACE, "<cron_name>@<cron_fire_time>").
TASK_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://pypi.org/project/awa-beat/")
_NAMESPACE = TASK_ID_NAMESPACE.bytes
#: The headers that the bridge puts on every message, for the workers' outcome recorder
#: (awa_beat.outcomes) to read. They carry the job, its schedule and its fire time (in
#: Awa's text form, and empty for a manual trigger), and "1" when the schedule asks for
#: at-most-once execution.
JOB_HEADER = "awa_beat_job"
SCHEDULE_HEADER = "awa_beat_schedule"
FIRE_TIME_HEADER = "awa_beat_fire_time"
AT_MOST_ONCE_HEADER = "awa_beat_at_most_once"
#: This encoder writes kombu's JSON of plain values without building an encoder per message.
_JSON = json.JSONEncoder()
#: How many entries the cache of (argsrepr, kwargsrepr, body) per args holds.
CALL_CACHE_SIZE = 512



def fire_task_id(cron_name: str | None, fire_time: str | None, job_id: int) -> str:
    """Return a fired job's Celery task id, which is the same on every republish.

    ``fire_time`` is the job's ``cron_fire_time`` in Awa's text form; a job without one
    (a manual trigger) is identified by its id instead.
    """
    key = f"{cron_name}@{fire_time}" if fire_time else f"job:{job_id}"
    # This is uuid.uuid5 without the UUID object, which costs more than the hash. The
    # tests compare the two.
    digest = bytearray(sha1(_NAMESPACE + key.encode("utf-8")).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    x = digest.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


@dataclass(frozen=True)
class _Plan:
    """What the bridge makes of one set of Celery options. Each set is parsed once."""

    options: dict[str, Any]
    """The apply_async options, without those the bridge owns and without ``expires``."""
    expires: Any
    relative_expiry: bool
    """Whether ``expires`` counts seconds after the fire."""
    templatable: bool
    """Whether messages with these options can be copied from a template."""

    @classmethod
    def parse(cls, text: str) -> _Plan:
        options = json.loads(text) or {}
        for key in BRIDGE_OWNED_OPTIONS:
            options.pop(key, None)
        expires = options.pop("expires", None)
        relative = isinstance(expires, (int, float)) and not isinstance(expires, bool)
        return cls(options, expires, relative,
                   "countdown" not in options and "eta" not in options)


def _call(text: str | None) -> tuple[Any, dict[str, Any]]:
    """Return (args, kwargs) from a job's args column, as Celery's send_task takes them."""
    call = json.loads(text) if text else {}
    if not isinstance(call, dict):
        call = {}
    return call.get("args") or (), call.get("kwargs") or {}


_PLAIN = (int, float, type(None))


def _saferepr(value: Any, maxlen: int, maxlevels: int) -> str:
    """Return Celery's ``saferepr`` of the value. A shortcut serves the common args, a
    short flat list of numbers (where saferepr equals plain ``repr``) and no kwargs."""
    if not value and isinstance(value, dict):
        return "{}"
    if (isinstance(value, list) and 0 < len(value) <= 32
            and all(type(v) in _PLAIN for v in value)):
        text = repr(value)
        if len(text) < maxlen:
            return text
    return saferepr(value, maxlen, maxlevels=maxlevels)


def _own_headers(job: dict[str, Any]) -> dict[str, str]:
    """Return awa-beat's headers for a pending job. They are strings, which are the
    cheapest to encode."""
    return {JOB_HEADER: str(job["id"]), SCHEDULE_HEADER: job["cron_name"] or "",
            FIRE_TIME_HEADER: job["cron_fire_time"] or "",
            AT_MOST_ONCE_HEADER: "1" if job.get("at_most_once") else "0"}


def parse_fire_time(text: str | None) -> datetime | None:
    """Return a fire time in Awa's text form as an aware UTC datetime (None for none)."""
    if not text:
        return None
    return parse_iso(text).astimezone(UTC)  # Awa's text form is "YYYY-MM-DD HH:MM:SS+00".


@dataclass
class Prepared:
    """One task message, serialised and routed, which any kombu channel can publish."""

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
    """The decoded body's third part (callbacks, chain, ...), which is kept to build copies."""
    table: HeaderTable | None = None
    """The table that encodes the headers of this template's copies (on AMQP only)."""
    plain_json: bool | None = None
    """Whether the bodies of this template's copies are JSON that the standard library
    can write."""


class _Recorder(Producer):
    """A producer that keeps what Celery would publish, instead of publishing it."""

    recorded: tuple[Any, ...] | None = None

    def _publish(self, body: Any, priority: Any, content_type: str, content_encoding: str,
                 headers: dict[str, Any], properties: dict[str, Any], routing_key: str,
                 mandatory: bool, immediate: bool, exchange: str, declare: list[Any],
                 *args: Any, **kwargs: Any) -> None:
        self.recorded = (body, priority, content_type, content_encoding, headers,
                         dict(properties), routing_key, exchange, list(declare))


class MessageBuilder:
    """Build the messages of pending jobs for one Celery app. Each job's message is kept
    until :meth:`forget` drops it (once it is published), so a batch that is published
    again is not rebuilt."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._recorder: _Recorder | None = None
        self._prepared: dict[int, Prepared] = {}
        self._templates: dict[tuple[str, str], Prepared] = {}
        self._plans: dict[tuple[str, str], _Plan] = {}
        self._calls: dict[tuple[int, str], tuple[str, str, Any]] = {}
        self._repr_limits: tuple[int, int, int] | None = None

    def warm(self) -> None:
        """Load ahead of the first message what Celery's first ``send_task`` loads: the
        result backend (which Celery may keep per thread, so this runs on the thread that
        builds the messages) and the recording producer. A failure is left for that
        ``send_task`` to meet again and report."""
        with contextlib.suppress(Exception):  # the first message's build raises it again
            if self._recorder is None:
                self._recorder = _Recorder(self.app.connection_for_write(), auto_declare=False)
            self.app.backend  # noqa: B018 - loaded by the first read, per thread

    def close(self) -> None:
        if self._recorder is not None:
            self._recorder.connection.release()
            self._recorder = None

    def forget(self, messages: list[Prepared]) -> None:
        """Drop ``messages``: the broker accepted them, so their jobs need them no more."""
        for m in messages:
            self._prepared.pop(m.job_id, None)

    def prepare(self, job: dict[str, Any]) -> Prepared:
        """Build the job's message exactly as Celery's beat would send it.

        ``job`` is a row of
        :meth:`~awa_beat._db.outbox.OutboxStore.pending_celery_jobs`. It holds its args and
        Celery options as JSON text, so that they key the caches below without being
        parsed again.

        Celery builds the first message for each task and set of options; the others
        are copies with their own task id, expiry, args and kwargs (body and the
        ``argsrepr``/``kwargsrepr`` headers), the only parts of a Celery message that
        differ between two sends with the same options (checked against Celery itself
        in the tests). Messages that depend on the time of sending (``countdown``,
        ``eta``), carry a jittered job's run time as their ``eta``, or are compressed
        are always built by Celery.
        """
        cached = self._prepared.get(job["id"])
        if cached is not None:
            return cached
        key = (job["kind"], job["options"] or "{}")
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = _Plan.parse(key[1])
        # A jitter put the job off: its message carries the run time as its eta.
        eta = job.get("eta")
        expires = plan.expires
        if plan.relative_expiry:
            # The expiry is relative to the fire (to the run time a jitter put it off
            # to), not to the publish, so a late publish does not extend it. A backfill
            # inserts jobs for past fire times to run now: theirs counts from the insert.
            fired = eta or (job["created_at"] if job.get("backfilled") else None) \
                or parse_fire_time(job["cron_fire_time"]) or job["created_at"]
            expires = fired + timedelta(seconds=plan.expires)
        task_id = fire_task_id(job["cron_name"], job["cron_fire_time"], job["id"])
        templatable = plan.templatable and eta is None
        template = self._templates.get(key) if templatable else None
        ours = _own_headers(job)
        if template is None:
            args, kwargs = _call(job["args"])
            options = dict(plan.options)
            if eta is not None:
                options["eta"] = eta
            prepared = self._build(job["id"], job["kind"], args, kwargs, options,
                                   expires, task_id, ours)
            if templatable and "compression" not in prepared.headers:
                self._templates[key] = prepared
        else:
            prepared = self._copy(template, job["id"], task_id, expires, job["args"] or "{}")
            prepared.headers.update(ours)
        self._prepared[job["id"]] = prepared
        return prepared

    def _copy(self, template: Prepared, job_id: int, task_id: str, expires: Any,
              call: str) -> Prepared:
        """Return a copy of ``template`` for another job, with the fields set the way
        Celery sets them."""
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
        """Return argsrepr, kwargsrepr and the body for the JSON ``call``. They are cached,
        because a schedule sends the same args every time it fires."""
        key = (id(template), call)
        parts = self._calls.get(key)
        if parts is not None:
            return parts
        args, kwargs = _call(call)
        if self._repr_limits is None:
            # The setting is read once, because a look-up in Celery's settings is slow
            # next to a local variable. task_repr_maxlevels is new in Celery 5.7; older
            # versions use saferepr's default.
            amqp = self.app.amqp
            self._repr_limits = (amqp.argsrepr_maxsize, amqp.kwargsrepr_maxsize,
                                 self.app.conf.get("task_repr_maxlevels", 3))
        args_max, kwargs_max, levels = self._repr_limits
        if template.embed is None:
            template.embed = loads(template.body, template.content_type,
                                   template.content_encoding)[2]
        if self._plain_json(template):
            body = _JSON.encode((args, kwargs, template.embed))
        else:
            _, _, body = dumps((args, kwargs, template.embed),
                               serializer=registry.type_to_name[template.content_type])
        parts = (_saferepr(args, args_max, levels), _saferepr(kwargs, kwargs_max, levels),
                 body)
        if len(self._calls) >= CALL_CACHE_SIZE:
            self._calls.clear()
        self._calls[key] = parts
        return parts

    def _plain_json(self, template: Prepared) -> bool:
        """Whether the bodies of ``template``'s copies are kombu's JSON of plain values,
        which the standard library's encoder writes the same way at less cost. Args and
        kwargs come from ``json.loads``, so they are always plain; the template's embed
        is checked once."""
        plain = template.plain_json
        if plain is None:
            name = registry.type_to_name.get(template.content_type)
            codec = getattr(registry, "_encoders", {}).get(name)
            plain = codec is not None and codec[2] is kombu_json.dumps
            if plain:
                try:
                    plain = _JSON.encode(template.embed) == kombu_json.dumps(template.embed)
                except (TypeError, ValueError):
                    plain = False  # This value is one that only kombu's encoder knows.
            template.plain_json = plain
        return plain

    def _build(self, job_id: int, kind: str, args: Any, kwargs: dict[str, Any],
               options: dict[str, Any], expires: Any, task_id: str,
               ours: dict[str, str]) -> Prepared:
        if self._recorder is None:
            self._recorder = _Recorder(self.app.connection_for_write(), auto_declare=False)
        headers = dict(options.pop("headers", None) or {})
        headers["celery_beat_task"] = True
        headers.update(ours)
        self._recorder.recorded = None
        self.app.send_task(kind, args, kwargs, task_id=task_id, producer=self._recorder,
                           expires=expires, headers=headers, retry=False, **options)
        recorded = self._recorder.recorded
        assert recorded is not None, "Celery did not publish through the producer"
        return Prepared(job_id, task_id, *recorded)
