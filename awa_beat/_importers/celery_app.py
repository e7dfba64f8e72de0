"""Source: a Celery app's ``beat_schedule`` (``awa-beat import -A APP``).

No run is known, so the cursor is "now", as in a normal sync.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import SourceError, first_line
from .common import NotCarried, Result, convert, dedupe


def load_app(spec: str) -> Any:
    """Import the Celery app from the working directory and return it. The name works as
    it does for ``celery -A``: ``module:app``, ``module.app``, or a module that holds
    ``app`` or ``celery``."""
    from celery import Celery
    from celery.app.utils import find_app

    try:
        app = find_app(spec)
    except Exception as exc:  # The user's module may raise anything at import time.
        raise SourceError(f"cannot load the Celery app {spec!r}: "
                          f"{type(exc).__name__}: {first_line(exc)}") from None
    if not isinstance(app, Celery):
        raise SourceError(f"{spec!r} is a {type(app).__name__}, not a Celery app")
    return app


def from_beat_schedule(beat_schedule: Mapping[str, Any], *, default_timezone: str = "UTC",
                       default_dispatch: str = "awa", default_dst: str = "awa"
                       ) -> list[Result]:
    """Convert every entry of a ``beat_schedule``. No run is known, so the cursor is now."""
    if not isinstance(beat_schedule, Mapping):
        raise SourceError(f"beat_schedule must be a dict of entries, not "
                          f"{type(beat_schedule).__name__}")
    return dedupe(
        convert(str(name), entry, default_timezone=default_timezone,
                default_dispatch=default_dispatch, default_dst=default_dst)
        if isinstance(entry, Mapping) else
        NotCarried(str(name), f"entry must be a dict, not {type(entry).__name__}")
        for name, entry in beat_schedule.items())

