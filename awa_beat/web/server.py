"""Serving the dashboard: the standard library's WSGI server, one thread per request,
and the rule that it listens beyond this host only with authentication."""

from __future__ import annotations

import ipaddress
import logging
import socket
import socketserver
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from ..errors import ConfigError, EndpointError
from ..logs import printable
from .app import Dashboard
from .auth import WebConfig

logger = logging.getLogger(__name__)


def is_loopback(bind: str) -> bool:
    if bind == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind).is_loopback
    except ValueError:
        return False


def check_bind(bind: str, config: WebConfig) -> None:
    """Refuse to listen on an address other hosts reach unless logging in is required."""
    if not is_loopback(bind) and not config.authenticates:
        raise ConfigError(
            f"refusing to listen on {bind} without authentication: set "
            "AWA_BEAT_WEB_PASSWORD (or --password-file), or --trust-user-header behind a "
            "reverse proxy that authenticates; or bind 127.0.0.1")


class ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True

    @property
    def host_and_port(self) -> tuple[str, int]:
        """Where it listens (``server_address`` is typed for every socket family)."""
        host, port = self.server_address[:2]
        return str(host), int(port)


class IPv6ThreadingServer(ThreadingServer):
    address_family = socket.AF_INET6


class QuietHandler(WSGIRequestHandler):
    """Access lines go to the ``awa_beat.web`` logger, without query strings."""

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        logger.info("%s %s %s %s", self.address_string(), printable(str(self.command)),
                    printable(self.path.split("?", 1)[0]), code)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), printable(format % args))


def make(app: Dashboard, bind: str = "127.0.0.1", port: int = 8080) -> ThreadingServer:
    """A server for ``app`` on ``bind:port`` (port 0: any free one), not yet serving."""
    check_bind(bind, app.config)
    server_class = IPv6ThreadingServer if ":" in bind else ThreadingServer
    try:
        return make_server(bind, port, app,
                           server_class=server_class, handler_class=QuietHandler)
    except OSError as exc:  # a busy port, an address this host does not have
        raise EndpointError(f"the dashboard cannot listen on {bind}:{port}: "
                            f"{exc.strerror or exc}") from None
