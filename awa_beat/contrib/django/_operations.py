"""The awa-beat operations the admin acts through, on the project's database."""

from __future__ import annotations

import threading

from django.conf import settings
from django.db import connections

from ..._db.conninfo import dsn_of
from ..._db.database import Database
from ..._ops.operations import Operations

_lock = threading.Lock()
_operations: Operations | None = None


def database_url() -> str:
    """``AWA_BEAT_DATABASE_URL``, else the connection of ``AWA_BEAT_DATABASE``
    (default ``"default"``)."""
    explicit = getattr(settings, "AWA_BEAT_DATABASE_URL", None)
    if explicit:
        return str(explicit)
    alias = getattr(settings, "AWA_BEAT_DATABASE", "default")
    db = connections[alias].settings_dict
    return dsn_of(dbname=db.get("NAME"), user=db.get("USER"), password=db.get("PASSWORD"),
                  host=db.get("HOST"), port=str(db.get("PORT") or ""))


def operations() -> Operations:
    """One :class:`Operations` per process, opened on first use."""
    global _operations
    with _lock:
        if _operations is None:
            store = Database(database_url(), max_size=2, origin="awa-beat django")
            store.open()
            _operations = Operations(store)
        return _operations


def close() -> None:
    global _operations
    with _lock:
        if _operations is not None:
            _operations.close()
            _operations = None
