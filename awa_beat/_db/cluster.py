"""What the replicas and the people using them leave in the database: the beats'
heartbeats (``awa-beat status``), the audit log, the dashboard's logins, and the pages of
schedules the dashboard lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import psycopg.types.json
from psycopg.rows import dict_row

from .database import one_row, wrap_errors
from .records import ScheduleRow
from .sql import queries

if TYPE_CHECKING:
    from .database import Database


class ClusterStore:
    """Heartbeats, audit, logins and dashboard pages, on a :class:`~.database.Database`'s
    pool."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- beats (for `awa-beat status`) -----------------------------------------------------

    def heartbeat(self, **beat: Any) -> None:
        """Record one beat's heartbeat: who it is, its role and what it last saw."""
        with self.db.connection() as conn, wrap_errors("recording the heartbeat"):
            conn.execute(queries["beat_heartbeat"],
                         {"publishes": False, "clock_skew_ms": None, **beat})

    def beat_gone(self, identity: str) -> None:
        """Remove the heartbeat of a beat that stops, so that status stops listing it at
        once instead of when its heartbeat grows old."""
        with self.db.connection() as conn, wrap_errors("removing the heartbeat"):
            conn.execute(queries["beat_gone"], {"identity": identity})

    def beats(self, window: timedelta = timedelta(seconds=60)) -> list[dict[str, Any]]:
        """Return the beats whose last heartbeat is younger than ``window``."""
        with self.db.connection() as conn, wrap_errors("reading beats"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["list_beats"], {"window": window}).fetchall()

    # -- the dashboard's pages ---------------------------------------------------------

    def schedules_page(self, *, after: str | None = None, before: str | None = None,
                       limit: int = 50, search: str | None = None,
                       paused: bool | None = None, owner: str | None = None,
                       owned_by: str | None = None, names: Sequence[str] | None = None,
                       ) -> list[tuple[ScheduleRow, str | None]]:
        """Return up to ``limit`` rows in name order after ``after``, or the rows just
        before ``before``, each with its pause note. The filters run in SQL: ``search``
        is lower-case text the name contains, ``owner`` a deployment ('' for rows that
        no awa-beat registered), ``owned_by`` either 'config' or 'runtime', and
        ``names`` a set of names to narrow the page to."""
        params = {"after": after, "before": before, "limit": limit, "search": search,
                  "paused": paused, "owner": owner, "owned_by": owned_by,
                  "names": list(names) if names is not None else None}
        query = queries["schedules_page" if before is None else "schedules_page_before"]
        with self.db.connection() as conn, wrap_errors("listing schedules"):
            rows = conn.cursor(row_factory=dict_row).execute(query, params).fetchall()
        if before is not None:
            rows.reverse()
        return [(ScheduleRow(**{k: v for k, v in r.items() if k != "pause_note"}),
                 r["pause_note"]) for r in rows]

    def count_schedules(self, *, search: str | None = None, paused: bool | None = None,
                        owner: str | None = None, owned_by: str | None = None,
                        names: Sequence[str] | None = None, cap: int = 10_001) -> int:
        """Count the rows that :meth:`schedules_page`'s filters match, up to ``cap``, so
        that counting a large table stays cheap."""
        params = {"search": search, "paused": paused, "owner": owner, "owned_by": owned_by,
                  "cap": cap,
                  "names": list(names) if names is not None else None}
        with self.db.connection() as conn, wrap_errors("counting schedules"):
            row = conn.execute(queries["count_schedules_page"], params).fetchone()
        return int(row[0]) if row else 0

    def deployments(self) -> list[str]:
        """Return the deployments that registered rows, for the dashboard's filter."""
        with self.db.connection() as conn, wrap_errors("reading deployments"):
            return [r[0] for r in conn.execute(queries["deployments"])]

    def paused_queues(self, queues: Sequence[str]) -> list[dict[str, Any]]:
        """Return Awa's paused queues among ``queues``. The standalone layout has no
        queue table of Awa's, so the answer there is empty."""
        with self.db.connection() as conn, wrap_errors("reading queue pauses"):
            (present,) = one_row(conn.execute(queries["has_queue_meta"]).fetchone(),
                              "reading queue pauses")
            if not present:
                return []
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["paused_queues"], {"queues": list(queues)}).fetchall()

    # -- the audit log (migration 0011) ------------------------------------------------

    def record_audit(self, **entry: Any) -> tuple[int, datetime]:
        """Write one row of ``awa_beat.audit_log`` (see migration 0011) and return its id
        and the instant it was recorded."""
        with self.db.connection() as conn, wrap_errors("recording the action"):
            row = conn.execute(queries["record_audit"], {
                **entry, "detail": psycopg.types.json.Jsonb(entry.get("detail") or {})}
                ).fetchone()
        row = one_row(row, "recording the action")
        return int(row[0]), row[1]

    def audit_log(self, *, limit: int = 50, before_id: int | None = None,
                  schedule: str | None = None) -> list[dict[str, Any]]:
        """Return up to ``limit`` audit entries, newest first, before the entry
        ``before_id`` when it is given, and only those about ``schedule`` when it is."""
        with self.db.connection() as conn, wrap_errors("reading the audit log"):
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(queries["audit_log"], {
                "limit": limit, "before_id": before_id, "schedule": schedule}).fetchall()

    # -- the dashboard's logins (migration 0014) ------------------------------------------

    def web_secret(self) -> tuple[bytes, str] | None:
        """Return the secret that signs the dashboard's session cookies and the
        fingerprint of the password it was made for, or None if no dashboard with a
        password has run yet."""
        with self.db.connection() as conn, wrap_errors("reading the dashboard's secret"):
            row = conn.execute(queries["web_secret"]).fetchone()
        return (bytes(row[0]), str(row[1])) if row else None

    def save_web_secret(self, secret: bytes, fingerprint: str, *,
                        replaces: str | None) -> None:
        """Store the first secret when ``replaces`` is None. Otherwise replace the secret
        whose fingerprint is ``replaces`` and end every session it signed, because a new
        password must log everyone out."""
        values = {"secret": secret, "fingerprint": fingerprint, "replaces": replaces}
        with self.db.connection() as conn, wrap_errors("storing the dashboard's secret"), \
                conn.transaction():
            if replaces is None:
                conn.execute(queries["create_web_secret"], values)
            elif conn.execute(queries["replace_web_secret"], values).rowcount:
                conn.execute(queries["end_web_sessions"])

    def start_web_session(self, id_digest: str, username: str, lifetime: float) -> None:
        """Start a logged-in session that lasts ``lifetime`` seconds, and delete the
        expired ones so that the table does not grow."""
        with self.db.connection() as conn, wrap_errors("starting a session"), conn.transaction():
            conn.execute(queries["prune_web_sessions"])
            conn.execute(queries["start_web_session"], {
                "id_digest": id_digest, "username": username, "lifetime": lifetime})

    def web_session_user(self, id_digest: str) -> str | None:
        """Return who logged in with the session, or None once it ended or expired."""
        with self.db.connection() as conn, wrap_errors("reading a session"):
            row = conn.execute(queries["web_session_user"], {"id_digest": id_digest}
                               ).fetchone()
        return str(row[0]) if row else None

    def end_web_session(self, id_digest: str) -> None:
        """End the session, as logging out does."""
        with self.db.connection() as conn, wrap_errors("ending a session"):
            conn.execute(queries["end_web_session"], {"id_digest": id_digest})
