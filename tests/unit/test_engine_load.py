"""The engine's bulk load: rows applied together get the due instants they get alone."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from awa_beat._db.records import CronRow, CronState, columns_of
from awa_beat._engine.engine import Engine

UTC = timezone.utc
T0 = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)  # a day before New York's spring change

#: Few calendars and instants, so that rows often share a calendar, a cursor or both.
CALENDARS = st.sampled_from([
    ("0 3 * * *", "UTC"), ("0 3 * * *", "America/New_York"), ("30 2 * * *", "America/New_York"),
    ("*/7 * * * * *", "UTC"), ("@every 90s", "UTC"), ("0 0 1 * *", "Europe/Paris"),
    ("61 3 * * *", "UTC"),  # not a calendar: held, never due
])
INSTANTS = st.integers(0, 6).map(lambda i: T0 + timedelta(hours=7 * i, seconds=13 * (i % 2)))


@st.composite
def rows(draw: st.DrawFn) -> list[CronState]:
    out = []
    for i in range(draw(st.integers(1, 30))):
        expr, tz = draw(CALENDARS)
        created = draw(INSTANTS)
        cursor = draw(st.none() | INSTANTS)
        paused = draw(st.none() | INSTANTS)
        out.append(CronState(f"r{i}", expr, tz, "coalesce", cursor, created, created, paused))
    return out


@settings(max_examples=200, deadline=None)
@given(rows())
def test_rows_read_together_are_due_when_each_alone_would_be(batch: list[CronState]) -> None:
    # Read together (the way a load applies each row as the store reads it), against
    # each row applied alone the long way (as a refresh's changed row is).
    together = Engine(store=None)  # type: ignore[arg-type]  # no database read
    together.table.load([CronRow(row.name, *columns_of(row)) for row in batch],
                        compare=False)
    for row in batch:
        alone = Engine(store=None)  # type: ignore[arg-type]
        alone.table.put(row)
        assert together.schedule(row.name) == alone.schedule(row.name), row
        assert together.state(row.name) == row
    assert together.next_due() == min(
        (due for row in batch if (due := together.schedule(row.name)[1]) is not None),  # type: ignore[index]
        default=None)


def test_the_kind_cache_starts_afresh_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("awa_beat._engine.table.KIND_CACHE", 2)
    engine = Engine(store=None)  # type: ignore[arg-type]  # the table reads no database

    def row(name: str, expr: str) -> CronState:
        return CronState(name, expr, "UTC", "coalesce", T0, T0, T0, None)

    with engine.table.batch():
        for m in range(5):
            engine.table.put(row(f"r{m}", f"{m} 3 * * *"))
    assert engine.table.cached_kinds() <= 2
    # Triples met after the cache started afresh are shared again, and every row keeps
    # the calendar of its own expression.
    with engine.table.batch():
        for n in ("a", "b"):
            engine.table.put(row(n, "7 3 * * *"))
    assert engine.table.get("a").kind is engine.table.get("b").kind  # type: ignore[union-attr]
    assert [engine.state(f"r{m}").cron_expr for m in range(5)] == [
        f"{m} 3 * * *" for m in range(5)]
    # A row whose kind left the cache gets its calendar back when it is worked on.
    assert engine.table.get("r0").calendar is not None  # type: ignore[union-attr]
    assert engine.schedule("r0")[1] == datetime(  # type: ignore[index]
        2026, 3, 8, 3, 0, tzinfo=UTC).timestamp()
