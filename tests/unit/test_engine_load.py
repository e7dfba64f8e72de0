"""The engine's bulk load: rows applied together get the due instants they get alone."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from awa_beat.engine import Engine
from awa_beat.records import CronState

UTC = timezone.utc
T0 = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)  # a day before New York's spring change

#: Few calendars and instants, so that rows often share a calendar, a cursor or both.
CALENDARS = st.sampled_from([
    ("0 3 * * *", "UTC"), ("0 3 * * *", "America/New_York"), ("30 2 * * *", "America/New_York"),
    ("*/7 * * * * *", "UTC"), ("@every 90s", "UTC"), ("0 0 1 * *", "Europe/Paris"),
])
INSTANTS = st.integers(0, 6).map(lambda i: T0 + timedelta(hours=7 * i, seconds=13 * (i % 2)))


@st.composite
def rows(draw: st.DrawFn) -> list[CronState]:
    out = []
    for i in range(draw(st.integers(1, 30))):
        expr, tz = draw(CALENDARS)
        created = draw(INSTANTS)
        cursor = draw(st.none() | INSTANTS)
        out.append(CronState(f"r{i}", expr, tz, "coalesce", cursor, created, created, None))
    return out


@settings(max_examples=200, deadline=None)
@given(rows())
def test_rows_applied_together_are_due_when_each_alone_would_be(batch: list[CronState]) -> None:
    together = Engine(store=None)  # type: ignore[arg-type]  # _apply reads no database
    together._apply([together._entry(row) for row in batch])
    for row in batch:
        alone = Engine(store=None)  # type: ignore[arg-type]
        alone._apply([alone._entry(row)])
        assert together._entries[row.name].due == alone._entries[row.name].due, row
