"""The log of rows that cannot fire, each problem told once until the row changes.

A row that is invalid, or whose fire the database refuses, stays so on every pass until
someone edits it. Logging it on every pass would flood the log, so each problem is
logged once for each version of the row (its ``updated_at``). The view and the firing
rules share one log, so that a row that goes from one problem to another and back is
told of again.
"""

from __future__ import annotations

import logging
from datetime import datetime

from .._logs import event

# The logger keeps the name it had before the engine was split into modules, so that
# logging configurations that select it by name go on working.
logger = logging.getLogger('awa_beat.engine')

#: Seconds before a schedule whose fire raised a database error is tried again, as Awa
#: does.
RETRY_DELAY = 1.0


class Problems:
    """Logs each row's problem once for each version of the row."""

    def __init__(self) -> None:
        self._told: dict[str, tuple[datetime, str]] = {}

    def _first(self, name: str, updated_at: datetime, problem: str) -> bool:
        key = (updated_at, problem)
        if self._told.get(name) == key:
            return False
        self._told[name] = key
        return True

    def invalid(self, name: str, updated_at: datetime, problem: str) -> None:
        """Tell that the row ``name`` cannot fire because of ``problem``."""
        if self._first(name, updated_at, problem):
            event(logger, logging.ERROR, "schedule.invalid",
                  "beat: schedule %r is invalid and is skipped until it changes: %s",
                  name, problem, schedule=name, problem=problem)

    def failed(self, name: str, updated_at: datetime, error: str) -> None:
        """Tell that the database refused to fire the row ``name`` with ``error``."""
        if self._first(name, updated_at, error):
            event(logger, logging.ERROR, "fire.failed",
                  "beat: firing schedule %r failed, retrying every %.0f s: %s",
                  name, RETRY_DELAY, error, schedule=name, error=error)
