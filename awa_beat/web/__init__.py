"""awa-beat's web dashboard: a WSGI application over the operations layer.

Run it with ``awa-beat web`` (``pip install 'awa-beat[web]'``), or mount
:func:`create_app`'s callable in any WSGI server or application (an ASGI one through a
WSGI adapter). See docs/web.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._auth import WebConfig
from .seams import OperationsEditor, OperationsOutcomes, Outcomes, ScheduleEditor

if TYPE_CHECKING:
    from ._app import Dashboard


def __getattr__(name: str) -> Any:
    # Only the app itself needs Jinja2 (the web extra). The pure parts (describe, which
    # the Django admin uses) import without it.
    if name == "Dashboard":
        from ._app import Dashboard

        return Dashboard
    raise AttributeError(name)

__all__ = ["Dashboard", "OperationsEditor", "OperationsOutcomes", "Outcomes", "ScheduleEditor",
           "WebConfig", "create_app"]


def create_app(database_url: str | None = None, *, config: WebConfig | None = None,
               operations: Any = None, outcomes: Outcomes | None = None,
               editor: ScheduleEditor | None = None, pool_size: int = 4,
               environ: Mapping[str, str] | None = None,
               **config_kwargs: Any) -> Dashboard:
    """Return the dashboard as a WSGI callable.

    The dashboard works on ``operations`` (an
    :class:`~awa_beat._ops.operations.Operations`, which it leaves open), or else on a
    store of its own for ``database_url`` (by default $AWA_BEAT_DATABASE_URL, else the
    embedded server), which ``app.close()`` closes. ``config`` (or its fields as keyword
    arguments: ``password=``, ``read_only=``, ...) says how the dashboard authenticates.
    ``outcomes`` and ``editor`` default to the operations' own (the run outcomes, and the
    add and edit forms of runtime schedules).
    """
    from .._db.database import Database
    from .._ops.operations import Operations, find_database_url
    from ._app import Dashboard

    if config is None:
        config = WebConfig(**config_kwargs)
    elif config_kwargs:
        raise TypeError("give config or its fields, not both")
    if operations is not None:
        return Dashboard(operations, config,
                         outcomes=outcomes or OperationsOutcomes(operations),
                         editor=editor or OperationsEditor(operations))
    url = find_database_url(database_url, environ=environ)
    store = Database(url, max_size=pool_size, origin="awa-beat web")
    store.open()
    ops = Operations(store)
    return Dashboard(ops, config, outcomes=outcomes or OperationsOutcomes(ops),
                     editor=editor or OperationsEditor(ops), close=ops.close)
