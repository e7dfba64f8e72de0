"""Keeping the engine's view of ``awa.cron_jobs`` in step with the table.

The engine holds every row of ``awa.cron_jobs`` (ours and other deployments', as Awa's
leader does) in a :class:`~awa_beat._engine.table.RowTable`. This module reads the
database into it:

* :meth:`View.load` reads every row, in one snapshot, at start.
* :meth:`View.refresh` reads only rows whose ``updated_at`` moved (pauses, resumes,
  edits and fires by anyone bump it), plus a fingerprint of the whole table (count and a
  hash of the names) that reveals inserts and deletes. When the fingerprint differs
  from what is held, the names are read again, and the rows held nowhere are read by
  name (:meth:`View.reconcile`). The lookback overlaps the last read by a few seconds,
  so a transaction that took its ``now()`` before that read but committed after it is
  still seen. The server leaves out the rows the last read already returned (their
  writers ended before its snapshot), so an idle refresh returns nothing.
* :meth:`View.sweep` reads the whole table again, a slice per pass at a bounded pace,
  which catches any change committed later than the overlap.

A row whose expression, time zone or policy is invalid is logged once (and again only
when the row changes) and skipped; it never stops the others.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Protocol

from .._bulk import collector_paused
from .._db.records import CronRow, CronState, TableState
from .._logs import event
from .problems import Problems
from .table import Row, RowTable

# The logger keeps the name it had before the engine was split into modules, so that
# logging configurations that select it by name go on working.
logger = logging.getLogger('awa_beat.engine')

UTC = timezone.utc
#: How far back each refresh looks before the last read, for transactions that took
#: their ``now()`` before it but committed after it.
REFRESH_OVERLAP = timedelta(seconds=10)
#: The least number of seconds from the start of one sweep over every row to the next.
#: The sweep is the backstop for commits later than the overlap.
FULL_RELOAD_INTERVAL = 300.0
#: Rows per slice of a sweep. A pass takes one slice, so that no pass holds up a fire for
#: longer than reading this many rows takes, whatever the table's size.
SWEEP_SLICE = 5000
#: The most rows a second a sweep reads. A table of up to FULL_RELOAD_INTERVAL times
#: this many rows is swept every FULL_RELOAD_INTERVAL; a larger one takes longer, so
#: that the sweep's cost per minute stays level whatever the table's size.
SWEEP_RATE = 350.0
#: The number of rows held from which a load takes everything then alive out of the
#: cyclic collector's sight (gc.freeze).
FREEZE_FROM = 10_000
#: A refresh due when a fire is due within this many times the last refresh's duration
#: waits until just after that fire (once in a row). Each refresh reads the whole table's
#: fingerprint, which on a large table takes long enough to make the fire late.
REFRESH_PUT_OFF = 2.0


class ViewStore(Protocol):
    """What the view needs of a store. The readers stream plain rows
    (:class:`~awa_beat._db.records.CronRow`), and the view decides what to keep of each
    as it arrives."""

    def cron_states(self) -> tuple[TableState, Iterator[CronRow]]:
        """The table's fingerprint and every row, from one snapshot."""
        ...

    def cron_names(self) -> list[str]:
        """The name of every row."""
        ...

    def cron_states_after(self, after: str, limit: int) -> tuple[str | None, list[CronRow]]:
        """Up to ``limit`` rows named after ``after``, in name order, with the last name
        read, or None if these were the last."""
        ...

    def changes(self, since: datetime, seen_xmin: int | None = None,
                ) -> tuple[TableState, Iterator[CronRow]]:
        """The fingerprint and the rows changed after ``since``."""
        ...

    def cron_states_by_name(self, names: Sequence[str]) -> list[CronState]:
        """The rows that still exist among ``names``."""
        ...


