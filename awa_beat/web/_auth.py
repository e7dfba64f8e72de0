"""Who is asking, and whether a form really came from our page.

:class:`WebConfig` chooses one of three ways to authenticate:

* None. This is only allowed while the server listens on a loopback address (see
  :func:`awa_beat.web.server.check_bind`), and the actor is recorded as ``anonymous``.
* A password. A login form starts a session (the name given there is the actor in the
  audit log), or HTTP Basic is used with any user name and that password. Attempts are
  counted per client (:class:`LoginThrottle`): after a few failures, each one makes the
  client wait longer. A session is a row in ``awa_beat.web_sessions`` (logging out and
  expiry delete it). A random id names it, in a cookie signed with a random secret that
  is kept in ``awa_beat.web_secret``; when the password changes, the secret is replaced
  and every session ends. The password itself signs nothing.
* A reverse proxy's user header (``trusted_user_header``). It is believed only from the
  proxy addresses listed in ``trusted_proxies``.

Every session, the anonymous one included, carries a random CSRF token. Every POST must
send it back (a synchronizer token), and when the browser says where the POST came from
(``Origin``, else ``Referer``), it must come from this site. Without a login, the
``Host`` that a request names must be a loopback name or a configured one
(:func:`host_allowed`), so a page elsewhere whose name was made to point at 127.0.0.1
(DNS rebinding) is refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..errors import ConfigError

SESSION_COOKIE = "awa_beat_session"
#: How many seconds a session lasts after the login.
SESSION_LIFETIME = 12 * 3600


@dataclass(frozen=True)
class WebConfig:
    """How the dashboard authenticates and what it allows."""

    password: str | None = None
    """The password that operators log in with (by the form or HTTP Basic)."""
    trusted_user_header: str | None = None
    """A header (e.g. ``X-Forwarded-User``) that names the user. A reverse proxy that
    authenticated the user sets it."""
    trusted_proxies: tuple[str, ...] = ("127.0.0.1", "::1")
    """The addresses whose ``trusted_user_header`` (and ``X-Forwarded-Proto``) are believed."""
    read_only: bool = False
    """Whether the pages show no action buttons and every action is refused."""
    secret: bytes | None = None
    """The secret that signs session cookies. By default, with a password, it is the
    random secret kept in the database (every dashboard on that database shares it, and
    it is replaced when the password changes); without a password, it is random per
    process."""
    allowed_origins: tuple[str, ...] = ()
    """More origins (``https://ops.example.com``) whose forms are accepted. A proxy that
    rewrites the Host header needs them."""
    allowed_hosts: tuple[str, ...] = ()
    """More names (``ops.example.com``, or with a port ``ops.example.com:8443``) that the
    ``Host`` header may give when no login is required. Loopback names are always
    allowed."""
    source: str = "web"
    """The source that is recorded with each action in the audit log."""
    page_size: int = 50

    def __post_init__(self) -> None:
        for host in self.allowed_hosts:
            if not _HOST.fullmatch(host):
                raise ConfigError(f"allowed host {host!r}: a host name or address, with an "
                                  "optional :port (ops.example.com, [::1]:8080)")

    @property
    def authenticates(self) -> bool:
        return bool(self.password or self.trusted_user_header)


@dataclass
class Session:
    user: str | None
    csrf: str
    expires: float
    new: bool = False
    """Whether the session is not in the browser's cookie yet, so that the response must
    set it."""
    id: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    """The id that names the session's row in the database, once someone has logged in
    with the session."""

    @property
    def key(self) -> str:
        """Return what the database keeps of the id: its digest, so that the table's rows
        cannot be used as cookies."""
        return hashlib.sha256(self.id.encode()).hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign_session(session: Session, key: bytes) -> str:
    payload = _b64(json.dumps({"u": session.user, "c": session.csrf,
                               "e": int(session.expires), "i": session.id}).encode())
    mac = _b64(hmac.new(key, payload.encode(), hashlib.sha256).digest())
    return f"{payload}.{mac}"


def load_session(cookie: str | None, key: bytes, now: float | None = None) -> Session | None:
    """Return the session in a cookie that we signed and that has not expired, else None."""
    if not cookie or "." not in cookie:
        return None
    payload, mac = cookie.rsplit(".", 1)
    expected = _b64(hmac.new(key, payload.encode(), hashlib.sha256).digest())
    if not hmac.compare_digest(mac, expected):
        return None
    try:
        data: dict[str, Any] = json.loads(_unb64(payload))
        session = Session(data["u"], str(data["c"]), float(data["e"]), id=str(data["i"]))
    except (ValueError, KeyError, TypeError, binascii.Error):
        return None
    if session.expires < (time.time() if now is None else now):
        return None
    return session


def new_session(user: str | None) -> Session:
    return Session(user, secrets.token_urlsafe(32), time.time() + SESSION_LIFETIME, new=True)


def password_matches(given: str, password: str) -> bool:
    return hmac.compare_digest(given.encode(), password.encode())


def basic_credentials(authorization: str | None) -> tuple[str, str] | None:
    """Return the user (``basic`` when none is given) and the password of an HTTP Basic
    ``Authorization`` header, or None when the header is not one."""
    if not authorization or not authorization.lower().startswith("basic "):
        return None
    try:
        text = base64.b64decode(authorization[6:].strip(), validate=True).decode()
    except (ValueError, UnicodeDecodeError, binascii.Error):
        return None
    if ":" not in text:
        return None
    user, _, given = text.partition(":")
    return user or "basic", given


# -- the password's fingerprint ---------------------------------------------------------------

#: scrypt's cost: a guess costs a fraction of a second and 16 MB. The dashboard pays it
#: once per start-up.
_SCRYPT = {"n": 2 ** 14, "r": 8, "p": 1}


def fingerprint(password: str, salt: bytes | None = None) -> str:
    """Return a salted, slow hash of ``password``. It is kept beside the signing secret,
    so that a dashboard started with another password notices and replaces the secret."""
    salt = secrets.token_bytes(16) if salt is None else salt
    digest = hashlib.scrypt(password.encode(), salt=salt, dklen=32, **_SCRYPT)
    return f"scrypt${_b64(salt)}${_b64(digest)}"


def fingerprint_matches(password: str, stored: str) -> bool:
    try:
        kind, salt, _ = stored.split("$")
        expected = fingerprint(password, _unb64(salt))
    except (ValueError, binascii.Error):
        return False
    return kind == "scrypt" and hmac.compare_digest(expected, stored)


# -- failed logins ------------------------------------------------------------------------------


class LoginThrottle:
    """Count failed logins per client. After ``free`` failures, each further one makes
    that client wait twice as long as the last (1 s, 2 s, 4 s, ... up to ``max_delay``)
    before it may try again. A good login, or ``forget_after`` seconds without a failure,
    starts the count again. The class is thread-safe, and it remembers at most
    ``max_clients`` clients (it forgets the quietest first)."""

    def __init__(self, *, free: int = 3, max_delay: float = 300.0,
                 forget_after: float = 900.0, max_clients: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.free, self.max_delay, self.forget_after = free, max_delay, forget_after
        self.max_clients, self.clock = max_clients, clock
        self._failures: dict[str, tuple[int, float, float]] = {}  # count, last, allowed
        self._reported: set[str] = set()
        self._lock = threading.Lock()

    def wait(self, client: str) -> float:
        """Return the seconds before ``client`` may try again (0 when it may try now)."""
        with self._lock:
            found = self._failures.get(client)
        return max(0.0, found[2] - self.clock()) if found else 0.0

    def first_refusal(self, client: str) -> bool:
        """Return whether this is the first attempt refused during ``client``'s current
        wait. That attempt is logged and audited; the rest of a flood is only answered."""
        with self._lock:
            first = client not in self._reported
            self._reported.add(client)
        return first

    def failed(self, client: str) -> float:
        """Count a failure of ``client``, and return the seconds it must now wait."""
        now = self.clock()
        with self._lock:
            count, last, _ = self._failures.pop(client, (0, now, now))
            self._reported.discard(client)
            if now - last > self.forget_after:
                count = 0
            count += 1
            delay = 0.0 if count <= self.free else min(self.max_delay,
                                                       2.0 ** (count - self.free - 1))
            self._failures[client] = (count, now, now + delay)
            while len(self._failures) > self.max_clients:  # The quietest come first.
                self._reported.discard(quietest := next(iter(self._failures)))
                del self._failures[quietest]
        return delay

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._failures.pop(client, None)
            self._reported.discard(client)


# -- where a request may say it is going, and to whom it may be addressed ---------------------

_CONTROL = frozenset(chr(c) for c in (*range(0x20), *range(0x7f, 0xa0)))
_HOST = re.compile(r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+)(:[0-9]{1,5})?")
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def redirect_target(target: str, paths: Collection[str], default: str = "/schedules") -> str:
    """Return ``target`` (a login form's ``next``) when it is one of this site's ``paths``
    with a query, rebuilt so that it holds only URL-safe ASCII; else return ``default``.
    Control characters, backslashes, a scheme or a host (``//evil.example``) are never let
    through, so a redirect can neither leave the site nor add a header."""
    if not target or "\\" in target or any(c in _CONTROL for c in target):
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or parts.fragment or parts.path not in paths:
        return default
    query = urlencode(parse_qsl(parts.query, keep_blank_values=True))
    return parts.path + (f"?{query}" if query else "")


def host_allowed(host: str | None, port: str, allowed: Collection[str] = ()) -> bool:
    """Return whether a request's ``Host`` header names this dashboard. It does when it
    gives a loopback name (``localhost``, ``127.0.0.1``, ``[::1]``) with no port or with
    the one we listen on (``port``), or one of ``allowed`` (with any port when the entry
    gives none)."""
    match = _HOST.fullmatch(host or "")
    if match is None:
        return False
    name, given = match[1].lower(), (match[2] or "")[1:]
    if name in LOOPBACK_NAMES and given in ("", port):
        return True
    for entry in allowed:
        named = _HOST.fullmatch(entry)
        if named and named[1].lower() == name and named[2] in (None, f":{given}"):
            return True
    return False


def csrf_ok(session: Session | None, token: str | None) -> bool:
    return bool(session and token and hmac.compare_digest(session.csrf.encode(),
                                                          token.encode()))


def same_origin(origin: str | None, referer: str | None, host: str, scheme: str,
                allowed: tuple[str, ...] = ()) -> bool:
    """Return whether a POST says that it came from this site: its ``Origin`` (else its
    ``Referer``) is ``scheme://host`` or one of ``allowed``. A request that sends neither
    header passes, but it still needs the CSRF token."""
    claimed = origin if origin and origin != "null" else None
    if claimed is None and referer:
        parts = urlsplit(referer)
        claimed = f"{parts.scheme}://{parts.netloc}"
    if claimed is None:
        return origin != "null"
    return claimed.lower() in {f"{scheme}://{host}".lower(), *(a.lower() for a in allowed)}
