"""``awa-beat history``: the recent fires and what became of them."""

from __future__ import annotations

import json

import click

from .context import database_url_option, friendly_errors, json_option, operations
from .format import (
    fire_label,
    job_json,
    occurrence_json,
    occurrence_outcome,
    occurrence_run_time,
    occurrence_time,
    table,
    task_id,
)


@click.command()
@database_url_option
@click.argument("name", required=False)
@click.option("-n", "count", default=20, show_default=True, help="How many occurrences.")
@json_option
@friendly_errors
def history(database_url: str | None, name: str | None, count: int, as_json: bool) -> None:
    """Recent fires. With NAME, every occurrence of that schedule in order: fired (job,
    outcome, run time), skipped by the overlap policy, or left out by a coalesce."""
    with operations(database_url) as ops:
        if name is not None:
            found = ops.occurrences(name, count)
        else:
            jobs = ops.history(None, count)
    if name is None:
        if as_json:
            click.echo(json.dumps([job_json(j) for j in jobs], indent=2))
            return
        click.echo(table(["JOB", "SCHEDULE", "FIRE TIME (UTC)", "STATE", "TASK ID"], [
            [str(j.job_id), j.schedule or "", fire_label(j), j.state, task_id(j)]
            for j in jobs]))
        return
    if as_json:
        click.echo(json.dumps([occurrence_json(o) for o in found], indent=2))
        return
    click.echo(table(["FIRE TIME (UTC)", "KIND", "JOB", "OUTCOME", "RUN TIME", "WORKER",
                      "DETAIL"], [
        [occurrence_time(o), o.kind, str(o.job_id or "-"), occurrence_outcome(o),
         occurrence_run_time(o), o.worker or "-", o.error or o.reason or ""]
        for o in found]))
