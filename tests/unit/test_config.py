"""Settings read Celery-style, where the database is found, and DSNs without passwords."""

from __future__ import annotations

from pathlib import Path

import pytest

from awa_beat._config import AWA_MAIN_LOCK_KEY, DEFAULT_LOCK_KEY, celery_dispatch_refused
from awa_beat._db.conninfo import redact, settings_from_app
from awa_beat._db.embedded import resolve_database_url
from awa_beat.errors import ConfigError


def test_defaults() -> None:
    s = settings_from_app({}, environ={})
    assert (s.database_url, s.lock_key, s.sync_interval, s.ping_interval,
            s.election_interval, s.catch_up_limit, s.default_timezone, s.dispatch,
            s.deployment) == (None, DEFAULT_LOCK_KEY, 60.0, 30.0, 1.0, 1000, "UTC", None,
                              "default")
    assert int.from_bytes(b"AWA_BEAT", "big") == DEFAULT_LOCK_KEY
    assert s.dst == "awa"  # Awa's rule: what an Awa leader sharing the table fires too
    assert settings_from_app({"awa_beat_dst": "celery"}, environ={}).dst == "celery"


def test_the_apps_configuration_wins_over_the_environment() -> None:
    conf = {"awa_beat_sync_interval": 5, "timezone": "Europe/Paris"}
    environ = {"AWA_BEAT_SYNC_INTERVAL": "7", "AWA_BEAT_CATCH_UP_LIMIT": "3",
               "AWA_BEAT_DISPATCH": "celery"}
    s = settings_from_app(conf, environ=environ, app_name="proj")
    assert (s.sync_interval, s.catch_up_limit, s.dispatch, s.default_timezone,
            s.deployment) == (5.0, 3, "celery", "Europe/Paris", "proj")


@pytest.mark.parametrize(("key", "value", "message"), [
    ("awa_beat_sync_interval", "soon", "awa_beat_sync_interval must be a float"),
    ("awa_beat_election_interval", 0, "at least 0.05"),
    ("awa_beat_catch_up_limit", 0, "at least 1"),
    ("awa_beat_lock_key", 2**63, "at most"),
    ("awa_beat_lock_key", AWA_MAIN_LOCK_KEY, "Awa's own lock key"),
    ("awa_beat_dispatch", "rq", "use one of celery, awa"),
    ("awa_beat_dst", "cron", "awa_beat_dst is 'cron'; use one of awa, celery"),
    ("awa_beat_database_url", "postgresql://u:p@h:notaport/db x=", "malformed"),
    ("awa_beat_election_interval", "nan", "awa_beat_election_interval is 'nan'; .* finite"),
    ("awa_beat_lock_timeout", float("nan"), "awa_beat_lock_timeout is nan; .* finite"),
    ("awa_beat_sync_interval", "NaN", "awa_beat_sync_interval .* finite"),
    ("awa_beat_ping_interval", "inf", "awa_beat_ping_interval .* finite"),
    ("awa_beat_stuck_after", float("inf"), "awa_beat_stuck_after .* finite"),
    ("awa_beat_startup_timeout", "-inf", "awa_beat_startup_timeout .* finite"),
    ("awa_beat_catch_up_limit", float("inf"), "awa_beat_catch_up_limit must be a int"),
    ("awa_beat_outcome_retention", 1e300, "at most 36500"),
    ("awa_beat_sync_interval", 10**400, "awa_beat_sync_interval must be a float"),
])
def test_a_bad_value_names_the_setting_and_what_is_allowed(key: str, value: object,
                                                           message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings_from_app({key: value}, environ={})


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999"])
def test_the_environment_cannot_give_a_setting_that_is_not_finite(value: str) -> None:
    with pytest.raises(ConfigError, match="awa_beat_election_interval"):
        settings_from_app({}, environ={"AWA_BEAT_ELECTION_INTERVAL": value})


def test_redact_hides_the_password_and_a_malformed_url_shows_nothing() -> None:
    assert "s3cret" not in redact("postgresql://bob:s3cret@db:5432/x")
    assert "bob" in redact("postgresql://bob:s3cret@db:5432/x")
    assert redact("postgresql://bob:s3cret@db:notaport/x x=") == "<unparseable database URL>"


def test_a_malformed_url_error_never_quotes_the_password() -> None:
    with pytest.raises(ConfigError) as info:
        settings_from_app({"awa_beat_database_url": "postgresql://u:s3cret@db/x y="},
                          environ={})
    assert "s3cret" not in str(info.value) and info.value.__cause__ is None


def test_a_read_only_command_does_not_create_an_embedded_database(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWA_BEAT_EMBEDDED_DIR", str(tmp_path / "pgdata"))
    with pytest.raises(ConfigError, match=r"no database: .*no embedded PostgreSQL in"):
        resolve_database_url(None, create_embedded=False)
    assert not (tmp_path / "pgdata").exists()
    assert resolve_database_url("postgresql://h/db") == "postgresql://h/db"


def test_the_celery_dispatch_refusal_names_the_entries_and_the_fix() -> None:
    message = str(celery_dispatch_refused(["a", "b"], "use awa"))
    assert "standalone schema" in message and message.endswith("use awa; entries: a, b")
