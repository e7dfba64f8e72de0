"""``awa-beat backfill``: one job for each fire time of a schedule in a past range."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import click

from .._ops.records import BackfillResult
from .._schedules.backfill import BACKFILL_LIMIT, BACKFILL_MAX_LIMIT, OVERLAPS
from .._schedules.fire_times import parse_iso
from ..errors import BackfillRefused
from .context import database_url_option, friendly_errors, json_option, operations
from .format import fmt, iso

#: The longest instant or limit text read; anything longer is refused as it is.
_TEXT_LIMIT = 64


def _instant(name: str, option: str, text: str) -> datetime:
    """Read ``--from`` or ``--to``: ISO 8601 with an offset (or Z). Without one the
    instant would depend on the host's zone, so it is refused."""
    shown = text if len(text) <= _TEXT_LIMIT else text[:_TEXT_LIMIT] + "..."
    try:
        t = parse_iso(text.strip()[:_TEXT_LIMIT + 1])
    except ValueError:
        raise BackfillRefused(f"backfill of {name!r} refused: {option} {shown!r} is not an "
                              "instant: give ISO 8601 with an offset or Z, e.g. "
                              "2026-11-01T00:00:00Z; nothing was written") from None
    if t.tzinfo is None:
        raise BackfillRefused(f"backfill of {name!r} refused: {option} {shown!r} has no "
                              "offset: add one or Z (e.g. 2026-11-01T00:00:00Z); nothing "
                              "was written")
    return t


def _limit(name: str, text: str | None) -> int:
    if text is None:
        return BACKFILL_LIMIT
    value = text.strip()
    if not (value.isascii() and value.isdigit()) or len(value) > 8:
        raise BackfillRefused(f"backfill of {name!r} refused: --limit {text[:_TEXT_LIMIT]!r} "
                              f"is not a whole number from 1 to {BACKFILL_MAX_LIMIT}; "
                              "nothing was written")
    return int(value)


def backfill_json(found: BackfillResult) -> dict[str, Any]:
    return {"schedule": found.schedule, "from": iso(found.start), "to": iso(found.end),
            "dry_run": found.dry_run, "inserted": found.inserted_count,
            "skipped": found.skipped_count, "first": iso(found.first), "last": iso(found.last),
            "inserted_fire_times": [iso(t) for t in found.inserted],
            "skipped_fire_times": [iso(t) for t in found.skipped],
            "job_ids": list(found.job_ids)}


def backfill_text(found: BackfillResult) -> str:
    """The counts, and the first and last fire times of the range."""
    head = (f"dry run, nothing written: {found.schedule}: would insert "
            f"{found.inserted_count} job(s)" if found.dry_run else
            f"backfilled {found.schedule}: {found.inserted_count} job(s) inserted")
    lines = [f"{head}, {found.skipped_count} fire time(s) skipped (they had a job already)"]
    if found.first is None:
        lines.append("the range has no fire time")
    else:
        lines.append(f"fire times (UTC): {fmt(found.first)} .. {fmt(found.last)}")
    return "\n".join(lines)


@click.command()
@database_url_option
@click.argument("name")
@click.option("--from", "start_text", required=True, metavar="T",
              help="The first instant of the range (ISO 8601 with an offset or Z; included).")
@click.option("--to", "end_text", required=True, metavar="T",
              help="The last instant of the range (ISO 8601 with an offset or Z; included).")
@click.option("--dry-run", is_flag=True, help="Say what would be inserted; write nothing.")
@click.option("--limit", "limit_text", metavar="N",
              help=f"The most fire times this call inserts (default {BACKFILL_LIMIT}, at "
                   f"most {BACKFILL_MAX_LIMIT}); a range with more is refused.")
@click.option("--overlap", default="allow", show_default=True, metavar="allow|skip",
              help=f"One of {', '.join(OVERLAPS)}: skip refuses while a run of NAME has "
                   "not finished.")
@json_option
@friendly_errors
def backfill(database_url: str | None, name: str, start_text: str, end_text: str,
             dry_run: bool, limit_text: str | None, overlap: str, as_json: bool) -> None:
    """One job for each fire time of NAME's calendar from --from to --to, in order, each
    as if NAME had fired then (its fire time the nominal one). A fire time that has a job
    already is skipped, so a backfill run twice adds nothing twice. The cursor is not
    moved; fire times after it, NAME's own to fire, are refused. Works while paused."""
    start = _instant(name, "--from", start_text)
    end = _instant(name, "--to", end_text)
    limit = _limit(name, limit_text)
    with operations(database_url) as ops:
        found = ops.backfill(name, start, end, overlap=overlap, limit=limit,
                             dry_run=dry_run, source="cli")
    if as_json:
        click.echo(json.dumps(backfill_json(found), indent=2))
        return
    click.echo(backfill_text(found))