class View:
    """Reads ``awa.cron_jobs`` into a table: a load, then refreshes and sweeps."""

    def __init__(self, store: ViewStore, table: RowTable, problems: Problems, *,
                 refresh_interval: float, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.table = table
        self.problems = problems
        self.refresh_interval = refresh_interval
        self.clock = clock
        self.state: TableState | None = None
        """The fingerprint of the last read, or None before the first load."""
        self._since = datetime.min.replace(tzinfo=UTC)
        self.next_refresh = 0.0
        """The epoch second from which the next pass refreshes."""
        self._refresh_seconds = 0.0
        """How long the last refresh's query took, by the engine's clock."""
        self._put_off = False
        """Whether the refresh due was put off for a fire. It is not put off twice in a row."""
        self._next_sweep = 0.0
        self._sweep_after: str | None = None
        """While a sweep runs, the name its next slice starts after."""
        self.next_slice = 0.0
        """While a sweep runs, the epoch second of its next slice."""

    def _now(self) -> float:
        return self.clock().timestamp()

    @property
    def loaded(self) -> bool:
        """Whether every row has been read once."""
        return self.state is not None

    @property
    def sweeping(self) -> bool:
        """Whether a sweep over every row is under way (a slice per pass)."""
        return self._sweep_after is not None

    def load(self) -> None:
        """Read every row afresh, in one snapshot. Rows that did not change keep their
        place. Later, :meth:`refresh` sweeps the table slice by slice."""
        table = self.table
        first = self.state is None
        started = time.perf_counter()
        with collector_paused():
            state, rows = self.store.cron_states()
            # Rows held as they are stored are dropped as they arrive, so a reload of a
            # large table never holds it twice.
            self._report(table.load(rows, compare=len(table) > 0))
        # Every stored row now has an entry, so more entries than rows means that some
        # were deleted. The names are read again only then, because deletions are rare.
        if len(table) > state.total:
            self.reconcile()
        self._adopt(state)
        now = self._now()
        self.next_refresh = now + self.refresh_interval
        self._next_sweep = now + FULL_RELOAD_INTERVAL
        self._sweep_after = None
        if len(table) >= FREEZE_FROM:
            # What the load left (the kinds and calendars cached, the imports' objects) is
            # tracked by the cyclic collector, though the packed rows are not, and a full
            # collection would walk it all; so it is taken out of the collector's sight.
            # What the process held in cycles before this point is never collected, so a
            # small table, whose collections are short, is left alone.
            gc.freeze()
        if first:
            # A replica is ready to fire from here on; the later reloads are routine.
            event(logger, logging.INFO, "engine.loaded",
                  "beat: holding %d schedule(s), read in %.1f s", len(table),
                  time.perf_counter() - started, schedules=len(table))

    def refresh(self) -> None:
        """Pick up what others changed since the last refresh (one query), and take the
        next slice of a sweep that is due or under way."""
        if self.state is None:
            self.load()
            return
        started = self._now()
        state, rows = self.store.changes(self._since, self.state.xmin)
        self._report(self.table.load(rows))
        if (state.total, state.fingerprint) != (len(self.table), self.state.fingerprint):
            self.reconcile()  # Rows were inserted or deleted.
        self._adopt(state)
        self._refresh_seconds = self._now() - started
        self.sweep()

    def refresh_if_due(self) -> bool:
        """Refresh if it is time to, unless a fire falls due before the refresh would
        end. Return whether it refreshed; when it did not, take the next slice of a sweep
        that is due or under way."""
        now = self._now()
        if now < self.next_refresh:
            self.sweep()
            return False
        next_due = self.table.next_due()
        if (not self._put_off and next_due is not None
                and next_due < now + REFRESH_PUT_OFF * self._refresh_seconds):
            # The refresh runs after the fire, not across it, but only once in a row, or
            # a refresh that takes longer than the gap between fires would never run.
            self.next_refresh = next_due
            self._put_off = True
            return False
        self.refresh()
        self.next_refresh = self._now() + self.refresh_interval
        self._put_off = False
        return True

    def reconcile(self) -> None:
        """Rows were inserted or deleted, so read the names alone, drop what is gone,
        and read the rows held nowhere (an insert the lookback did not return). A later
        snapshot than the refresh's is as good, because a row deleted since is gone, and
        one added since is read whole."""
        table = self.table
        present = set(self.store.cron_names())
        for name in [n for n in table.names() if n not in present]:
            table.remove(name)
        missing = [n for n in present if n not in table]
        for start in range(0, len(missing), SWEEP_SLICE):
            rows = self.store.cron_states_by_name(missing[start:start + SWEEP_SLICE])
            with table.batch():
                self._report([taken for row in rows if (taken := table.put(row)) is not None])

    def sweep(self) -> None:
        """Read every row again every FULL_RELOAD_INTERVAL (or, for a table of more than
        FULL_RELOAD_INTERVAL x SWEEP_RATE rows, at SWEEP_RATE rows a second), SWEEP_SLICE
        rows a slice in name order, and apply those that differ from the held ones. This
        is the backstop for a change committed later than the refresh's lookback, and one
        slice at a time never holds up a fire for long."""
        now = self._now()
        if self._sweep_after is None:
            if now < self._next_sweep:
                return
            self._sweep_after = ""
            self._next_sweep = now + FULL_RELOAD_INTERVAL
            self.next_slice = now
        if now < self.next_slice:
            return
        last, rows = self.store.cron_states_after(self._sweep_after, SWEEP_SLICE)
        self._report(self.table.load(rows))
        self._sweep_after = last  # This is None after the last slice.
        self.next_slice = now + SWEEP_SLICE / SWEEP_RATE

    def wake_at(self) -> float:
        """The epoch second at which the view next wants a pass: the next refresh, or
        the next slice of a sweep under way."""
        return min(self.next_refresh, self.next_slice) if self.sweeping else self.next_refresh

    def _adopt(self, state: TableState) -> None:
        self.state = state
        # The lookback is anchored on the server's clock at the read, not on the newest
        # change seen, so that rows changed long ago do not come back on every refresh.
        self._since = max(self._since, state.db_now - REFRESH_OVERLAP)

    def _report(self, rows: list[Row]) -> None:
        for row in rows:
            if row.problem is not None:
                self.problems.invalid(row.name, row.updated_at, row.problem)
