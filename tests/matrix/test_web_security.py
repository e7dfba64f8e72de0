"""Matrix, the dashboard as an attacker finds it (issue 35, items 2, 3, 4 and 7): real
HTTP against ``awa-beat web``'s server on a free loopback port, on a database holding the
catalogue, and Chromium where only a browser shows the harm (a planted cookie).

Each test names the case of the issue it covers.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import logging
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from awa_beat._db.database import connect
from tests.matrix.catalogue import NAMES, MatrixDB

pytestmark = pytest.mark.integration

pytest.importorskip("jinja2", reason="the dashboard needs the web extra")
pytest.importorskip("waitress", reason="the dashboard needs the web extra")

from awa_beat.web import WebConfig, create_app  # noqa: E402 - only with the web extra
from awa_beat.web.server import make  # noqa: E402

PASSWORD = "correct horse"
#: Any schedule of the catalogue: the pages are the same for every type.
NAME = max(sorted(NAMES), key=len)


@pytest.fixture(scope="module")
def db(matrix_templates: Any) -> MatrixDB:
    return matrix_templates.clone("standalone")


class Served:
    """A dashboard served on a free loopback port, and HTTP to it."""

    def __init__(self, url: str, config: WebConfig, **server: Any) -> None:
        self.app = create_app(url, config=config)
        self.server: Any = make(self.app, "127.0.0.1", 0, **server)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
        self.app.close()

    def request(self, method: str, path: str, *, form: dict[str, str] | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        body = urlencode(form) if form is not None else None
        sent = {"Host": f"127.0.0.1:{self.port}", **(headers or {})}
        if form is not None:
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            return (response.status, {k.lower(): v for k, v in response.getheaders()},
                    response.read().decode("utf-8", "replace"))
        finally:
            conn.close()

    def raw(self, data: bytes) -> bytes:
        """What the server answers ``data``, read until it closes the connection (a
        server that refuses a request before reading all of it may reset the
        connection: what arrived before is the answer)."""
        chunks = []
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            try:
                sock.sendall(data)
                while chunk := sock.recv(65536):
                    chunks.append(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
        return b"".join(chunks)


@pytest.fixture
def serve(db: MatrixDB) -> Iterator[Any]:
    started: list[Served] = []

    def start(config: WebConfig | None = None, **server: Any) -> Served:
        started.append(Served(db.url, config or WebConfig(), **server))
        return started[-1]

    yield start
    for served in started:
        served.close()


class Browser:
    """A client with a cookie jar of one cookie, as a browser keeps it."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.cookie = ""

    def request(self, method: str, path: str, form: dict[str, str] | None = None,
                **headers: str) -> tuple[int, dict[str, str], str]:
        sent = {"Cookie": self.cookie, **headers} if self.cookie else dict(headers)
        status, got, body = self.served.request(method, path, form=form, headers=sent)
        if "set-cookie" in got:
            self.cookie = got["set-cookie"].split(";")[0]
        return status, got, body

    def token(self, path: str = "/login") -> str:
        status, _, body = self.request("GET", path)
        found = re.search(r'name="csrf_token" value="([^"]+)"', body)
        assert found, (status, body[:500])
        return found.group(1)

    def log_in(self, password: str = PASSWORD, user: str = "alice", next_: str = ""
               ) -> tuple[int, dict[str, str], str]:
        return self.request("POST", "/login", {
            "csrf_token": self.token(), "username": user, "password": password,
            "next": next_})


def audit(db: MatrixDB, action: str) -> list[tuple[str, str, str | None]]:
    with connect(db.url) as conn:
        return conn.execute(
            "SELECT actor, outcome, schedule FROM awa_beat.audit_log WHERE action = %s "
            "ORDER BY id", (action,)).fetchall()


# -- item 2: the login's `next` -------------------------------------------------------------


