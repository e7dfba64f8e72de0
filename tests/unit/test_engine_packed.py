"""The engine holds each row packed: what it gives back is the row it was given."""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from awa_beat._db.records import CronRow, CronState, columns_of
from awa_beat._engine.engine import Engine

UTC = timezone.utc
T0 = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)

#: Any instant Python holds, to the microsecond, before and after the epoch.
INSTANTS = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                        timezones=st.just(UTC))
#: Valid calendars, and texts that are not one (any characters PostgreSQL's text holds).
TEXT = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
               max_size=20)
EXPRESSIONS = st.sampled_from(["0 3 * * *", "*/7 * * * * *", "@every 90s", "5 4 * * 1,3"]) | TEXT
ZONES = st.sampled_from(["UTC", "America/New_York", "Europe/Paris"]) | TEXT
POLICIES = st.sampled_from(["coalesce", "catch_up", "skip"]) | TEXT


@st.composite
def rows(draw: st.DrawFn) -> CronState:
    return CronState(draw(st.text(min_size=1, max_size=10)), draw(EXPRESSIONS), draw(ZONES),
                     draw(POLICIES), draw(st.none() | INSTANTS), draw(INSTANTS),
                     draw(INSTANTS), draw(st.none() | INSTANTS))


def engine() -> Engine:
    return Engine(store=None, clock=lambda: T0)  # type: ignore[arg-type]  # no database read


@settings(max_examples=300, deadline=None)
@given(rows())
def test_a_row_held_reads_back_as_it_was_read(row: CronState) -> None:
    held = engine()
    held.table.put(row)
    assert held.state(row.name) == row
    assert held.rows() == [row]
    # Unpacked to be worked on, it has the calendar (or the problem) it was read with.
    entry, fresh = held.table.get(row.name), held.table.put(row, compare=False)
    assert entry is not None and fresh is not None
    assert (entry.kind.calendar, entry.kind.problem) == (fresh.kind.calendar,
                                                        fresh.kind.problem)


@settings(max_examples=300, deadline=None)
@given(rows(), rows())
def test_a_row_read_is_held_only_if_every_column_is_as_held(row: CronState,
                                                           other: CronState) -> None:
    held = engine()
    held.table.put(row)
    columns = [f.name for f in fields(CronState)][1:]
    assert held.table.holds(CronRow(row.name, *columns_of(row)))
    # The readers leave out what this says is held: one column off must not be.
    for column in columns:
        changed = replace(row, **{column: getattr(other, column)})
        assert held.table.holds(CronRow(row.name, *columns_of(changed))) == (
            changed == row)
    assert not held.table.holds(CronRow(row.name + "x", *columns_of(row)))


@settings(max_examples=100, deadline=None)
@given(st.lists(rows(), max_size=8, unique_by=lambda r: r.name))
def test_zones_and_policies_past_the_pair_table_are_spelled_out(
        batch: list[CronState]) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("awa_beat._engine.table.MAX_PAIRS", 2)  # a table of two pairs, then full
        held = engine()
        with held.table.batch():
            for row in batch:
                held.table.put(row)
        assert sorted(held.rows(), key=lambda r: r.name) == sorted(batch, key=lambda r: r.name)
        assert held.table.pair_count() <= 2


def test_due_instants_and_the_census_come_from_the_packed_rows() -> None:
    held = engine()
    made = [
        CronState("due", "0 3 * * *", "UTC", "coalesce", T0, T0, T0, None),
        CronState("paused", "0 3 * * *", "UTC", "coalesce", T0, T0, T0, T0),
        CronState("invalid", "not cron", "UTC", "coalesce", T0, T0, T0, None),
        CronState("late", "0 3 * * *", "UTC", "coalesce", T0 - timedelta(days=2), T0, T0,
                  None),
    ]
    with held.table.batch():
        for row in made:
            held.table.put(row)
    tomorrow = datetime(2026, 3, 8, 3, 0, tzinfo=UTC).timestamp()
    assert held.schedule("due") == (made[0], tomorrow)
    assert held.schedule("paused") == (made[1], None)
    assert held.schedule("invalid") == (made[2], None)
    assert held.schedule("late") == (made[3], datetime(2026, 3, 6, 3, 0, tzinfo=UTC).timestamp())
    census = held.census(overdue_after=60)
    assert (census.total, census.paused, census.invalid, census.overdue) == (4, 1, 1, 1)
    assert held.next_due() == datetime(2026, 3, 6, 3, 0, tzinfo=UTC).timestamp()


def test_a_row_queued_twice_at_one_instant_fires_once() -> None:
    from awa_beat._testing import FakeClock, MemoryStore

    clock = FakeClock(T0)
    store = MemoryStore(clock)
    row = CronState("r", "0 3 * * *", "UTC", "coalesce", T0, T0, T0, None)
    store.rows["r"] = row
    held = Engine(store.evaluator, clock=clock)
    held.load()
    # Applied again with only updated_at moved: queued a second time at the same instant.
    held.table.put(replace(row, updated_at=T0 + timedelta(1)))
    requested: list[str] = []
    fire = store.evaluator.fire

    def recording(requests):  # type: ignore[no-untyped-def]
        requested.extend(request.name for request in requests)
        return fire(requests)

    store.evaluator.fire = recording  # type: ignore[method-assign]
    clock.advance(days=1)
    held.fire_due()
    # The store's compare-and-swap would drop a second request; the engine must not
    # even make one.
    assert requested == ["r"]


def test_two_instants_of_one_repeated_wall_time_are_remembered_apart() -> None:
    # They compare equal (same zone, same wall time) an hour apart: the first's answer
    # must not be given for the second.
    from zoneinfo import ZoneInfo

    from awa_beat._schedules.fire_times import calendar_for

    calendar = calendar_for("0 0 * * * *", "UTC")
    first = datetime(2026, 11, 1, 1, 30, tzinfo=ZoneInfo("America/New_York"))  # 05:30Z
    second = first.replace(fold=1)  # 06:30Z
    alone = Engine(store=None)  # type: ignore[arg-type]
    expected = alone.table.first_due(calendar, second, second)
    assert expected == datetime(2026, 11, 1, 7, tzinfo=UTC).timestamp()
    engine = Engine(store=None)  # type: ignore[arg-type]
    with engine.table.batch():
        assert engine.table.first_due(calendar, first, first) == datetime(
            2026, 11, 1, 6, tzinfo=UTC).timestamp()
        assert engine.table.first_due(calendar, second, second) == expected
        assert engine.table.first_due(calendar, None, first) != engine.table.first_due(
            calendar, None, second)
