"""Database URLs and connections as the database driver reads them.

A URL is checked, shown and assembled here, with psycopg's parser (libpq's rules), so that
the layers above the database never import the driver: the settings hold the URL as text,
and every surface that reads it asks this module whether it is well formed and how to show
it without its password.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from psycopg import Connection
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .._config import DATABASE_URL_ENV, Settings
from ..errors import ConfigError

__all__ = ["Connection", "caller_connection", "database_url", "dsn_of", "redact",
           "settings_from_app", "validate_dsn"]


def redact(dsn: str) -> str:
    """Return the DSN with any password replaced, so that it is safe to log or print."""
    try:
        params = conninfo_to_dict(dsn)
    except Exception:
        return "<unparseable database URL>"
    if "password" in params:
        params["password"] = "***"
    shown = {k: v for k, v in params.items() if v is not None}
    return make_conninfo(**shown)  # type: ignore[arg-type]


def validate_dsn(dsn: str) -> str:
    """Reject a malformed DSN early, with a message that never shows the password."""
    try:
        conninfo_to_dict(dsn)
    except Exception:
        # The error is not chained, because the parser's message may quote the password.
        raise ConfigError(
            "the database URL is malformed; expected e.g. "
            "postgresql://user:password@host:5432/dbname"
        ) from None
    return dsn


def well_formed(dsn: str) -> bool:
    """Whether ``dsn`` parses as a connection string or URL."""
    try:
        conninfo_to_dict(dsn)
    except Exception:
        return False
    return True


def database_url(
    explicit: str | None = None, environ: Mapping[str, str] | None = None
) -> str | None:
    """Return the configured database URL: the explicit value, else $AWA_BEAT_DATABASE_URL."""
    environ = os.environ if environ is None else environ
    url = explicit or environ.get(DATABASE_URL_ENV) or None
    return validate_dsn(url) if url else None


def settings_from_app(conf: Any, environ: Mapping[str, str] | None = None, *,
                      app_name: str | None = None) -> Settings:
    """:meth:`Settings.from_app`, with the database URL checked as the driver reads it
    (:class:`~awa_beat.errors.ConfigError` if it is malformed). The settings cannot check
    it themselves, because they sit below the database layer."""
    settings = Settings.from_app(conf, environ, app_name=app_name)
    if settings.database_url:
        validate_dsn(settings.database_url)
    return settings


def dsn_of(**params: str | None) -> str:
    """A connection string of the given parameters (``dbname``, ``user``, ``host``, ...),
    leaving out those that are empty."""
    return make_conninfo(**{k: v for k, v in params.items() if v})


def caller_connection(conn: Any) -> Connection[Any] | None:
    """The psycopg connection of ``conn``, a caller's connection to join: the connection
    itself, or the one under Django's wrapper (connected first, since Django connects
    lazily). None stays None."""
    if conn is None or isinstance(conn, Connection):
        return conn
    ensure = getattr(conn, "ensure_connection", None)
    if callable(ensure):
        ensure()
        inner = getattr(conn, "connection", None)
        if isinstance(inner, Connection):
            return inner
    raise TypeError("conn must be a psycopg 3 connection or a Django connection on the "
                    f"psycopg 3 backend, not {type(conn).__name__}")
