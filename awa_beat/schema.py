"""Create or upgrade the tables awa-beat needs, whichever way the database was set up.

Two layouts are supported:

* **Awa installed** (``awa.schema_version`` exists): Awa owns the ``awa`` schema. We
  only check that it is recent enough (v26 added the cron pause columns) and never
  create, alter or drop anything in it.
* **Standalone**: we create ``awa.cron_jobs`` with exactly Awa's definition and a
  plain ``awa.jobs`` table with Awa's producer columns and limits.

Our own bookkeeping lives in the ``awa_beat`` schema, versioned in
``awa_beat.schema_version``. Migrations run in one transaction under an advisory lock
of our own, so replicas that start together migrate once and the others wait.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import psycopg

from .errors import SchemaError
from .sql import migration_files, queries

logger = logging.getLogger(__name__)

#: Oldest Awa schema with the cron pause columns (paused_at, paused_by).
MIN_AWA_VERSION = 26
#: The bytes of "AWABMIGR": an advisory lock key of our own (Awa's is "AWA_MAIN").
MIGRATION_LOCK_KEY = int.from_bytes(b"AWABMIGR", "big")
_STANDALONE_MARKER = "-- standalone only"


@dataclass(frozen=True)
class SchemaInfo:
    """What :func:`migrate` found and did."""

    awa_version: int | None
    """Awa's schema version, or None when the ``awa`` tables are our standalone ones."""
    applied: tuple[int, ...]
    """Migrations applied by this call (empty when the schema was up to date)."""
    version: int
    """awa-beat's schema version after the call."""

    @property
    def awa_owned(self) -> bool:
        return self.awa_version is not None


def latest_version() -> int:
    return max(version for version, _, _ in migration_files())


def awa_version(conn: psycopg.Connection) -> int | None:
    """Awa's schema version, or None when Awa is not installed in this database."""
    row = conn.execute(queries["has_awa_schema_version"]).fetchone()
    if not row or not row[0]:
        return None
    row = conn.execute(queries["awa_schema_version"]).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def check_awa_version(version: int | None) -> None:
    if version is not None and version < MIN_AWA_VERSION:
        raise SchemaError(
            f"Awa is installed at schema version {version}, but awa-beat needs version "
            f"{MIN_AWA_VERSION} or later (the cron pause columns); upgrade Awa and run its "
            "migrations (e.g. `python -m awa migrate`), then start awa-beat again"
        )


def migrate(conn: psycopg.Connection) -> SchemaInfo:
    """Bring the database up to date; safe to call from many replicas at once."""
    try:
        with conn.transaction():
            conn.execute(queries["lock_migrations"], {"key": MIGRATION_LOCK_KEY})
            found_awa = awa_version(conn)
            check_awa_version(found_awa)
            conn.execute(queries["create_bookkeeping"])
            done = {row[0] for row in conn.execute(queries["applied_migrations"])}
            applied = []
            for version, description, sql in migration_files():
                if version in done:
                    continue
                if sql.startswith(_STANDALONE_MARKER) and found_awa is not None:
                    description += " (skipped: Awa owns the awa schema)"
                else:
                    conn.execute(sql)
                conn.execute(
                    queries["record_migration"],
                    {"version": version, "description": description},
                )
                applied.append(version)
    except psycopg.Error as exc:
        raise SchemaError(f"migration failed: {exc}") from exc
    if applied:
        logger.info("awa-beat schema migrated to version %s", latest_version())
    return SchemaInfo(found_awa, tuple(applied), latest_version())


def check(conn: psycopg.Connection) -> SchemaInfo:
    """Verify without changing anything that the schema is ready for awa-beat."""
    found_awa = awa_version(conn)
    check_awa_version(found_awa)
    try:
        versions = [row[0] for row in conn.execute(queries["applied_migrations"])]
    except psycopg.errors.UndefinedTable:
        versions = []
    current = max(versions, default=0)
    if current < latest_version():
        raise SchemaError(
            f"the awa-beat schema is at version {current}, this awa-beat needs "
            f"{latest_version()}; run `awa-beat migrate`"
        )
    return SchemaInfo(found_awa, (), current)
