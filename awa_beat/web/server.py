"""Serving the dashboard: waitress serves it, and it listens beyond this host only with
authentication.

The standard library's ``wsgiref`` server is not used. Its own documentation says that it
is not meant for production and does only basic security checks, and it showed that
here: it writes header values as it is given them (a CR/LF in a redirect became a header
of the browser's choosing), holds one thread per connection with no timeout (so idle
connections pile up without bound), and has no limit on how many connections it takes.
Doing this safely would mean writing an HTTP server. waitress is a WSGI server in pure
Python, maintained for years by the Pylons project. It refuses CR and LF in header
values, answers a malformed request line with 400, bounds the request's head and body,
closes idle connections (``channel_timeout``), takes at most ``connection_limit`` at
once, and reads requests in one event loop, so that a connection costs a socket, not a
thread. Only a complete request reaches one of its few worker threads.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Iterable
from typing import Any

from .._logs import printable
from ..errors import ConfigError, EndpointError
from ._app import Dashboard, StartResponse
from ._auth import WebConfig

logger = logging.getLogger(__name__)

#: How many seconds a connection may stay silent before the server closes it.
IDLE_TIMEOUT = 10.0
#: How many connections are served at once. More wait in the listen queue until one closes.
CONNECTION_LIMIT = 500
#: How many threads run requests. Each may hold one of the store's connections.
THREADS = 4
#: The longest request line and headers together. A longer head is refused (431). A
#: shorter address that is still too long reaches the app, which answers 414
#: (app.MAX_URL_CHARS).
MAX_HEAD_BYTES = 256 * 1024
#: The largest request body. The dashboard's forms are far smaller (see app.MAX_FORM_BYTES).
MAX_BODY_BYTES = 1024 * 1024


def is_loopback(bind: str) -> bool:
    if bind == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind).is_loopback
    except ValueError:
        return False


def check_bind(bind: str, config: WebConfig) -> None:
    """Refuse to listen on an address that other hosts reach, unless logging in is required."""
    if not is_loopback(bind) and not config.authenticates:
        raise ConfigError(
            f"refusing to listen on {bind} without authentication: set "
            "AWA_BEAT_WEB_PASSWORD (or --password-file), or --trust-user-header behind a "
            "reverse proxy that authenticates; or bind 127.0.0.1")


class AccessLog:
    """Write access lines to the ``awa_beat.web`` logger, without query strings."""

    def __init__(self, app: Dashboard) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse
                 ) -> Iterable[bytes]:
        def logged(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
            logger.info("%s %s %s %s", environ.get("REMOTE_ADDR", "-"),
                        printable(str(environ.get("REQUEST_METHOD", ""))),
                        printable(str(environ.get("PATH_INFO", ""))), status.split(" ")[0])
            return start_response(status, headers, *exc)

        return self.app(environ, logged)


class Server:
    """Serve ``app`` with waitress, run and stopped like a ``socketserver`` server: call
    :meth:`serve_forever` in one thread, :meth:`shutdown` from another, then
    :meth:`server_close`."""

    def __init__(self, app: Dashboard, bind: str, port: int, *,
                 idle_timeout: float = IDLE_TIMEOUT,
                 connection_limit: int = CONNECTION_LIMIT, threads: int = THREADS) -> None:
        from waitress.server import create_server

        self._server: Any = create_server(
            AccessLog(app), host=bind, port=port, threads=threads,
            channel_timeout=idle_timeout,
            # Idle connections are looked for this often, so the timeout holds.
            cleanup_interval=max(0.5, min(idle_timeout / 2, 30.0)),
            connection_limit=connection_limit,
            max_request_header_size=MAX_HEAD_BYTES, max_request_body_size=MAX_BODY_BYTES,
            expose_tracebacks=False, ident="awa-beat", asyncore_use_poll=True,
            asyncore_loop_timeout=0.5)
        self._stop = threading.Event()
        self._stopped = threading.Event()

    @property
    def _map(self) -> dict[int, Any]:
        # A server with one listening socket keeps its sockets in ``_map``; the server of
        # a name with several addresses (localhost) keeps them in ``map``.
        server = self._server
        found: dict[int, Any] = server.map if hasattr(server, "map") else server._map
        return found

    @property
    def host_and_port(self) -> tuple[str, int]:
        """Return the host and port where the server listens."""
        server = self._server
        if hasattr(server, "effective_port"):
            return str(server.effective_host), int(server.effective_port)
        host, port = server.effective_listen[0][:2]  # One name may have several addresses.
        return str(host), int(port)

    @property
    def server_address(self) -> tuple[str, int]:
        """Return :attr:`host_and_port`, under the name that ``socketserver`` gives it."""
        return self.host_and_port

    def serve_forever(self) -> None:
        from waitress import wasyncore

        self._stopped.clear()
        try:
            while not self._stop.is_set():
                wasyncore.loop(timeout=0.5, map=self._map, use_poll=True, count=1)
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        self._stop.set()
        self._stopped.wait(5)

    def server_close(self) -> None:
        from waitress import wasyncore

        self._server.task_dispatcher.shutdown()
        wasyncore.close_all(self._map)


def make(app: Dashboard, bind: str = "127.0.0.1", port: int = 8080, *,
         idle_timeout: float = IDLE_TIMEOUT, connection_limit: int = CONNECTION_LIMIT,
         threads: int = THREADS) -> Server:
    """Return a server for ``app`` on ``bind:port`` (port 0 takes any free one). The server
    is not serving yet."""
    check_bind(bind, app.config)
    try:
        return Server(app, bind, port, idle_timeout=idle_timeout,
                      connection_limit=connection_limit, threads=threads)
    except OSError as exc:  # The port is busy, or this host does not have the address.
        raise EndpointError(f"the dashboard cannot listen on {bind}:{port}: "
                            f"{exc.strerror or exc}") from None
