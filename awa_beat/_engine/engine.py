"""The evaluator: which schedules are due, and firing them. No Celery in here.

:class:`Engine` is the face the runtime, the metrics and the tests see. Its work is done
by four parts, each in a module of its own:

* :mod:`~awa_beat._engine.table` holds every row of ``awa.cron_jobs``, packed, with the
  queue of when each is next due (:mod:`~awa_beat._engine.due_queue`). It is the only
  module that knows how a row is packed.
* :mod:`~awa_beat._engine.view` keeps the table in step with the database: a load at
  start, a refresh of what changed, and a sweep of the whole table at a bounded pace.
* :mod:`~awa_beat._engine.firing` turns the due rows into fire requests and applies what
  the fire statement did. Every firing rule lives there.
* :mod:`~awa_beat._engine.problems` logs each row that cannot fire, once per version.

:meth:`Engine.run_pass` fires what is due (one batched statement per FIRE_BATCH
schedules), refreshes from the database when the refresh interval has passed (one
query), and returns how long to sleep: until the next due fire or the next refresh,
whichever is first (0 while more are due). A caller told of a change (a notification)
calls :meth:`Engine.refresh_soon` to refresh at the next pass.

Time is always passed in (``clock``), so that tests drive the engine with a fake clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Protocol

from .._db.records import CronState, FireResult
from .firing import OUTCOMES, SKIP_REASONS, EngineStats, Firing, FiringStore
from .problems import Problems
from .table import RowTable
from .view import View, ViewStore

__all__ = ["OUTCOMES", "SKIP_REASONS", "Census", "Engine", "EngineStats", "EngineStore",
           "PassReport", "utcnow"]

UTC = timezone.utc


def utcnow() -> datetime:
    return datetime.now(UTC)


class EngineStore(ViewStore, FiringStore, Protocol):
    """What the engine needs of a store: :class:`awa_beat._db.evaluator.EvaluatorStore`
    against PostgreSQL, :class:`awa_beat._testing.MemoryStore` in memory. The view reads through
    it, and the firing rules fire through it."""


@dataclass(frozen=True)
class Census:
    """The rows the engine holds, counted at one instant."""

    total: int
    paused: int
    invalid: int
    """Rows that cannot fire: a bad expression, zone or policy, or a job Awa would reject."""
    overdue: int
    """Rows whose next fire time is further in the past than the census's grace."""


@dataclass
class PassReport:
    """What one pass did, for logs and tests."""

    fired: FireResult
    refreshed: bool
    wait: float
    """Seconds until the engine wants its next pass."""


class Engine:
    """Evaluates and fires every schedule of one database. It is not thread-safe."""

    def __init__(
        self,
        store: EngineStore,
        *,
        catch_up_limit: int = 1000,
        refresh_interval: float = 1.0,
        clock: Callable[[], datetime] = utcnow,
        on_fired: Callable[[FireResult], None] | None = None,
    ) -> None:
        self.store = store
        self.table = RowTable()
        problems = Problems()
        self.view = View(store, self.table, problems, refresh_interval=refresh_interval,
                         clock=clock)
        self.firing = Firing(store, self.table, problems, catch_up_limit=catch_up_limit,
                             clock=clock, on_fired=on_fired)
        self._clock = clock

    # -- settings the parts share ----------------------------------------------------------

    @property
    def clock(self) -> Callable[[], datetime]:
        return self._clock

    @clock.setter
    def clock(self, clock: Callable[[], datetime]) -> None:
        self._clock = self.view.clock = self.firing.clock = clock

    @property
    def catch_up_limit(self) -> int:
        return self.firing.catch_up_limit

    @catch_up_limit.setter
    def catch_up_limit(self, limit: int) -> None:
        self.firing.catch_up_limit = limit

    @property
    def on_fired(self) -> Callable[[FireResult], None] | None:
        return self.firing.on_fired

    @on_fired.setter
    def on_fired(self, on_fired: Callable[[FireResult], None] | None) -> None:
        self.firing.on_fired = on_fired

    @property
    def refresh_interval(self) -> float:
        return self.view.refresh_interval

    def set_refresh_interval(self, seconds: float) -> None:
        """Refresh every ``seconds`` from the next refresh on: often when polling is the
        only way to see changes, rarely when notifications announce them."""
        self.view.refresh_interval = seconds

    @property
    def stats(self) -> EngineStats:
        return self.firing.stats

    @property
    def last_lag(self) -> float | None:
        """Seconds between the latest fire time of the last firing pass and its start."""
        return self.firing.last_lag

    # -- the view --------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        """Whether every row has been read once."""
        return self.view.loaded

    def load(self) -> None:
        """Read every row afresh, in one snapshot (at start)."""
        self.view.load()

    def refresh(self) -> None:
        """Pick up what others changed since the last refresh (one query)."""
        self.view.refresh()

    def refresh_soon(self) -> None:
        """Refresh at the next pass, because the table changed."""
        self.view.next_refresh = 0.0

    @property
    def sweeping(self) -> bool:
        """Whether a sweep over every row is under way (a slice per pass)."""
        return self.view.sweeping

    def sweep(self) -> None:
        """Take the next slice of a sweep over every row, when one is due or under way."""
        self.view.sweep()

    # -- passes ----------------------------------------------------------------------------

    def run_pass(self) -> PassReport:
        """Fire what is due, refresh if it is time, and return how long to sleep."""
        if self.view.state is None:
            self.view.load()
        firing = self.firing
        fired = firing.fire_due()
        if firing.held_check_at is not None:
            firing.start_held()
        refreshed = self.view.refresh_if_due()
        return PassReport(fired, refreshed, self.wait())

    def look_for_held(self) -> None:
        """Look for held fires (overlap buffer_one) at the next pass, as a new leader
        must: it does not know which fires its predecessor held."""
        self.firing.look_for_held()

    def fire_due(self) -> FireResult:
        """Fire the schedules whose due time has come, up to FIRE_BATCH of them, in one
        batched statement. :meth:`wait` is 0 while more are due."""
        return self.firing.fire_due()

    def next_due(self) -> float | None:
        """Epoch seconds of the earliest due fire held, or None."""
        return self.table.next_due()

    def wait(self) -> float:
        """Seconds until the engine wants its next pass."""
        until = self.view.wake_at()
        due = self.table.next_due()
        if due is not None:
            until = min(until, due)
        held = self.firing.held_check_at
        if held is not None:
            until = min(until, held)
        return max(0.0, until - self._clock().timestamp())

    # -- introspection ---------------------------------------------------------------------

    def state(self, name: str) -> CronState | None:
        """The row ``name`` as this engine last read it, or None if it is not in its view."""
        return self.table.row(name)

    def schedule(self, name: str) -> tuple[CronState, float | None] | None:
        """The row held for ``name`` and the epoch second of its next due fire (None:
        paused, invalid or no further fire), or None if no such row is held."""
        row = self.table.row(name)
        return None if row is None else (row, self.table.due(name))

    def census(self, overdue_after: float) -> Census:
        """Count the rows held: paused, invalid, and overdue (next fire more than
        ``overdue_after`` seconds ago). It is safe to call from another thread."""
        return Census(*self.table.census(self._clock().timestamp() - overdue_after))

    def __len__(self) -> int:
        return len(self.table)

    def rows(self) -> list[CronState]:
        return self.table.rows()
