"""The bridge's broker connection: it publishes batches of messages, then waits for
their confirms.

On AMQP the channel is in publisher-confirm mode, and the publisher awaits the broker's
acks once per batch rather than once per message. On other transports (Redis,
filesystem, ...) a publish that returns counts as accepted.

Whatever the broker or its client library raises (the transport's connection and
channel errors, kombu's ``OperationalError``, any ``OSError``) leaves the publisher as
a :class:`~awa_beat.errors.BrokerError`, so that the caller can tell a broker outage
from anything else.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

import amqp
from amqp.exceptions import RecoverableConnectionError
from kombu import Connection
from kombu.common import maybe_declare
from kombu.exceptions import OperationalError

from ..errors import BrokerError, first_line
from .amqp import PublishFrames, coalesced_writes
from .messages import Prepared


class Publisher:
    """One broker connection. It publishes batches and returns once they are accepted."""

    def __init__(self, app: Any, confirm_timeout: float = 30.0) -> None:
        self.app = app
        self.confirm_timeout = confirm_timeout
        self.conn: Connection | None = None
        self.channel: Any = None
        self.confirms = False
        self.encodes = False
        """The py-amqp channel, on which the bridge encodes message properties itself."""
        self._broker_errors: tuple[type[BaseException], ...] = (OSError, OperationalError)
        self._declared: set[Any] = set()
        self._tag = 0
        self._confirmed = 0
        """The broker has confirmed every delivery tag up to this one."""
        self._confirmed_above: set[int] = set()
        """The tags above ``_confirmed`` that the broker confirmed singly (out of order)."""
        self._nacked = False

    @contextlib.contextmanager
    def _on_broker(self) -> Iterator[None]:
        """Within the block, turn what the broker's client raises into a BrokerError."""
        try:
            yield
        except BrokerError:
            raise
        except self._broker_errors as exc:
            raise BrokerError(first_line(exc)) from exc

    def open(self) -> None:
        if self.conn is not None:
            return
        conn = self.app.connection_for_write()
        if conn.transport.driver_type == "amqp":
            # A broker that accepts the connection and then reads nothing must not hold a
            # write forever, so py-amqp gives up on a socket write after this many
            # seconds. (Celery merges these options into the app's broker_transport_options.)
            conn.release()
            conn = self.app.connection_for_write(
                transport_options={"write_timeout": self.confirm_timeout})
        self._broker_errors = (*conn.connection_errors, *conn.channel_errors, OSError,
                               OperationalError)
        with self._on_broker():
            try:
                conn.ensure_connection(max_retries=1)
                channel = conn.channel()
                self.confirms = conn.transport.driver_type == "amqp" and hasattr(
                    channel, "confirm_select")
                self.encodes = isinstance(channel, amqp.Channel)
                if self.confirms:
                    channel.confirm_select()
                    # py-amqp polls the socket before every publish to see whether the
                    # broker blocked the connection. A block shows up in the confirm wait
                    # anyway.
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

    @property
    def connected(self) -> bool:
        return self.conn is not None

    def warm(self) -> bool:
        """Open the connection ahead of the first send, and return True if it is open. A
        failure is left for that send to meet again and report."""
        try:
            self.open()
        except BrokerError:
            return False
        return True

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):  # A dead connection is fine to drop.
                self.conn.release()
        self.conn = self.channel = None

    def _on_ack(self, tag: int, multiple: bool) -> None:
        # Tags rise one by one on a channel, so "confirmed up to" plus the few tags acked
        # out of order is all the state needed, and there is no per-message set to scan.
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
        """Publish ``messages`` without waiting, and return the mark to pass to
        :meth:`wait`."""
        self.open()
        assert self.conn is not None
        with self._on_broker():
            self._send(messages)
        if self.confirms:
            self._tag += len(messages)
        return self._tag

    def _send(self, messages: Sequence[Prepared]) -> None:
        assert self.conn is not None
        channel = self.channel
        for m in messages:
            # This comes before publishing anything, because a declare waits for the
            # broker's answer, which must not sit behind writes that are being gathered.
            for entity in m.declare:
                if entity not in self._declared:
                    maybe_declare(entity, channel, retry=False)
                    self._declared.add(entity)
        if self.encodes:
            self._send_frames(messages)
            return
        for m in messages:
            _publish(channel, m)

    def _send_frames(self, messages: Sequence[Prepared]) -> None:
        """Publish on py-amqp's channel. Copies of a template go out as frames put
        together here (:class:`PublishFrames`), and Celery's own messages go through
        py-amqp; all of them are written in few system calls."""
        assert self.conn is not None
        channel = self.channel
        connection = self.conn.connection
        if channel.connection is None:
            raise RecoverableConnectionError("basic_publish: connection closed")
        frames = PublishFrames(channel.channel_id, connection.frame_max)
        transport = connection.transport
        with coalesced_writes(transport):
            for m in messages:
                if m.table is None:  # Celery built this message; it is not a copy.
                    _publish(channel, m)
                    continue
                properties = {"priority": m.priority, "content_type": m.content_type,
                              "content_encoding": m.content_encoding,
                              "application_headers": m.headers, **m.properties}
                transport.write(frames.publish(m.exchange, m.routing_key, m.body,
                                               properties, m.table))
                # py-amqp counts a write per publish, and its heartbeats go by this count.
                connection.bytes_sent += 1

    def wait(self, mark: int) -> None:
        """Return once the broker has confirmed every message sent up to ``mark``, and
        raise a :class:`BrokerError` after ``confirm_timeout``."""
        if not self.confirms:
            return  # A publish that returned was accepted.
        assert self.conn is not None
        deadline = time.monotonic() + self.confirm_timeout
        with self._on_broker():
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


def _publish(channel: Any, m: Prepared) -> None:
    """Publish ``m`` through the channel's own message building and frame writer."""
    message = channel.prepare_message(m.body, m.priority, m.content_type,
                                      m.content_encoding, m.headers, m.properties)
    channel.basic_publish(message, exchange=m.exchange, routing_key=m.routing_key)
