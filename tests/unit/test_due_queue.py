"""The engine's due queue against a plain heap of (instant, name): same order, same
stale pairs dropped."""

from __future__ import annotations

import heapq

from hypothesis import given, settings
from hypothesis import strategies as st

from awa_beat._engine.due_queue import DueQueue

NAMES = st.sampled_from(["a", "b", "c", "d", "e"])
INSTANTS = st.integers(0, 5).map(float)
OPS = st.lists(st.one_of(
    st.tuples(st.just("push"), INSTANTS, NAMES),
    st.tuples(st.just("pop"), INSTANTS, st.just("")),
), max_size=60)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_pops_what_a_heap_with_lazy_removal_pops(ops: list[tuple[str, float, str]]) -> None:
    due: dict[str, float] = {}  # each name's current instant: the owner's view

    def current(name: str, instant: float) -> bool:
        return due.get(name) == instant

    queue = DueQueue(current)
    heap: list[tuple[float, str]] = []
    for op, instant, name in ops:
        if op == "push":
            due[name] = instant
            queue.push(instant, name)
            heapq.heappush(heap, (instant, name))
            continue
        while heap and not current(heap[0][1], heap[0][0]):
            heapq.heappop(heap)
        expected = heapq.heappop(heap) if heap and heap[0][0] <= instant else None
        assert queue.pop(instant) == expected
        if expected is not None:
            del due[expected[1]]
        first = queue.first()
        while heap and not current(heap[0][1], heap[0][0]):
            heapq.heappop(heap)
        assert first == (heap[0][0] if heap else None)
