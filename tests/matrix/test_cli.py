"""Matrix, the command line: ``list``, ``show``, ``history``, ``status``, ``doctor``,
``export``, ``add`` and ``edit`` with every type of the catalogue, in both layouts
(click's runner, in process, against the real database).

One database per layout serves the module; the reads come first, then the writes, each
on a schedule of its own.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest

from awa_beat._schedules.markers import bounded, split_bounds
from tests.integration.test_cli import run
from tests.matrix.catalogue import (
    CATALOGUE,
    NAMES,
    PAUSED_BY,
    MatrixDB,
    as_if_on_time,
    stored_rows,
)

pytestmark = pytest.mark.integration
UTC = timezone.utc


def cli(db: MatrixDB, *args: str) -> Any:
    return run(*args, "--database-url", db.url)


def cli_json(db: MatrixDB, *args: str) -> Any:
    result = cli(db, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def runs_left(name: str) -> int | None:
    entry = CATALOGUE[name]
    return None if entry.max_runs is None else entry.max_runs - entry.runs


# -- reads -----------------------------------------------------------------------------------


def test_list_shows_every_type(shared_matrix_db: MatrixDB) -> None:
    db = shared_matrix_db
    text = cli(db, "list")
    assert text.exit_code == 0, text.output
    listed = {r["name"]: r for r in cli_json(db, "list")}
    assert sorted(listed) == sorted(NAMES)
    now = datetime.now(UTC)
    for name, r in listed.items():
        entry = CATALOGUE[name]
        assert name in text.output and entry.cron_expr in text.output
        assert (r["schedule"], r["timezone"], r["task"]) == (entry.cron_expr, entry.timezone,
                                                             entry.task)
        assert r["owner"] == entry.owner and not r["invalid"] and not r["orphan"]
        assert bool(r["paused_at"]) == entry.paused
        if entry.state == "active":
            nxt = datetime.fromisoformat(r["next_fire"])
            assert nxt in (entry.calendar(now), entry.calendar(datetime.now(UTC))), name
    assert f"by {PAUSED_BY}" in text.output


@pytest.mark.parametrize("name", NAMES)
def test_show_each_type(shared_matrix_db: MatrixDB, name: str) -> None:
    entry = CATALOGUE[name]
    text = cli(shared_matrix_db, "show", name)
    assert text.exit_code == 0, text.output
    assert entry.cron_expr in text.output and entry.timezone in text.output
    shown = cli_json(shared_matrix_db, "show", name)
    assert (shown["schedule"], shown["timezone"], shown["task"]) == (
        entry.cron_expr, entry.timezone, entry.task)
    fires = [datetime.fromisoformat(t) for t in shown["next_fires"]]
    if entry.state == "active":  # each the calendar's next after the one before
        assert fires and fires[1:] == [entry.calendar(t) for t in fires[:-1]]
        assert fires[0] > datetime.fromisoformat(shown["last_enqueued_at"])
    left = runs_left(name)
    if left is not None:
        assert len(fires) <= left
    assert len(shown["last_jobs"]) == entry.runs


@pytest.mark.parametrize("name", NAMES)
def test_history_of_each_type(shared_matrix_db: MatrixDB, name: str) -> None:
    entry = CATALOGUE[name]
    text = cli(shared_matrix_db, "history", name)
    assert text.exit_code == 0, text.output
    history = cli_json(shared_matrix_db, "history", name)
    assert len(history) == entry.runs
    assert all(h["kind"] == "fired" for h in history)


def test_history_of_all_and_status_and_doctor(shared_matrix_db: MatrixDB) -> None:
    db = shared_matrix_db
    fired = sum(e.runs for e in CATALOGUE.values())
    assert [h["schedule"] for h in cli_json(db, "history")] == ["retired"] * fired
    as_if_on_time(db.url, late=["offgrid-interval"])
    status = cli(db, "status")
    assert status.exit_code == 0, status.output
    assert "overdue schedules: 1" in status.output
    doctor = cli(db, "doctor")
    assert doctor.exit_code == 1, doctor.output
    assert f"{len(NAMES)} schedule(s), 0 invalid" in doctor.output
    assert "offgrid-interval" in doctor.output  # the overdue one, named
    fails = 1 if db.layout == "awa" else 2
    if db.layout == "standalone":  # the retired one's jobs: Awa is not installed
        assert f"deployment matrix: {fired} job(s) wait, nothing runs them" in doctor.output
    assert doctor.output.count("[FAIL]") == fails, doctor.output


def test_export_has_every_type(shared_matrix_db: MatrixDB) -> None:
    python = cli(shared_matrix_db, "export")
    assert python.exit_code == 0, python.output
    exported = cli(shared_matrix_db, "export", "--format", "json")
    assert exported.exit_code == 0, exported.output
    entries = json.loads(exported.output)
    assert sorted(entries) == sorted(NAMES)
    for name in NAMES:
        assert repr(name) in python.output
        assert entries[name]["task"] == CATALOGUE[name].task


# -- writes ----------------------------------------------------------------------------------

#: The command line that adds each type (the retired state is the fire statement's).
ADD_ARGS: dict[str, list[str]] = {
    "cron-zone": ["--cron", "30 7 * * *", "--tz", "Europe/Paris"],
    "grid-interval": ["--every", "10m"],
    "offgrid-interval": ["--every", "7s"],
    "solar": ["--solar", "sunrise:48.8566:2.3522"],
    "at": ["--at", "2031-01-01T10:00:00+01:00"],
    "rrule": ["--cron", "@rrule DTSTART=20260105T090000;FREQ=WEEKLY;BYDAY=MO,WE",
              "--tz", "Europe/Berlin"],
    "bound-start": ["--cron", "0 * * * *", "--start", "2030-06-01T02:00:00+02:00"],
    "bound-end": ["--cron", "0 * * * *", "--end", "2035-01-01T00:00:00Z"],
    "bound-max-runs": ["--cron", "15 * * * *", "--max-runs", "3"],
    "one-off": ["--cron", "45 4 * * *", "--one-off"],
    "paused": ["--cron", "0 3 * * *"],
}


@pytest.mark.parametrize("name", list(ADD_ARGS))
def test_add_each_type(shared_matrix_db: MatrixDB, name: str) -> None:
    db, entry, new = shared_matrix_db, CATALOGUE[name], f"cli-{name}"
    added = cli(db, "add", new, "--task", entry.task, *ADD_ARGS[name])
    assert added.exit_code == 0, added.output
    assert entry.cron_expr in added.output
    if entry.state == "paused":
        assert cli(db, "pause", new, "--by", PAUSED_BY).exit_code == 0
    row = stored_rows(db.url)[new]
    assert (row["cron_expr"], row["timezone"], row["owner"]) == (
        entry.cron_expr, entry.timezone, "runtime")
    assert row["paused_by"] == (PAUSED_BY if entry.paused else None)


@pytest.mark.parametrize("name", NAMES)
def test_edit_one_option_of_each_type(shared_matrix_db: MatrixDB, name: str) -> None:
    db, entry = shared_matrix_db, CATALOGUE[name]
    before = stored_rows(db.url)[name]
    if before["owner"] == "config":
        refused = cli(db, "edit", name, "--queue", "reports")
        assert refused.exit_code == 1 and refused.output.count("\n") == 1, refused.output
        assert "force" in refused.output
        assert stored_rows(db.url)[name] == before
    edited = cli(db, "edit", name, "--queue", "reports",
                 *(["--force"] if before["owner"] == "config" else []))
    assert edited.exit_code == 0, edited.output
    after = stored_rows(db.url)[name]
    assert {**before, "owner": "runtime"} == after  # the calendar and the state stay
    assert cli_json(db, "show", name)["queue"] == "reports"
    assert entry.cron_expr in edited.output


@pytest.mark.parametrize("name", NAMES)
def test_edit_the_calendar_of_each_type(shared_matrix_db: MatrixDB, name: str) -> None:
    db, entry = shared_matrix_db, CATALOGUE[name]
    before = stored_rows(db.url)[name]
    edited = cli(db, "edit", name, "--cron", "30 * * * *", "--force")
    assert edited.exit_code == 0, edited.output
    after = stored_rows(db.url)[name]
    bounds = split_bounds(entry.cron_expr)[1] if entry.marker == "cron" else None
    expected = bounded("30 * * * *", bounds) if bounds else "30 * * * *"
    assert (after["cron_expr"], after["timezone"]) == (expected, before["timezone"])
    assert after["paused_by"] == before["paused_by"]
