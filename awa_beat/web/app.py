"""The WSGI application: requests, responses, routing, and the checks every request
passes (authentication, CSRF, read-only) before a view runs."""

from __future__ import annotations

import ipaddress
import logging
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlencode

import jinja2

from ..config import redact
from ..errors import AwaBeatError, NotFound, StoreError
from ..logs import printable
from ..operations import Operations
from . import auth
from .seams import Outcomes, ScheduleEditor

logger = logging.getLogger(__name__)

#: Forms are small; a larger body is refused before it is read.
MAX_FORM_BYTES = 64 * 1024

StartResponse = Callable[..., Any]


class HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Request:
    environ: dict[str, Any]
    session: auth.Session | None = None
    user: str | None = None
    nonce: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    """Allows this response's inline script and style under the Content-Security-Policy."""

    @property
    def method(self) -> str:
        return str(self.environ.get("REQUEST_METHOD", "GET")).upper()

    @property
    def path(self) -> str:
        return str(self.environ.get("PATH_INFO") or "/")

    @property
    def root(self) -> str:
        """Where the app is mounted (``SCRIPT_NAME``), for links."""
        return str(self.environ.get("SCRIPT_NAME", "")).rstrip("/")

    def url(self, path: str, **params: Any) -> str:
        shown = {k: v for k, v in params.items() if v not in (None, "")}
        return self.root + path + (f"?{urlencode(shown)}" if shown else "")

    @property
    def query(self) -> dict[str, str]:
        parsed = parse_qs(str(self.environ.get("QUERY_STRING", "")), keep_blank_values=True)
        return {k: v[-1] for k, v in parsed.items()}

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
        """Where the request came from, for the audit log: the proxy's
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
            self._form = {k: v[-1] for k, v in parsed.items()}
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
    """The WSGI callable: ``Dashboard(ops, config)(environ, start_response)``."""

    def __init__(self, ops: Operations, config: auth.WebConfig | None = None, *,
                 outcomes: Outcomes | None = None, editor: ScheduleEditor | None = None,
                 close: Callable[[], None] | None = None) -> None:
        from . import views

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
        except NotFound as exc:
            response = self._error(req, 404, str(exc))
        except StoreError as exc:
            logger.warning("awa-beat web: %s", printable(str(exc)))
            response = self._error(req, 503, str(exc))
        except AwaBeatError as exc:
            response = self._error(req, 400, str(exc))
        except Exception:  # a bug: logged here, and the browser gets a page, not a trace
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
        return (f"{auth.SESSION_COOKIE}={auth.sign_session(req.session, self.config.signing_key)}"
                f"; Path={req.root or '/'}; HttpOnly; SameSite=Strict{secure}")

    def _error(self, req: Request, status: int, message: str) -> Response:
        try:
            return self.render(req, "error.html", status, code=status, message=message)
        except Exception:  # the error page itself must not fail
            logger.exception("awa-beat web: rendering the error page failed")
            return Response(f"{status}", status)

    def _handle(self, req: Request) -> Response:
        config = self.config
        req.session = auth.load_session(req.cookies.get(auth.SESSION_COOKIE),
                                        config.signing_key)
        route = self.routes.get((req.method, req.path))
        if route is None:
            if any(path == req.path for _, path in self.routes):
                raise HTTPError(405, f"{req.method} is not allowed here")
            raise HTTPError(404, "no such page")
        public = req.path in ("/login", "/favicon.ico")
        req.user = self._user(req)
        if req.session is None:
            req.session = auth.new_session(req.user)
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
            self._check_post(req)
        return route(self, req)

    def _user(self, req: Request) -> str | None:
        config = self.config
        if config.trusted_user_header and req.from_trusted_proxy(config):
            user = req.header(config.trusted_user_header)
            if user:
                return user.strip()
        if config.password:
            user = auth.basic_user(req.header("Authorization"), config.password)
            if user:
                return user
            if req.session and req.session.user:
                return req.session.user
            return None
        if not config.authenticates:
            return "anonymous"
        return None

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
