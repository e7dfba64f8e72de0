"""The HTTP endpoint of a beat process: ``/metrics``, ``/healthz`` and ``/readyz``.

Off unless ``awa_beat_http_port`` is set; it listens on 127.0.0.1 unless
``awa_beat_http_bind`` says otherwise. It runs on a daemon thread (a thread per
request), so a beat loop that is stuck, on a socket or anywhere else, cannot hold up a
probe: that is what ``/healthz`` reports.

* ``/healthz`` (liveness): the loop took its last step no later than it planned to,
  give or take ``awa_beat_stuck_after`` seconds. Each step records when the next one
  is due (the end of the sleep it asks for, or of its wait on the lock's session), so
  the bound follows the loop's own cadence rather than a guess at its longest sleep.
* ``/readyz`` (readiness): the node has started and knows its role (a standby is
  ready), and its latest database operation reached the database, no longer ago than
  :data:`CONTACT_WINDOW`, and its clock is within ``awa_beat_clock_tolerance`` of the
  database's (a replica that may not lead is not ready). Every replica talks to the
  database every few seconds (a heartbeat, a standby's refresh, the leader's passes), so
  this costs no query.

The accept loop sleeps in ``select()`` on the listening socket and a wake-up pipe,
with no timeout: an endpoint no one calls costs the process nothing.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
import time
import traceback
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from .._logs import event
from ..errors import EndpointError, first_line
from .node import HEARTBEAT_INTERVAL

if TYPE_CHECKING:
    from .node import BeatNode

# The logger keeps the name it had before the modules moved into layer packages, so
# logging configurations that select it by name go on working.
logger = logging.getLogger('awa_beat.http')

#: Seconds since the last operation that reached the database after which a node is
#: not ready: three heartbeats, the slowest of a node's regular contacts.
CONTACT_WINDOW = 3 * HEARTBEAT_INTERVAL


def liveness(node: BeatNode, now: float) -> tuple[bool, str]:
    """Whether the node's loop makes progress, and what the probe says about it."""
    if node.closed and node.engine is not None:
        return False, "closed"
    back_by = node.stats.back_by
    if back_by is None:
        return True, "not started"
    late = now - back_by
    limit = node.settings.stuck_after
    if late > limit:
        return False, (f"stuck: the beat loop is {late:.1f} s past its planned step "
                       f"(awa_beat_stuck_after: {limit:g} s)")
    return True, "alive"


def readiness(node: BeatNode, now: float) -> tuple[bool, str]:
    """Whether the node can do its part (lead, or stand by to), and why not."""
    if node.engine is None:
        return False, "starting"
    if node.closed:
        return False, "closed"
    role = node.status().role
    if not node.elected_once:
        return False, "starting: no election yet"
    if node.clock_problem is not None:
        # A replica that may not lead is no standby to count on either.
        return False, f"{role}: {node.clock_problem}"
    store = node.store
    contact = store.contact if store is not None else None
    if contact is None or not contact.reachable:
        return False, f"{role}: the database is unreachable"
    assert contact.ok_at is not None
    if now - contact.ok_at > CONTACT_WINDOW:
        return False, f"{role}: no database contact for {now - contact.ok_at:.0f} s"
    return True, role


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    endpoint: Endpoint

    if TYPE_CHECKING:
        # socketserver's accept-then-dispatch step (serve_forever's), left out of its stubs.
        def _handle_request_noblock(self) -> None: ...


def _collection_failed(exc: Exception) -> None:
    """One log line per failed scrape, with where it was raised: a traceback spread over
    dozens of lines each scrape would drown the beat's own log (it is kept for DEBUG)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    text = f"{type(exc).__name__}: {first_line(exc)}{where}"
    event(logger, logging.ERROR, "metrics.failed", "http: building /metrics failed: %s",
          text, error=text)
    logger.debug("http: building /metrics failed", exc_info=exc)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:
        endpoint = self.server.endpoint
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            try:
                page = generate_latest(endpoint.registry)
            except Exception as exc:  # a bug in a collector or a source: say so, keep serving
                _collection_failed(exc)
                self._reply(500, b"error: building the metrics failed (see the log)\n")
                return
            self._reply(200, page, CONTENT_TYPE_LATEST)
        elif path in ("/healthz", "/readyz"):
            probe = liveness if path == "/healthz" else readiness
            ok, why = probe(endpoint.node, endpoint.monotonic())
            self._reply(200 if ok else 503, f"{'ok' if ok else 'fail'}: {why}\n".encode())
        else:
            self._reply(404, b"not found: try /metrics, /healthz or /readyz\n")

    def _reply(self, code: int, body: bytes,
               content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("http: %s - %s", self.address_string(), format % args)


class Endpoint:
    """The endpoint of one node, served on a daemon thread until :meth:`close`."""

    def __init__(self, node: BeatNode, registry: CollectorRegistry, *, host: str,
                 port: int, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.node = node
        self.registry = registry
        self.monotonic = monotonic
        try:
            self._server = _Server((host, port), _Handler)
        except OSError as exc:
            raise EndpointError(f"the metrics endpoint cannot listen on {host}:{port}: "
                                f"{exc.strerror or exc}") from None
        self._server.endpoint = self
        self._wake_r, self._wake_w = socket.socketpair()
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name="awa-beat-http",
                                        daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> Endpoint:
        self._thread.start()
        host, port = self.address
        logger.info("beat: metrics and probes on http://%s:%d/ (/metrics, /healthz, "
                    "/readyz)", host, port)
        return self

    def _serve(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._server.socket, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self._stopping:
                ready = selector.select()  # no timeout: nothing runs while no one calls
                if self._stopping:
                    break
                if any(key.fileobj is self._server.socket for key, _ in ready):
                    self._server._handle_request_noblock()  # accept, then a thread

    def close(self) -> None:
        """Stop accepting and close the socket (requests under way finish on their
        own threads). Safe from a signal handler: a flag, a byte, a bounded join."""
        if self._stopping:
            return
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(2.0)
        self._server.server_close()
        self._wake_r.close()
        self._wake_w.close()
