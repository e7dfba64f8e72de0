"""The bridge's publish loop on py-amqp. This module makes it cheaper in three ways.

**Properties are encoded incrementally.** py-amqp encodes every message's properties from
scratch: it passes Celery's twenty-odd headers, each through a chain of ``isinstance``
checks, into a ``BytesIO``, and that is most of the CPU a publish costs. The bridge
publishes copies of one template message that differ in a handful of headers (task id,
args repr, expiry), so :class:`HeaderTable` keeps the encoded bytes of every header a
copy shares with its template, by identity, and encodes only the others. py-amqp's own
``dumps`` encodes every value except strings and short strings, whose encoding the AMQP
0-9-1 spec fixes; the tests compare the result with py-amqp's, byte for byte.

**Frames are put together directly.** :class:`PublishFrames` builds a publish's method,
header and body frames from cached parts, where py-amqp goes through a ``Message``, its
generic method writer and a locked shared buffer for each one.

**Frames are written in few system calls.** py-amqp writes every message to the socket
on its own (one ``sendall`` per message). :func:`coalesced_writes` gathers a batch's
frames and writes them in chunks of up to 256 KiB, because a system call per message
costs about as much as building the message.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from struct import pack
from typing import Any

from amqp.basic_message import Message
from amqp.serialization import dumps


def _item(key: str, value: Any) -> bytes:
    """Encode one field-table entry: the key as a short string, then the typed value."""
    if type(value) is str:
        return _short(key) + b"S" + _long(value)
    return dumps("F", [{key: value}])[4:]  # This drops the one-entry table's length.


def _long(value: str) -> bytes:
    """Encode a long string (a text field's value): its length in four bytes, then UTF-8."""
    data = value.encode("utf-8", "surrogatepass")
    return pack(">I", len(data)) + data


class HeaderTable:
    """Encode the header tables (and the other properties) of messages that mostly repeat
    one template's."""

    __slots__ = ("_known", "_scalars", "_text_keys")

    def __init__(self, template: dict[str, Any]) -> None:
        self._known = {k: (v, _item(k, v)) for k, v in template.items()}
        self._text_keys: dict[str, bytes] = {}
        """This holds a key's encoding and the type of a string value, for the headers
        that differ."""
        self._scalars: dict[str, tuple[Any, bytes]] = {}
        """This holds the last value of each other property, encoded, because most of
        them repeat the template's."""

    def scalar(self, key: str, kind: str, value: Any) -> bytes:
        """Encode a property other than the headers, as py-amqp does."""
        last = self._scalars.get(key)
        if last is not None and last[0] is value:
            return last[1]
        if kind == "s":
            data = _short(value)
        elif kind == "o":
            data = pack("B", value)
        else:
            data = dumps(kind, [value])
        self._scalars[key] = (value, data)
        return data

    def encode(self, headers: dict[str, Any]) -> bytes:
        known = self._known
        text_keys = self._text_keys
        parts: list[bytes] = []
        append = parts.append
        for key, value in headers.items():
            hit = known.get(key)
            if hit is not None and hit[0] is value:
                append(hit[1])
            elif type(value) is str:
                head = text_keys.get(key)
                if head is None:
                    head = text_keys[key] = _short(key) + b"S"
                append(head)
                append(_long(value))
            else:
                append(_item(key, value))
        data = b"".join(parts)
        return pack(">I", len(data)) + data


def _short(value: str | bytes) -> bytes:
    data = value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
    return pack("B", len(data)) + data


#: Basic's fourteen properties in their order on the wire, each with its flag bit. They
#: fit in one flags word.
_PROPERTIES = [(key, kind, 1 << (15 - i)) for i, (key, kind) in enumerate(Message.PROPERTIES)]


def encode_properties(props: dict[str, Any], table: HeaderTable) -> bytes:
    """Encode a content header's property flags and values as py-amqp's ``Message``
    encodes them, with ``application_headers`` encoded through ``table``."""
    flags = 0
    values: list[bytes] = []
    for key, kind, bit in _PROPERTIES:
        value = props.get(key)
        if value is not None:
            flags |= bit
            values.append(table.encode(value) if kind == "F" else table.scalar(key, kind, value))
    return pack(">H", flags) + b"".join(values)


_BASIC_PUBLISH = pack(">HH", 60, 40)
_FRAME_END = b"\xce"


class PublishFrames:
    """Build the frames of ``basic.publish`` on one channel straight to bytes.

    py-amqp writes each publish through its generic method writer: it encodes the
    method's arguments by signature and packs the frames into a shared buffer under a
    lock, with a ``Message`` object in between. Every publish of a batch has the same
    method frame except for a few routes, and its content header differs in a few
    headers only, so this class puts the frames together from cached parts. The tests
    compare them with py-amqp's frame writer, byte for byte.
    """

    __slots__ = ("_channel", "_chunk", "_methods")

    def __init__(self, channel_id: int, frame_max: int) -> None:
        self._channel = channel_id
        self._chunk = frame_max - 8  # A frame's payload is its size less its header and end.
        self._methods: dict[tuple[str, str], bytes] = {}

    def _frame(self, kind: int, payload: bytes) -> bytes:
        return b"".join((pack(">BHI", kind, self._channel, len(payload)), payload, _FRAME_END))

    def publish(self, exchange: str, routing_key: str, body: str | bytes,
                properties: dict[str, Any], table: HeaderTable) -> bytes:
        """Return every frame of one unmandatory publish of ``body``. A text body is
        encoded in its ``content_encoding`` (set to UTF-8 if there is none), as py-amqp
        does."""
        method = self._methods.get((exchange, routing_key))
        if method is None:
            args = dumps("Bssbb", (0, exchange, routing_key, False, False))
            method = self._methods[exchange, routing_key] = self._frame(
                1, _BASIC_PUBLISH + args)
        if isinstance(body, str):
            encoding = properties.get("content_encoding")
            if encoding is None:
                properties["content_encoding"] = encoding = "utf-8"
            body = body.encode(encoding)
        size = len(body)
        parts = [method, self._frame(2, b"".join((
            pack(">HHQ", 60, 0, size), encode_properties(properties, table))))]
        chunk = self._chunk
        if size <= chunk:
            if size:
                parts.append(self._frame(3, body))
        else:
            parts.extend(self._frame(3, body[i:i + chunk]) for i in range(0, size, chunk))
        return b"".join(parts)


#: How many bytes :func:`coalesced_writes` gathers before it writes them out.
WRITE_CHUNK = 256 * 1024


@contextmanager
def coalesced_writes(transport: Any, chunk: int = WRITE_CHUNK) -> Iterator[None]:
    """Within the block, gather what py-amqp writes to ``transport`` and write it in
    chunks of about ``chunk`` bytes. The rest is written when the block ends normally.

    Frames are only ever appended whole, so the broker sees the same byte stream, later
    by at most one chunk. On an exception the unwritten frames are dropped, and the
    caller publishes them again. A transport without py-amqp's ``_write`` hook is left
    alone.
    """
    own = transport.__dict__.get("_write")  # On TCP it is the socket's sendall; on SSL, a method.
    write = own or getattr(transport, "_write", None)
    if write is None:
        yield
        return
    pending: list[bytes] = []
    size = 0

    def gather(data: Any) -> None:
        nonlocal size
        pending.append(bytes(data))  # py-amqp passes a view of a buffer that it reuses.
        size += len(data)
        if size >= chunk:
            flush()

    def flush() -> None:
        nonlocal size
        if pending:
            data = b"".join(pending)
            pending.clear()
            size = 0
            write(data)

    transport._write = gather
    try:
        yield
        flush()
    finally:
        if own is None:
            del transport._write
        else:
            transport._write = own
