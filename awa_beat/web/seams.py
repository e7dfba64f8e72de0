"""Where work that is not on this branch plugs into the dashboard.

* :class:`Outcomes`: run outcomes, skips and overdue schedules (issue 16). Without one
  the list offers no overdue/failing filter and the history shows the job states only.
* :class:`ScheduleEditor`: adding and editing runtime-managed schedules through
  ``awa_beat.Schedules`` (issue 15). Without one there are no add/edit forms; with one,
  the views call it and nothing else writes a definition.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from ..operations import JobRecord


class Outcomes(Protocol):
    def overdue(self) -> Collection[str]:
        """Names of the schedules whose fire is late."""

    def failing(self) -> Collection[str]:
        """Names of the schedules whose last run failed."""

    def job_outcomes(self, jobs: Sequence[JobRecord]) -> Mapping[int, str]:
        """What became of each job (by id): ran, failed, skipped, ..."""


class ScheduleEditor(Protocol):
    def add(self, name: str, entry: Mapping[str, Any], *, by: str) -> None:
        """Register ``entry`` (a ``beat_schedule`` entry) as a runtime-managed schedule."""

    def edit(self, name: str, entry: Mapping[str, Any], *, by: str) -> None:
        """Change the runtime-managed schedule ``name``; refuse one a deployment owns."""
