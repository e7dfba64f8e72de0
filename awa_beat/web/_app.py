"""The WSGI application: requests, responses, routing, and the checks that every request
passes before a view runs (the Host it names, authentication, CSRF, read-only mode)."""

from __future__ import annotations

import ipaddress
import logging
import math
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlencode

import jinja2

from .._db.conninfo import redact
from .._logs import event, printable
from .._ops.operations import Operations
from ..errors import AwaBeatError, NotFound, StoreError, WriteNotApplied
from . import _auth as auth
from .seams import Outcomes, ScheduleEditor

# The logger keeps the name it had before the modules moved into layer packages, so
# logging configurations that select it by name go on working.
logger = logging.getLogger('awa_beat.web.app')

#: Forms are small, so a larger body is refused before it is read.
MAX_FORM_BYTES = 64 * 1024
#: No page needs a longer path and query, so a longer one is refused (414).
MAX_URL_CHARS = 8 * 1024

StartResponse = Callable[..., Any]


class HTTPError(Exception):
    def __init__(self, status: int, message: str,
                 headers: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or []


def _no_nul(values: dict[str, str]) -> dict[str, str]:
    # PostgreSQL text cannot hold NUL. The app refuses it here and names the field,
    # rather than leaving the refusal to the server.
    for key, value in values.items():
        if "\0" in key or "\0" in value:
            raise HTTPError(400, f"{printable(key)}: must not contain a NUL character")
    return values


@dataclass
class Request:
    environ: dict[str, Any]
    session: auth.Session | None = None
    user: str | None = None
    nonce: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    """The nonce that allows this response's inline script and style under the
    Content-Security-Policy."""
    audited: bool = False
    """Whether the action that this request asked for is in the audit log already."""

    @property
    def method(self) -> str:
        return str(self.environ.get("REQUEST_METHOD", "GET")).upper()

    @property
    def path(self) -> str:
        return str(self.environ.get("PATH_INFO") or "/")

    @property
    def root(self) -> str:
        """Return where the app is mounted (``SCRIPT_NAME``), for links."""
        return str(self.environ.get("SCRIPT_NAME", "")).rstrip("/")

    def url(self, path: str, **params: Any) -> str:
        shown = {k: v for k, v in params.items() if v not in (None, "")}
        return self.root + path + (f"?{urlencode(shown)}" if shown else "")

    @property
    def query(self) -> dict[str, str]:
        parsed = parse_qs(str(self.environ.get("QUERY_STRING", "")), keep_blank_values=True)
        return _no_nul({k: v[-1] for k, v in parsed.items()})

    def header(self, name: str) -> str | None:
        key = "HTTP_" + name.upper().replace("-", "_")
        value = self.environ.get(key)
        return str(value) if value is not None else None

    @property
    def remote_addr(self) -> str:
        return str(self.environ.get("REMOTE_ADDR") or "")

    def from_trusted_proxy(self, config: auth.WebConfig) -> bool:
        try:
            addr = ipaddress.ip_address(self.remote_addr)
        except ValueError:
            return False
        for trusted in config.trusted_proxies:
            try:
                if addr in ipaddress.ip_network(trusted, strict=False):
                    return True
            except ValueError:
                continue
        return False

    def client(self, config: auth.WebConfig) -> str:
        """Return where the request came from, for the audit log: the proxy's
        ``X-Forwarded-For`` when the proxy is trusted, else the peer's address."""
        forwarded = self.header("X-Forwarded-For")
        if forwarded and config.trusted_user_header and self.from_trusted_proxy(config):
            return forwarded.split(",")[0].strip()
        return self.remote_addr

    def scheme(self, config: auth.WebConfig) -> str:
        proto = self.header("X-Forwarded-Proto")
        if proto and self.from_trusted_proxy(config):
            return proto.split(",")[0].strip().lower()
        return str(self.environ.get("wsgi.url_scheme", "http"))

    @property
    def host(self) -> str:
        host = self.header("Host")
        if host:
            return host
        return f"{self.environ.get('SERVER_NAME', '')}:{self.environ.get('SERVER_PORT', '')}"

    @property
    def cookies(self) -> dict[str, str]:
        cookie = SimpleCookie()
        try:
            cookie.load(self.header("Cookie") or "")
        except CookieError:
            return {}
        return {k: m.value for k, m in cookie.items()}

    _form: dict[str, str] | None = None

    @property
    def form(self) -> dict[str, str]:
        if self._form is None:
            try:
                length = int(self.environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            if length > MAX_FORM_BYTES:
                raise HTTPError(413, "the form is too large")
            body = self.environ["wsgi.input"].read(length) if length > 0 else b""
            try:
                parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True,
                                  strict_parsing=False)
            except UnicodeDecodeError:
                raise HTTPError(400, "the form is not UTF-8") from None
            self._form = _no_nul({k: v[-1] for k, v in parsed.items()})
        return self._form


@dataclass
class Response:
    body: str = ""
    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def redirect(cls, location: str) -> Response:
        return cls("", 303, [("Location", location)])


View = Callable[["Dashboard", Request], Response]


class Dashboard:
    """The WSGI callable: ``Dashboard(ops, config)(environ, start_response)``.

    With a password, the dashboard must be made on a store (``ops.store``) migrated to
    version 14 at least, because it reads (or makes) the secret that signs session
    cookies there.
    """

    def __init__(self, ops: Operations, config: auth.WebConfig | None = None, *,
                 outcomes: Outcomes | None = None, editor: ScheduleEditor | None = None,
                 close: Callable[[], None] | None = None,
                 throttle: auth.LoginThrottle | None = None) -> None:
        from . import _views as views

        self.ops = ops
        self.config = config or auth.WebConfig()
        self.outcomes = outcomes
        self.editor = editor
        self._close = close
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("awa_beat.web", "templates"),
            autoescape=True, undefined=jinja2.StrictUndefined,
            trim_blocks=True, lstrip_blocks=True)
        self.templates.filters.update(views.FILTERS)
        self.routes: dict[tuple[str, str], View] = views.ROUTES
        self.actions = views.ACTIONS
        #: The pages where a login may send the browser back to: this site's, no others.
        self.pages = frozenset(path for method, path in self.routes
                               if method == "GET" and path != "/login")
        self.throttle = throttle or auth.LoginThrottle()
        self.signing_key = self._signing_key()

    def _signing_key(self) -> bytes:
        """Return the configured secret. Without one, return the database's secret when
        there is a password (the secret is made, or replaced when it was made for another
        password), and a random secret otherwise."""
        password = self.config.password
        if self.config.secret or not password:
            return self.config.secret or secrets.token_bytes(32)
        store = self.ops.store
        found = store.cluster.web_secret()
        if found is not None and auth.fingerprint_matches(password, found[1]):
            return found[0]
        store.cluster.save_web_secret(secrets.token_bytes(32), auth.fingerprint(password),
                                      replaces=found[1] if found else None)
        if found is not None:
            event(logger, logging.WARNING, "web.secret_replaced",
                  "awa-beat web: the password changed: sessions are signed with a new "
                  "secret, and every session has ended")
        stored = store.cluster.web_secret()
        if stored is None:
            raise StoreError("storing the dashboard's secret failed: it was not kept")
        return stored[0]

    def close(self) -> None:
        if self._close is not None:
            self._close()

    def render(self, req: Request, template: str, status: int = 200, **context: Any
               ) -> Response:
        context.setdefault("database", redact(self.ops.store.conninfo))
        body = self.templates.get_template(template).render(
            req=req, config=self.config, user=req.user, nonce=req.nonce,
            csrf=req.session.csrf if req.session else "", **context)
        return Response(body, status)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse
                 ) -> Iterable[bytes]:
        req = Request(environ)
        try:
            response = self._handle(req)
        except HTTPError as exc:
            response = self._error(req, exc.status, exc.message)
            response.headers += exc.headers
        except NotFound as exc:
            response = self._error(req, 404, str(exc))
        except WriteNotApplied as exc:  # The database answered and kept the row.
            response = self._error(req, 409, str(exc))
        except StoreError as exc:
            logger.warning("awa-beat web: %s", printable(str(exc)))
            response = self._error(req, 503, str(exc))
        except AwaBeatError as exc:
            response = self._error(req, 400, str(exc))
        except Exception:  # A bug is logged here, and the browser gets a page, not a trace.
            logger.exception("awa-beat web: %s %s failed", printable(req.method),
                             printable(req.path))
            response = self._error(req, 500, "internal error (logged by the server)")
        headers = [("Content-Type", "text/html; charset=utf-8"),
                   ("Cache-Control", "no-store"),
                   ("X-Content-Type-Options", "nosniff"),
                   ("X-Frame-Options", "DENY"),
                   ("Referrer-Policy", "same-origin"),
                   ("Content-Security-Policy",
                    f"default-src 'none'; script-src 'nonce-{req.nonce}'; "
                    f"style-src 'nonce-{req.nonce}'; img-src 'self'; form-action 'self'; "
                    "frame-ancestors 'none'; base-uri 'none'"),
                   *response.headers]
        if req.session is not None and req.session.new:
            headers.append(("Set-Cookie", self._cookie(req)))
        body = response.body.encode("utf-8")
        headers.append(("Content-Length", str(len(body))))
        start_response(f"{response.status} {HTTPStatus(response.status).phrase}", headers)
        return [body]

    def _cookie(self, req: Request) -> str:
        assert req.session is not None
        secure = "; Secure" if req.scheme(self.config) == "https" else ""
        return (f"{auth.SESSION_COOKIE}={auth.sign_session(req.session, self.signing_key)}"
                f"; Path={req.root or '/'}; HttpOnly; SameSite=Strict{secure}")

    def _error(self, req: Request, status: int, message: str) -> Response:
        # Another site may read a page refused for its Host, so the page names no database.
        shown = {"database": None} if status == 421 else {}
        try:
            return self.render(req, "error.html", status, code=status, message=message,
                               **shown)
        except Exception:  # The error page itself must not fail.
            logger.exception("awa-beat web: rendering the error page failed")
            return Response(f"{status}", status)

    def _handle(self, req: Request) -> Response:
        config = self.config
        self._check_address(req)
        req.session = self._session(req)
        route = self.routes.get((req.method, req.path))
        if route is None:
            if any(path == req.path for _, path in self.routes):
                raise HTTPError(405, f"{req.method} is not allowed here")
            raise HTTPError(404, "no such page")
        public = req.path in ("/login", "/favicon.ico")
        req.user = self._user(req)
        if req.session is None:
            req.session = auth.new_session(None)
        if config.authenticates and req.user is None and not public:
            if config.password and req.method == "GET" and not req.header("Authorization"):
                return Response.redirect(req.url("/login", next=req.path + (
                    "?" + req.environ["QUERY_STRING"] if req.environ.get("QUERY_STRING")
                    else "")))
            headers = ([("WWW-Authenticate", 'Basic realm="awa-beat", charset="UTF-8"')]
                       if config.password else [])
            response = self._error(req, 401, "log in first")
            response.headers += headers
            return response
        if req.method == "POST":
            return self._post(req, route)
        return route(self, req)

    def _check_address(self, req: Request) -> None:
        """Refuse an overlong address. Without a login, also refuse a Host that is not
        ours (a page elsewhere whose name now points at this host: DNS rebinding)."""
        if len(req.path) + len(str(req.environ.get("QUERY_STRING", ""))) > MAX_URL_CHARS:
            raise HTTPError(414, f"the address is too long (at most {MAX_URL_CHARS} "
                                 "characters)")
        config = self.config
        port = str(req.environ.get("SERVER_PORT", ""))
        if not config.authenticates and not auth.host_allowed(req.header("Host"), port,
                                                              config.allowed_hosts):
            raise HTTPError(421, f"this dashboard has no login, so it answers only to "
                                 f"{', '.join(auth.LOOPBACK_NAMES)} (port {port}) and the "
                                 f"names given with --allowed-host, not to Host "
                                 f"{req.header('Host') or '(none)'!r}")

    def _session(self, req: Request) -> auth.Session | None:
        """Return the cookie's session. A logged-in session counts only while its row in
        the database says that it has not ended (by a logout, expiry, or a replaced
        secret)."""
        session = auth.load_session(req.cookies.get(auth.SESSION_COOKIE), self.signing_key)
        if session is not None and session.user is not None and (
                not self.config.password
                or self.ops.store.cluster.web_session_user(session.key) != session.user):
            return None
        return session

    def _user(self, req: Request) -> str | None:
        config = self.config
        if config.trusted_user_header and req.from_trusted_proxy(config):
            user = req.header(config.trusted_user_header)
            if user:
                return user.strip()
        if config.password:
            given = auth.basic_credentials(req.header("Authorization"))
            if given is not None and self.password_ok(req, *given):
                return given[0]
            if req.session and req.session.user:
                return req.session.user
            return None
        if not config.authenticates:
            return "anonymous"
        return None

    def _post(self, req: Request, route: View) -> Response:
        """Run a POST's checks and its view. An action that is refused or fails on the way
        is recorded in the audit log, unless its view recorded it."""
        try:
            self._check_post(req)
            response = route(self, req)
        except HTTPError as exc:
            self._audit_refused(req, f"refused: {exc.message}")
            raise
        except AwaBeatError as exc:
            self._audit_refused(req, f"error: {exc}")
            raise
        except Exception:
            self._audit_refused(req, "error: internal error (logged by the server)")
            raise
        if response.status >= 400:
            self._audit_refused(req, f"refused ({response.status})")
        return response

    def _check_post(self, req: Request) -> None:
        config = self.config
        if config.read_only and req.path in self.actions:
            raise HTTPError(403, "this dashboard is read-only")
        if not auth.same_origin(req.header("Origin"), req.header("Referer"), req.host,
                                req.scheme(config), config.allowed_origins):
            raise HTTPError(403, "this form did not come from this site (Origin)")
        if not auth.csrf_ok(req.session if not req.session or not req.session.new else None,
                            req.form.get("csrf_token")):
            raise HTTPError(403, "the form's CSRF token is missing or wrong; reload the page")

    # -- the audit log and logging in ------------------------------------------------------

    def record(self, req: Request, action: str, outcome: str, *, actor: str | None = None,
               schedule: str | None = None, detail: dict[str, Any] | None = None) -> None:
        """Write one entry of the audit log for this request (who acted, from where)."""
        self.ops.record_action(actor=actor or req.user or "anonymous",
                               source=self.config.source, action=action, outcome=outcome,
                               schedule=schedule, remote_addr=req.client(self.config),
                               detail=detail)
        req.audited = True

    def _audit_refused(self, req: Request, outcome: str) -> None:
        if req.path not in self.actions or req.audited:
            return
        try:
            name = req.form.get("name") or None
        except HTTPError:  # The form itself was refused (too large, or not UTF-8).
            name = None
        try:
            self.record(req, req.path.rsplit("/", 1)[-1], outcome, schedule=name)
        except StoreError as exc:  # The refusal stands, and the page says what went wrong.
            logger.warning("awa-beat web: recording a refused action failed: %s",
                           printable(str(exc)))

    def local_target(self, target: str) -> str:
        """Return where a login may send the browser back to (see
        :func:`auth.redirect_target`)."""
        return auth.redirect_target(target, self.pages)

    def password_ok(self, req: Request, user: str, given: str) -> bool:
        """Return whether ``given`` is the password. After a few failures, a client must
        wait longer after each one; meanwhile it gets 429, and the password is not even
        compared. Every wrong password is logged and audited, and so is the first attempt
        refused in each wait."""
        client = req.client(self.config)
        wait = math.ceil(self.throttle.wait(client))
        if wait > 0:
            if self.throttle.first_refusal(client):
                self._login_refused(req, user, client,
                                    f"too many failed logins, {wait} s to wait")
            raise HTTPError(429, f"too many failed logins from {client}: try again in "
                                 f"{wait} s", [("Retry-After", str(wait))])
        if self.config.password and auth.password_matches(given, self.config.password):
            self.throttle.succeeded(client)
            return True
        self.throttle.failed(client)
        self._login_refused(req, user, client, "wrong password")
        return False

    def _login_refused(self, req: Request, user: str, client: str, why: str) -> None:
        event(logger, logging.WARNING, "web.login_refused",
              "awa-beat web: login of %r from %s refused: %s", user, client, why,
              user=user, client=client)
        self.record(req, "login", f"refused: {why}", actor=user)

    def log_in(self, req: Request, user: str) -> None:
        """Start a session for ``user``: write its row in the database and set its cookie."""
        session = auth.new_session(user)
        self.ops.store.cluster.start_web_session(session.key, user, auth.SESSION_LIFETIME)
        req.session = session
        self.record(req, "login", "ok", actor=user)

    def log_out(self, req: Request) -> None:
        """End the session. Its row is deleted, so its cookie opens nothing again."""
        if req.session is not None and req.session.user is not None:
            self.ops.store.cluster.end_web_session(req.session.key)
            self.record(req, "logout", "ok", actor=req.session.user)
        req.session = auth.new_session(None)
