"""The packed row table gives the answers of the plain reference table, whatever is done.

Random sequences of loads, puts, removals, fires and their results run on both
:class:`~awa_beat._engine.table.RowTable` and
:class:`~awa_beat._engine.reference_table.ReferenceTable`, and every question asked of
both gets the same answer, as psycopg tests its C transformer against the Python one.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from awa_beat._db.records import CronRow, CronState
from awa_beat._engine.reference_table import ReferenceTable
from awa_beat._engine.table import Row, RowTable

UTC = timezone.utc
T0 = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)
NAMES = st.sampled_from(["a", "b", "c", "d", "e"])
#: Few distinct instants, so that rows share them (and the batch memo is asked). They are
#: in UTC, as the store reads them, and include both instants of a wall time New York
#: repeats.
_FOLD = datetime(2026, 11, 1, 1, 30, tzinfo=ZoneInfo("America/New_York"))
INSTANTS = st.sampled_from([
    T0, T0 - timedelta(days=1), T0 - timedelta(minutes=7, microseconds=250),
    T0 + timedelta(hours=5), _FOLD.astimezone(UTC), _FOLD.replace(fold=1).astimezone(UTC),
    datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)])
EXPRESSIONS = st.sampled_from([
    "0 3 * * *", "*/7 * * * * *", "@every 90s", "5 4 * * 1,3", "0 0 30 2 *", "not cron",
    "@every 300s | runs=3", "@at 2026-03-08T00:00:00Z | runs=1", "* * * * *"])
ZONES = st.sampled_from(["UTC", "America/New_York", "Europe/Paris", "Mars/Olympus"])
POLICIES = st.sampled_from(["coalesce", "catch_up", "skip"])


@st.composite
def records(draw: st.DrawFn) -> CronState:
    return CronState(draw(NAMES), draw(EXPRESSIONS), draw(ZONES), draw(POLICIES),
                     draw(st.none() | INSTANTS), draw(INSTANTS), draw(INSTANTS),
                     draw(st.none() | INSTANTS))


def _as_read(record: CronState) -> CronRow:
    return CronRow(record.name, record.cron_expr, record.timezone,
                   record.missed_fire_policy, record.last_enqueued_at, record.created_at,
                   record.updated_at, record.paused_at)


def _seen(row: Row | None) -> tuple[object, ...] | None:
    """What the firing rules can see of a row being worked on."""
    if row is None:
        return None
    return (row.name, row.cron_expr, row.timezone, row.missed_fire_policy,
            row.last_enqueued_at, row.created_at, row.updated_at, row.paused_at, row.due,
            row.problem, row.calendar is None)


class SameAnswers(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.packed = RowTable()
        self.plain = ReferenceTable()
        self.in_flight: dict[str, tuple[Row, Row]] = {}
        """Rows taken to be fired whose result is not applied yet: packed, then plain."""

    @rule(batch=st.lists(records(), max_size=6), compare=st.booleans())
    def load(self, batch: list[CronState], compare: bool) -> None:
        read = [_as_read(r) for r in batch]
        invalid = self.packed.load(read, compare=compare)
        assert [_seen(r) for r in invalid] == [
            _seen(r) for r in self.plain.load(read, compare=compare)]

    @rule(record=records(), compare=st.booleans(), together=st.booleans())
    def put(self, record: CronState, compare: bool, together: bool) -> None:
        if together:
            with self.packed.batch(), self.plain.batch():
                answers = (self.packed.put(record, compare=compare),
                           self.plain.put(record, compare=compare))
        else:
            answers = (self.packed.put(record, compare=compare),
                       self.plain.put(record, compare=compare))
        assert _seen(answers[0]) == _seen(answers[1])

    @rule(record=records())
    def limits_problem(self, record: CronState) -> None:
        assert _seen(self.packed.put_limits_problem(record)) == _seen(
            self.plain.put_limits_problem(record))

    @rule(name=NAMES)
    def remove(self, name: str) -> None:
        self.packed.remove(name)
        self.plain.remove(name)
        self.in_flight.pop(name, None)

    @rule(hours=st.integers(min_value=-48, max_value=24 * 400))
    def take_due(self, hours: int) -> None:
        now = (T0 + timedelta(hours=hours)).timestamp()
        with self.packed.batch(), self.plain.batch():
            packed, plain = self.packed.pop_due(now), self.plain.pop_due(now)
        assert (packed is None) == (plain is None)
        if packed is not None and plain is not None:
            assert packed[0] == plain[0]
            assert _seen(packed[1]) == _seen(plain[1])
            self.in_flight[packed[1].name] = (packed[1], plain[1])

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data(), outcome=st.sampled_from(["fired", "nothing due", "failed"]))
    def fire_result(self, data: st.DataObject, outcome: str) -> None:
        name = data.draw(st.sampled_from(sorted(self.in_flight)))
        rows = self.in_flight.pop(name)
        if name not in self.packed:
            return
        updated = data.draw(INSTANTS)
        for table, row in zip((self.packed, self.plain), rows, strict=True):
            with table.batch():
                if outcome == "fired":
                    # The cursor moves to the fire time, as the fire statement moves it.
                    assert row.due is None
                    row.last_enqueued_at = updated
                    row.updated_at = updated
                    table.schedule(row)
                elif outcome == "failed":
                    table.schedule(row, at=T0.timestamp() + 1.0)
                else:
                    table.schedule(row)

    @rule(record=records())
    def holds(self, record: CronState) -> None:
        read = _as_read(record)
        assert self.packed.holds(read) == self.plain.holds(read)

    @rule(hours=st.integers(min_value=-48, max_value=48))
    def census(self, hours: int) -> None:
        before = (T0 + timedelta(hours=hours)).timestamp()
        assert self.packed.census(before) == self.plain.census(before)

    @invariant()
    def same_rows(self) -> None:
        assert len(self.packed) == len(self.plain)
        assert sorted(self.packed.names()) == sorted(self.plain.names())
        for name in self.plain.names():
            assert name in self.packed
            assert self.packed.row(name) == self.plain.row(name)
            assert self.packed.due(name) == self.plain.due(name)
            assert _seen(self.packed.get(name)) == _seen(self.plain.get(name))
        assert self.packed.next_due() == self.plain.next_due()


SameAnswers.TestCase.settings = settings(max_examples=150, stateful_step_count=30,
                                         deadline=None)
test_the_packed_table_answers_as_the_reference_table_does = SameAnswers.TestCase