def test_a_login_plants_no_cookie_and_leaves_not_the_site_in_chromium(
        serve: Any) -> None:
    """issue 35, item 2: ``next=/schedules%0D%0ASet-Cookie:%20planted=1`` planted a cookie
    in Chromium; ``/\\t/evil.example`` passed as a local path."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no Chromium installed")
    sync_api = pytest.importorskip("playwright.sync_api")
    served = serve(WebConfig(password=PASSWORD))
    base = f"http://127.0.0.1:{served.port}"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            for target, lands in [
                    ("/schedules%0D%0ASet-Cookie:%20planted=1", "/schedules"),
                    ("/%09/evil.example", "/schedules"),
                    ("%2F%2Fevil.example", "/schedules"),
                    (f"/schedule%3Fname%3D{quote(NAME)}", "/schedule?name=")]:
                context = browser.new_context()
                page = context.new_page()
                page.goto(f"{base}/login?next={target}")
                page.fill("input[name=username]", "alice")
                page.fill("input[name=password]", PASSWORD)
                page.click("button:has-text('Log in')")
                page.wait_for_url(f"{base}{lands}*")
                cookies = {c["name"] for c in context.cookies()}
                assert cookies == {"awa_beat_session"}, target
                context.close()
        finally:
            browser.close()


def test_a_login_with_a_next_no_header_can_hold_is_redirected_safely(serve: Any) -> None:
    """issue 35, item 7: a non-Latin-1 ``next`` raised UnicodeEncodeError after a good
    login; item 2: CR/LF went into the Location header as given."""
    served = serve(WebConfig(password=PASSWORD))
    for target, location in [
            ("/schedules?q=日本語", "/schedules?q=%E6%97%A5%E6%9C%AC%E8%AA%9E"),
            ("/schedules\r\nSet-Cookie: planted=1", "/schedules"),
            ("/\t/evil.example", "/schedules"),
            ("/\\evil.example", "/schedules")]:
        status, headers, _ = Browser(served).log_in(next_=target)
        assert (status, headers["location"]) == (303, location), target
        assert "planted" not in headers.get("set-cookie", "")


# -- item 3: DNS rebinding ------------------------------------------------------------------


def test_without_a_login_a_host_that_is_not_ours_is_refused(serve: Any, db: MatrixDB
                                                            ) -> None:
    """issue 35, item 3: a page on attacker.example rebound to 127.0.0.1 read every
    schedule and added one, the Origin check comparing Origin with that same Host."""
    served = serve()
    port = served.port
    evil = f"attacker.example:{port}"
    status, _, body = served.request("GET", "/cluster", headers={"Host": evil})
    assert status == 421 and "--allowed-host" in body and NAME not in body
    assert "postgres" not in body  # no database named to another site
    rebound = Browser(served)
    status, _, _ = rebound.request("GET", "/schedule/new", Host=evil)
    assert status == 421 and rebound.cookie == ""
    status, _, _ = rebound.request("POST", "/schedule/add", {
        "name": "proj.delete_everything", "task": "proj.delete_everything", "kind": "every",
        "schedule": "5"}, Host=evil, Origin=f"http://{evil}")
    assert status == 421
    with connect(db.url) as conn:
        assert conn.execute("SELECT count(*) FROM awa.cron_jobs WHERE name = "
                            "'proj.delete_everything'").fetchone() == (0,)
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "localhost"):
        assert served.request("GET", f"/schedule?name={quote(NAME)}",
                              headers={"Host": host})[0] == 200, host
    assert served.request("GET", "/schedules", headers={"Host": "127.0.0.1:1"})[0] == 421


def test_an_allowed_host_is_answered(serve: Any) -> None:
    served = serve(WebConfig(allowed_hosts=("ops.example.com",)))
    assert served.request("GET", "/cluster", headers={"Host": "ops.example.com"})[0] == 200
    assert served.request("GET", "/schedules", headers={"Host": "evil.example"})[0] == 421


def test_the_command_takes_allowed_hosts(db: MatrixDB, tmp_path: Any) -> None:
    """``awa-beat web --allowed-host``, end to end: the real command, its server."""
    process = subprocess.Popen(
        [sys.executable, "-m", "awa_beat", "web", "--port", "0", "--allowed-host",
         "ops.example.com", "--database-url", db.url],
        stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert found, line
        conn = http.client.HTTPConnection("127.0.0.1", int(found.group(1)), timeout=10)
        for host, status in [("ops.example.com", 200), ("evil.example", 421)]:
            conn.request("GET", "/cluster", headers={"Host": host})
            response = conn.getresponse()
            response.read()
            assert response.status == status, host
        conn.close()
    finally:
        process.terminate()
        process.wait(10)


# -- item 4: the password login -------------------------------------------------------------


def test_failed_logins_are_slowed_logged_and_audited(serve: Any, db: MatrixDB,
                                                     caplog: pytest.LogCaptureFixture
                                                     ) -> None:
    """issue 35, item 4: no rate limit, delay, lockout or log line (1,000 guesses a
    second from one client)."""
    served = serve(WebConfig(password=PASSWORD))
    browser = Browser(served)
    before = len(audit(db, "login"))
    with caplog.at_level(logging.WARNING, logger="awa_beat.web"):
        answers = [browser.log_in(password=f"guess {i}", user="mall\nory")[0]
                   for i in range(5)]
    assert answers[:4] == [401, 401, 401, 401]
    assert answers[4] == 429  # the fourth failure costs a second's wait
    status, headers, body = browser.log_in(password=PASSWORD)
    assert status == 429 and int(headers["retry-after"]) >= 1
    assert "try again in" in body
    refused = [r for r in caplog.records if getattr(r, "action", "") == "web.login_refused"]
    assert len(refused) == 5  # each wrong password, and the first attempt of the wait
    assert all("\n" not in r.getMessage() for r in refused)  # the name escaped
    entries = audit(db, "login")[before:]
    assert [outcome for _, outcome, _ in entries][:4] == ["refused: wrong password"] * 4
    assert entries[4][1] == "refused: too many failed logins, 1 s to wait"
    assert len(entries) == 5 and entries[0][0] == "mall\nory"
    # Basic authentication is counted as well.
    wrong = "Basic " + base64.b64encode(b"ops:guess").decode()
    assert served.request("GET", "/schedules", headers={"Authorization": wrong})[0] == 429


def test_a_login_is_let_in_once_the_wait_is_over(serve: Any) -> None:
    served = serve(WebConfig(password=PASSWORD))
    browser = Browser(served)
    answers = [browser.log_in(password="guess")[0] for _ in range(5)]
    assert answers == [401, 401, 401, 401, 429]
    deadline = time.monotonic() + 10
    while (status := browser.log_in()[0]) == 429 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert status == 303


def test_a_cookie_signed_with_the_password_opens_nothing(serve: Any, db: MatrixDB) -> None:
    """issue 35, item 4: the cookie was signed with one SHA-256 of the password: one
    cookie was an offline oracle, and a known password forged any session."""
    served = serve(WebConfig(password=PASSWORD))
    old_key = hashlib.sha256(b"awa-beat web session\0" + PASSWORD.encode()).digest()

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    payload = b64(json.dumps({"u": "mallory", "c": "x", "e": 4_000_000_000,
                              "i": "made-up"}).encode())
    mac = b64(hmac.new(old_key, payload.encode(), hashlib.sha256).digest())
    status, headers, _ = served.request("GET", "/cluster", headers={
        "Cookie": f"awa_beat_session={payload}.{mac}"})
    assert status == 303 and "/login" in headers["location"]
    with connect(db.url) as conn:
        secret, fingerprint = conn.execute(
            "SELECT secret, fingerprint FROM awa_beat.web_secret").fetchone()
    assert len(bytes(secret)) == 32 and bytes(secret) != old_key
    assert PASSWORD not in fingerprint
    # A real cookie names a session the database knows, not the password.
    browser = Browser(served)
    assert browser.log_in()[0] == 303
    cookie = browser.cookie.split("=", 1)[1]
    claims = json.loads(base64.urlsafe_b64decode(cookie.split(".")[0] + "=="))
    assert claims["u"] == "alice" and len(claims["i"]) >= 32


def test_logging_out_ends_the_session_for_good(serve: Any, db: MatrixDB) -> None:
    """issue 35, item 4: logging out did not end the session (the old cookie worked)."""
    served = serve(WebConfig(password=PASSWORD))
    browser = Browser(served)
    assert browser.log_in(next_="/cluster")[0] == 303
    old = browser.cookie
    assert browser.request("GET", "/cluster")[0] == 200
    token = browser.token("/cluster")
    assert browser.request("POST", "/logout", {"csrf_token": token})[0] == 303
    status, headers, _ = served.request("GET", "/cluster", headers={"Cookie": old})
    assert status == 303 and "/login" in headers["location"]
    assert [o for _, o, _ in audit(db, "logout")][-1:] == ["ok"]


def test_an_expired_session_is_refused_and_pruned(serve: Any, db: MatrixDB) -> None:
    served = serve(WebConfig(password=PASSWORD))
    browser = Browser(served)
    assert browser.log_in()[0] == 303
    with connect(db.url) as conn:
        conn.execute("UPDATE awa_beat.web_sessions SET expires_at = now() - interval '1 s'")
    assert browser.request("GET", "/cluster")[0] == 303
    assert Browser(served).log_in()[0] == 303  # a login deletes the expired rows
    with connect(db.url) as conn:
        assert conn.execute("SELECT count(*) FILTER (WHERE expires_at <= now()), count(*) "
                            "FROM awa_beat.web_sessions").fetchone() == (0, 1)


def test_a_new_password_replaces_the_secret_and_ends_every_session(
        serve: Any, db: MatrixDB) -> None:
    first = serve(WebConfig(password=PASSWORD))
    browser = Browser(first)
    assert browser.log_in()[0] == 303
    assert browser.request("GET", "/cluster")[0] == 200
    with connect(db.url) as conn:
        (before,) = conn.execute("SELECT secret FROM awa_beat.web_secret").fetchone()
    serve(WebConfig(password=PASSWORD))  # the same password keeps the secret
    with connect(db.url) as conn:
        assert conn.execute("SELECT secret FROM awa_beat.web_secret").fetchone() == (before,)
    second = serve(WebConfig(password="another password"))
    with connect(db.url) as conn:
        (after,) = conn.execute("SELECT secret FROM awa_beat.web_secret").fetchone()
        assert after != before
        assert conn.execute("SELECT count(*) FROM awa_beat.web_sessions").fetchone() == (0,)
    assert browser.request("GET", "/cluster")[0] == 303  # ended on the old dashboard too
    assert second.request("GET", "/cluster", headers={"Cookie": browser.cookie})[0] == 303


# -- item 7: the HTTP edges -----------------------------------------------------------------


def _status(reply: bytes) -> int:
    match = re.match(rb"HTTP/1\.[01] (\d{3}) ", reply)
    assert match, reply[:200]
    return int(match.group(1))


def test_malformed_requests_get_a_clear_refusal_not_a_traceback(
        serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    """issue 35, item 7: a request line over 64 KB, or a garbage one, gave a traceback
    and an empty reply."""
    served = serve()
    host = f"Host: 127.0.0.1:{served.port}\r\n".encode()
    with caplog.at_level(logging.DEBUG):
        long_line = served.raw(b"GET /schedules?q=" + b"a" * 70_000 + b" HTTP/1.1\r\n" + host
                               + b"Connection: close\r\n\r\n")
        huge = served.raw(b"GET /" + b"a" * 300_000 + b" HTTP/1.1\r\n" + host + b"\r\n")
        garbage = served.raw(b"\x16\x03\x01\x02\x00garbage\r\n\r\n")
        no_version = served.raw(b"GET\r\n\r\n")
    assert _status(long_line) == 414 and b"too long" in long_line
    assert huge == b"" or _status(huge) == 431  # past the head's limit: refused unread
    assert _status(garbage) == 400 and _status(no_version) == 400
    assert [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()] == []
    status, _, body = served.request("GET", "/schedules?q=" + "a" * 9000)
    assert status == 414 and "too long" in body


@pytest.mark.parametrize(("path", "field"), [
    ("/schedules?q=a%00b", "q"), ("/schedules?owner=%00", "owner"),
    ("/schedules?after=a%00", "after"), ("/schedules?before=%00", "before"),
    ("/schedule?name=%00", "name"),
])
def test_a_nul_is_refused_naming_the_field(serve: Any, path: str, field: str) -> None:
    """issue 35, item 7: a NUL in q, owner or after gave a 503 (PostgreSQL refused it)."""
    status, _, body = serve().request("GET", path)
    assert status == 400 and f"{field}: must not contain a NUL character" in body


def test_digits_that_are_not_ascii_are_no_500(serve: Any) -> None:
    """issue 35, item 7: ``job=²`` and ``before=²`` gave a 500 (``'²'.isdigit()``)."""
    served = serve()
    status, _, body = served.request("GET", f"/schedule?name={quote(NAME)}&done=triggered"
                                     f"&job={quote('²')}")
    assert status == 200 and "Triggered: job ?." in body
    status, _, body = served.request("GET", f"/audit?before={quote('²')}")
    assert status == 400 and "before: an entry id" in body


def test_idle_connections_are_closed_and_cost_no_thread(serve: Any) -> None:
    """issue 35, item 7: idle connections were never timed out (1,100 held open, a
    thread each)."""
    served = serve(idle_timeout=1.0, connection_limit=50)
    threads = threading.active_count()
    sockets = [socket.create_connection(("127.0.0.1", served.port), timeout=10)
               for _ in range(200)]
    try:
        time.sleep(0.5)  # let the server accept what it will
        assert threading.active_count() <= threads + 1  # no thread per connection
        deadline = time.monotonic() + 15
        closed = 0
        for sock in sockets:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                if sock.recv(1) == b"":
                    closed += 1
            except (TimeoutError, ConnectionResetError):
                pass
        assert closed == len(sockets)  # every idle one closed by the server
    finally:
        for sock in sockets:
            sock.close()
    assert served.request("GET", "/cluster")[0] == 200


def test_connections_past_the_limit_wait_for_a_free_place(serve: Any) -> None:
    served = serve(idle_timeout=30.0, connection_limit=10)
    idle = [socket.create_connection(("127.0.0.1", served.port), timeout=10)
            for _ in range(20)]
    try:
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=1.5)
        conn.request("GET", "/schedules", headers={"Host": f"127.0.0.1:{served.port}"})
        with pytest.raises(TimeoutError):  # over the cap: not taken yet
            conn.getresponse()
        conn.close()
    finally:
        for sock in idle:
            sock.close()
    assert served.request("GET", "/cluster")[0] == 200


def test_every_refused_action_is_audited(serve: Any, db: MatrixDB) -> None:
    """issue 35, item 7: refused adds were not in the audit log, though every action
    "done or refused" should be."""
    served = serve()
    browser = Browser(served)
    token = browser.token("/schedule/new")
    status, _, _ = browser.request("POST", "/schedule/add", {
        "csrf_token": token, "name": "bad-add", "task": "proj.x", "kind": "cron",
        "schedule": "not a cron"})
    assert status == 400
    (actor, outcome, schedule), = audit(db, "add")[-1:]
    assert (actor, schedule) == ("anonymous", "bad-add") and outcome.startswith("error: ")
    status, _, _ = browser.request("POST", "/schedule/pause", {
        "csrf_token": "wrong", "name": NAME})
    assert status == 403
    assert audit(db, "pause")[-1] == ("anonymous", "refused: the form's CSRF token is "
                                      "missing or wrong; reload the page", NAME)
    status, _, _ = browser.request("POST", "/schedule/trigger", {
        "csrf_token": token, "name": NAME}, Origin="https://evil.example")
    assert status == 403
    assert audit(db, "trigger")[-1][1] == "refused: this form did not come from this site " \
                                          "(Origin)"
    status, _, _ = browser.request("POST", "/schedule/remove", {
        "csrf_token": token, "name": NAME, "confirm": "another"})
    assert status == 400
    assert audit(db, "remove")[-1] == ("anonymous", "refused: confirm: must repeat the "
                                       "schedule's name", NAME)
    read_only = serve(WebConfig(read_only=True))
    status, _, _ = Browser(read_only).request("POST", "/schedule/resume", {"name": NAME})
    assert status == 403
    assert audit(db, "resume")[-1] == ("anonymous", "refused: this dashboard is read-only",
                                       NAME)

