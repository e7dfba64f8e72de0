"""Who is asking, and whether a form really came from our page.

Three ways to authenticate, chosen by :class:`WebConfig`:

* none: only allowed while the server listens on a loopback address (see
  :func:`awa_beat.web.server.check_bind`); the actor is recorded as ``anonymous``;
* a password: a login form (the name given there is the actor in the audit log) that
  sets a signed session cookie, or HTTP Basic with any user name and that password;
* a reverse proxy's user header (``trusted_user_header``), believed only from the
  proxy addresses listed in ``trusted_proxies``.

Every session, the anonymous one included, carries a random CSRF token; every POST
must send it back (synchronizer token) and, when the browser says where it came from
(``Origin``, else ``Referer``), come from this site.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

SESSION_COOKIE = "awa_beat_session"
#: Seconds a session lasts after the login.
SESSION_LIFETIME = 12 * 3600


@dataclass(frozen=True)
class WebConfig:
    """How the dashboard authenticates and what it allows."""

    password: str | None = None
    """Operators log in with this password (form or HTTP Basic)."""
    trusted_user_header: str | None = None
    """A header (e.g. ``X-Forwarded-User``) naming the user, set by a reverse proxy
    that authenticated them."""
    trusted_proxies: tuple[str, ...] = ("127.0.0.1", "::1")
    """The addresses whose ``trusted_user_header`` (and ``X-Forwarded-Proto``) is believed."""
    read_only: bool = False
    """No action buttons, and every action refused."""
    secret: bytes | None = None
    """Signs session cookies. Default: derived from the password (so every process
    behind one password shares sessions), else random per process."""
    allowed_origins: tuple[str, ...] = ()
    """More origins (``https://ops.example.com``) whose forms are accepted, for a proxy
    that rewrites the Host header."""
    source: str = "web"
    """Recorded with each action in the audit log."""
    page_size: int = 50
    _random_secret: bytes = field(default_factory=lambda: secrets.token_bytes(32),
                                  repr=False, compare=False)

    @property
    def authenticates(self) -> bool:
        return bool(self.password or self.trusted_user_header)

    @property
    def signing_key(self) -> bytes:
        if self.secret:
            return self.secret
        if self.password:
            return hashlib.sha256(b"awa-beat web session\0" + self.password.encode()).digest()
        return self._random_secret


@dataclass
class Session:
    user: str | None
    csrf: str
    expires: float
    new: bool = False
    """Not yet in the browser's cookie: the response sets it."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign_session(session: Session, key: bytes) -> str:
    payload = _b64(json.dumps({"u": session.user, "c": session.csrf,
                               "e": int(session.expires)}).encode())
    mac = _b64(hmac.new(key, payload.encode(), hashlib.sha256).digest())
    return f"{payload}.{mac}"


def load_session(cookie: str | None, key: bytes, now: float | None = None) -> Session | None:
    """The session in a cookie we signed that has not expired, else None."""
    if not cookie or "." not in cookie:
        return None
    payload, mac = cookie.rsplit(".", 1)
    expected = _b64(hmac.new(key, payload.encode(), hashlib.sha256).digest())
    if not hmac.compare_digest(mac, expected):
        return None
    try:
        data: dict[str, Any] = json.loads(_unb64(payload))
        session = Session(data["u"], str(data["c"]), float(data["e"]))
    except (ValueError, KeyError, TypeError, binascii.Error):
        return None
    if session.expires < (time.time() if now is None else now):
        return None
    return session


def new_session(user: str | None) -> Session:
    return Session(user, secrets.token_urlsafe(32), time.time() + SESSION_LIFETIME, new=True)


def password_matches(given: str, password: str) -> bool:
    return hmac.compare_digest(given.encode(), password.encode())


def basic_user(authorization: str | None, password: str) -> str | None:
    """The user of an HTTP Basic ``Authorization`` header with the right password."""
    if not authorization or not authorization.lower().startswith("basic "):
        return None
    try:
        user, _, given = base64.b64decode(authorization[6:].strip()).decode().partition(":")
    except (ValueError, UnicodeDecodeError, binascii.Error):
        return None
    return (user or "basic") if password_matches(given, password) else None


def csrf_ok(session: Session | None, token: str | None) -> bool:
    return bool(session and token and hmac.compare_digest(session.csrf.encode(),
                                                          token.encode()))


def same_origin(origin: str | None, referer: str | None, host: str, scheme: str,
                allowed: tuple[str, ...] = ()) -> bool:
    """Whether a POST says it came from this site: its ``Origin`` (else its ``Referer``)
    is ``scheme://host`` or one of ``allowed``; a request that says neither passes (it
    still needs the CSRF token)."""
    claimed = origin if origin and origin != "null" else None
    if claimed is None and referer:
        parts = urlsplit(referer)
        claimed = f"{parts.scheme}://{parts.netloc}"
    if claimed is None:
        return origin != "null"
    return claimed.lower() in {f"{scheme}://{host}".lower(), *(a.lower() for a in allowed)}
