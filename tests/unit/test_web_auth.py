"""Sessions, CSRF and origin checks of the dashboard, and its refusal to listen beyond
loopback without authentication."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest

from awa_beat.errors import ConfigError
from awa_beat.web import _auth as auth

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

    assert auth.basic_credentials(header("ops:pw")) == ("ops", "pw")
    assert auth.basic_credentials(header(":pw")) == ("basic", "pw")
    assert auth.basic_credentials("Basic !!!") is None
    assert auth.basic_credentials("Bearer x") is None
    assert auth.basic_credentials(None) is None


def test_a_session_cookie_carries_a_random_id_and_nothing_of_the_password() -> None:
    one, two = auth.new_session("alice"), auth.new_session("alice")
    assert one.id != two.id and one.key != two.key and len(one.key) == 64
    loaded = auth.load_session(auth.sign_session(one, KEY), KEY)
    assert loaded is not None and loaded.id == one.id and loaded.key == one.key
    # issue 35: the key was a SHA-256 of the password; the config derives none now.
    assert not hasattr(auth.WebConfig(password="a"), "signing_key")


def test_the_password_fingerprint_is_salted_and_checks_the_password() -> None:
    first, second = auth.fingerprint("correct horse"), auth.fingerprint("correct horse")
    assert first != second  # salted: equal passwords do not give equal fingerprints
    assert "correct horse" not in first and first.startswith("scrypt$")
    assert auth.fingerprint_matches("correct horse", first)
    assert auth.fingerprint_matches("correct horse", second)
    assert not auth.fingerprint_matches("correct horsf", first)
    assert not auth.fingerprint_matches("correct horse", "garbage")
    assert not auth.fingerprint_matches("correct horse", "md5$x$y")


PAGES = frozenset({"/schedules", "/schedule", "/audit", "/cluster"})


@pytest.mark.parametrize(("target", "expected"), [
    ("/schedules", "/schedules"),
    ("/schedule?name=nightly", "/schedule?name=nightly"),
    ("/schedules?q=a b&owner=", "/schedules?q=a+b&owner="),
    # issue 35: CR/LF would have become a header of the attacker's choosing
    ("/schedules\r\nSet-Cookie: planted=1", "/schedules"),
    ("/schedules?q=x\r\nSet-Cookie:%20planted=1", "/schedules"),
    # issue 35: a tab, which urlsplit drops, turned this into //evil.example
    ("/\t/evil.example", "/schedules"),
    ("//evil.example/schedules", "/schedules"),
    ("https://evil.example/schedules", "/schedules"),
    ("/\\evil.example", "/schedules"),
    ("\\\\evil.example", "/schedules"),
    ("/schedules\x00", "/schedules"),
    ("/schedules\x85", "/schedules"),  # a C1 control
    ("javascript:alert(1)", "/schedules"),
    ("/login?next=/schedules", "/schedules"),  # not back to the login page
    ("/no-such-page", "/schedules"),
    ("", "/schedules"),
    # non-Latin-1 text is percent-encoded: a Location header can always be written
    ("/schedule?name=日本語", "/schedule?name=%E6%97%A5%E6%9C%AC%E8%AA%9E"),
    ("/schedule?name=a%0d%0aX:%20y", "/schedule?name=a%0D%0AX%3A+y"),
])
def test_a_login_goes_back_only_to_a_page_of_this_site(target: str, expected: str) -> None:
    result = auth.redirect_target(target, PAGES)
    assert result == expected
    assert result.isascii() and not any(c in result for c in "\r\n\t\\")


@pytest.mark.parametrize(("host", "allowed", "ok"), [
    ("127.0.0.1:8080", (), True),
    ("localhost:8080", (), True),
    ("LOCALHOST:8080", (), True),
    ("[::1]:8080", (), True),
    ("127.0.0.1", (), True),  # no port: the default one is implied by the browser
    ("127.0.0.1:9999", (), False),  # another port: not us
    ("attacker.example:8080", (), False),  # DNS rebinding
    ("localhost.:8080", (), False),
    ("127.0.0.1.evil.example:8080", (), False),
    ("", (), False),
    (None, (), False),
    ("127.0.0.1:8080\r\nX: y", (), False),
    ("ops.example.com", ("ops.example.com",), True),
    ("ops.example.com:443", ("ops.example.com",), True),
    ("ops.example.com:443", ("ops.example.com:8443",), False),
    ("ops.example.com:8443", ("OPS.example.com:8443",), True),
    ("evil.example", ("ops.example.com",), False),
])
def test_without_a_login_only_our_own_names_are_answered(
        host: str | None, allowed: tuple[str, ...], ok: bool) -> None:
    assert auth.host_allowed(host, "8080", allowed) is ok


def test_an_allowed_host_that_is_no_host_name_is_refused() -> None:
    auth.WebConfig(allowed_hosts=("ops.example.com", "ops.example.com:8443", "[::1]:80"))
    for bad in ("https://ops.example.com", "ops.example.com/x", "", "a b"):
        with pytest.raises(ConfigError, match="allowed host"):
            auth.WebConfig(allowed_hosts=(bad,))


def test_failed_logins_make_the_client_wait_longer_each_time() -> None:
    now = [1000.0]
    throttle = auth.LoginThrottle(free=3, max_delay=60, forget_after=900,
                                  clock=lambda: now[0])
    assert [throttle.failed("10.0.0.1") for _ in range(3)] == [0, 0, 0]
    assert throttle.wait("10.0.0.1") == 0
    delays = [throttle.failed("10.0.0.1") for _ in range(8)]
    assert delays == [1, 2, 4, 8, 16, 32, 60, 60]  # growing, then capped
    assert throttle.wait("10.0.0.1") == 60
    assert throttle.wait("10.0.0.2") == 0  # per client
    now[0] += 30
    assert throttle.wait("10.0.0.1") == 30
    throttle.succeeded("10.0.0.1")
    assert throttle.wait("10.0.0.1") == 0
    for _ in range(5):
        throttle.failed("10.0.0.3")
    now[0] += 901  # long quiet: counted from the start again
    assert throttle.failed("10.0.0.3") == 0


def test_only_the_first_attempt_refused_in_a_wait_is_reported() -> None:
    throttle = auth.LoginThrottle(free=0, clock=lambda: 0.0)
    throttle.failed("a")
    assert [throttle.first_refusal("a") for _ in range(3)] == [True, False, False]
    throttle.failed("a")  # a new wait: reported again
    assert throttle.first_refusal("a") and not throttle.first_refusal("a")
    throttle.succeeded("a")
    throttle.failed("a")
    assert throttle.first_refusal("a")


def test_the_throttle_remembers_a_bounded_number_of_clients() -> None:
    throttle = auth.LoginThrottle(free=0, max_clients=3, clock=lambda: 0.0)
    for client in ("a", "b", "c", "d"):
        throttle.failed(client)
    assert throttle.wait("a") == 0 and throttle.wait("d") == 1


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

    from awa_beat._cli import main

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
