"""What workers report of the runs they made (``awa_beat.outcomes``), and the history and
overdue checks read from it.

Workers report from their own processes through :mod:`awa_beat.outcomes`; the reads serve
``awa-beat history``, the dashboard and doctor's check for runs that never finished.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from psycopg.rows import dict_row

from .database import wrap_errors
from .records import FAILURES_PAUSED_BY, PAUSE_ERROR_LIMIT
from .sql import queries

if TYPE_CHECKING:
    from .database import Database


class OutcomeStore:
    """Outcome writes and reads, on a :class:`~.database.Database`'s pool."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def record(self, columns: dict[str, list[Any]]) -> list[tuple[str, str]]:
        """Upsert the workers' reports, given as parallel arrays with one row per task
        id (see :func:`awa_beat.outcomes.outcome_params`), and return the schedules that
        this batch paused after their ``pause_after_failures`` failed runs in a row, each
        with its pause note.

        A batch without a failed run is one statement. One with a failed run is written
        in a transaction that first locks the rows of its schedules that ask to be paused
        on failure, then checks them once the batch is in (docs/operating-time.md)."""
        failed = sorted({name for name, state in zip(columns["schedules"], columns["states"],
                                                     strict=True) if state == "failed"})
        with self.db.connection() as conn, wrap_errors("recording outcomes"):
            if not failed:
                conn.execute(queries["record_outcomes"], columns)
                return []
            with conn.transaction():
                guarded = [r[0] for r in conn.execute(queries["lock_failure_guards"],
                                                      {"names": failed})]
                conn.execute(queries["record_outcomes"], columns)
                if not guarded:
                    return []
                return [(name, note) for name, note in conn.execute(
                    queries["pause_after_failures"],
                    {"names": guarded, "by": FAILURES_PAUSED_BY,
                     "error_limit": PAUSE_ERROR_LIMIT})]

    def claim(self, **run: Any) -> bool:
        """Start the run of ``run["task_id"]`` unless a run of it started already, so
        that a task runs at most once, and return whether this claim won. A refused
        claim is counted as a duplicate delivery."""
        with self.db.connection() as conn, wrap_errors("claiming a run"):
            claimed = conn.execute(queries["claim_outcome"], run).fetchone() is not None
            if not claimed:
                conn.execute(queries["count_duplicate"], {"task_id": run["task_id"]})
        return claimed

    def purge(self, retention: timedelta, limit: int = 5000) -> int:
        """Delete up to ``limit`` outcomes older than ``retention`` and return how many
        were deleted."""
        with self.db.connection() as conn, wrap_errors("deleting old outcomes"):
            row = conn.execute(queries["purge_outcomes"],
                               {"retention": retention, "limit": limit}).fetchone()
        return int(row[0]) if row else 0

    def schedule_history(self, name: str | None, limit: int, default_max_runtime: float
                         ) -> list[dict[str, Any]]:
        """Return the occurrences of ``name``, or of every schedule when ``name`` is
        None, newest first; the ``schedule_history`` statement says what each holds."""
        what = "the history" if name is None else f"the history of {name!r}"
        with self.db.connection() as conn, wrap_errors(f"reading {what}"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["schedule_history"], {
                "name": name, "limit": limit,
                "default_max_runtime": default_max_runtime}).fetchall()

    def explain_records(self, name: str, fire_time: datetime | None, second: datetime,
                        default_max_runtime: float) -> list[dict[str, Any]]:
        """Return what is recorded of ``name`` at ``fire_time`` (None: the instant is no
        fire time) and of its manual triggers in ``second``: jobs, backfills whose job is
        gone, and occurrences; the ``explain_records`` statement says what each holds."""
        with self.db.connection() as conn, wrap_errors(f"reading the records of {name!r}"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["explain_records"], {
                "name": name, "fire_time": fire_time, "second": second,
                "default_max_runtime": default_max_runtime}).fetchall()

    def overdue_candidates(self, default_max_runtime: float) -> list[dict[str, Any]]:
        """Return each schedule's last run with what it takes to tell whether it is
        overdue; the caller decides, because the rule needs the schedule's calendar."""
        with self.db.connection() as conn, wrap_errors("reading the last runs"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["overdue_candidates"],
                               {"default_max_runtime": default_max_runtime}).fetchall()
