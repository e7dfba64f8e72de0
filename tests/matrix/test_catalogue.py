"""The catalogue itself: every entry converts to the stored form it documents, is stored
so (owner, pause, run count) in both layouts, and its calendar is awa-beat's."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from awa_beat._db.records import RETIRED_BY
from awa_beat._schedules.fire_times import calendar_for, next_fire_after
from awa_beat._schedules.markers import is_marker, max_runs
from awa_beat._schedules.spec import spec_from_entry
from tests.matrix.catalogue import CATALOGUE, NAMES, PAUSED_BY, MatrixDB, stored_rows

pytestmark = pytest.mark.integration
UTC = timezone.utc
#: Instants the calendars are compared at: around a DST change in Europe, around the
#: bounds, and ordinary days.
INSTANTS = [datetime(2026, 3, 29, 0, 59, 59, tzinfo=UTC), datetime(2026, 10, 25, 1, 0, tzinfo=UTC),
            datetime(2026, 12, 7, 16, 40, 3, 500000, tzinfo=UTC),
            datetime(2030, 5, 31, 23, 59, 59, tzinfo=UTC), datetime(2030, 6, 1, tzinfo=UTC),
            datetime(2031, 1, 1, 8, 59, 59, tzinfo=UTC), datetime(2031, 1, 1, 9, tzinfo=UTC),
            datetime(2034, 12, 31, 23, 0, 0, tzinfo=UTC), datetime(2035, 1, 1, tzinfo=UTC)]


@pytest.mark.parametrize("name", NAMES)
def test_each_entry_converts_to_its_documented_stored_form(name: str) -> None:
    entry = CATALOGUE[name]
    spec = spec_from_entry(name, entry.entry)
    assert (spec.cron_expr, spec.timezone) == (entry.cron_expr, entry.timezone)
    assert is_marker(spec.cron_expr) == (entry.marker is not None)
    if entry.marker is not None:
        assert spec.cron_expr.startswith(f"@{entry.marker} ")
    assert max_runs(spec.cron_expr) == entry.max_runs


@pytest.mark.parametrize("name", NAMES)
def test_each_calendar_is_the_documented_one(name: str) -> None:
    entry = CATALOGUE[name]
    calendar = calendar_for(entry.cron_expr, entry.timezone)
    for t in INSTANTS:
        assert next_fire_after(calendar, t) == entry.calendar(t), (name, t)


def test_the_catalogue_is_stored_as_it_says(matrix_db: MatrixDB) -> None:
    rows = stored_rows(matrix_db.url)
    assert sorted(rows) == sorted(NAMES) == sorted(matrix_db.names)
    for name, row in rows.items():
        entry = CATALOGUE[name]
        assert (row["cron_expr"], row["timezone"], row["kind"]) == (
            entry.cron_expr, entry.timezone, entry.task), name
        assert (row["owner"], row["deployment"]) == (entry.owner, "matrix"), name
        assert row["paused_by"] == {"active": None, "paused": PAUSED_BY,
                                    "retired": RETIRED_BY}[entry.state], name
        assert (row["runs"] or 0) == entry.runs, name
