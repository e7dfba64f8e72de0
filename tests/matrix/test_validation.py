"""Matrix, validation (issue 34, defects 7 and 8): every refusal names the entry and the
field on one line, writes nothing and shows no traceback, through the CLI, the Python API
and the dashboard; values PostgreSQL would refuse are refused first, and when one gets
to it all the same it is the data's fault, never an outage; one odd row of an import is
left out by name; schedules that can never fire are refused when written, and rows that
already cannot are flagged by ``doctor``, ``list``/``show`` and the dashboard. Both table
layouts, a real PostgreSQL (and Redis, Chromium where they run).
"""

from __future__ import annotations

import json
import os
import random
import string
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import psycopg
import pytest
from click.testing import Result
from dateutil.rrule import DAILY, rrule

from awa_beat import Schedules
from awa_beat._beat.node import BeatNode
from awa_beat._db.database import Database, connect
from awa_beat._schedules.calendars import at
from awa_beat._schedules.spec import ScheduleSpec, specs_from_beat_schedule
from awa_beat.errors import DataRefused, ValidationError
from tests.integration.test_cli import run
from tests.matrix.catalogue import NAMES, SETTINGS, MatrixDB

pytestmark = pytest.mark.integration
UTC = timezone.utc


def cli(url: str, *args: str) -> Result:
    return run(*args, "--database-url", url)


def names(url: str) -> set[str]:
    with connect(url) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM awa.cron_jobs")}


def refused(result: Result, entry: str, field: str, *words: str) -> None:
    """Exit 1, no traceback, and one line naming ``entry`` and ``field`` with ``words``."""
    out = result.output
    assert result.exit_code == 1, out
    assert "Traceback" not in out and out.startswith("error: "), out
    line = next((ln for ln in out.splitlines() if f"field {field!r}" in ln), "")
    assert repr(entry)[:40].rstrip("'") in line, out
    for word in words:
        assert word in line, out


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# -- the CLI: add and edit --------------------------------------------------------------------


@pytest.mark.parametrize(("args", "field", "words"), [
    (["--every", "²"], "--every", ["'²': give an interval"]),
    (["--every", "99999999999999999999d"], "--every", ["at most 3660 days"]),
    (["--at", "0001-01-01T00:00:00+14:00"], "--at", ["out of range"]),
    (["--every", "1m", "--args", nested(5000)], "--args", ["nested too deep"]),
    (["--every", "1m", "--option", "headers=" + nested(5000)], "--option", ["nested too deep"]),
])
def test_add_options_that_were_tracebacks_are_one_line_errors(
        db_url: str, args: list[str], field: str, words: list[str]) -> None:
    result = cli(db_url, "add", "x", "--task", "t", *args)
    refused(result, "x", field, *words)
    assert len(result.output.splitlines()) == 1
    assert "x" not in names(db_url)


SURROGATE = "bad\udc80name"  # what Python makes of a command line byte that is not UTF-8


@pytest.mark.parametrize(("name", "args", "field", "words"), [
    ("n" * 2700, ["--every", "1m"], "name", ["2700 bytes", "at most 2000"]),
    (SURROGATE, ["--every", "1m"], "name", ["lone surrogate"]),
    ("deep", ["--every", "1m", "--args", nested(150)], "args", ["nested more than 100"]),
    ("big", ["--every", "1m", "--kwargs", json.dumps({"blob": "x" * (1 << 20)})], "kwargs",
     ["at most 1048576"]),
    ("blank", ["--every", "1m", "--task", "   "], "task", ["not blank"]),
    ("feb-30", ["--cron", "0 0 30 2 *"], "schedule", ["never fire"]),
    ("past", ["--at", "2020-01-01T00:00:00+00:00"], "schedule", ["is past", "never fire"]),
])
def test_add_refuses_by_entry_and_field_and_writes_nothing(
        db_url: str, name: str, args: list[str], field: str, words: list[str]) -> None:
    task = [] if "--task" in args else ["--task", "t"]
    refused(cli(db_url, "add", name, *task, *args), name, field, *words)
    assert names(db_url) == set()


def test_edit_refuses_and_leaves_the_row_as_it_was(db_url: str) -> None:
    assert cli(db_url, "add", "kept", "--task", "t", "--every", "1m").exit_code == 0
    before = cli(db_url, "show", "kept", "--json").output
    for args, field in ((["--args", nested(150)], "args"), (["--cron", "0 0 31 4 *"], "schedule"),
                        (["--task", " "], "task")):
        refused(cli(db_url, "edit", "kept", *args), "kept", field)
    assert cli(db_url, "show", "kept", "--json").output == before


# -- the Python API ------------------------------------------------------------------------


