"""A plain implementation of the engine's row table, to test the packed one against.

:class:`~awa_beat._engine.table.RowTable` packs every row into bytes, shares calendars
between rows through a cache of kinds, keeps a queue with lazy removal, and remembers
answers for the rows of a batch. Each of those saves memory or time at a million rows,
and each is a place for a bug to hide. :class:`ReferenceTable` answers the same questions
with a dict of small objects and no cleverness: every row keeps its own record, the next
due row is found by looking at every row, and nothing is remembered between calls. The
tests run random sequences of operations on both and require the same answers, the way
psycopg tests its C transformer against the pure-Python one.

The engine never uses this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime

from .._db.records import CronRow, CronState, columns_of
from .._schedules.cron import epoch_seconds
from .._schedules.fire_times import POLICIES, Calendar, calendar_for, next_epoch_from
from ..errors import ScheduleError
from .table import LIMITS_PROBLEM, Kind, Row


class _Held:
    """One row held: its record, when it is next due, and why it cannot fire."""

    __slots__ = ("due", "problem", "record")

    def __init__(self, record: CronState, due: float | None, problem: str | None) -> None:
        self.record = record
        self.due = due
        self.problem = problem


def _kind(cron_expr: str, timezone: str, missed_fire_policy: str) -> Kind:
    """The calendar of a triple, parsed afresh, or the problem that stops it."""
    calendar = None
    problem = None
    try:
        calendar = calendar_for(cron_expr, timezone, cache=False)
    except ScheduleError as exc:
        problem = str(exc)
    if problem is None and missed_fire_policy not in POLICIES:
        problem = f"unknown missed-fire policy {missed_fire_policy!r}"
    return Kind(cron_expr, timezone, missed_fire_policy,
                calendar if problem is None else None, problem, b"")


class ReferenceTable:
    """The interface of :class:`~awa_beat._engine.table.RowTable`, with plain objects."""

    def __init__(self) -> None:
        self._rows: dict[str, _Held] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, name: object) -> bool:
        return name in self._rows

    def names(self) -> list[str]:
        return list(self._rows)

    def row(self, name: str) -> CronState | None:
        held = self._rows.get(name)
        return None if held is None else held.record

    def rows(self) -> list[CronState]:
        return [held.record for held in self._rows.values()]

    def due(self, name: str) -> float | None:
        held = self._rows.get(name)
        return None if held is None else held.due

    def next_due(self) -> float | None:
        return min((held.due for held in self._rows.values() if held.due is not None),
                   default=None)

    def holds(self, row: CronRow) -> bool:
        held = self._rows.get(row.name)
        return held is not None and held.record == CronState(*row)

    def census(self, before: float) -> tuple[int, int, int, int]:
        paused = invalid = overdue = 0
        for held in self._rows.values():
            if held.problem is not None:
                invalid += 1
            elif held.record.paused_at is not None:
                paused += 1
            elif held.due is not None and held.due < before:
                overdue += 1
        return len(self._rows), paused, invalid, overdue

    @contextmanager
    def batch(self) -> Iterator[None]:
        # Nothing is remembered between calls, so a batch changes nothing.
        yield

    def load(self, rows: Iterable[CronRow], *, compare: bool = True) -> list[Row]:
        invalid = []
        for row in rows:
            if compare and self.holds(row):
                continue
            taken = self.put(CronState(*row), compare=False)
            if taken is not None and taken.problem is not None:
                invalid.append(taken)
        return invalid

    def put(self, row: CronState | CronRow, *, compare: bool = True) -> Row | None:
        record = CronState(row.name, *columns_of(row))
        if compare and self.holds(CronRow(record.name, *columns_of(record))):
            return None
        kind = _kind(record.cron_expr, record.timezone, record.missed_fire_policy)
        return self.schedule(Row(record.name, kind, *columns_of(record)[3:]))

    def put_limits_problem(self, row: CronState) -> Row:
        kind = Kind(row.cron_expr, row.timezone, row.missed_fire_policy, None,
                    LIMITS_PROBLEM, b"")
        held = Row(row.name, kind, *columns_of(row)[3:])
        self._rows[row.name] = _Held(row, None, LIMITS_PROBLEM)
        return held

    def schedule(self, row: Row, *, at: float | None = None) -> Row:
        if row.calendar is None or row.paused_at is not None:
            row.due = None
        else:
            row.due = at if at is not None else self.first_due(
                row.calendar, row.last_enqueued_at, row.created_at)
        record = CronState(row.name, row.cron_expr, row.timezone, row.missed_fire_policy,
                           row.last_enqueued_at, row.created_at, row.updated_at,
                           row.paused_at)
        self._rows[row.name] = _Held(record, row.due, row.problem)
        return row

    def remove(self, name: str) -> None:
        self._rows.pop(name, None)

    def get(self, name: str) -> Row | None:
        held = self._rows.get(name)
        if held is None:
            return None
        record = held.record
        if held.problem == LIMITS_PROBLEM:
            kind = Kind(record.cron_expr, record.timezone, record.missed_fire_policy, None,
                        LIMITS_PROBLEM, b"")
        else:
            kind = _kind(record.cron_expr, record.timezone, record.missed_fire_policy)
        row = Row(name, kind, *columns_of(record)[3:])
        row.due = held.due
        return row

    def pop_due(self, now: float) -> tuple[float, Row] | None:
        due = [(held.due, name) for name, held in self._rows.items()
               if held.due is not None and held.due <= now]
        if not due:
            return None
        at, name = min(due)
        self._rows[name].due = None
        row = self.get(name)
        assert row is not None
        return at, row

    def first_due(self, calendar: Calendar, last_enqueued_at: datetime | None,
                  created_at: datetime) -> float | None:
        # Awa fires a new row's latest fire from a minute before it was created, and a
        # fired row's first fire after its cursor.
        if last_enqueued_at is None:
            found = next_epoch_from(calendar, epoch_seconds(created_at) - 60, after=False)
        else:
            found = next_epoch_from(calendar, epoch_seconds(last_enqueued_at), after=True)
        return None if found is None else float(found)

