"""``awa-beat import``: move an existing Celery schedule into awa-beat."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import click

from ..config import celery_dispatch_refused, redact
from ..cron import load_timezone
from ..errors import SchemaError
from ..operations import settings_for
from .context import context_app, database_url_option, friendly_errors, json_option, open_store
from .format import fmt, table


@click.command("import")
@database_url_option
@click.option("-A", "--app", "app_spec", metavar="APP",
              help="The Celery app, as for `celery -A`. Alone: import its beat_schedule. With "
                   "a --from-* source: its settings (time zone, dispatch, deployment, "
                   "database) and modules (to unpickle --from-file).")
@click.option("--from-django", metavar="URL",
              help="Import django-celery-beat's tables from this PostgreSQL database.")
@click.option("--from-redbeat", metavar="URL",
              help="Import RedBeat's entries from this Redis, e.g. redis://host:6379/0.")
@click.option("--key-prefix", default="redbeat:", show_default=True,
              help="RedBeat's key prefix (redbeat_key_prefix).")
@click.option("--from-file", metavar="PATH",
              help="Import a celerybeat-schedule file (Celery's PersistentScheduler).")
@click.option("--timezone", "zone", metavar="ZONE",
              help="Time zone of crontabs that name none: the old beat's app time zone "
                   "(default: the app's; for --from-file, the one recorded in the file).")
@click.option("--dispatch", type=click.Choice(["celery", "awa"]), default=None,
              help="Who runs the fired jobs (default: awa_beat_dispatch, else awa).")
@click.option("--deployment", default=None,
              help="Deployment the rows belong to (default: as beat's: awa_beat_deployment, "
                   "else the app's name, else 'default').")
@click.option("--dry-run", is_flag=True, help="Print what would change and write nothing.")
@json_option
@friendly_errors
def import_(database_url: str | None, app_spec: str | None, from_django: str | None,
            from_redbeat: str | None, key_prefix: str, from_file: str | None,
            zone: str | None, dispatch: str | None, deployment: str | None, dry_run: bool,
            as_json: bool) -> None:
    """Move an existing Celery schedule into awa-beat: no double and no missed run.

    From the app's beat_schedule (-A alone), django-celery-beat's tables, RedBeat, or a
    celerybeat-schedule file. Each entry's last run becomes its cursor, so its first fire
    is the next one after that run; a stored cursor only ever moves forward. Entries the
    source had disabled are imported paused (existing rows keep their pause). What cannot
    be carried over exactly is listed with the reason, and nothing else is written for it.
    """
    from .. import importers

    chosen = [name for name, value in (("--from-django", from_django),
                                       ("--from-redbeat", from_redbeat),
                                       ("--from-file", from_file)) if value]
    if len(chosen) > 1:
        raise click.UsageError(f"give one source, not {' and '.join(chosen)}")
    app = importers.load_app(app_spec) if app_spec else context_app()
    if not chosen and app is None:
        raise click.UsageError("nothing to import: give -A APP, --from-django URL, "
                               "--from-redbeat URL or --from-file PATH")
    settings = settings_for(app)
    deployment = deployment or settings.deployment
    dispatch = dispatch or settings.dispatch or "awa"
    if from_file:
        read = importers.read_schedule_file(from_file)
        default_tz = zone or read.tz or settings.default_timezone
        load_timezone(default_tz)
        source = f"celerybeat-schedule file {from_file}"
        results = importers.from_schedule_file(read, default_timezone=default_tz,
                                               default_dispatch=dispatch)
    else:
        default_tz = zone or settings.default_timezone
        load_timezone(default_tz)  # a bad zone is one error, not one per entry
        if from_django:
            source = f"django-celery-beat at {redact(from_django)}"
            results = importers.from_django(
                importers.read_django(from_django), now=datetime.now(timezone.utc),
                default_timezone=default_tz, default_dispatch=dispatch)
        elif from_redbeat:
            source = (f"RedBeat at {importers.redact_url(from_redbeat)} "
                      f"(prefix {key_prefix!r})")
            results = importers.from_redbeat(
                importers.read_redbeat(from_redbeat, key_prefix), key_prefix=key_prefix,
                default_timezone=default_tz, default_dispatch=dispatch)
        else:
            assert app is not None
            source = f"beat_schedule of the Celery app {app.main or '(unnamed)'!r}"
            results = importers.from_beat_schedule(
                app.conf.beat_schedule or {}, default_timezone=default_tz,
                default_dispatch=dispatch)
    imported = [r for r in results if isinstance(r, importers.Imported)]
    notes = []
    with open_store(database_url, app) as store:
        if not dry_run:
            store.migrate()
        if store.awa_owned and any(r.spec.dispatch == "celery" for r in imported):
            raise celery_dispatch_refused(
                [r.name for r in imported if r.spec.dispatch == "celery"],
                "import with --dispatch awa, or into a database of its own")
        try:
            existing = {row.name: row for row in store.get_many([r.name for r in imported])}
        except SchemaError:
            if not dry_run:
                raise
            existing = {}
            notes.append("awa-beat's schema is not set up in this database yet: the import "
                         "creates it first (as `awa-beat migrate`), so every row shows as new")
        if (from_django or from_redbeat) and imported:
            notes.append("these rows are not in the app's beat_schedule: beat lists them at "
                         "start-up as no longer configured (they keep firing); `awa-beat "
                         "export` prints them as a beat_schedule to move into the app")
        plan = importers.plan(results, existing, deployment, now=datetime.now(timezone.utc))
        plan.notes[:0] = notes
        outcome = None if dry_run or not imported else store.import_schedules(
            [r.spec.row(deployment) for r in imported], [r.cursor for r in imported],
            [r.paused_by for r in imported], deployment=deployment)
    written = None
    if not dry_run:  # what the statement itself reports, row by row
        old = [r for r in outcome or [] if not r["inserted"]]
        moved = [r for r in old if r["cursor_after"] != r["cursor_before"]]
        written = {"inserted": len(outcome or []) - len(old),
                   "changed": sum(1 for r in old if r["changed"]),
                   "cursors_moved": len(moved),
                   "unchanged": sum(1 for r in old if not r["changed"] and r not in moved)}
    if as_json:
        click.echo(json.dumps({"source": source, "deployment": deployment, "dry_run": dry_run,
                               **plan.to_json(), "written": written}, indent=2))
        return
    _print_plan(plan, source, deployment)
    counts = (f"{len(plan.new)} new, {len(plan.changed)} changed, {len(plan.cursor_moves)} "
              f"cursor(s) moved forward, {len(plan.unchanged)} unchanged, "
              f"{len(plan.not_carried)} not carried over")
    if dry_run:
        click.echo(f"\ndry run, nothing written: {counts}")
    else:
        assert written is not None
        click.echo(f"\nimported {len(imported)} schedule(s): {written['inserted']} new, "
                   f"{written['changed']} changed, {written['cursors_moved']} cursor(s) moved "
                   f"forward, {written['unchanged']} unchanged; {len(plan.not_carried)} not "
                   "carried over")


def _print_plan(plan: Any, source: str, deployment: str) -> None:
    click.echo(f"source: {source}\ndeployment: {deployment}")
    if plan.new:
        click.echo(f"\nnew ({len(plan.new)}):")
        click.echo(_indent(table(["NAME", "SCHEDULE", "TZ", "TASK", "CURSOR (UTC)", "PAUSED"], [
            [i.name, i.spec.cron_expr, i.spec.timezone, i.spec.kind,
             fmt(i.cursor) if i.cursor else "now (no last run known)", i.paused_by or ""]
            for i in plan.new])))
    if plan.changed:
        click.echo(f"\nchanged ({len(plan.changed)}):")
        for name, fields in plan.changed:
            click.echo(f"  {name}")
            for key, (old, new) in fields.items():
                click.echo(f"    {key}: {_shown(old)} -> {_shown(new)}")
    if plan.cursor_moves:
        click.echo(f"\ncursor moves forward ({len(plan.cursor_moves)}):")
        click.echo(_indent(table(["NAME", "STORED (UTC)", "IMPORTED LAST RUN (UTC)"], [
            [name, fmt(old), fmt(new)] for name, old, new in plan.cursor_moves])))
    if plan.cursor_kept:
        click.echo(f"\ncursor kept, the source's last run is older ({len(plan.cursor_kept)}):")
        click.echo(_indent(table(["NAME", "STORED (UTC)", "IMPORTED LAST RUN (UTC)"], [
            [name, fmt(old), fmt(new)] for name, old, new in plan.cursor_kept])))
    if plan.unchanged:
        click.echo(f"\nunchanged ({len(plan.unchanged)}): {', '.join(plan.unchanged)}")
    if plan.not_carried:
        click.echo(f"\nNOT carried over ({len(plan.not_carried)}):")
        for item in plan.not_carried:
            click.echo(f"  {item.name}: {item.reason}")
    if plan.notes:
        click.echo("\nnotes:")
        for note in plan.notes:
            click.echo(f"  {note}")


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def _shown(value: Any) -> str:
    from ..importers import ABSENT

    return "(absent)" if value is ABSENT else json.dumps(value, default=str)