@pytest.mark.parametrize(("changes", "field", "words"), [
    ({"args": {"a": 1}}, "args", ["a dict would give its keys alone"]),
    ({"args": {"a", "b"}}, "args", ["a set has no fixed order"]),
    ({"options": {"awa_beat": {"tags": {"a": 1}}}}, "options.awa_beat.tags", ["dict"]),
    ({"schedule": rrule(DAILY, dtstart=datetime(2027, 1, 1), count=0)}, "schedule",
     ["never fire"]),
    ({"schedule": rrule(DAILY, dtstart=datetime(2027, 1, 1), until=datetime(2026, 1, 1))},
     "schedule", ["never fire"]),
    ({"options": {"awa_beat": {"end_time": "2026-01-01T00:00:00Z"}}},
     "options.awa_beat.end_time", ["is past", "never fire"]),
    ({"schedule": at(datetime(2026, 1, 1, tzinfo=UTC))}, "schedule", ["is past"]),
])
def test_the_api_refuses_coercions_and_schedules_that_never_fire(
        db_url: str, changes: dict[str, Any], field: str, words: list[str]) -> None:
    entry: dict[str, Any] = {"task": "t", "schedule": 60, **changes}
    with Schedules(db_url, settings=SETTINGS) as schedules, \
            pytest.raises(ValidationError) as info:
        schedules.add("e", **entry)
    [(name, got, message)] = info.value.problems
    assert (name, got) == ("e", field)
    assert all(w in message for w in words), message
    assert names(db_url) == set()


# -- values that reach PostgreSQL anyway: the data's fault, not an outage ----------------------


def raw_row(name: str, **over: Any) -> dict[str, Any]:
    return {"name": name, "cron_expr": "0 9 * * *", "timezone": "UTC", "kind": "t",
            "queue": "default", "args": {"args": [], "kwargs": {}}, "priority": 2,
            "max_attempts": 25, "tags": [], "metadata": {}, "missed_fire_policy": "coalesce",
            **over}


#: A name of 2700 bytes that does not compress (PostgreSQL compresses a long index entry).
LONG_NAME = "".join(random.Random(34).choices(string.ascii_letters, k=2700))


@pytest.mark.parametrize("row", [raw_row(LONG_NAME), raw_row(SURROGATE)],
                         ids=["name-2700-bytes", "lone-surrogate"])
def test_data_postgresql_refuses_is_data_refused_not_database_unavailable(
        db_url: str, row: dict[str, Any]) -> None:
    with Database(db_url) as store, pytest.raises(DataRefused) as info:
        store.schedules.sync([row], deployment="matrix")
    assert "syncing schedules failed" in str(info.value)
    assert names(db_url) == set()


def test_beat_start_up_with_data_postgresql_refuses_stops_at_once(db_url: str) -> None:
    # A spec built directly, past validation (as a third-party caller could).
    spec = ScheduleSpec(name=LONG_NAME, kind="t", cron_expr="0 9 * * *")
    node = BeatNode(SETTINGS, [spec], database_url=db_url)
    started = time.monotonic()
    with pytest.raises(DataRefused):
        node.open()
    # The start-up timeout is 300 s: no retry as if the database were down.
    assert time.monotonic() - started < 30


# -- schedules stored before, that can no longer fire ---------------------------------------

SPENT = {
    "spent-end": {"task": "t", "schedule": 60,
                  "options": {"awa_beat": {"end_time": "2026-01-01T00:00:00Z"}}},
    "spent-at": {"task": "t", "schedule": at(datetime(2026, 1, 1, tzinfo=UTC))},
    "spent-rrule": {"task": "t", "schedule": rrule(DAILY, dtstart=datetime(2025, 1, 1),
                                                   count=3)},
}
HEALTHY = {"healthy": {"task": "t", "schedule": 60}}


def register(url: str, entries: dict[str, Any]) -> None:
    """As a beat's start-up sync registers its beat_schedule: a configuration is read
    without a clock, so a bound that has passed since it was written is stored."""
    specs = specs_from_beat_schedule(entries, default_timezone="UTC")
    BeatNode(SETTINGS, specs, database_url=url).open().close()


@pytest.fixture
def spent_url(db_url: str) -> str:
    register(db_url, {**SPENT, **HEALTHY})
    return db_url


def test_doctor_list_and_show_flag_rows_that_can_never_fire(spent_url: str) -> None:
    doctor = cli(spent_url, "doctor")
    assert doctor.exit_code == 1, doctor.output
    assert "3 schedule(s) that can never fire again" in doctor.output
    for name, why in (("spent-end", "its end_time 2026-01-01T00:00:00Z is past"),
                      ("spent-at", "its one fire, at 2026-01-01T00:00:00Z, is past"),
                      ("spent-rrule", "its calendar has no fire time after")):
        assert f"{name}: {why}" in doctor.output
        shown = cli(spent_url, "show", name)
        assert "NEVER FIRES" in shown.output and why in shown.output
    assert "healthy:" not in doctor.output
    listed = {r["name"]: r for r in json.loads(cli(spent_url, "list", "--json").output)}
    assert {n for n, r in listed.items() if r["never_fires"]} == set(SPENT)
    assert listed["healthy"]["never_fires"] is None
    assert cli(spent_url, "list").output.count("NEVER FIRES") == 3


