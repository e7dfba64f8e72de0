"""Where run outcomes and runtime writes plug into the dashboard, and their
implementations on :class:`~awa_beat._ops.operations.Operations`, which
:func:`create_app` passes by default.

* :class:`Outcomes` gives run outcomes, skips and overdue schedules (issue 16). Without
  it, the list offers no overdue or failing filter, and the history shows the job states
  only.
* :class:`ScheduleEditor` adds and edits runtime-managed schedules through
  ``awa_beat.Schedules`` (issue 15). Without it there are no add and edit forms; with it,
  the views call it and nothing else writes a definition.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from .._ops.operations import Operations
from .._ops.records import JobRecord


class Outcomes(Protocol):
    def overdue(self) -> Collection[str]:
        """Return the names of the schedules whose fire is late."""

    def failing(self) -> Collection[str]:
        """Return the names of the schedules whose last run failed."""

    def job_outcomes(self, jobs: Sequence[JobRecord]) -> Mapping[int, str]:
        """Return what became of each job, by id: ran, failed, skipped, ..."""


class ScheduleEditor(Protocol):
    def add(self, name: str, entry: Mapping[str, Any], *, by: str) -> None:
        """Register ``entry`` (a ``beat_schedule`` entry) as a runtime-managed schedule."""

    def edit(self, name: str, entry: Mapping[str, Any], *, by: str) -> None:
        """Change the runtime-managed schedule ``name``; refuse one a deployment owns."""


class OperationsOutcomes:
    """:class:`Outcomes` read from the run outcomes that awa-beat records (docs/outcomes.md)."""

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
    """:class:`ScheduleEditor` through :meth:`Operations.add` and :meth:`Operations.update`,
    which bring the validation, the ownership rules and the transaction of every runtime
    write."""

    def __init__(self, ops: Operations) -> None:
        self.ops = ops

    def add(self, name: str, entry: Mapping[str, Any], *, by: str) -> None:
        self.ops.add({name: entry})

    def edit(self, name: str, entry: Mapping[str, Any], *, by: str) -> None:
        # There is no force, so a row that a deployment's beat_schedule owns is refused
        # (ScheduleOwned).
        self.ops.update(name, entry)
