"""Schedules at run time: the Python API (``awa_beat.Schedules``).

Add, change, pause and remove schedules from application code, with no restart: the
leading beat is notified of every committed change and acts on it within a second.
Every entry is read exactly as a ``beat_schedule`` entry is (same forms, same
:class:`~awa_beat.errors.ValidationError`), with the app's settings (default time zone,
dispatch, deployment), so it fires exactly as it would from the configuration::

    from celery.schedules import crontab
    from awa_beat import Schedules

    schedules = Schedules.from_app(app)          # or Schedules("postgresql://...")
    schedules.add("tenant-42-report", task="reports.build",
                  schedule=crontab(hour=7, minute=30), kwargs={"tenant": 42},
                  options={"queue": "reports",
                           "awa_beat": {"timezone": "Europe/Paris"}})
    schedules.update("tenant-42-report", schedule=crontab(hour=8))  # the rest stays
    schedules.pause("tenant-42-report"); schedules.resume("tenant-42-report")
    schedules.trigger("tenant-42-report")        # one job now
    schedules.backfill("tenant-42-report",       # a job for each fire of last month
                       datetime(2026, 11, 1, tzinfo=timezone.utc),
                       datetime(2026, 11, 30, 23, 59, tzinfo=timezone.utc))
    schedules.get("tenant-42-report").next_fire
    schedules.add_many({f"tenant-{t}-report": {"task": "reports.build",
                                              "schedule": crontab(hour=7),
                                              "kwargs": {"tenant": t}}
                        for t in tenants})       # one round trip for thousands
    schedules.remove("tenant-42-report")

**Ownership.** What this API writes is owned by no deployment's ``beat_schedule``
(owner ``runtime``): no beat reports it as an orphan, and no beat's sync overwrites it.
Writing over a row that a ``beat_schedule`` owns raises
:class:`~awa_beat.errors.ScheduleOwned` unless ``force=True``, which takes the row over:
from then on that beat leaves it alone and logs ``schedule.conflict`` at start-up until
the entry leaves its configuration or the row is removed.

**Transactions.** Every write takes ``conn=``, a psycopg 3 connection (or Django's
``django.db.connection``) to the same database, and joins its open transaction, so that
it commits or rolls back with the caller's own writes::

    with conn.transaction():
        conn.execute("INSERT INTO tenants ...")
        schedules.add("tenant-42-report", ..., conn=conn)

A change becomes visible to beat when that transaction commits; keep it short (beat's
refresh looks back 10 s for late commits, and reloads everything every 5 minutes).
Reads (:meth:`Schedules.get`, :meth:`Schedules.list`) use the API's own connection and
see committed data only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from .._config import Settings
from .._db.conninfo import caller_connection
from .._db.database import Database
from .._schedules.backfill import BACKFILL_LIMIT
from .._schedules.explain import Explanation
from .._schedules.preview import Preview
from .._schedules.spec import ScheduleSpec
from ..errors import ValidationError
from .operations import Operations, find_database_url, settings_for
from .records import BackfillResult, ScheduleView

__all__ = ["Schedules"]

#: Either a psycopg connection or Django's connection wrapper (``django.db.connection``).
Connection = Any


class Schedules:
    """The schedules of one database, changed at run time. Thread-safe; close it (or use
    ``with``) to release its connection."""

    def __init__(self, database_url: str | None = None, *, settings: Settings | None = None,
                 app: Any = None, pool_size: int = 2) -> None:
        """``database_url`` (default: the app's ``awa_beat_database_url``, else
        $AWA_BEAT_DATABASE_URL); ``settings`` (default: ``app``'s, else the
        environment's) decide the default time zone, dispatch and deployment."""
        self.settings = settings if settings is not None else settings_for(app)
        url = find_database_url(database_url or self.settings.database_url, app)
        store = Database(url, min_size=1, max_size=pool_size)
        store.open()
        try:
            store.check_schema()  # `awa-beat migrate` first, or start beat once
        except BaseException:
            store.close()
            raise
        self._ops = Operations(store, deployment=self.settings.deployment,
                               settings=self.settings)

    @classmethod
    def from_app(cls, app: Any, *, database_url: str | None = None,
                 settings: Settings | None = None, pool_size: int = 2) -> Schedules:
        """The schedules of a Celery app's database, read with its settings (as its beat
        reads its beat_schedule)."""
        return cls(database_url, settings=settings, app=app, pool_size=pool_size)

    def close(self) -> None:
        self._ops.close()

    def __enter__(self) -> Schedules:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Schedules {self._ops.store!r} deployment={self.settings.deployment!r}>"

    # -- writes ---------------------------------------------------------------------------

    def add(self, name: str, *, task: str, schedule: Any, args: Iterable[Any] = (),
            kwargs: Mapping[str, Any] | None = None, options: Mapping[str, Any] | None = None,
            replace: bool = False, force: bool = False, conn: Connection = None
            ) -> ScheduleSpec:
        """Add one schedule, as the ``beat_schedule`` entry ``{"task": task, "schedule":
        schedule, "args": args, "kwargs": kwargs, "options": options}`` would.

        Its first fire is the first time of its calendar after the write. Raises
        :class:`~awa_beat.errors.ValidationError` (nothing written) for a bad entry,
        :class:`~awa_beat.errors.ScheduleExists` if ``name`` exists (unless ``replace``),
        :class:`~awa_beat.errors.ScheduleOwned` when replacing a row that a
        ``beat_schedule`` owns (unless ``force``). Returns the validated spec.
        """
        # As given: validation refuses what a conversion here would coerce (a dict's
        # keys as args).
        entry = {"task": task, "schedule": schedule, "args": args, "kwargs": kwargs,
                 "options": options}
        (spec,) = self._ops.add({name: entry}, replace=replace, force=force,
                                conn=caller_connection(conn))
        return spec

    def add_many(self, entries: Mapping[str, Mapping[str, Any]]
                 | Iterable[tuple[str, Mapping[str, Any]]], *, replace: bool = False,
                 force: bool = False, conn: Connection = None) -> list[ScheduleSpec]:
        """Add many schedules, all or none: a ``beat_schedule`` mapping (name -> entry) or
        ``(name, entry)`` pairs. Every problem of every entry is reported at once; an
        existing name refuses the whole batch unless ``replace``. A few round trips in
        all, whatever the number of entries."""
        if isinstance(entries, Mapping):
            batch = dict(entries)
        else:
            batch, duplicates = {}, []
            for name, entry in entries:
                if name in batch:
                    duplicates.append((str(name), "name", "is given more than once"))
                batch[name] = entry
            if duplicates:
                raise ValidationError(duplicates)
        return self._ops.add(batch, replace=replace, force=force,
                             conn=caller_connection(conn))

    def update(self, name: str, *, force: bool = False, conn: Connection = None,
               **changes: Any) -> ScheduleSpec:
        """Change only what is given of ``name``'s entry: ``task``, ``schedule``,
        ``args``, ``kwargs``, ``options``. ``options`` and its ``awa_beat`` dict are
        merged key by key (a value of None removes a key)::

            schedules.update("report", schedule=crontab(hour=8),
                             options={"awa_beat": {"timezone": "Asia/Tokyo"}})

        Bounds (``start_time``, ``end_time``, ``max_runs``, ``one_off``), the catch-up
        window and the jitter (``catch_up_window``, ``jitter``: seconds) and the outcome
        settings are settings like the others: a new schedule keeps them, and None removes
        one (``options={"awa_beat": {"max_runs": None}}``); ``at()`` carries its one run
        and replaces them. Raising a retired schedule's run limit past the runs it made,
        or removing it, resumes it. :meth:`get` shows them (``.bounds``).

        A new calendar (schedule or time zone) never fires a time from before the
        change. :class:`~awa_beat.errors.NotFound` if there is no such schedule;
        :class:`~awa_beat.errors.ScheduleOwned` for a ``beat_schedule``'s row unless
        ``force``.
        """
        return self._ops.update(name, changes, force=force, conn=caller_connection(conn))

    def pause(self, name: str, by: str | None = None, *, conn: Connection = None
              ) -> datetime:
        """Stop ``name``'s automatic fires until :meth:`resume`; when it was paused."""
        return self._ops.pause(name, by, conn=caller_connection(conn))

    def resume(self, name: str, *, conn: Connection = None) -> None:
        """Resume ``name``; its missed-fire policy decides what is caught up."""
        self._ops.resume(name, conn=caller_connection(conn))

    def trigger(self, name: str, *, conn: Connection = None) -> int:
        """Enqueue one job of ``name`` now, even while paused; the job's id."""
        return self._ops.trigger(name, conn=caller_connection(conn))

    def backfill(self, name: str, start: datetime, end: datetime, *, overlap: str = "allow",
                 limit: int = BACKFILL_LIMIT, dry_run: bool = False) -> BackfillResult:
        """Give one job to each fire time of ``name``'s calendar from ``start`` to ``end``
        (aware datetimes, both included), in order, each as if the schedule had fired
        then: the job's fire time is the nominal one, and its metadata says
        ``"backfilled": true``. Idempotent: a fire time that has a job already (an
        earlier backfill's, the schedule's own fire, a reported outcome) is skipped, even
        when two backfills run at once. The cursor is not moved, so the schedule's own
        fires go on as planned; fire times after it are refused, since they are the
        schedule's own. A paused schedule may be backfilled.

        ``overlap``: ``"allow"`` (every job is available at once) or ``"skip"`` (refused
        while a run of the schedule has not finished). ``limit``: the most fire times one
        call inserts (default 100,000, at most 1,000,000); a range with more is refused
        with the count. ``dry_run``: say what would be inserted and skipped, and write
        nothing. The call is recorded in the audit log (action ``backfill``).

        Returns a :class:`~awa_beat._ops.records.BackfillResult`; raises
        :class:`~awa_beat.errors.BackfillRefused` (nothing written) or
        :class:`~awa_beat.errors.NotFound`."""
        return self._ops.backfill(name, start, end, overlap=overlap, limit=limit,
                                  dry_run=dry_run, source="api")

    def remove(self, name: str, *, conn: Connection = None) -> None:
        """Delete ``name`` (:class:`~awa_beat.errors.NotFound` if there is none); the jobs
        it fired stay. A ``beat_schedule``'s row comes back at that beat's next sync."""
        self._ops.remove(name, conn=caller_connection(conn))

    # -- reads ----------------------------------------------------------------------------

    def get(self, name: str) -> ScheduleView:
        """``name``'s stored row, next fire and owner (``.owner``)."""
        return self._ops.get(name)

    def preview(self, name: str, *, count: int | None = None,
                until: datetime | None = None) -> Preview:
        """``name``'s next fires: ``count`` of them (default 10, at most 1000), or every
        fire up to ``until`` (an aware datetime; at most 1000), each marked when a DST
        change moves it or repeats its hour, with warnings about a calendar that fires
        twice or moves in a DST change, never fires, or fires every second. A paused
        schedule lists the fires it would have if resumed, a retired one none, and a
        schedule with a run limit no more than the runs it has left; its
        :attr:`~Preview.notices` say so. Raises :class:`~awa_beat.errors.NotFound`, or
        :class:`~awa_beat.errors.ValidationError` naming ``count`` or ``until``."""
        return self._ops.preview(name, count=count, until=until)

    def explain(self, name: str, at: datetime) -> Explanation:
        """What happened or will happen to ``name`` at the instant ``at`` (an aware
        datetime; fires are whole seconds, so any instant within a fire time's second is
        that fire time), and why: fired (the job and its outcome), triggered by hand,
        backfilled, buffered, coalesced, skipped (overlap or the catch-up window), before
        the schedule existed, out of its bounds, paused (by whom, with the note),
        retired, due, will fire (and when its job runs, with jitter), or not a fire time
        (the fire times either side), with how a DST gap or fold moved or repeated the
        fire. :attr:`~Explanation.kind` is the answer, :attr:`~Explanation.summary` and
        :attr:`~Explanation.details` say it in words. Read only. Raises
        :class:`~awa_beat.errors.NotFound`, or :class:`~awa_beat.errors.ValidationError`
        naming ``at``."""
        return self._ops.explain(name, at)

    def list(self, pattern: str | None = None) -> list[ScheduleView]:
        """Every schedule, by name; ``pattern`` is a SQL LIKE pattern on the name."""
        return self._ops.schedules(pattern)
