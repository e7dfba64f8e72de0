"""Running an import (``awa-beat import``): it reads the source, converts, plans, then
writes.

The command line parses the options into :class:`ImportOptions` and prints the
:class:`ImportOutcome` that :func:`run_import` returns. Everything in between is here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .._config import celery_dispatch_refused
from .._db.conninfo import redact, settings_from_app
from .._schedules.cron import load_timezone
from .._schedules.spec import check_outcome_tracking
from ..errors import SchemaError
from .celery_app import from_beat_schedule
from .common import Imported, Result
from .django import from_django, read_django
from .planning import Plan, plan
from .redbeat import from_redbeat, read_redbeat, redact_url
from .schedule_file import from_schedule_file, read_schedule_file

if TYPE_CHECKING:
    from .._db.database import Database

SCHEMA_NOT_SET_UP = ("awa-beat's schema is not set up in this database yet: the import "
                     "creates it first (as `awa-beat migrate`), so every row shows as new")
NOT_IN_BEAT_SCHEDULE = ("these rows are not in the app's beat_schedule: beat lists them at "
                        "start-up as no longer configured (they keep firing); `awa-beat "
                        "export` prints them as a beat_schedule to move into the app")


@dataclass(frozen=True)
class ImportOptions:
    """What an import was asked for. At most one ``from_*`` source is given; none means
    the app's ``beat_schedule``, and then ``app`` is required."""

    app: Any = None
    """The Celery app (``-A``, or ``celery -A proj awa import``), whose settings are the
    defaults (time zone, dispatch, deployment, database). With None, Celery's defaults
    apply."""
    from_django: str | None = None
    from_redbeat: str | None = None
    key_prefix: str = "redbeat:"
    from_file: str | None = None
    trust_file: bool = False
    """Whether to read ``from_file`` even if neither this user nor root owns it (it is a
    pickle)."""
    timezone: str | None = None
    """The time zone of crontabs that name none. By default it is the app's, or the file's."""
    dispatch: str | None = None
    deployment: str | None = None
    database_url: str | None = None
    dry_run: bool = False
    force: bool = False
    """Whether to overwrite rows written at run time too (they become configuration again)."""


@dataclass(frozen=True)
class ImportOutcome:
    """What an import found and did: the plan (with its notes), and what was written."""

    source: str
    """The source, described for people, with passwords redacted."""
    deployment: str
    dry_run: bool
    plan: Plan
    imported: int
    """How many entries were carried over (and written, unless this was a dry run)."""
    written: dict[str, int] | None
    """What the write statement itself reported (``inserted``, ``changed``,
    ``cursors_moved``, ``unchanged``), or None on a dry run."""

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "deployment": self.deployment, "dry_run": self.dry_run,
                **self.plan.to_json(), "written": self.written}


def run_import(options: ImportOptions, open_store: Callable[[str | None], Database]
               ) -> ImportOutcome:
    """Read the source, plan against the stored rows and, unless this is a dry run, write.

    ``open_store`` gives the store (not yet opened) for a database URL: the options' URL,
    else the app's ``awa_beat_database_url``, else None.
    """
    app = options.app
    settings = settings_from_app(app.conf if app is not None else {},
                                 app_name=app.main if app is not None else None)
    deployment = options.deployment or settings.deployment
    dispatch = options.dispatch or settings.dispatch or "awa"
    source, results = read_source(options, settings.default_timezone, dispatch, settings.dst)
    imported = [r for r in results if isinstance(r, Imported)]
    # Refused before the database is opened, as beat refuses it: without the app's
    # outcome tracking no failure is ever seen, and the schedule would never pause.
    check_outcome_tracking([r.spec for r in imported], settings.track_outcomes)
    notes = []
    with open_store(options.database_url or settings.database_url) as store:
        if not options.dry_run:
            store.migrate()
        if store.awa_owned and any(r.spec.dispatch == "celery" for r in imported):
            raise celery_dispatch_refused(
                [r.name for r in imported if r.spec.dispatch == "celery"],
                "import with --dispatch awa, or into a database of its own")
        try:
            existing = {row.name: row for row in
                        store.schedules.get_many([r.name for r in imported])}
        except SchemaError:
            if not options.dry_run:
                raise
            existing = {}
            notes.append(SCHEMA_NOT_SET_UP)
        if (options.from_django or options.from_redbeat) and imported:
            notes.append(NOT_IN_BEAT_SCHEDULE)
        the_plan = plan(results, existing, deployment, now=datetime.now(timezone.utc),
                        force=options.force)
        the_plan.notes[:0] = notes
        left_out = {r.name for r in the_plan.not_carried}
        imported = [r for r in imported if r.name not in left_out]
        outcome = None if options.dry_run or not imported else store.schedules.import_schedules(
            [r.spec.row(deployment) for r in imported], [r.cursor for r in imported],
            [r.paused_by for r in imported], deployment=deployment, force=options.force)
    return ImportOutcome(source, deployment, options.dry_run, the_plan, len(imported),
                         None if options.dry_run else written(outcome or []))


def read_source(options: ImportOptions, app_timezone: str, dispatch: str, dst: str
                ) -> tuple[str, list[Result]]:
    """Return the chosen source, described, and its results. ``app_timezone`` is the
    default time zone of crontabs unless the options or the file name one. ``dst`` is the
    DST policy of crontabs whose entry gives none (the app's ``awa_beat_dst``, as beat
    reads it)."""
    if options.from_file:
        read = read_schedule_file(options.from_file, trust=options.trust_file)
        default_tz = options.timezone or read.tz or app_timezone
        load_timezone(default_tz)
        return (f"celerybeat-schedule file {options.from_file}",
                from_schedule_file(read, default_timezone=default_tz,
                                   default_dispatch=dispatch, default_dst=dst))
    default_tz = options.timezone or app_timezone
    load_timezone(default_tz)  # A bad zone makes one error, not one per entry.
    if options.from_django:
        return (f"django-celery-beat at {redact(options.from_django)}",
                from_django(read_django(options.from_django), now=datetime.now(timezone.utc),
                            default_timezone=default_tz, default_dispatch=dispatch,
                            default_dst=dst))
    if options.from_redbeat:
        prefix = options.key_prefix
        return (f"RedBeat at {redact_url(options.from_redbeat)} (prefix {prefix!r})",
                from_redbeat(read_redbeat(options.from_redbeat, prefix), key_prefix=prefix,
                             default_timezone=default_tz, default_dispatch=dispatch,
                             default_dst=dst))
    app = options.app
    if app is None:
        raise ValueError("no source: give a from_* source or the Celery app")
    return (f"beat_schedule of the Celery app {app.main or '(unnamed)'!r}",
            from_beat_schedule(app.conf.beat_schedule or {}, default_timezone=default_tz,
                               default_dispatch=dispatch, default_dst=dst))


def written(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Return the counts of what the import statement reported, row by row."""
    old = [r for r in rows if not r["inserted"]]
    moved = [r for r in old if r["cursor_after"] != r["cursor_before"]]
    return {"inserted": len(rows) - len(old),
            "changed": sum(1 for r in old if r["changed"]),
            "cursors_moved": len(moved),
            "unchanged": sum(1 for r in old if not r["changed"] and r not in moved)}