def test_no_schedule_of_the_catalogue_is_flagged(shared_matrix_db: MatrixDB) -> None:
    """The retired one is done as meant, the paused one waits, bounds to come are fine."""
    db = shared_matrix_db
    listed = json.loads(cli(db.url, "list", "--json").output)
    assert sorted(r["name"] for r in listed) == sorted(NAMES)
    assert [r["name"] for r in listed if r["never_fires"]] == []
    assert "0 schedule(s) that can never fire again" in cli(db.url, "doctor").output


# -- imports: one odd row is left out by name, the rest carried over -------------------------

DJANGO_TABLES = """
CREATE TABLE django_celery_beat_intervalschedule (id int PRIMARY KEY, every bigint,
    period text);
CREATE TABLE django_celery_beat_clockedschedule (id int PRIMARY KEY, clocked_time timestamptz);
CREATE TABLE django_celery_beat_periodictask (id serial PRIMARY KEY, name text, task text,
    interval_id int, crontab_id int, solar_id int, clocked_id int, args text, kwargs text,
    queue text, exchange text, routing_key text, headers text, priority int,
    expires timestamptz, expire_seconds int, one_off bool DEFAULT false,
    start_time timestamptz, enabled bool DEFAULT true, last_run_at timestamptz,
    total_run_count int DEFAULT 0);
INSERT INTO django_celery_beat_intervalschedule VALUES (1, 10, 'seconds'),
    (2, 2147483648, 'days');
INSERT INTO django_celery_beat_clockedschedule VALUES (1, '0001-01-01 00:00:00+00');
INSERT INTO django_celery_beat_periodictask (name, task, interval_id, clocked_id, one_off,
    start_time) VALUES
    ('fine', 't.fine', 1, NULL, false, NULL),
    ('clocked-year-1', 't.once', NULL, 1, true, NULL),
    ('interval-2-31-days', 't.huge', 2, NULL, false, NULL),
    ('start-year-1', 't.early', 1, NULL, false, '0001-06-01 00:00:00+00');
"""


def import_json(url: str, *args: str) -> dict[str, Any]:
    result = run("import", *args, "--database-url", url, "--json")
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    return json.loads(result.stdout)


def test_django_odd_rows_are_named_and_the_rest_imported(databases: Any, db_url: str) -> None:
    source = databases.fresh()
    with psycopg.connect(source, autocommit=True) as conn:
        conn.execute(DJANGO_TABLES)
    out = import_json(db_url, "--from-django", source)
    left_out = {i["name"]: i["reason"] for i in out["not_carried_over"]}
    assert "clocked_time 0001-01-01T00:00:00+00:00 is out of range" in left_out["clocked-year-1"]
    assert left_out["interval-2-31-days"].startswith("unusable interval")
    assert "start_time" in left_out["start-year-1"] and "out of range" in left_out["start-year-1"]
    assert names(db_url) == {"fine"}


@pytest.fixture
def redis_prefix() -> Iterator[tuple[Any, str]]:
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url("redis://127.0.0.1:6379/0", socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.skip(f"no Redis: {exc}")
    prefix = f"matrix-validation-{os.getpid()}-{time.monotonic_ns()}:"
    yield client, prefix
    for key in client.scan_iter(match=prefix.encode() + b"*"):
        client.delete(key)
    client.close()


def test_redbeat_odd_rows_are_named_and_the_rest_imported(redis_prefix: tuple[Any, str],
                                                          db_url: str) -> None:
    client, prefix = redis_prefix

    def entry(name: str, schedule: Any) -> bytes:
        return json.dumps({"name": name, "task": "t", "schedule": schedule,
                           "args": [], "kwargs": {}, "options": {}, "enabled": True}).encode()

    every = {"__type__": "interval", "every": 30.0}
    client.hset(f"{prefix}fine", "definition", entry("fine", every))
    client.hset(f"{prefix}not-utf-8", mapping={
        "definition": entry("not-utf-8", every).replace(b'"t"', b'"t\xff"')})
    client.hset(f"{prefix}freq-99", "definition", entry("freq-99", {
        "__type__": "rrule", "freq": 99, "dtstart": 1767600000}))
    out = import_json(db_url, "--from-redbeat", "redis://127.0.0.1:6379/0",
                      "--key-prefix", prefix)
    left_out = {i["name"]: i["reason"] for i in out["not_carried_over"]}
    assert left_out["not-utf-8"] == \
        "its definition is not UTF-8 text: RedBeat cannot read it either"
    assert "rrule frequency 99" in left_out["freq-99"]
    assert names(db_url) == {"fine"}
