"""The bridge's shortcuts in building messages equal what py-amqp and Celery produce."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from amqp import spec
from amqp.basic_message import Message
from amqp.method_framing import frame_writer
from amqp.serialization import dumps
from celery import Celery
from celery.utils.saferepr import saferepr
from hypothesis import given, settings
from hypothesis import strategies as st

from awa_beat._bridge.amqp import HeaderTable, PublishFrames, encode_properties
from awa_beat._bridge.messages import _Recorder, _saferepr

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
                    st.floats(allow_nan=False), st.text(max_size=40))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)
headers = st.dictionaries(st.text(min_size=1, max_size=20), values, max_size=25)
shortstr = st.one_of(st.none(), st.text(max_size=60))


def celery_message() -> tuple[Any, ...]:
    app = Celery("enc", set_as_current=False)
    app.conf.broker_url = "memory://"
    recorder = _Recorder(app.connection_for_write(), auto_declare=False)
    app.send_task("proj.report", [1, "two"], {"full": True}, producer=recorder,
                  task_id="5c3a0c2e-6c5e-5a44-9c61-0d9c3a0c2e6c", retry=False,
                  expires=datetime(2026, 12, 2, 10, 0, tzinfo=timezone.utc),
                  headers={"celery_beat_task": True, "x-team": "data"}, priority=5)
    assert recorder.recorded is not None
    return recorder.recorded


def encoded_both_ways(template: dict[str, Any], message_headers: dict[str, Any],
                      table: HeaderTable | None = None, **properties: Any
                      ) -> tuple[bytes, bytes]:
    ours = encode_properties(dict(properties, application_headers=message_headers),
                             table or HeaderTable(template))
    theirs = Message("body", application_headers=message_headers, **properties)
    return ours, theirs._serialize_properties()


def test_a_celery_message_and_its_copies_encode_as_py_amqp_does() -> None:
    _, priority, ctype, cenc, template, props, *_ = celery_message()
    for task_id, argsrepr in [("a" * 36, "[1, 'two']"), ("b" * 36, "[" + "9, " * 300 + "]"),
                              ("é" * 36, "")]:
        copy = dict(template)
        copy["id"] = copy["root_id"] = task_id
        copy["argsrepr"] = argsrepr
        copy["expires"] = "2026-12-02T10:00:00+00:00"
        ours, theirs = encoded_both_ways(template, copy, priority=priority,
                                         content_type=ctype, content_encoding=cenc,
                                         **dict(props, correlation_id=task_id,
                                                expiration="59000"))
        assert ours == theirs


@settings(max_examples=300, deadline=None)
@given(template=headers, changes=headers, content_type=shortstr, correlation_id=shortstr,
       expiration=shortstr, delivery_mode=st.sampled_from([None, 1, 2]),
       priority=st.one_of(st.none(), st.integers(0, 255)),
       timestamp=st.one_of(st.none(), st.integers(0, 2**40)))
def test_any_headers_and_properties_encode_as_py_amqp_does(
    template: dict[str, Any], changes: dict[str, Any], **properties: Any
) -> None:
    message_headers = {**template, **changes}
    ours, theirs = encoded_both_ways(template, message_headers, **properties)
    assert ours == theirs


property_sets = st.fixed_dictionaries({}, optional={
    "content_type": shortstr, "correlation_id": shortstr, "expiration": shortstr,
    "delivery_mode": st.sampled_from([1, 2]), "priority": st.integers(0, 255),
    "timestamp": st.integers(0, 2**40)})


@settings(max_examples=200, deadline=None)
@given(template=headers, messages=st.lists(st.tuples(headers, property_sets), max_size=6))
def test_one_table_encodes_a_run_of_messages_as_py_amqp_does(
    template: dict[str, Any], messages: list[tuple[dict[str, Any], dict[str, Any]]]
) -> None:
    table = HeaderTable(template)  # remembers what it encoded last: each must still match
    for changes, properties in messages:
        ours, theirs = encoded_both_ways(template, {**template, **changes}, table,
                                         **properties)
        assert ours == theirs


def test_other_header_types_encode_as_py_amqp_does() -> None:
    template = {"when": datetime(2026, 1, 1, tzinfo=timezone.utc), "amount": Decimal("1.25"),
                "raw": b"\x00bytes", "nested": {"a": [1, None, {"b": True}]}}
    ours, theirs = encoded_both_ways(template, dict(template, raw=b"other"))
    assert ours == theirs


plain = st.one_of(st.none(), st.integers(-2**70, 2**70), st.floats(allow_nan=True))


@given(args=st.lists(plain, max_size=40))
def test_args_shortcut_equals_celery_saferepr(args: list[Any]) -> None:
    for maxlen in (1024, 20):
        assert _saferepr(args, maxlen, 3) == saferepr(args, maxlen, maxlevels=3)
    assert _saferepr({}, 1024, 3) == saferepr({}, 1024, maxlevels=3)


class _Recording:
    """What py-amqp's frame writer is given: a connection's frame_max and a transport."""

    def __init__(self, frame_max: int) -> None:
        self.frame_max = frame_max
        self.bytes_sent = 0
        self.written: list[bytes] = []

    def write(self, data: Any) -> None:
        self.written.append(bytes(data))


def py_amqp_frames(frame_max: int, channel_id: int, exchange: str, routing_key: str,
                   body: Any, headers: dict[str, Any], **properties: Any) -> bytes:
    recording = _Recording(frame_max)
    write = frame_writer(recording, recording)
    message = Message(body, application_headers=headers, **properties)
    write(1, channel_id, spec.Basic.Publish,
          dumps("Bssbb", (0, exchange, routing_key, False, False)), message)
    return b"".join(recording.written)


def our_frames(frame_max: int, channel_id: int, exchange: str, routing_key: str,
               body: Any, headers: dict[str, Any], template: dict[str, Any],
               **properties: Any) -> bytes:
    frames = PublishFrames(channel_id, frame_max)
    properties["application_headers"] = headers
    first = frames.publish(exchange, routing_key, body, dict(properties), HeaderTable(template))
    again = frames.publish(exchange, routing_key, body, dict(properties), HeaderTable(template))
    assert first == again  # the cached method frame is the one built first
    return first


def test_a_celery_message_and_its_copies_are_framed_as_py_amqp_frames_them() -> None:
    body, priority, ctype, cenc, template, props, routing_key, exchange, _ = celery_message()
    copy = dict(template, id="c" * 36, root_id="c" * 36, argsrepr="[2, 'three']")
    for frame_max in (131072, 4096, 200):  # whole, and a body of several frames
        for text in (body, body * 40, "", "é" * 300):
            properties = dict(props, priority=priority, content_type=ctype,
                              content_encoding=cenc, correlation_id="c" * 36)
            assert our_frames(frame_max, 1, exchange, routing_key, text, copy, template,
                              **properties) == py_amqp_frames(
                frame_max, 1, exchange, routing_key, text, copy, **properties)


@settings(max_examples=200, deadline=None)
@given(template=headers, changes=headers, channel_id=st.integers(1, 65535),
       frame_max=st.integers(9, 256), exchange=st.text(max_size=30),
       routing_key=st.text(max_size=60),
       body=st.one_of(st.text(max_size=3000), st.binary(max_size=3000)),
       content_encoding=st.sampled_from([None, "utf-8", "binary"]),
       correlation_id=shortstr, expiration=shortstr)
def test_any_publish_is_framed_as_py_amqp_frames_it(
    template: dict[str, Any], changes: dict[str, Any], channel_id: int, frame_max: int,
    exchange: str, routing_key: str, body: Any, content_encoding: str | None,
    **properties: Any
) -> None:
    if content_encoding is not None:
        properties["content_encoding"] = content_encoding
    if isinstance(body, str) and content_encoding == "binary":
        body = body.encode()  # py-amqp would encode it in a codec Python does not know
    message_headers = {**template, **changes}
    assert our_frames(frame_max, channel_id, exchange, routing_key, body, message_headers,
                      template, **properties) == py_amqp_frames(
        frame_max, channel_id, exchange, routing_key, body, message_headers, **properties)
