"""``awa-beat list|show|pause|resume|trigger|remove|export``: one schedule or many."""

from __future__ import annotations

import json
from datetime import datetime

import click

from .._exporting import python_module
from .._schedules.cron import load_timezone
from .context import database_url_option, friendly_errors, json_option, operations
from .format import (
    bounds_lines,
    fmt,
    iso,
    job_json,
    last_fire_text,
    next_fire_text,
    occurrence_json,
    occurrence_table,
    schedule_json,
    table,
)


@click.command("list")
@database_url_option
@click.argument("pattern", required=False)
@json_option
@friendly_errors
def list_(database_url: str | None, pattern: str | None, as_json: bool) -> None:
    """Every schedule (PATTERN: a SQL LIKE pattern on the name, e.g. 'report-%')."""
    with operations(database_url) as ops:
        views = ops.schedules(pattern)
    if as_json:
        click.echo(json.dumps([{**schedule_json(v), "orphan": v.orphan} for v in views],
                              indent=2))
        return
    rows = []
    for view in views:
        row = view.row
        paused = f"since {fmt(row.paused_at)} by {row.paused_by or '?'}" if row.paused_at else ""
        owner = view.owner_text
        if view.orphan:
            owner += " (orphan: not in beat_schedule)"
        rows.append([
            row.name, row.cron_expr, row.timezone, row.missed_fire_policy,
            next_fire_text(view),
            fmt(view.next_fire, row.timezone) if view.next_fire and not view.paused else "",
            last_fire_text(view), paused, owner,
        ])
    click.echo(table(["NAME", "SCHEDULE", "TZ", "POLICY", "NEXT FIRE (UTC)", "NEXT (LOCAL)",
                      "LAST FIRE (UTC)", "PAUSED", "OWNER"], rows))


@click.command()
@database_url_option
@click.argument("name")
@click.option("--by", default=None, help="Who paused it (shown by list).")
@friendly_errors
def pause(database_url: str | None, name: str, by: str | None) -> None:
    """Stop NAME's automatic fires (survives redeploys; trigger still works)."""
    with operations(database_url) as ops:
        ops.pause(name, by)
    click.echo(f"paused {name}")


@click.command()
@database_url_option
@click.argument("name")
@friendly_errors
def resume(database_url: str | None, name: str) -> None:
    """Resume NAME; its missed-fire policy decides what is caught up."""
    with operations(database_url) as ops:
        ops.resume(name)
    click.echo(f"resumed {name}")


@click.command()
@database_url_option
@click.argument("name")
@friendly_errors
def trigger(database_url: str | None, name: str) -> None:
    """Enqueue one job for NAME now, even while paused; the schedule is unchanged."""
    with operations(database_url) as ops:
        job_id = ops.trigger(name)
    click.echo(f"triggered {name}: job {job_id}")


@click.command()
@database_url_option
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@friendly_errors
def remove(database_url: str | None, name: str, yes: bool) -> None:
    """Delete NAME's row (jobs it already fired stay)."""
    with operations(database_url) as ops:
        ops.get(name)  # An unknown name is an error before any question is asked.
        if not yes:
            click.confirm(f"remove schedule {name!r}?", abort=True)
        ops.remove(name)
    click.echo(f"removed {name}")


@click.command()
@database_url_option
@click.argument("name")
@click.option("-n", "count", default=10, show_default=True, help="How many fires and jobs.")
@json_option
@friendly_errors
def show(database_url: str | None, name: str, count: int, as_json: bool) -> None:
    """NAME's whole row, its next fire times (DST changes marked) and its last jobs."""
    with operations(database_url) as ops:
        view = ops.get(name)
        jobs = ops.history(name, count)
        found = ops.occurrences(name, count)
        upcoming = ops.upcoming(view.row, count=count)
        runs_left = ops.runs_left(view.row)
        # Why it is paused: an operator's note, or awa-beat's after failures in a row.
        note = ops.pause_note(name) if view.row.paused_at is not None else None
    row = view.row
    if as_json:
        click.echo(json.dumps({
            **schedule_json(view), "kind": row.kind, "queue": row.queue, "args": row.args,
            "priority": row.priority, "max_attempts": row.max_attempts, "tags": row.tags,
            "metadata": row.metadata, "created_at": iso(row.created_at),
            "updated_at": iso(row.updated_at), "runs_left": runs_left, "pause_note": note,
            "next_fires": [iso(f.at) for f in upcoming],
            "last_jobs": [job_json(j) for j in jobs],
            "history": [occurrence_json(o) for o in found],
        }, indent=2, default=str))
        return
    for label, value in [
        ("name", row.name), ("schedule", row.cron_expr), ("time zone", row.timezone),
        ("task", row.kind), ("args", json.dumps(row.args)),
        ("options", json.dumps((row.metadata or {}).get("celery", {}).get("options", {}))),
        ("policy", row.missed_fire_policy), ("awa queue", row.queue),
        ("priority", str(row.priority)), ("max attempts", str(row.max_attempts)),
        *bounds_lines(view.bounds),
        ("next fire", next_fire_text(view) + (
            f" (if resumed: {fmt(view.next_fire)} UTC)"
            if view.paused and not row.retired and view.next_fire else "")),
        ("last fire", last_fire_text(view)),
        ("cursor", f"{fmt(row.last_enqueued_at)} UTC"),
    ] + ([("runs left", str(runs_left))] if runs_left is not None else []) + [
        ("paused", f"since {fmt(row.paused_at)} UTC by {row.paused_by or '?'}"
         + (f": {note}" if note else "") if row.paused_at else "no"),
        ("owner", view.owner_text if row.deployment else "(not registered by awa-beat)"),
        ("created", f"{fmt(row.created_at)} UTC"), ("updated", f"{fmt(row.updated_at)} UTC"),
    ] + ([("INVALID", view.problem)] if view.problem else []) + (
            [("NEVER FIRES", view.never_fires)] if view.never_fires else []):
        click.echo(f"{label + ':':<14} {value}")
    click.echo("\nnext fires" + (" (if resumed):" if view.paused else ":"))
    click.echo(table(["UTC", "LOCAL", ""], [
        [fmt(f.at), fmt(f.at, row.timezone), f.note] for f in upcoming]) if upcoming
        else "  (none)")
    click.echo("\nhistory:")
    click.echo(occurrence_table(found) if found else "  (none)")


@click.command()
@database_url_option
@click.option("--format", "fmt_", type=click.Choice(["python", "json"]), default="python",
              show_default=True)
@click.option("--timezone", "app_timezone", metavar="ZONE",
              help="python: the time zone of the Celery app that will load the module (its "
                   "`timezone`); crontabs in it are written as plain crontabs (default: "
                   "every crontab is pinned to its own zone).")
@click.argument("pattern", required=False)
@friendly_errors
def export(database_url: str | None, fmt_: str, app_timezone: str | None,
           pattern: str | None) -> None:
    """The stored schedules as a beat_schedule module a stock celery beat runs (entries
    Celery cannot run as awa-beat does are comments saying why), or as JSON (every entry,
    in awa-beat's form, which `awa-beat import` reads back)."""
    if app_timezone is not None:
        load_timezone(app_timezone)
    with operations(database_url) as ops:
        if fmt_ == "json":
            click.echo(json.dumps(ops.export_entries(pattern), indent=2, default=_json_value))
            return
        rows = ops.export_rows(pattern)
    click.echo(python_module(rows, app_timezone=app_timezone), nl=False)


def _json_value(value: object) -> str:
    """Encode a bound given as a datetime in ISO 8601, the form that an import reads back."""
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")
