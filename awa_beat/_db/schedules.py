"""Schedule rows in ``awa.cron_jobs``: the configuration's sync, runtime writes (the Python
API, ``awa-beat add/edit/pause``), imports, and the reads the operator commands make.

The evaluator's own reads and the fire statement are in :mod:`.evaluator`, since the
evaluator holds every row in memory and reads them its own way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import psycopg
import psycopg.types.json
from psycopg.rows import dict_row

from ..errors import NotFound, WriteNotApplied, first_line
from .batches import SyncBatch, sync_params
from .database import one_row, wrap_errors
from .records import RETIRED_BY, ScheduleRow, SyncResult
from .sql import queries

if TYPE_CHECKING:
    from .database import Database

# The logger keeps the name it had before the store was split by aggregate, so logging
# configurations that select it by name go on working.
logger = logging.getLogger('awa_beat.store')

#: Connections a start-up sync compares its batches on at once (the pool has four).
SYNC_CONNECTIONS = 3

#: The first key of the two-key advisory lock that backfills of one schedule take turns
#: under (the second is the hash of the name): "awab" in ASCII.
BACKFILL_LOCK_CLASS = 0x61776162


def changed(conn: psycopg.Connection, row: Any, name: str, action: str) -> Any:
    """Return ``row``, which a write that must change ``name``'s row returned. When it
    is None the write changed nothing, and that must never pass for a success: the
    error is :class:`NotFound` when no such row exists, else :class:`WriteNotApplied`,
    because a trigger or rule of the database skipped the write."""
    if row is not None:
        return row
    if conn.execute(queries["schedule_exists"], {"name": name}).fetchone() is None:
        raise NotFound(f"no schedule named {name!r}")
    raise WriteNotApplied(f"{action} {name!r} changed nothing: the database skipped the "
                          "write (a trigger or rule on awa.cron_jobs); nothing was written")


def _json(value: Any) -> Any:
    """Decode a JSON column that the statement read as text. A caller's connection may
    load JSON its own way (Django's leaves it as a string), so the statement casts it
    to text and the value is decoded here."""
    return json.loads(value) if isinstance(value, str) else value


class ScheduleStore:
    """Reads and writes of schedule rows, on a :class:`~.database.Database`'s pool.

    The writes that take a ``conn`` run in the caller's transaction (see
    :meth:`Database.transaction <.database.Database.transaction>`), so that an operation
    that reads, checks and writes several rows does it atomically.
    """

    def __init__(self, db: Database) -> None:
        self.db = db

    def sync(self, rows: Sequence[dict[str, Any]] | SyncBatch, *,
             deployment: str | None = None) -> SyncResult:
        """Upsert schedule rows in one round trip. The rows are dicts of
        ``awa.cron_jobs`` columns, or a :class:`SyncBatch` already encoded; nothing is
        ever deleted, because several deployments share the table."""
        if isinstance(rows, SyncBatch):
            batch = rows
        elif deployment is None:
            raise TypeError("sync() needs the deployment that registers the rows")
        else:
            batch = SyncBatch.encode(rows, deployment)
        if not batch.size:
            return SyncResult(0, 0, 0)
        with self.db.connection() as conn, wrap_errors("syncing schedules"):
            row = conn.execute(queries["upsert_schedules"], batch.params).fetchone()
        assert row is not None  # an aggregate: always one row
        inserted, updated = int(row[0]), int(row[1])
        return SyncResult(inserted, updated, batch.size - inserted - updated, int(row[2]))

    def sync_all(self, batches: Sequence[SyncBatch], *,
                 connections: int = SYNC_CONNECTIONS) -> SyncResult:
        """Sync every batch of one configuration, whose names are disjoint, on up to
        ``connections`` of the pool at once. The server compares a batch with the stored
        rows in one backend per statement, so a large configuration is compared on as
        many server cores as there are connections. Each batch commits on its own, as
        :meth:`sync` does, and the first error stops the rest."""
        workers = min(connections, len(batches), self.db.max_size)
        if workers <= 1:
            results = [self.sync(batch) for batch in batches]
        else:
            # Imported here because only a large start-up sync needs threads.
            from concurrent.futures import ThreadPoolExecutor

            pool = ThreadPoolExecutor(workers, thread_name_prefix="awa-beat-sync")
            try:
                results = list(pool.map(self.sync, batches))
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
        return SyncResult.total(results)

    def config_in_force(self, deployment: str, digest: str) -> bool:
        """Tell whether ``deployment``'s rows are still as its last start-up sync of the
        configuration ``digest`` left them, with no definition or owner written since.
        A start with that configuration would then write nothing, so it can skip the
        sync."""
        with self.db.connection() as conn, wrap_errors("reading the stored configuration"):
            row = conn.execute(queries["config_in_force"],
                               {"deployment": deployment, "digest": digest}).fetchone()
        return bool(row and row[0])

    def record_config(self, deployment: str, digest: str, synced: SyncResult) -> None:
        """Record that the configuration ``digest`` was synced whole (``synced`` is the
        total), so that :meth:`config_in_force` can answer at the next start."""
        with self.db.connection() as conn, wrap_errors("recording the synced configuration"):
            conn.execute(queries["record_config_sync"], {
                "deployment": deployment, "digest": digest, "row_count": synced.rows,
                "fingerprint": synced.fingerprint})

    def analyze_if_stale(self, conn: psycopg.Connection | None = None) -> bool:
        """Refresh the planner's statistics of ``awa.cron_jobs`` when they are missing or
        far from the table's size, and return whether it did. Where this role may not
        ANALYZE the table, autovacuum will do it in time. The statements run on ``conn``
        if one is given (an autocommit connection, which is left open), else on a
        connection of the pool.

        After a bulk insert and before autovacuum gets to it, the planner takes the table
        for nearly empty and can join a fire batch against it row by row, which on a
        large table makes each batch orders of magnitude slower (docs/performance.md).
        """
        try:
            with self.db.on(conn) as c:
                (stale,) = one_row(c.execute(queries["cron_jobs_stats_stale"]).fetchone(),
                                   "reading the table's statistics")
                if stale:
                    c.execute(queries["analyze_cron_jobs"])
        except psycopg.Error as exc:  # this role does not own the table
            logger.info("awa-beat: cannot ANALYZE awa.cron_jobs (%s); relying on autovacuum",
                        first_line(exc))
            return False
        return bool(stale)

    def list_all(self, pattern: str | None = None) -> list[ScheduleRow]:
        """List every schedule by name, or those whose name matches ``pattern``, a SQL
        LIKE pattern."""
        with self.db.connection() as conn, wrap_errors("listing schedules"):
            cur = conn.cursor(row_factory=dict_row)
            return [ScheduleRow(**r) for r in cur.execute(queries["list_schedules"],
                                                          {"pattern": pattern})]

    def orphaned_names(self, deployment: str, configured: Sequence[str]) -> list[str]:
        """List the names that ``deployment`` registered from its configuration and that
        are not among ``configured``: the rows its beat_schedule no longer has."""
        with self.db.connection() as conn, wrap_errors("reading schedules"):
            return [r[0] for r in conn.execute(queries["orphaned_names"], {
                "deployment": deployment, "names": list(configured)})]

    def runtime_owned_names(self, names: Sequence[str]) -> list[str]:
        """List which of ``names`` were written at run time; a beat's sync leaves those
        alone."""
        with self.db.connection() as conn, wrap_errors("reading schedule owners"):
            return [r[0] for r in conn.execute(queries["runtime_owned_names"],
                                               {"names": list(names)})]

    # -- runtime writes (the Python API, `awa-beat add/edit`) ------------------------------

    def lock_schedules(self, conn: psycopg.Connection, names: Sequence[str]) -> list[ScheduleRow]:
        """Return the stored rows among ``names``, with their owners, locked FOR UPDATE
        in ``conn``'s transaction (see :meth:`Database.transaction
        <.database.Database.transaction>`)."""
        # The cursor is psycopg's own, whatever cursor the caller's connection makes:
        # Django's binds parameters on the client, which binary parameters do not allow.
        # The statement is never prepared, because a generic plan cannot see how long
        # the arrays are.
        cur = psycopg.Cursor(conn, row_factory=dict_row)
        rows = cur.execute(queries["lock_schedules"], {"names": list(names)},
                           prepare=False).fetchall()
        return [ScheduleRow(**{**r, "args": _json(r["args"]), "metadata": _json(r["metadata"])})
                for r in rows]

    def upsert_runtime(self, conn: psycopg.Connection, rows: Sequence[dict[str, Any]], *,
                       deployment: str, replace: bool) -> SyncResult:
        """Write schedule rows as owner 'runtime' in ``conn``'s transaction, in one
        round trip. Without ``replace``, an existing name is skipped and counted as
        unchanged."""
        if not rows:
            return SyncResult(0, 0, 0)
        params = {**sync_params(rows, deployment), "replace": replace}
        row = psycopg.Cursor(conn).execute(queries["upsert_runtime_schedules"], params,
                                           prepare=False).fetchone()
        inserted, updated, skipped = (int(row[0]), int(row[1]), row[2]) if row else (0, 0, [])
        if replace and skipped:
            # Every row is written when replacing, so a row that was not written was
            # skipped by the database.
            raise WriteNotApplied(
                f"writing {', '.join(map(repr, skipped))} changed nothing: the database "
                "skipped the write (a trigger or rule on awa.cron_jobs); nothing was written")
        return SyncResult(inserted, updated, len(rows) - inserted - updated)

    def unretire(self, conn: psycopg.Connection, name: str) -> bool:
        """Resume the retired schedule ``name`` in ``conn``'s transaction when runs are
        left under its run limit, or it has none; return whether it was resumed."""
        with wrap_errors(f"resuming retired {name!r}"):
            row = psycopg.Cursor(conn).execute(
                queries["unretire_schedule"], {"name": name, "retired_by": RETIRED_BY},
                prepare=False).fetchone()
        return row is not None

    def get_many(self, names: Sequence[str]) -> list[ScheduleRow]:
        """Return the full rows that exist among ``names``, in no particular order."""
        with self.db.connection() as conn, wrap_errors("reading schedules"):
            cur = conn.cursor(row_factory=dict_row)
            return [ScheduleRow(**r) for r in cur.execute(queries["get_schedules"],
                                                          {"names": list(names)})]

    def get(self, name: str) -> ScheduleRow:
        """Return ``name``'s full row; :class:`NotFound` if there is none."""
        with self.db.connection() as conn, wrap_errors(f"reading schedule {name!r}"):
            cur = conn.cursor(row_factory=dict_row)
            row = cur.execute(queries["get_schedule"], {"name": name}).fetchone()
        if row is None:
            raise NotFound(f"no schedule named {name!r}")
        return ScheduleRow(**row)

    def pause(self, name: str, by: str | None = None, *,
              conn: psycopg.Connection | None = None) -> datetime:
        """Pause ``name`` and return when it was paused; ``by`` says who paused it."""
        with self.db.on(conn) as c, wrap_errors(f"pausing {name!r}"):
            row = c.execute(queries["pause_schedule"], {"name": name, "by": by}).fetchone()
            return changed(c, row, name, "pausing")[0]

    def resume(self, name: str, *, conn: psycopg.Connection | None = None) -> None:
        """Resume ``name``; its cursor decides what it fires next."""
        with self.db.on(conn) as c, wrap_errors(f"resuming {name!r}"):
            row = c.execute(queries["resume_schedule"], {"name": name}).fetchone()
            changed(c, row, name, "resuming")

    def trigger(self, name: str, *, conn: psycopg.Connection | None = None) -> int:
        """Insert one job for ``name`` now, even while it is paused, and return the job's
        id. The cursor is left alone, so the schedule's own fires go on as planned."""
        query = self.db.layout.trigger_statement
        with self.db.on(conn) as c, wrap_errors(f"triggering {name!r}"):
            row = c.execute(query, {"name": name}).fetchone()
        if row is None:
            raise NotFound(f"no schedule named {name!r}")
        return int(row[0])

    def remove(self, name: str, *, conn: psycopg.Connection | None = None) -> bool:
        """Delete the schedule's row, and keep the jobs it already fired. Return False
        if there was no such row; raise :class:`WriteNotApplied` if there is one and the
        database kept it."""
        with self.db.on(conn) as c, wrap_errors(f"removing {name!r}"):
            row = c.execute(queries["remove_schedule"], {"name": name}).fetchone()
            if not (row and row[0]):
                try:
                    # This raises; the question is which of the two errors applies.
                    changed(c, None, name, "removing")
                except NotFound:
                    return False
        return True

    # -- backfills (docs/operating-time.md) ----------------------------------------------

    def backfill_plan(self, name: str, fire_times: Sequence[datetime]) -> list[datetime]:
        """Return which of ``fire_times`` (in order) have no job yet, so that a backfill
        would give each one; nothing is written."""
        if not fire_times:
            return []
        with self.db.connection() as conn, wrap_errors(f"planning a backfill of {name!r}"):
            return [r[0] for r in conn.execute(queries["backfill_plan"], {
                "name": name, "fire_times": list(fire_times)})]

    def backfill(self, name: str, fire_times: Sequence[datetime], *, by: str,
                 audit: dict[str, Any] | None = None) -> list[tuple[datetime, int]]:
        """Insert one job for each of ``fire_times`` (in order, none after the cursor)
        that has none yet, as if the schedule had fired then, and return the fire times
        that got one with the job's id. Backfills of one schedule take turns under an
        advisory lock, so two at once (two replicas, two operators) never give a fire
        time two jobs. ``audit``: an audit log entry (``record_audit``'s fields) written
        in the same transaction, so it is there exactly when the jobs are."""
        with self.db.connection() as conn, wrap_errors(f"backfilling {name!r}"), \
                conn.transaction():
            conn.execute(queries["backfill_lock"],
                         {"lock_class": BACKFILL_LOCK_CLASS, "name": name})
            rows = conn.execute(self.db.layout.statements["backfill"], {
                "name": name, "fire_times": list(fire_times), "by": by}).fetchall()
            inserted = [(r[0], int(r[1])) for r in rows]
            if audit is not None:
                detail = {**audit.get("detail", {}), "inserted": len(inserted),
                          "skipped": len(fire_times) - len(inserted)}
                conn.execute(queries["record_audit"], {
                    **audit, "detail": psycopg.types.json.Jsonb(detail)})
        return inserted

    def run_in_progress(self, name: str) -> dict[str, Any] | None:
        """Return the newest run of ``name`` that has not finished (``job_id``,
        ``fire_time``, ``state``), or None."""
        with self.db.connection() as conn, wrap_errors(f"reading the runs of {name!r}"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["backfill_run_in_progress"], {"name": name}).fetchone()

    def jobs(self, name: str, limit: int = 10) -> list[dict[str, Any]]:
        """Return the newest jobs fired or triggered for ``name``."""
        with self.db.connection() as conn, wrap_errors(f"reading jobs of {name!r}"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["jobs_for_schedule"],
                               {"name": name, "limit": limit}).fetchall()

    def recent_jobs(self, limit: int = 20) -> list[dict[str, Any]]:
        """Return the newest jobs fired or triggered from any schedule."""
        with self.db.connection() as conn, wrap_errors("reading jobs"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["recent_jobs"], {"limit": limit}).fetchall()

    def import_schedules(self, rows: Sequence[dict[str, Any]],
                         cursors: Sequence[datetime | None], paused_by: Sequence[str | None],
                         *, deployment: str, force: bool = False) -> list[dict[str, Any]]:
        """Upsert imported schedule rows (``awa-beat import``) in one round trip.

        The rows are written as :meth:`sync` writes them, with each row's cursor from the
        old scheduler (None when it is unknown) and its pause reason (None when it is
        active). A new row starts at that cursor, or now, and is paused when a reason is
        given. An existing row gets the new definition, its cursor only ever moves
        forward, and its pause is left alone. A row written at run time is left alone
        unless ``force`` is given, which makes it configuration again. The result has one
        dict per row, by name: ``name, inserted, changed, cursor_before, cursor_after``.
        """
        if not rows:
            return []
        params = {**sync_params(rows, deployment), "cursors": list(cursors),
                  "paused_by": list(paused_by), "force": force}
        with self.db.connection() as conn, wrap_errors("importing schedules"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["import_schedules"], params).fetchall()

    # -- pauses, as the dashboard records them ------------------------------------------

    def pause_with_note(self, name: str, by: str | None, note: str, *,
                        conn: psycopg.Connection | None = None) -> datetime:
        """Pause ``name`` with a note that says why, as the dashboard does, and return
        when it was paused."""
        with self.db.on(conn) as c, wrap_errors(f"pausing {name!r}"):
            row = c.execute(queries["pause_schedule_with_note"],
                            {"name": name, "by": by, "note": note}).fetchone()
            return changed(c, row, name, "pausing")[0]

    def pause_note(self, name: str) -> str | None:
        """Return the note of ``name``'s current pause, or None if it was given none."""
        with self.db.connection() as conn, wrap_errors(f"reading the pause note of {name!r}"):
            row = conn.execute(queries["pause_note"], {"name": name}).fetchone()
        return row[0] if row else None

    def runs_used(self, name: str) -> int:
        """Return how many runs of ``name`` count against its run limit (0 when none
        fired)."""
        with self.db.connection() as conn, wrap_errors(f"reading the runs of {name!r}"):
            row = conn.execute(queries["runs_used"], {"name": name}).fetchone()
        return int(row[0]) if row else 0
