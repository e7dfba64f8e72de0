"""Create or upgrade the tables that awa-beat needs, whichever way the database was set up.

Two layouts are supported:

* **Awa installed** (``awa.schema_version`` exists): Awa owns the ``awa`` schema. We
  only check that it is recent enough (v26 added the cron pause columns), and we never
  create, alter or drop anything in it.
* **Standalone**: we create ``awa.cron_jobs`` with exactly Awa's definition, and a
  plain ``awa.jobs`` table with Awa's producer columns and limits.

Either way, ``awa.cron_jobs`` must be the table that awa-beat knows
(:func:`check_layout`), because a newer Awa adds columns (ownership, retirement) and a
trigger that skips some updates and refuses some deletes. They are read from the
catalog, not guessed from Awa's version number, which says nothing about a table changed
by hand.

Our own bookkeeping lives in the ``awa_beat`` schema, versioned in
``awa_beat.schema_version``. Migrations run in one transaction under an advisory lock
of our own, so replicas that start together migrate once and the others wait.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import psycopg

from ..errors import SchemaError, UnknownSchema
from .sql import migration_files, queries

# The logger keeps the name it had before the modules moved into layer packages, so
# logging configurations that select it by name go on working.
logger = logging.getLogger('awa_beat.schema')

#: The oldest Awa schema with the cron pause columns (paused_at, paused_by).
MIN_AWA_VERSION = 26
#: The bytes of "AWABMIGR" make an advisory lock key of our own (Awa's is "AWA_MAIN").
MIGRATION_LOCK_KEY = int.from_bytes(b"AWABMIGR", "big")
_STANDALONE_MARKER = "-- standalone only"
#: ``awa.cron_jobs``'s columns from Awa v026 on (and in the standalone layout, which
#: copies them). Every statement of awa-beat's names these columns, and only these.
CRON_JOBS_COLUMNS = ("name", "cron_expr", "timezone", "kind", "queue", "args", "priority",
                     "max_attempts", "tags", "metadata", "missed_fire_policy",
                     "last_enqueued_at", "created_at", "updated_at", "paused_at", "paused_by")
#: The newest Awa schema that awa-beat was read against (Awa 0.7.0-alpha.1; awa-pg 0.6.9 is
#: at 40). Versions 27 to 43 leave ``awa.cron_jobs`` as v026 made it. A refusal shows this
#: version, but the refusal itself rests on what the table looks like.
KNOWN_AWA_VERSION = 43
#: awa-beat's own triggers on ``awa.cron_jobs`` (the change notifications of migration
#: 0007) are named with this prefix. Any other trigger changes what a write does.
OWN_TRIGGER_PREFIX = "awa_beat_"


@dataclass(frozen=True)
class SchemaInfo:
    """What :func:`migrate` found and did."""

    awa_version: int | None
    """Awa's schema version, or None when the ``awa`` tables are our standalone ones."""
    applied: tuple[int, ...]
    """The migrations that this call applied (empty when the schema was up to date)."""
    version: int
    """awa-beat's schema version after the call."""

    @property
    def awa_owned(self) -> bool:
        return self.awa_version is not None


def latest_version() -> int:
    return max(version for version, _, _ in migration_files())


def awa_version(conn: psycopg.Connection) -> int | None:
    """Return Awa's schema version, or None when Awa is not installed in this database."""
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


def layout_problems(conn: psycopg.Connection) -> list[str]:
    """Return what awa-beat does not know in ``awa.cron_jobs``: the columns that it lacks
    or has beyond :data:`CRON_JOBS_COLUMNS`, triggers other than awa-beat's own, and
    rules. The result is empty when the table is as known, or does not exist yet."""
    columns, triggers, rules = conn.execute(queries["cron_jobs_shape"]).fetchone() or ([], [], [])
    if not columns:
        return []
    found = {
        "columns awa-beat does not know": [c for c in columns if c not in CRON_JOBS_COLUMNS],
        "missing columns": [c for c in CRON_JOBS_COLUMNS if c not in columns],
        "triggers": [t for t in triggers if not t.startswith(OWN_TRIGGER_PREFIX)],
        "rules": list(rules),
    }
    return [f"{what} {', '.join(names)}" for what, names in found.items() if names]


def check_layout(conn: psycopg.Connection) -> int | None:
    """Return Awa's schema version (None for the standalone layout), once it is one that
    awa-beat can use: recent enough, with ``awa.cron_jobs`` as awa-beat knows it.
    Otherwise raise :class:`SchemaError` (:class:`UnknownSchema`) with a one-line message."""
    version = awa_version(conn)
    check_awa_version(version)
    problems = layout_problems(conn)
    if problems:
        newer = (f"Awa's schema is at v{version}, newer than the v{KNOWN_AWA_VERSION} "
                 "awa-beat knows, and " if version is not None and version > KNOWN_AWA_VERSION
                 else "")
        raise UnknownSchema(
            f"{newer}awa.cron_jobs is not the table awa-beat knows ({'; '.join(problems)}): "
            "awa-beat would misread its rows or take skipped writes for done, so it refuses "
            "to run on it; use an awa-beat release that supports this Awa schema")
    return version


def migrate(conn: psycopg.Connection) -> SchemaInfo:
    """Bring the database up to date. It is safe to call this from many replicas at once."""
    try:
        with conn.transaction():
            conn.execute(queries["lock_migrations"], {"key": MIGRATION_LOCK_KEY})
            found_awa = check_layout(conn)
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
    """Verify, without changing anything, that the schema is ready for awa-beat."""
    found_awa = check_layout(conn)
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
