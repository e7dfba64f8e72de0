"""``celery -A proj awa ...``: awa-beat's operator commands as a Celery sub-command.

Celery imports every ``celery.commands`` entry point whenever any ``celery`` command
starts (workers, beat, inspect, ...). This module imports only click, so having
awa-beat installed costs those commands nothing; psycopg and the commands themselves
load when ``celery awa`` actually runs.
"""

from __future__ import annotations

import click


class _LazyGroup(click.Group):
    """The commands of :data:`awa_beat.cli.main`, imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from .cli import main

        return main.list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        from .cli import main

        return main.get_command(ctx, cmd_name)


command = _LazyGroup(
    "awa", help="awa-beat's operator commands, configured by the Celery app (-A).")
