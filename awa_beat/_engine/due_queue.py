"""The engine's queue of due instants: names grouped by the instant they are due at.

A heap of ``(instant, name)`` tuples costs a tuple per schedule. Schedules are due on
whole seconds, and many on the same one (every daily report at midnight, every row of
a tenant's calendar), so names are kept in one list per distinct instant, with a heap of
the instants alone: a list slot per schedule instead of a tuple.

Removal is lazy, as with a plain heap: the owner re-queues a name under its new instant
and tells, through ``current(name, instant)``, whether a queued pair still holds; stale
pairs are dropped when they reach the front.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable


class DueQueue:
    """Names by due instant (epoch seconds), earliest first; ties in name order."""

    __slots__ = ("_current", "_instants", "_names", "_sorted")

    def __init__(self, current: Callable[[str, float], bool]) -> None:
        self._current = current
        self._instants: list[float] = []
        """A heap of the instants that have names queued."""
        self._names: dict[float, list[str]] = {}
        self._sorted: float | None = None
        """The instant whose list is sorted for popping (the front one, once looked at)."""

    def push(self, instant: float, name: str) -> None:
        names = self._names.get(instant)
        if names is None:
            self._names[instant] = [name]
            heapq.heappush(self._instants, instant)
            return
        names.append(name)
        if instant == self._sorted:
            self._sorted = None

    def first(self) -> float | None:
        """The earliest instant with a current name queued, or None."""
        instants, lists, current = self._instants, self._names, self._current
        while instants:
            instant = instants[0]
            names = lists[instant]
            if self._sorted != instant:
                names.sort(reverse=True)  # popped from the end: in name order
                self._sorted = instant
            while names and not current(names[-1], instant):
                names.pop()
            if names:
                return instant
            del lists[instant]
            heapq.heappop(instants)
            self._sorted = None
        return None

    def pop(self, until: float) -> tuple[float, str] | None:
        """The earliest current ``(instant, name)`` at or before ``until``, removed, or
        None."""
        instant = self.first()
        if instant is None or instant > until:
            return None
        return instant, self._names[instant].pop()
