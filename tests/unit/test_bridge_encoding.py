"""The bridge's shortcuts in building messages equal what py-amqp and Celery produce."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from amqp.basic_message import Message
from celery import Celery
from celery.utils.saferepr import saferepr
from hypothesis import given, settings
from hypothesis import strategies as st

from awa_beat.bridge.amqp import EncodedMessage, HeaderTable
from awa_beat.bridge.messages import _Recorder, _saferepr

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
                      **properties: Any) -> tuple[bytes, bytes]:
    ours = EncodedMessage("body", HeaderTable(template), application_headers=message_headers,
                          **properties)
    theirs = Message("body", application_headers=message_headers, **properties)
    return ours._serialize_properties(), theirs._serialize_properties()


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
