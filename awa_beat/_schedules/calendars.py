"""Schedule types of awa-beat's own, for what Celery has no class for.

``at(instant)`` fires once, at one instant (django-celery-beat's ``clocked`` schedule,
and what ``awa-beat add --at`` creates)::

    schedules.add("new-year", task="greet", schedule=at(datetime(2027, 1, 1, tzinfo=UTC)))

Celery's ``crontab``, ``schedule``, ``solar``, numbers and ``timedelta`` are used as they
are; see :mod:`awa_beat._schedules.spec` for how each is stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["at"]


@dataclass(frozen=True)
class at:  # The name is lower case, like Celery's crontab and solar.
    """Fire once, at ``instant`` (an aware datetime; sub-seconds are dropped)."""

    instant: datetime

    def __post_init__(self) -> None:
        if not isinstance(self.instant, datetime):
            raise TypeError(f"at() needs a datetime, not {type(self.instant).__name__}")
        if self.instant.tzinfo is None or self.instant.utcoffset() is None:
            raise ValueError(f"at() needs an aware datetime (with a zone), not {self.instant!r}")
