"""``awa-beat explain NAME --at INSTANT``: what happened or will happen to a schedule at one
instant, and why."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import click

from .._ops.operations import utcnow
from .._schedules.explain import Explanation, parse_instant
from ..errors import ValidationError
from .context import database_url_option, friendly_errors, json_option, operations
from .format import fmt, iso


def _instant(name: str, text: str) -> datetime:
    """Read ``--at`` (:func:`awa_beat._schedules.explain.parse_instant`)."""
    try:
        return parse_instant(text, utcnow())
    except ValueError as exc:
        raise ValidationError([(name, "--at", str(exc))]) from None


def explanation_json(found: Explanation) -> dict[str, Any]:
    """Return an explanation's JSON shape (instants in UTC)."""
    return {
        "name": found.name, "at": iso(found.at), "kind": found.kind,
        "summary": found.summary, "details": list(found.details),
        "fire_time": iso(found.fire_time), "previous": iso(found.previous),
        "next": iso(found.next), "dst": found.dst or None, "run_at": iso(found.run_at),
        "timezone": found.timezone, "now": iso(found.now),
        "jobs": [{"kind": j.kind, "job_id": j.job_id, "fire_time": iso(j.fire_time),
                  "state": j.state, "outcome": j.outcome, "created_at": iso(j.created_at),
                  "run_at": iso(j.run_at), "started_at": iso(j.started_at),
                  "finished_at": iso(j.finished_at), "error": j.error,
                  "task_id": j.task_id} for j in found.jobs],
        "occurrences": [{"kind": o.kind, "fire_time": iso(o.fire_time),
                         "last_fire_time": iso(o.last_fire_time), "count": o.count,
                         "reason": o.reason, "recorded_at": iso(o.recorded_at)}
                        for o in found.occurrences],
    }


@click.command("explain")
@database_url_option
@click.argument("name")
@click.option("--at", "at_text", required=True, metavar="INSTANT",
              help="The instant: ISO 8601 with a UTC offset or Z, or 'now'. Any instant "
                   "within a fire time's second is that fire time.")
@json_option
@friendly_errors
def explain_(database_url: str | None, name: str, at_text: str, as_json: bool) -> None:
    """What happened or will happen to NAME at INSTANT, and why: fired (the job and its
    outcome), triggered by hand, backfilled, buffered, coalesced, skipped (overlap or the
    catch-up window), before the schedule existed, out of its bounds, paused (by whom and
    why), retired, due, will fire; or not a fire time (the fire times either side). A DST
    gap or fold that moved or repeated the fire is named."""
    at = _instant(name, at_text)
    with operations(database_url) as ops:
        found = ops.explain(name, at)
    if as_json:
        click.echo(json.dumps(explanation_json(found), indent=2))
        return
    click.echo(f"{found.name} at {fmt(found.at)} UTC ({fmt(found.at, found.timezone)}): "
               f"{found.kind.replace('_', ' ')}")
    click.echo(found.summary)
    for line in found.details:
        click.echo(f"  - {line}")
