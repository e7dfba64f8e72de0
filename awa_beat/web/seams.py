"""Where run outcomes and runtime writes plug into the dashboard, and their
implementations on :class:`~awa_beat._ops.operations.Operations` (:func:`create_app` passes
them by default).

* :class:`Outcomes`: run outcomes, skips and overdue schedules (issue 16). Without one
  the list offers no overdue/failing filter and the history shows the job states only.
* :class:`ScheduleEditor`: adding and editing runtime-managed schedules through
  ``awa_beat.Schedules`` (issue 15). Without one there are no add/edit forms; with one,
  the views call it and nothing else writes a definition.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from .._ops.operations import Operations
from .._ops.records import JobRecord


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


class OperationsOutcomes:
    """:class:`Outcomes` from the run outcomes awa-beat records (docs/outcomes.md)."""

    def __init__(self, ops: Operations) -> None:
        self.ops = ops

    def overdue(self) -> Collection[str]:
        return [o.name for o in self.ops.overdue()]

    def failing(self) -> Collection[str]:
        return self.ops.failing()

    def job_outcomes(self, jobs: Sequence[JobRecord]) -> Mapping[int, str]:
        found: dict[int, str] = {}
        for name in {j.schedule for j in jobs if j.schedule}:
            for occurrence in self.ops.occurrences(name, max(len(jobs), 1)):
                if occurrence.job_id is not None and occurrence.outcome:
                    found[occurrence.job_id] = occurrence.outcome
        return found


class OperationsEditor:
    """:class:`ScheduleEditor` through :meth:`Operations.add` and :meth:`Operations.update`:
    the validation, the ownership rules and the transaction of every runtime write."""

    def __init__(self, ops: Operations) -> None:
        self.ops = ops

    def add(self, name: str, entry: Mapping[str, Any], *, by: str) -> None:
        self.ops.add({name: entry})

    def edit(self, name: str, entry: Mapping[str, Any], *, by: str) -> None:
        # No force: a row a deployment's beat_schedule owns is refused (ScheduleOwned).
        self.ops.update(name, entry)
