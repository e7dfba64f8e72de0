"""``awa-beat preview``: the next fires of a stored schedule or of a calendar given on the
command line, with DST changes marked and warnings about the calendar."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import click

from .._ops.operations import utcnow
from .._schedules.fire_times import parse_iso
from .._schedules.preview import MAX_COUNT, Preview, preview
from .context import database_url_option, friendly_errors, json_option, operations
from .format import fmt, iso, table


def _instant(value: str | None) -> datetime | None:
    """Read ``--until``: ISO 8601, in UTC unless it carries an offset."""
    if value is None:
        return None
    try:
        t = parse_iso(value.strip())
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an instant: give ISO 8601, e.g. "
                                 "2027-01-01T00:00:00Z", param_hint="'--until'") from None
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def preview_json(name: str | None, found: Preview) -> dict[str, Any]:
    """Return a preview's JSON shape (the fires in UTC, and on the zone's wall clock)."""
    return {
        "name": name, "schedule": found.cron_expr, "timezone": found.timezone,
        "description": found.description, "after": iso(found.start),
        "fires": [{"at": iso(f.at), "local": f.local.isoformat(), "mark": f.mark or None,
                   "note": f.note or None, "run_at": iso(f.run_at)} for f in found.fires],
        "more": found.more, "warnings": list(found.warnings), "notices": list(found.notices),
    }


@click.command("preview")
@database_url_option
@click.argument("name", required=False)
@click.option("--cron", "expr", metavar="EXPR",
              help="Preview this calendar instead of a stored schedule: an Awa cron "
                   "expression or one of awa-beat's markers (@every 7s, @rrule ...).")
@click.option("--tz", "zone", metavar="ZONE",
              help="The time zone of --cron (default UTC).")
@click.option("--count", "-n", type=click.IntRange(1, MAX_COUNT), default=None,
              help=f"How many fires (default 10, at most {MAX_COUNT}).")
@click.option("--until", "until_text", metavar="T",
              help="Every fire up to this instant instead (ISO 8601, UTC unless it has "
                   f"an offset; at most {MAX_COUNT}).")
@json_option
@friendly_errors
def preview_(database_url: str | None, name: str | None, expr: str | None,
             zone: str | None, count: int | None, until_text: str | None,
             as_json: bool) -> None:
    """The next fires of NAME, or of --cron EXPR --tz ZONE, with DST changes marked (a
    fire moved by a gap, a repeated hour), and warnings about a calendar that fires twice
    or moves in a DST change, never fires, or fires every second. A paused schedule lists
    the fires it would have if resumed; a retired one none."""
    if (name is None) == (expr is None):
        raise click.UsageError("give a schedule's NAME or --cron EXPR, not both or neither")
    if zone is not None and expr is None:
        raise click.UsageError("--tz goes with --cron (a stored schedule has its own zone)")
    if count is not None and until_text is not None:
        raise click.UsageError("give --count or --until, not both")
    until = _instant(until_text)
    if expr is not None:
        found = preview(expr, zone or "UTC", utcnow(), count=count, until=until,
                        name="--cron")
    else:
        assert name is not None
        with operations(database_url) as ops:
            found = ops.preview(name, count=count, until=until)
    if as_json:
        click.echo(json.dumps(preview_json(name, found), indent=2))
        return
    click.echo(f"schedule: {found.cron_expr} ({found.timezone})")
    if found.description:
        click.echo(f"in words: {found.description}")
    for notice in found.notices:
        click.echo(f"note: {notice}")
    click.echo(f"\nnext fires after {fmt(found.start)} UTC:")
    jittered = any(f.run_at is not None for f in found.fires)
    if found.fires:
        click.echo(table(["UTC", "LOCAL", "DST", *(["RUNS AT (JITTER)"] if jittered else [])], [
            [fmt(f.at), fmt(f.at, found.timezone),
             f"{f.mark.upper()}: {f.note}" if f.mark in ("gap", "fold") else f.note,
             *([f.run_at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if f.run_at else "-"]
               if jittered else [])]
            for f in found.fires]))
    else:
        click.echo("  (none)")
    if found.more:
        click.echo("  ... (more fires follow)")
    for warning in found.warnings:
        click.echo(f"warning: {warning}")
