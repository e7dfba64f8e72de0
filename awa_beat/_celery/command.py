"""``celery -A proj awa ...``: awa-beat's operator commands as a Celery sub-command.

Celery imports every ``celery.commands`` entry point whenever any ``celery`` command
starts (workers, beat, inspect, ...). This module imports only click and Celery's
signals, so having awa-beat installed costs those commands nothing; psycopg and the
commands themselves load when ``celery awa`` actually runs.

Because every ``celery worker`` imports it, this is also where a worker learns to record
outcomes from one setting (``awa_beat_track_outcomes``): the ``worker_init`` handler
below reads the app's settings and installs :mod:`awa_beat.outcomes` when it is on.
"""

from __future__ import annotations

import click
from celery import signals


class _LazyGroup(click.Group):
    """The commands of :data:`awa_beat._cli.main`, imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from .._cli import main

        return main.list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        from .._cli import main

        return main.get_command(ctx, cmd_name)


command = _LazyGroup(
    "awa", help="awa-beat's operator commands, configured by the Celery app (-A).")


def _worker_init(sender: object = None, **kwargs: object) -> None:
    from ..outcomes import on_worker_init

    on_worker_init(sender=sender, **kwargs)


signals.worker_init.connect(_worker_init, weak=False, dispatch_uid="awa_beat.outcomes")
