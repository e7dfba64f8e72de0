"""What an operator sees of every schedule type (issue 34, defects 1 and 5): the
dashboard over real HTTP and in Chromium, the Django admin through Django's test client
in a real project, and the CLI, on the catalogue stored in either layout.

* Defect 1: every page and admin view answers, and describes each type in words (the
  admin's cells are in django_cases.py, which Django's one configuration per process
  keeps in a process of its own).
* Defect 5: "last fire" is never the registration time; a paused schedule shows no
  countdown; history labels a failed task failed; ``show`` lists only the runs left; a
  deadline only counts from a fire.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from celery.schedules import crontab
from click.testing import CliRunner

from awa_beat import Schedules
from awa_beat._cli import main
from awa_beat._db.database import Database, connect
from awa_beat._db.records import FireRequest
from awa_beat._ops.operations import Operations
from awa_beat._schedules.fire_times import calendar_for, next_fire_after
from awa_beat._testing import FAKE_CLOCK_TOLERANCE, FakeClock
from tests.matrix.catalogue import CATALOGUE, NAMES, SETTINGS, MatrixDB
from tests.web_server import serve

pytestmark = pytest.mark.integration
UTC = timezone.utc

#: Each type in words, as the dashboard and the admin describe it.
WORDS = {
    "cron-zone": "at 07:30, every day",
    "grid-interval": "every 10 minutes",
    "offgrid-interval": "every 7 seconds",
    "solar": "at sunrise at 48.8566, 2.3522",
    "at": "once, at 2031-01-01 09:00 UTC",
    "rrule": "every week, on Monday and Wednesday, at 09:00, from 2026-01-05 09:00",
    "crontab-and": "at 09:00, on day 13 of the month, if it falls on Friday",
    "crontab-dst-celery": "at 02:30, every day (Celery's steps over clock changes)",
    "bound-start": "at minute 0, every hour; from 2030-06-01 00:00 UTC",
    "bound-end": "at minute 0, every hour; until 2035-01-01 00:00 UTC",
    "bound-max-runs": "at minute 15, every hour; at most 3 runs",
    "one-off": "at 04:45, every day; at most 1 run (one-off)",
    "paused": "at 03:00, every day",
    "retired": "every second; at most 2 runs",
}
#: How many next fires each type has left to list (``show``, the schedule page).
RUNS_LEFT = {"at": 1, "one-off": 1, "bound-max-runs": 3, "retired": 0}


def test_every_type_of_the_catalogue_has_its_words() -> None:
    assert set(WORDS) == set(NAMES)  # a new type gets its words here


# -- the dashboard over HTTP ----------------------------------------------------------------


@pytest.fixture(scope="module")
def dashboard(shared_matrix_db: MatrixDB) -> Iterator[str]:
    yield from serve(shared_matrix_db.url)


def get(base: str, path: str, **query: str) -> str:
    """The page's text (entities decoded); fails on any status but 200."""
    url = base + path + ("?" + urllib.parse.urlencode(query) if query else "")
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200
            return html.unescape(response.read().decode())
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"GET {path} {query}: {exc.code}") from None


def row_html(page: str, name: str) -> str:
    """The list's row of ``name``."""
    match = re.search(rf'<tr data-name="{re.escape(name)}">(.*?)</tr>', page, re.S)
    assert match, f"{name} is not listed"
    return match.group(1)


def test_the_list_its_filters_and_a_search_answer_with_every_type(dashboard: str) -> None:
    everything = get(dashboard, "/schedules")
    for name in NAMES:
        assert WORDS[name] in row_html(everything, name)
    paused = get(dashboard, "/schedules", paused="yes")  # the retired one is paused
    assert {n for n in NAMES if CATALOGUE[n].paused} == set(
        re.findall(r'<tr data-name="([^"]+)">', paused))
    active = get(dashboard, "/schedules", paused="no")
    assert {n for n in NAMES if not CATALOGUE[n].paused} == set(
        re.findall(r'<tr data-name="([^"]+)">', active))
    for owner in ("~runtime", "matrix", "~none"):
        get(dashboard, "/schedules", owner=owner)
    for state in ("overdue", "failing"):
        get(dashboard, "/schedules", state=state)
    for name in NAMES:
        found = get(dashboard, "/schedules", q=name)
        assert WORDS[name] in row_html(found, name)


