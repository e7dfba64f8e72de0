"""``awa-beat history``: the recent fires and what became of them."""

from __future__ import annotations

import json

import click

from .context import database_url_option, friendly_errors, json_option, operations
from .format import occurrence_json, occurrence_table


@click.command()
@database_url_option
@click.argument("name", required=False)
@click.option("-n", "count", default=20, show_default=True, help="How many occurrences.")
@json_option
@friendly_errors
def history(database_url: str | None, name: str | None, count: int, as_json: bool) -> None:
    """Recent occurrences, of every schedule or of NAME, newest first: fired (job, outcome,
    run time), triggered, skipped by the overlap policy, or left out by a coalesce."""
    with operations(database_url) as ops:
        found = ops.occurrences(name, count)
    if as_json:
        click.echo(json.dumps([occurrence_json(o) for o in found], indent=2))
        return
    click.echo(occurrence_table(found, schedules=name is None))
