"""The Celery outbox: jobs fired for Celery wait in ``awa.jobs`` until the dispatch bridge
has handed them to the broker, then are marked published, and purged after a while.

Fires and publishing are decoupled this way so that a broker outage never blocks firing:
the fire statement only inserts rows, and the leader's bridge drains them in fire order.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from psycopg.rows import dict_row

from .database import wrap_errors
from .records import Fence, OutboxBacklog
from .sql import queries

if TYPE_CHECKING:
    from .database import Database


class OutboxStore:
    """The outbox's reads and writes, on a :class:`~.database.Database`'s pool."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def pending_celery_jobs(self, deployment: str, limit: int,
                            after: tuple[str, int] = ("", 0), fence: Fence | None = None,
                            ) -> list[dict[str, Any]]:
        """Return ``deployment``'s jobs for Celery that the broker has not accepted yet,
        in fire order, starting after ``after``, the ``(fire_key, id)`` of the last job
        of the previous page. With a ``fence``, the answer is empty unless the fence's
        session still holds the leader lock, so that a deposed leader publishes
        nothing."""
        with self.db.connection() as conn, wrap_errors("reading unpublished jobs"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["pending_celery_jobs"], {
                "deployment": deployment, "limit": limit, "after_fire": after[0],
                "after_id": after[1], "leader_pid": fence.backend_pid if fence else None,
                "lock_key": fence.lock_key if fence else None}).fetchall()

    def mark_published(self, ids: Sequence[int], task_ids: Sequence[str]) -> int:
        """Mark the jobs the broker accepted as published, with the Celery task id each
        was sent under, and return how many were marked."""
        with self.db.connection() as conn, wrap_errors("marking jobs published"):
            cur = conn.execute(queries["mark_published"],
                               {"ids": list(ids), "task_ids": list(task_ids)})
            return cur.rowcount

    def mark_unpublishable(self, job_id: int, error: str) -> None:
        """Mark a job that can never be sent (its message cannot be built) as failed,
        with the reason, so that it stops blocking the jobs behind it."""
        with self.db.connection() as conn, wrap_errors("marking a job failed"):
            conn.execute(queries["mark_unpublishable"], {"id": job_id, "error": error})

    def purge_published(self, retention: timedelta, limit: int) -> int:
        """Delete up to ``limit`` jobs published longer than ``retention`` ago and
        return how many were deleted."""
        with self.db.connection() as conn, wrap_errors("deleting published jobs"):
            cur = conn.execute(queries["purge_published"],
                               {"retention": retention, "limit": limit})
            return cur.rowcount

    def backlogs(self) -> list[OutboxBacklog]:
        """Return the jobs waiting for the broker, by deployment. The list is empty in a
        layout without a Celery outbox, where Celery dispatch is refused."""
        if not self.db.layout.celery_outbox:
            return []
        with self.db.connection() as conn, wrap_errors("reading the outbox's backlog"):
            return [OutboxBacklog(*row) for row in conn.execute(queries["outbox_backlogs"])]

    def stranded_awa_jobs(self) -> dict[str, int]:
        """Count the jobs left for Awa workers in a database where Awa is not installed,
        by deployment. Where Awa owns the tables its workers run those jobs, so there
        is nothing to count."""
        if not self.db.layout.celery_outbox:
            return {}
        with self.db.connection() as conn, wrap_errors("counting jobs left for Awa workers"):
            return dict(conn.execute(queries["count_stranded_awa_jobs"]).fetchall())
