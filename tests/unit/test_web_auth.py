"""Sessions, CSRF and origin checks of the dashboard, and its refusal to listen beyond
loopback without authentication."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest

from awa_beat.errors import ConfigError
from awa_beat.web import auth

KEY = b"k" * 32


def test_a_signed_session_round_trips_and_a_tampered_one_does_not() -> None:
    session = auth.new_session("alice")
    cookie = auth.sign_session(session, KEY)
    loaded = auth.load_session(cookie, KEY)
    assert loaded is not None and (loaded.user, loaded.csrf) == ("alice", session.csrf)
    _, mac = cookie.rsplit(".", 1)
    forged = base64.urlsafe_b64encode(b'{"u":"root","c":"x","e":9999999999}').decode()
    assert auth.load_session(f"{forged.rstrip('=')}.{mac}", KEY) is None
    assert auth.load_session(cookie, b"another key") is None
    assert auth.load_session(cookie, KEY, now=time.time() + auth.SESSION_LIFETIME + 1) is None
    assert auth.load_session("garbage", KEY) is None and auth.load_session(None, KEY) is None


def test_csrf_needs_the_session_token() -> None:
    session = auth.new_session(None)
    assert auth.csrf_ok(session, session.csrf)
    assert not auth.csrf_ok(session, "")
    assert not auth.csrf_ok(session, None)
    assert not auth.csrf_ok(session, session.csrf + "x")
    assert not auth.csrf_ok(None, session.csrf)


@pytest.mark.parametrize(("origin", "referer", "ok"), [
    ("http://127.0.0.1:8080", None, True),
    ("https://evil.example", None, False),
    ("null", None, False),
    (None, "http://127.0.0.1:8080/schedule?name=x", True),
    (None, "https://evil.example/x", False),
    (None, None, True),  # says nothing: the token still decides
    ("https://ops.example.com", None, True),  # allowed explicitly
])
def test_same_origin(origin: str | None, referer: str | None, ok: bool) -> None:
    assert auth.same_origin(origin, referer, "127.0.0.1:8080", "http",
                            ("https://ops.example.com",)) is ok


def test_basic_auth() -> None:
    def header(text: str) -> str:
        return "Basic " + base64.b64encode(text.encode()).decode()

    assert auth.basic_user(header("ops:pw"), "pw") == "ops"
    assert auth.basic_user(header("ops:wrong"), "pw") is None
    assert auth.basic_user("Basic !!!", "pw") is None
    assert auth.basic_user(None, "pw") is None


def test_the_signing_key_follows_the_password_else_is_random() -> None:
    assert auth.WebConfig(password="a").signing_key == auth.WebConfig(password="a").signing_key
    assert auth.WebConfig(password="a").signing_key != auth.WebConfig(password="b").signing_key
    assert auth.WebConfig().signing_key != auth.WebConfig().signing_key


def test_listening_beyond_loopback_needs_authentication() -> None:
    from awa_beat.web.server import check_bind, is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")
    check_bind("127.0.0.1", auth.WebConfig())
    with pytest.raises(ConfigError, match=r"refusing to listen on 0\.0\.0\.0"):
        check_bind("0.0.0.0", auth.WebConfig())
    check_bind("0.0.0.0", auth.WebConfig(password="pw"))
    check_bind("0.0.0.0", auth.WebConfig(trusted_user_header="X-User"))


def test_the_web_command_refuses_an_open_address_before_touching_the_database(
        tmp_path: Path) -> None:
    from click.testing import CliRunner

    from awa_beat.cli import main

    url = "postgresql://beat:dsn-secret@db.invalid/app"
    result = CliRunner().invoke(main, ["web", "--bind", "0.0.0.0", "--database-url", url])
    assert result.exit_code == 1
    assert "refusing to listen on 0.0.0.0 without authentication" in result.output
    assert "dsn-secret" not in result.output
    empty = tmp_path / "pw"
    empty.write_text("\n")
    result = CliRunner().invoke(main, ["web", "--password-file", str(empty),
                                       "--database-url", url])
    assert result.exit_code == 1 and "is empty" in result.output
