"""The parts that every command shares: they find the Celery app and the database, define
the common options, and turn awa-beat's errors into one line on stderr.

Every entry point finds its database in the same way (:func:`database_url_for`):
``awa-beat ...``, ``celery -A proj awa ...`` (where the app comes from Celery's context)
and ``awa-beat import -A proj`` (where ``-A`` names the app).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, TypeVar

import click

from .._config import DATABASE_URL_ENV
from .._db.database import Database
from .._ops.operations import Operations, find_database_url, settings_for
from ..errors import AwaBeatError

F = TypeVar("F", bound=Callable[..., Any])


def friendly_errors(func: F) -> F:
    """Print an awa-beat error as ``error: ...`` and exit with 1 instead of showing a
    traceback. The README promises exit code 1 for every mistake, "no database" included;
    code 2 stays click's own, for a command line that it cannot parse."""

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

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def context_app() -> Any:
    """Return the Celery app of ``celery -A proj awa ...`` when the command runs that way,
    else None."""
    ctx = click.get_current_context(silent=True)
    return getattr(ctx.find_root().obj, "app", None) if ctx is not None else None


def database_url_for(explicit: str | None, app: Any = None) -> str:
    """Return the database URL that ``--database-url`` (or $AWA_BEAT_DATABASE_URL) gives.
    Without one, return the database of ``app`` (by default the app of ``celery -A``), and
    without an app, the embedded server that a beat started on this host."""
    return find_database_url(explicit, app if app is not None else context_app())


def open_store(explicit: str | None, app: Any = None) -> Database:
    """Return a store on the database of :func:`database_url_for`. The store is not open
    yet: use it in a ``with`` block."""
    return Database(database_url_for(explicit, app), max_size=1)


def operations_kwargs() -> dict[str, Any]:
    """Return the keyword arguments that tell :class:`Operations` about the app.

    Under ``celery -A``, they carry the app's settings (which decide how ``add`` reads an
    entry), its deployment and its configured names (so that orphans can be flagged).
    Otherwise they carry the environment's settings, and no orphans are flagged."""
    app = context_app()
    if app is None:
        return {"settings": settings_for(None)}
    settings = settings_for(app)

    def configured() -> list[str]:
        from .._celery.scheduler import configured_entries

        return list(configured_entries(app, settings))

    return {"deployment": settings.deployment, "configured": configured,
            "settings": settings}


@contextmanager
def operations(explicit: str | None) -> Iterator[Operations]:
    """Open the operations layer on the database of :func:`database_url_for`."""
    with Operations.open(database_url_for(explicit), **operations_kwargs()) as ops:
        yield ops
