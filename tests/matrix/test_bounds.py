"""Bounds (start_time, end_time, max_runs, one_off) and the outcome settings overlap and
deadline are fields of every schedule type: shown, changed and removed through the
Python API and ``awa-beat add|edit``, never lost by an edit of the calendar (issue 34,
defect 4). The dashboard's and the Django admin's forms are in test_bounds_forms.py."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from celery.schedules import crontab, solar
from click.testing import CliRunner
from dateutil.rrule import MO, WEEKLY, rrule

from awa_beat._cli import main
from awa_beat._db.database import Database
from awa_beat._db.records import RETIRED_BY
from awa_beat._engine.engine import Engine
from awa_beat._schedules.calendars import at
from awa_beat._testing import FAKE_CLOCK_TOLERANCE, FakeClock
from awa_beat.errors import ValidationError
from tests.matrix.catalogue import (
    AT_INSTANT,
    CATALOGUE,
    RRULE_START,
    SOLAR,
    MatrixDB,
    stored_rows,
)

pytestmark = pytest.mark.integration
UTC = timezone.utc
START = datetime(2030, 7, 1, tzinfo=UTC)
END = datetime(2034, 1, 1, tzinfo=UTC)
#: Another calendar of each type (the default: an hourly crontab), for "edit the
#: calendar": the API's schedule object and the command line's flag.
OTHER_CALENDAR: dict[str, tuple[Any, list[str]]] = {
    "cron-zone": (crontab(hour=8, minute=0), ["--cron", "0 8 * * *"]),
    "grid-interval": (timedelta(minutes=20), ["--every", "20m"]),
    "offgrid-interval": (11, ["--every", "11s"]),
    "solar": (solar("sunset", *SOLAR[1:]), ["--solar", f"sunset:{SOLAR[1]}:{SOLAR[2]}"]),
    "rrule": (rrule(WEEKLY, byweekday=(MO,), dtstart=RRULE_START),
              ["--cron", "@rrule DTSTART=20260105T090000;FREQ=WEEKLY;BYDAY=MO"]),
}
HOURLY = (crontab(minute=45), ["--cron", "45 * * * *"])
#: Every type but at(), which carries its one run itself (test_at_carries_its_one_run).
BOUNDABLE = [name for name, e in CATALOGUE.items() if e.marker != "at"]


def other_calendar(name: str) -> tuple[Any, list[str]]:
    return OTHER_CALENDAR.get(name, HOURLY)


def row_of(db: MatrixDB, name: str) -> dict[str, Any]:
    return stored_rows(db.url)[name]


# -- the Python API ---------------------------------------------------------------------------


def bounds(schedules: Any, name: str) -> tuple[Any, ...]:
    b = schedules.get(name).bounds
    return b.start_time, b.end_time, b.max_runs, b.one_off, b.overlap, b.deadline


def test_api_each_bound_is_set_kept_by_a_calendar_edit_and_removed(matrix_db: MatrixDB
                                                                    ) -> None:
    with matrix_db.schedules() as s:
        for name in BOUNDABLE:
            s.update(name, force=True, options={"awa_beat": {
                "start_time": START, "end_time": END, "max_runs": 40, "overlap": "skip",
                "deadline": 900}})
            set_ = (START, END, 40, False, "skip", 900.0)
            assert bounds(s, name) == set_, name
            schedule, _ = other_calendar(name)
            s.update(name, schedule=schedule)
            assert bounds(s, name) == set_, name  # the calendar changed, the bounds stay
            s.update(name, kwargs={"changed": True})
            assert bounds(s, name) == set_, name
            s.update(name, options={"awa_beat": {"max_runs": None}})
            assert bounds(s, name) == (START, END, None, False, "skip", 900.0), name
            s.update(name, options={"awa_beat": {"one_off": True}})
            assert bounds(s, name) == (START, END, 1, True, "skip", 900.0), name
            s.update(name, options={"awa_beat": {"max_runs": 5}})  # replaces one_off
            assert bounds(s, name) == (START, END, 5, False, "skip", 900.0), name
            s.update(name, options={"awa_beat": {"start_time": None, "end_time": None,
                                                 "max_runs": None, "overlap": None,
                                                 "deadline": None}})
            assert bounds(s, name) == (None, None, None, False, "allow", None), name
            assert " | " not in s.get(name).row.cron_expr, name


def test_api_a_bounded_entry_keeps_its_own_bounds_through_a_calendar_edit(
        matrix_db: MatrixDB) -> None:
    """The catalogue's bounded entries, as stored (the issue's repro)."""
    with matrix_db.schedules() as s:
        for name in ("bound-start", "bound-end", "bound-max-runs", "one-off"):
            before = bounds(s, name)
            s.update(name, force=True, schedule=crontab(minute=30))
            assert bounds(s, name) == before, name
            assert s.get(name).row.cron_expr.startswith("@cron 30 * * * * | "), name


def test_at_carries_its_one_run(matrix_db: MatrixDB) -> None:
    with matrix_db.schedules() as s:
        assert bounds(s, "at") == (None, None, 1, True, "allow", None)
        before = row_of(matrix_db, "at")
        for key, value in (("max_runs", 3), ("end_time", END), ("start_time", START)):
            with pytest.raises(ValidationError) as info:
                s.update("at", options={"awa_beat": {key: value}})
            assert [(n, f) for n, f, _ in info.value.problems] == [
                ("at", f"options.awa_beat.{key}")]
            assert "\n" not in str(info.value) and "at() fires once" in str(info.value)
            assert row_of(matrix_db, "at") == before  # nothing written
        s.update("at", schedule=at(AT_INSTANT + timedelta(days=1)), kwargs={"n": 2})
        assert s.get("at").row.cron_expr == "@at 2031-01-02T09:00:00Z | runs=1"
        s.update("at", schedule=crontab(minute=5))  # its one run went with it
        assert s.get("at").row.cron_expr == "5 * * * *"
        s.update("bound-max-runs", schedule=at(AT_INSTANT))  # at() says its own bounds
        assert s.get("bound-max-runs").row.cron_expr == "@at 2031-01-01T09:00:00Z | runs=1"


def jobs_of(url: str, name: str) -> int:
    with Database(url) as store:
        return len(store.schedules.jobs(name, 100))


def fire_for(url: str, seconds: int) -> None:
    """Run the real engine and fire statement on a clock ``seconds`` past now."""
    with Database(url) as store:
        store.clock_tolerance = FAKE_CLOCK_TOLERANCE  # the fake clock runs ahead
        engine = Engine(store.evaluator,
                        clock=FakeClock(datetime.now(UTC) + timedelta(seconds=seconds)))
        for _ in range(3):
            engine.run_pass()


def test_a_retired_schedule_comes_back_when_its_run_limit_is_raised(matrix_db: MatrixDB
                                                                    ) -> None:
    """Its two runs fired. A calendar edit leaves it retired; a limit of 3 runs in all
    gives it one more run (its count stays), which retires it again; removing the limit
    brings it back for good."""
    url = matrix_db.url
    with matrix_db.schedules() as s:
        s.update("retired", schedule=2)
        assert s.get("retired").row.paused_by == RETIRED_BY
        assert bounds(s, "retired")[2] == 2
        s.update("retired", options={"awa_beat": {"max_runs": 2}})
        assert s.get("retired").row.paused_by == RETIRED_BY
        with Database(url) as store:
            for name in matrix_db.names:  # only "retired" may fire here
                if name != "retired" and store.schedules.get(name).paused_at is None:
                    store.schedules.pause(name, "test")
        fired = jobs_of(url, "retired")
        s.update("retired", options={"awa_beat": {"max_runs": 3}})
        view = s.get("retired")
        assert view.row.paused_at is None and view.next_fire is not None
        assert row_of(matrix_db, "retired")["runs"] == 2  # the runs made still count
        fire_for(url, 30)
        assert jobs_of(url, "retired") == fired + 1
        row = row_of(matrix_db, "retired")
        assert (row["runs"], row["paused_by"]) == (3, RETIRED_BY)
        s.update("retired", options={"awa_beat": {"max_runs": None}})
        assert s.get("retired").row.paused_at is None
        assert bounds(s, "retired")[2] is None


def test_an_operator_pause_is_not_lifted_by_a_new_run_limit(matrix_db: MatrixDB) -> None:
    with matrix_db.schedules() as s:
        s.update("paused", force=True, options={"awa_beat": {"max_runs": 3}})
        assert s.get("paused").row.paused_by != RETIRED_BY
        assert s.get("paused").row.paused_at is not None


# -- the command line -------------------------------------------------------------------------


def cli(db: MatrixDB, *args: str) -> Any:
    return CliRunner().invoke(main, [*args, "--database-url", db.url])


def shown(db: MatrixDB, name: str) -> dict[str, Any]:
    result = cli(db, "show", name, "--json")
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def fields(data: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(data[k] for k in ("start_time", "end_time", "max_runs", "one_off",
                                   "overlap", "deadline"))


def test_cli_edit_each_flag_keeps_bounds_through_a_calendar_edit(matrix_db: MatrixDB
                                                                 ) -> None:
    db = matrix_db
    set_ = ("2030-07-01T00:00:00+00:00", "2034-01-01T00:00:00+00:00", 40, False, "skip",
            900.0)
    for name in BOUNDABLE:
        edited = cli(db, "edit", name, "--force", "--start", "2030-07-01T02:00:00+02:00",
                     "--end", "2034-01-01T00:00Z", "--max-runs", "40", "--overlap", "skip",
                     "--deadline", "15m", "--json")
        assert edited.exit_code == 0, (name, edited.output)
        assert fields(json.loads(edited.stdout)) == set_, name
        _, flag = other_calendar(name)
        assert cli(db, "edit", name, *flag).exit_code == 0, name
        assert fields(shown(db, name)) == set_, name  # the calendar changed, bounds stay
        assert cli(db, "edit", name, "--max-runs", "none").exit_code == 0
        assert fields(shown(db, name))[2:4] == (None, False), name
        assert cli(db, "edit", name, "--one-off").exit_code == 0
        assert fields(shown(db, name))[2:4] == (1, True), name
        assert cli(db, "edit", name, "--no-one-off").exit_code == 0
        assert fields(shown(db, name))[2:4] == (None, False), name
        removed = cli(db, "edit", name, "--start", "none", "--end", "none", "--overlap",
                      "none", "--deadline", "none")
        assert removed.exit_code == 0, removed.output
        assert fields(shown(db, name)) == (None, None, None, False, "allow", None), name
        assert " | " not in shown(db, name)["schedule"], name
    text = cli(db, "show", "bound-end").output  # show lists them as fields
    assert "max runs:" in text and "one-off:" in text and "deadline:" in text


@pytest.mark.parametrize(("flag", "extra"), [
    (["--cron", "0 9 * * *"], []), (["--every", "10m"], []), (["--every", "7s"], []),
    (["--solar", "sunrise:48.85:2.35"], []),
    (["--cron", "@rrule DTSTART=20260105T090000;FREQ=WEEKLY;BYDAY=MO,WE"],
     ["--tz", "Europe/Berlin"]),
])
def test_cli_add_with_every_flag(matrix_db: MatrixDB, flag: list[str],
                                 extra: list[str]) -> None:
    added = cli(matrix_db, "add", "new", "--task", "t.new", *flag, *extra, "--start",
                "2030-07-01T00:00:00Z", "--end", "2034-01-01T00:00:00Z", "--max-runs", "3",
                "--overlap", "skip", "--deadline", "900", "--json")
    assert added.exit_code == 0, added.output
    assert fields(json.loads(added.stdout)) == (
        "2030-07-01T00:00:00+00:00", "2034-01-01T00:00:00+00:00", 3, False, "skip", 900.0)
    once = cli(matrix_db, "add", "once", "--task", "t.once", *flag, *extra, "--one-off")
    assert once.exit_code == 0, once.output
    assert fields(shown(matrix_db, "once"))[2:4] == (1, True)


def test_cli_add_at_takes_one_off_but_no_bounds(matrix_db: MatrixDB) -> None:
    ok = cli(matrix_db, "add", "once", "--task", "t", "--at", "2031-01-01T09:00Z",
             "--one-off", "--overlap", "skip")
    assert ok.exit_code == 0, ok.output
    refused = cli(matrix_db, "add", "twice", "--task", "t", "--at", "2031-01-01T09:00Z",
                  "--max-runs", "2")
    assert refused.exit_code == 1
    assert refused.output == ("error: invalid schedule field: entry 'twice', field "
                              "'options.awa_beat.max_runs': at() fires once, at its instant;"
                              " start_time, end_time and max_runs do not apply\n")
    assert "twice" not in stored_rows(matrix_db.url)


@pytest.mark.parametrize(("args", "field", "words"), [
    (["--option", "max_runs=3"], "--option", "use --max-runs"),
    (["--option", "start_time=2030-01-01T00:00Z"], "--option", "use --start"),
    (["--option", "retry=false"], "--option", "would be ignored"),
    (["--option", "no_such_option=1"], "--option", "not an apply_async option"),
    (["--option", "awa_beat=[1]"], "--option", "JSON object"),
    (["--option", 'awa_beat={"queue": "a"}', "--queue", "b"], "--option", "give it once"),
    (["--option", 'awa_beat={"no_such": 1}'], "options.awa_beat.no_such", "unknown setting"),
    (["--max-runs", "0"], "options.awa_beat.max_runs", "whole number >= 1"),
    (["--max-runs", "three"], "--max-runs", "a whole number of runs"),
    (["--start", "tomorrow"], "--start", "ISO 8601"),
    (["--end", "2030-01-01T00:00"], "--end", "no UTC offset"),
    (["--deadline", "soon"], "--deadline", "seconds after the fire"),
    (["--start", "2034-01-01T00:00Z", "--end", "2030-01-01T00:00Z"],
     "options.awa_beat.end_time", "never fire"),
])
def test_cli_refusals_name_the_entry_and_field_and_write_nothing(
        shared_matrix_db: MatrixDB, args: list[str], field: str, words: str) -> None:
    before = stored_rows(shared_matrix_db.url)
    for command in (["add", "fresh", "--task", "t", "--cron", "0 9 * * *"],
                    ["edit", "bound-max-runs"]):
        result = cli(shared_matrix_db, *command, *args)
        entry = command[1]
        assert result.exit_code == 1, result.output
        line = result.output
        assert line.startswith(f"error: invalid schedule field: entry {entry!r}, field "
                               f"{field!r}: "), line
        assert line.count("\n") == 1 and words in line and "Traceback" not in line
        assert stored_rows(shared_matrix_db.url) == before


def test_cli_option_awa_beat_merges_with_the_other_flags(matrix_db: MatrixDB) -> None:
    added = cli(matrix_db, "add", "merged", "--task", "t", "--cron", "0 9 * * *",
                "--option", 'awa_beat={"max_runs": 3, "at_most_once": true}',
                "--option", "expires=60", "--queue", "reports", "--tz", "Europe/Paris",
                "--policy", "catch_up", "--deadline", "600")
    assert added.exit_code == 0, added.output
    data = shown(matrix_db, "merged")
    assert (data["max_runs"], data["deadline"], data["timezone"], data["policy"],
            data["queue"]) == (3, 600.0, "Europe/Paris", "catch_up", "reports")
    assert data["metadata"]["awa_beat"]["at_most_once"] is True
    assert data["metadata"]["celery"]["options"] == {"expires": 60, "queue": "reports"}
    edited = cli(matrix_db, "edit", "merged", "--option", 'awa_beat={"max_runs": 4}',
                 "--tz", "UTC")
    assert edited.exit_code == 0, edited.output
    data = shown(matrix_db, "merged")
    assert (data["max_runs"], data["timezone"]) == (4, "UTC")
