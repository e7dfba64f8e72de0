"""``awa-beat history``: the recent fires and the jobs they made."""

from __future__ import annotations

import json

import click

from .context import database_url_option, friendly_errors, json_option, operations
from .format import fire_label, job_json, table, task_id


@click.command()
@database_url_option
@click.argument("name", required=False)
@click.option("-n", "count", default=20, show_default=True, help="How many fires.")
@json_option
@friendly_errors
def history(database_url: str | None, name: str | None, count: int, as_json: bool) -> None:
    """Recent fires (of NAME, or of every schedule): fire time, job, state, task id."""
    with operations(database_url) as ops:
        jobs = ops.history(name, count)
    if as_json:
        click.echo(json.dumps([job_json(j) for j in jobs], indent=2))
        return
    click.echo(table(["JOB", "SCHEDULE", "FIRE TIME (UTC)", "STATE", "TASK ID"], [
        [str(j.job_id), j.schedule or "", fire_label(j), j.state, task_id(j)] for j in jobs]))
