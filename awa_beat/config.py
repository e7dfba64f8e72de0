"""Where awa-beat finds its database, and how a DSN is shown without its password."""

from __future__ import annotations

import os
from collections.abc import Mapping

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .errors import ConfigError

DATABASE_URL_ENV = "AWA_BEAT_DATABASE_URL"


def redact(dsn: str) -> str:
    """The DSN with any password replaced, safe to log or print."""
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
    except Exception as exc:
        raise ConfigError(
            "the database URL is malformed; expected e.g. "
            "postgresql://user:password@host:5432/dbname"
        ) from exc
    return dsn


def database_url(
    explicit: str | None = None, environ: Mapping[str, str] | None = None
) -> str | None:
    """The configured database URL: the explicit value, else $AWA_BEAT_DATABASE_URL."""
    environ = os.environ if environ is None else environ
    url = explicit or environ.get(DATABASE_URL_ENV) or None
    return validate_dsn(url) if url else None