@pytest.mark.parametrize("name", NAMES)
def test_each_schedule_page_answers_and_lists_only_the_runs_left(dashboard: str, name: str
                                                                 ) -> None:
    page = get(dashboard, "/schedule", name=name)
    assert WORDS[name] in page
    upcoming = re.search(r'<table id="preview">.*?<tbody>(.*?)</tbody>', page, re.S)
    assert upcoming
    fires = upcoming.group(1).count("<tr data-mark=")
    assert fires == min(20, RUNS_LEFT.get(name, 20))
    if name in RUNS_LEFT:
        assert re.search(rf'id="runs-left">{RUNS_LEFT[name]}<', page)
    get(dashboard, "/schedule/remove", name=name)
    if CATALOGUE[name].owner == "runtime":
        get(dashboard, "/schedule/edit", name=name)


def test_paused_schedules_show_no_countdown_and_nothing_shows_a_registration_as_a_fire(
        dashboard: str) -> None:
    page = get(dashboard, "/schedules")
    for name in NAMES:
        row = row_html(page, name)
        cells = re.findall(r'<td class="num">(.*?)</td>', row, re.S)
        next_cell, last_cell = cells
        entry = CATALOGUE[name]
        if entry.state == "retired":
            assert "retired: no run left" in next_cell and "countdown" not in next_cell
            assert "never" not in last_cell  # its last run fired
        elif entry.paused:
            assert "paused" in next_cell and "countdown" not in next_cell
            assert "if resumed" in next_cell
        else:
            assert "countdown" in next_cell
        if entry.state != "retired":
            assert "never" in last_cell, (name, last_cell)
    assert "never" in get(dashboard, "/schedule", name="cron-zone").split(
        'id="last-fire">')[1][:200]


# -- the dashboard in Chromium -------------------------------------------------------------


def test_the_list_with_every_type_in_chromium(dashboard: str) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(f"{dashboard}/schedules")
            table = page.locator("#schedules")
            sync_api.expect(table.locator("tbody tr")).to_have_count(len(NAMES))
            for name in NAMES:
                row = table.locator(f"tr[data-name='{name}']")
                sync_api.expect(row).to_contain_text(WORDS[name])
                countdowns = row.locator(".countdown")
                sync_api.expect(countdowns).to_have_count(0 if CATALOGUE[name].paused else 1)
            ticking = table.locator("tr[data-name='at'] .countdown")  # years away
            sync_api.expect(ticking).to_have_text(re.compile(r"^in "))
            sync_api.expect(table.locator("tr[data-name='paused']")).to_contain_text("paused")
            page.screenshot(path=os.environ.get("AWA_BEAT_MATRIX_SHOT",
                                                "/tmp/awa-beat-matrix-schedules.png"),
                            full_page=True)
            assert errors == []
        finally:
            browser.close()


# -- the CLI -------------------------------------------------------------------------------


