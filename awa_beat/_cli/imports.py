"""``awa-beat import``: move an existing Celery schedule into awa-beat."""

from __future__ import annotations

import json
from typing import Any

import click

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
              help="Import a celerybeat-schedule file (Celery's PersistentScheduler). The "
                   "file is a pickle: reading it runs the code it names, --dry-run "
                   "included, so import only files you trust. One that neither you nor "
                   "root owns is refused without --trust-file.")
@click.option("--trust-file", is_flag=True,
              help="Read the --from-file file even though another user owns it.")
@click.option("--timezone", "zone", metavar="ZONE",
              help="Time zone of crontabs that name none: the old beat's app time zone "
                   "(default: the app's; for --from-file, the one recorded in the file).")
@click.option("--dispatch", type=click.Choice(["celery", "awa"]), default=None,
              help="Who runs the fired jobs (default: awa_beat_dispatch, else awa).")
@click.option("--deployment", default=None,
              help="Deployment the rows belong to (default: as beat's: awa_beat_deployment, "
                   "else the app's name, else 'default').")
@click.option("--dry-run", is_flag=True, help="Print what would change and write nothing.")
@click.option("--force", is_flag=True,
              help="Overwrite schedules written at run time too (the Python API, "
                   "`awa-beat add`); without it they are listed as not carried over.")
@json_option
@friendly_errors
def import_(database_url: str | None, app_spec: str | None, from_django: str | None,
            from_redbeat: str | None, key_prefix: str, from_file: str | None,
            trust_file: bool, zone: str | None, dispatch: str | None,
            deployment: str | None, dry_run: bool, force: bool, as_json: bool) -> None:
    """Move an existing Celery schedule into awa-beat: no double and no missed run.

    From the app's beat_schedule (-A alone), django-celery-beat's tables, RedBeat, or a
    celerybeat-schedule file. Each entry's last run becomes its cursor, so its first fire
    is the next one after that run; a stored cursor only ever moves forward. Entries the
    source had disabled are imported paused (existing rows keep their pause). What cannot
    be carried over exactly is listed with the reason, and nothing else is written for it.
    """
    from .._importers.celery_app import load_app
    from .._importers.run import ImportOptions, run_import

    chosen = [name for name, value in (("--from-django", from_django),
                                       ("--from-redbeat", from_redbeat),
                                       ("--from-file", from_file)) if value]
    if len(chosen) > 1:
        raise click.UsageError(f"give one source, not {' and '.join(chosen)}")
    app = load_app(app_spec) if app_spec else context_app()
    if not chosen and app is None:
        raise click.UsageError("nothing to import: give -A APP, --from-django URL, "
                               "--from-redbeat URL or --from-file PATH")
    done = run_import(ImportOptions(
        app=app, from_django=from_django, from_redbeat=from_redbeat, key_prefix=key_prefix,
        from_file=from_file, trust_file=trust_file, timezone=zone, dispatch=dispatch,
        deployment=deployment, database_url=database_url, dry_run=dry_run, force=force),
        lambda url: open_store(url, app))
    plan, written = done.plan, done.written
    if as_json:
        click.echo(json.dumps(done.to_json(), indent=2))
        return
    _print_plan(plan, done.source, done.deployment)
    counts = (f"{len(plan.new)} new, {len(plan.changed)} changed, {len(plan.cursor_moves)} "
              f"cursor(s) moved forward, {len(plan.unchanged)} unchanged, "
              f"{len(plan.not_carried)} not carried over")
    if dry_run:
        click.echo(f"\ndry run, nothing written: {counts}")
    else:
        assert written is not None
        click.echo(f"\nimported {done.imported} schedule(s): {written['inserted']} new, "
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
    from .._importers.planning import ABSENT

    return "(absent)" if value is ABSENT else json.dumps(value, default=str)
