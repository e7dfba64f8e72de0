"""The ``awa-beat`` command line.

User mistakes (a bad URL, an unreachable database, an unknown name) end in a one-line
error and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click

from . import __version__
from .config import DATABASE_URL_ENV, database_url
from .errors import AwaBeatError
from .store import Store

F = TypeVar("F", bound=Callable[..., Any])


def friendly_errors(func: F) -> F:
    """Print awa-beat errors as ``error: ...`` and exit 1 instead of a traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except AwaBeatError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


database_url_option = click.option(
    "--database-url",
    envvar=DATABASE_URL_ENV,
    show_envvar=True,
    help="PostgreSQL URL, e.g. postgresql://user:pass@host:5432/db.",
)


def open_store(url: str | None) -> Store:
    resolved = database_url(url)
    if resolved is None:
        raise click.UsageError(f"no database: pass --database-url or set {DATABASE_URL_ENV}")
    return Store(resolved).open()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="awa-beat")
def main() -> None:
    """awa-beat: a PostgreSQL-backed, highly available Celery beat."""


@main.command()
@database_url_option
@friendly_errors
def migrate(database_url: str | None) -> None:
    """Create or upgrade awa-beat's tables (safe to run from many replicas at once)."""
    store = open_store(database_url)
    try:
        info = store.migrate()
    finally:
        store.close()
    layout = f"Awa schema v{info.awa_version}" if info.awa_owned else "standalone awa schema"
    if info.applied:
        click.echo(f"migrated to awa-beat schema v{info.version} ({layout})")
    else:
        click.echo(f"already at awa-beat schema v{info.version} ({layout})")


if __name__ == "__main__":  # pragma: no cover
    main()
