"""``awa-beat migrate``."""

from __future__ import annotations

import click

from .context import database_url_option, friendly_errors, open_store


@click.command()
@database_url_option
@friendly_errors
def migrate(database_url: str | None) -> None:
    """Create or upgrade awa-beat's tables (safe to run from many replicas at once)."""
    with open_store(database_url) as store:
        info = store.migrate()
    layout = f"Awa schema v{info.awa_version}" if info.awa_owned else "standalone awa schema"
    if info.applied:
        click.echo(f"migrated to awa-beat schema v{info.version} ({layout})")
    else:
        click.echo(f"already at awa-beat schema v{info.version} ({layout})")