def cli(url: str, *args: str) -> Any:
    result = CliRunner().invoke(main, [*args, "--database-url", url], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_list_says_paused_and_never(shared_matrix_db: MatrixDB) -> None:
    url = shared_matrix_db.url
    listed = {s["name"]: s for s in json.loads(cli(url, "list", "--json").output)}
    for name in NAMES:
        entry, shown = CATALOGUE[name], listed[name]
        if entry.paused:
            assert shown["next_fire"] is None, name
        else:
            assert shown["next_fire"] is not None, name
        assert (shown["last_fire"] is None) == (entry.state != "retired"), name
    text = {line.split()[0]: line for line in cli(url, "list").output.splitlines()[1:]}
    assert "  paused  " in text["paused"] and "retired (no run left)" in text["retired"]
    for name in NAMES:
        if CATALOGUE[name].state != "retired":
            assert "  never  " in text[name], text[name]


@pytest.mark.parametrize("name", NAMES)
def test_show_lists_only_the_runs_left(shared_matrix_db: MatrixDB, name: str) -> None:
    shown = json.loads(cli(shared_matrix_db.url, "show", name, "--json").output)
    assert len(shown["next_fires"]) == min(10, RUNS_LEFT.get(name, 10))
    assert shown["runs_left"] == RUNS_LEFT.get(name)
    text = cli(shared_matrix_db.url, "show", name).output
    assert re.search(r"^last fire: +(never|\d{4}-)", text, re.M)


def test_a_run_fired_leaves_one_run_less_to_list(matrix_db: MatrixDB) -> None:
    name = "bound-max-runs"
    with Database(matrix_db.url) as store:
        store.clock_tolerance = FAKE_CLOCK_TOLERANCE  # fires dated ahead of now
        row = store.schedules.get(name)
        assert row.last_enqueued_at is not None
        fire = next_fire_after(calendar_for(row.cron_expr, row.timezone), row.last_enqueued_at)
        assert fire is not None
        store.evaluator.fire([FireRequest(name, row.last_enqueued_at, [fire], limited=True)])
        with Operations(store) as ops:
            view = ops.get(name)
            assert view.last_fire == fire  # the fire, at last
            assert len(ops.upcoming(view.row, count=10)) == 2
    shown = json.loads(cli(matrix_db.url, "show", name, "--json").output)
    assert len(shown["next_fires"]) == 2 and shown["last_fire"] == fire.isoformat()


def test_a_schedule_added_in_a_long_transaction_has_never_fired(matrix_db: MatrixDB
                                                                ) -> None:
    # The caller's transaction (Django's atomic(), say) began a second before the write:
    # the cursor is the second of the write, and so is the registration.
    name = "every-second"
    with connect(matrix_db.url) as conn, conn.transaction():
        conn.execute("SELECT pg_sleep(1.2)")
        with Schedules(matrix_db.url, settings=SETTINGS) as schedules:
            schedules.add(name, task="matrix.tick", schedule="* * * * * *", conn=conn)
    with Database(matrix_db.url) as store, Operations(store) as ops:
        view = ops.get(name)
        assert view.row.last_enqueued_at is not None  # a fire time of this calendar
        assert (view.last_fire, view.quiet_since) == (None, None)


def test_history_labels_a_failed_celery_task_failed(matrix_db: MatrixDB) -> None:
    if matrix_db.layout != "standalone":
        pytest.skip("Celery dispatch is refused where Awa owns the tables")
    from awa_beat._bridge.messages import fire_task_id
    from awa_beat.outcomes import Report, outcome_params

    name = "celery-task"
    with Schedules(matrix_db.url, settings=SETTINGS) as schedules:
        schedules.add(name, task="matrix.fails", schedule=crontab(minute=0),
                      options={"awa_beat": {"dispatch": "celery"}})
    with Database(matrix_db.url) as store:
        store.clock_tolerance = FAKE_CLOCK_TOLERANCE  # fires dated ahead of now
        row = store.schedules.get(name)
        assert row.last_enqueued_at is not None
        fire = next_fire_after(calendar_for(row.cron_expr, row.timezone), row.last_enqueued_at)
        assert fire is not None
        (job,) = store.evaluator.fire([FireRequest(name, row.last_enqueued_at, [fire])]).jobs
        task_id = fire_task_id(name, job.fire_time, job.job_id)
        store.outbox.mark_published([job.job_id], [task_id])  # the bridge: the job is 'completed'
        store.outcomes.record(outcome_params([Report(  # the worker: the task failed
            task_id, name, job.fire_time, job.job_id, "failed",
            finished_at=datetime.now(UTC), runtime=0.25, error="ValueError: boom")]))
    everything = cli(matrix_db.url, "history").output
    (line,) = [li for li in everything.splitlines() if f" {name} " in li]
    assert " failed " in line and "completed" not in line, everything
    assert "ValueError: boom" in line
    shown = cli(matrix_db.url, "show", name).output
    assert " failed " in shown.split("history:")[1] and "completed" not in shown
    listed = json.loads(cli(matrix_db.url, "history", "--json").output)
    assert [(o["schedule"], o["outcome"]) for o in listed if o["schedule"] == name] == [
        (name, "failed")]


# -- the deadline --------------------------------------------------------------------------


def test_a_deadline_counts_from_a_fire_not_from_the_registration(matrix_db: MatrixDB
                                                                 ) -> None:
    name = "daily-deadline"
    with Schedules(matrix_db.url, settings=SETTINGS) as schedules:
        schedules.add(name, task="matrix.daily", schedule=crontab(hour=3, minute=0),
                      options={"awa_beat": {"deadline": 1}})
    with Database(matrix_db.url) as store:
        store.clock_tolerance = FAKE_CLOCK_TOLERANCE  # fires dated ahead of now
        row = store.schedules.get(name)
        registered = row.last_enqueued_at
        assert registered is not None
        clock = FakeClock(registered + timedelta(seconds=2))
        with Operations(store, clock=clock) as ops:
            assert name not in {o.name for o in ops.overdue()}  # never due yet
            fire = next_fire_after(calendar_for(row.cron_expr, row.timezone), registered)
            assert fire is not None
            store.evaluator.fire([FireRequest(name, registered, [fire])])
            clock.now = fire + timedelta(seconds=2)  # its job has not even started
            (late,) = [o for o in ops.overdue() if o.name == name]
            assert late.reasons == (f"deadline: the fire of {fire:%Y-%m-%d %H:%M:%S} UTC did "
                                    "not succeed within 1 s",)

