"""``awa-beat doctor``: check the set-up and print the fix for each problem."""

from __future__ import annotations

import sys

import click

from .._ops.doctor import diagnose
from .context import database_url_for, database_url_option, friendly_errors, operations_kwargs
from .format import check_text


@click.command()
@database_url_option
@friendly_errors
def doctor(database_url: str | None) -> None:
    """Check the set-up; print the fix for each problem and exit 1 if there is one."""
    problems = 0
    for check in diagnose(database_url_for(database_url), **operations_kwargs()):
        click.echo(check_text(check))
        problems += not check.ok
    sys.exit(1 if problems else 0)
