"""An embedded PostgreSQL (pgserver) for trying awa-beat without a database server.

Several processes may share one data directory: pgserver starts the server for the
first and stops it when the last one exits.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .errors import ConfigError

logger = logging.getLogger(__name__)

DEFAULT_DIR_ENV = "AWA_BEAT_EMBEDDED_DIR"


def default_data_dir() -> Path:
    return Path(os.environ.get(DEFAULT_DIR_ENV) or Path.cwd() / ".awa-beat" / "pgdata")


_servers: dict[Path, object] = {}


def embedded_database_url(data_dir: Path | None = None, dbname: str = "postgres") -> str:
    """Start (or join) an embedded server in ``data_dir`` and return its URL."""
    try:
        import pgserver
    except ImportError as exc:
        raise ConfigError(
            "no database URL is configured and the embedded PostgreSQL is not installed; "
            "set AWA_BEAT_DATABASE_URL (or awa_beat_database_url) or "
            "`pip install 'awa-beat[embedded]'`"
        ) from exc
    # pgserver logs every step of starting and stopping at INFO; keep beat's log readable.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    path = (data_dir or default_data_dir()).resolve()
    path.mkdir(parents=True, exist_ok=True)
    server = _servers.get(path)
    if server is None:
        server = pgserver.get_server(path, cleanup_mode="stop")
        _servers[path] = server
    uri = server.get_uri(dbname)  # type: ignore[attr-defined]
    return str(uri)
