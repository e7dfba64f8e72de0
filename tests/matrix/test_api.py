"""Matrix, the Python API (``awa_beat.Schedules``): ``get``, ``list``, ``update`` of each
field and ``remove``, for every type of the catalogue, in both layouts.

One database per layout serves the module: each test changes one field of one schedule
and checks that exactly that changed; the removals come last.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import fields
from datetime import datetime, timezone
from typing import Any

import pytest
from celery.schedules import crontab

from awa_beat import Schedules
from awa_beat._db.records import ScheduleRow
from awa_beat._schedules.fire_times import calendar_for, next_fire_after
from awa_beat._schedules.markers import Bounds, bounded, split_bounds
from awa_beat.errors import NotFound, ScheduleOwned
from tests.matrix.catalogue import CATALOGUE, NAMES, MatrixDB, stored_rows

pytestmark = pytest.mark.integration
UTC = timezone.utc
ZONE_FIXED = {"grid-interval", "offgrid-interval", "solar", "at"}
"""Types whose calendar is in UTC whatever the entry's zone (README: Intervals, solar,
at)."""


@pytest.fixture(scope="module")
def api(shared_matrix_db: MatrixDB) -> Iterator[Schedules]:
    with shared_matrix_db.schedules() as schedules:
        yield schedules


def kept_bounds(name: str) -> Bounds:
    """The bounds of ``name`` an edit of its calendar must keep (an ``at``'s one run is
    its calendar's, not a bound)."""
    entry = CATALOGUE[name]
    return split_bounds(entry.cron_expr)[1] if entry.marker == "cron" else Bounds()


# -- reads -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_get_shows_each_type_as_stored_with_its_next_fire(api: Schedules, name: str) -> None:
    entry = CATALOGUE[name]
    before = datetime.now(UTC)
    view = api.get(name)
    after = datetime.now(UTC)
    row = view.row
    assert (row.cron_expr, row.timezone, row.kind) == (entry.cron_expr, entry.timezone,
                                                        entry.task)
    assert row.args == {"args": list(entry.entry["args"]), "kwargs": entry.entry["kwargs"]}
    assert view.owner == entry.owner and not view.invalid
    assert row.retired == (entry.state == "retired")
    assert (row.paused_at is not None) == entry.paused
    if entry.state == "retired":
        assert view.next_fire is None  # no run left: no further fire
    elif entry.state == "active":
        assert view.next_fire in (entry.calendar(before), entry.calendar(after))


def test_list_has_every_type(api: Schedules, shared_matrix_db: MatrixDB) -> None:
    listed = {v.name: v for v in api.list()}
    assert sorted(listed) == sorted(shared_matrix_db.names)
    for name, view in listed.items():
        assert view.row.cron_expr == CATALOGUE[name].cron_expr
    assert [v.name for v in api.list("bound-%")] == ["bound-end", "bound-max-runs",
                                                     "bound-start"]


# -- updates, one field at a time --------------------------------------------------------------


def _timezone(name: str, before: ScheduleRow, after: ScheduleRow) -> bool:
    if name in ZONE_FIXED:  # a calendar in UTC whatever the zone: its fires stay
        now = datetime.now(UTC)
        return next_fire_after(calendar_for(after.cron_expr, after.timezone), now) in (
            CATALOGUE[name].calendar(now), CATALOGUE[name].calendar(datetime.now(UTC)))
    return after.timezone == "Asia/Tokyo"


def _schedule(name: str, before: ScheduleRow, after: ScheduleRow) -> bool:
    # A crontab is in the entry's zone, whatever the zone of the calendar it replaces.
    return (after.cron_expr, after.timezone) == (bounded("30 * * * *", kept_bounds(name)),
                                                 before.timezone)


Check = Callable[[str, ScheduleRow, ScheduleRow], bool]
#: field -> (the update's keywords, what the row must then say, the columns it may change)
UPDATES: dict[str, tuple[dict[str, Any], Check, set[str]]] = {
    "task": ({"task": "matrix.renamed"}, lambda n, b, a: a.kind == "matrix.renamed",
             {"kind"}),
    "args": ({"args": [1, "two"]}, lambda n, b, a: a.args["args"] == [1, "two"], {"args"}),
    "kwargs": ({"kwargs": {"k": 2}}, lambda n, b, a: a.args["kwargs"] == {"k": 2}, {"args"}),
    "queue": ({"options": {"awa_beat": {"queue": "reports"}}},
              lambda n, b, a: a.queue == "reports", {"queue"}),
    "priority": ({"options": {"awa_beat": {"priority": 1}}},
                 lambda n, b, a: a.priority == 1, {"priority"}),
    "apply_async options": ({"options": {"expires": 60}},
                            lambda n, b, a: a.metadata["celery"]["options"] == {
                                "queue": "matrix", "expires": 60}, {"metadata"}),
    "timezone": ({"options": {"awa_beat": {"timezone": "Asia/Tokyo"}}}, _timezone,
                 {"timezone", "last_enqueued_at"}),
    "schedule": ({"schedule": crontab(minute=30)}, _schedule,
                 {"cron_expr", "timezone", "last_enqueued_at"}),
}
#: Cells that fail today, each for one of issue 34's defects.
UPDATE_DEFECTS: dict[tuple[str, str], str] = {}


def update_cases() -> Iterator[Any]:
    for field_ in UPDATES:
        for name in NAMES:
            reason = UPDATE_DEFECTS.get((field_, name))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            yield pytest.param(field_, name, id=f"{field_}-{name}", marks=marks)


COLUMNS = [f.name for f in fields(ScheduleRow) if f.name not in ("updated_at",)]


@pytest.mark.parametrize(("field_", "name"), list(update_cases()))
def test_update_changes_that_field_alone(api: Schedules, field_: str, name: str) -> None:
    changes, holds, may_change = UPDATES[field_]
    before = api.get(name).row
    if before.owner == "config":  # a beat_schedule's row: refused unless forced
        with pytest.raises(ScheduleOwned):
            api.update(name, **changes)
        assert api.get(name).row == before
    api.update(name, force=before.owner == "config", **changes)
    after = api.get(name).row
    assert holds(name, before, after), after
    unchanged = [c for c in COLUMNS if c not in may_change | {"owner"}]
    assert {c: getattr(after, c) for c in unchanged} == {c: getattr(before, c)
                                                          for c in unchanged}
    assert after.owner == "runtime"  # forced or not, the row is now written at run time
    assert after.retired == before.retired and after.paused_by == before.paused_by


# -- removal ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_remove_deletes_each_type(api: Schedules, shared_matrix_db: MatrixDB,
                                  name: str) -> None:
    api.remove(name)
    with pytest.raises(NotFound):
        api.get(name)
    with pytest.raises(NotFound):
        api.remove(name)
    rows = stored_rows(shared_matrix_db.url)
    assert name not in rows
