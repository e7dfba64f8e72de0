"""``awa-beat status``: the leader, the standbys and the bridge's backlog."""

from __future__ import annotations

import json

import click

from .context import database_url_option, friendly_errors, json_option, operations
from .format import backlog_json, backlog_text, beat_json, fmt, overdue_json


@click.command()
@database_url_option
@json_option
@friendly_errors
def status(database_url: str | None, as_json: bool) -> None:
    """The current leader, the standbys seen recently, the last pass lag, the backlog, and
    the overdue schedules."""
    with operations(database_url) as ops:
        cluster = ops.cluster.status()
    if as_json:
        click.echo(json.dumps({
            "leaders": [beat_json(b) for b in cluster.leaders],
            "standbys": [beat_json(b) for b in cluster.standbys],
            "unpublished_backlog": cluster.backlog,
            "backlog_by_deployment": [backlog_json(b) for b in cluster.backlogs],
            "stranded_awa_jobs": cluster.stranded,
            "overdue": [overdue_json(o) for o in cluster.overdue]}, indent=2))
        return
    if not cluster.leaders:
        click.echo("leader: NONE (no beat holds the lock; is any running?)")
    for b in cluster.leaders:
        lag = f"{b.last_lag_ms:.0f} ms" if b.last_lag_ms is not None else "-"
        click.echo(f"leader: {b.host} pid {b.pid} (deployment {b.deployment}, "
                   f"lock key {b.lock_key}), leading since {fmt(b.leader_since)} UTC, "
                   f"last pass lag {lag}, clock {b.clock}")
    click.echo(f"standbys seen in the last minute: {len(cluster.standbys)}")
    for b in cluster.standbys:
        click.echo(f"  {b.host} pid {b.pid} (deployment {b.deployment}), "
                   f"seen {b.age.total_seconds():.0f} s ago, clock {b.clock}")
    click.echo(f"unpublished Celery jobs (bridge backlog): {cluster.backlog}")
    for backlog in cluster.backlogs:
        click.echo(f"  {backlog_text(backlog)}")
    if cluster.stranded:
        click.echo(f"jobs left for Awa workers, but Awa is not installed here (NOTHING runs "
                   f"them): {sum(cluster.stranded.values())}")
        for deployment, jobs in cluster.stranded.items():
            click.echo(f"  deployment {deployment or '(none)'}: {jobs} job(s)")
    click.echo(f"overdue schedules: {len(cluster.overdue)}")
    for o in cluster.overdue:
        click.echo(f"  {o.name}: {'; '.join(o.reasons)}")
