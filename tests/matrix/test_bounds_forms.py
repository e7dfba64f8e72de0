"""Bounds (start_time, end_time, max_runs, one_off), overlap and deadline, and the
catch-up window and the jitter as fields of the dashboard's add and edit forms, in
Chromium, and of the Django admin's change page and runtime form, for every schedule type
of the catalogue, in both layouts (issue 34, defect 4; issue 38). The API and
command-line cells are in test_bounds.py and test_window_jitter.py.

Every type is stored here owned at run time (the forms edit only such rows).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from awa_beat._db.database import Database
from awa_beat._ops.records import ScheduleBounds
from awa_beat._testing import TempDatabases

# Skips this module as it skips its own without Chromium or Playwright.
from tests.acceptance.test_web import CHROMIUM, WebConfig, expect, serve, sync_api
from tests.conftest import LAYOUTS
from tests.matrix.catalogue import CATALOGUE, NAMES, store_catalogue, stored_rows

pytestmark = pytest.mark.acceptance
UTC = timezone.utc
ROOT = Path(__file__).resolve().parents[2]
END = datetime(2034, 1, 1, tzinfo=UTC)
#: What each type's edit form shows of its bounds, as stored by the catalogue.
SHOWN = {
    "bound-start": {"start_time": "2030-06-01T00:00:00+00:00"},
    "bound-end": {"end_time": "2035-01-01T00:00:00+00:00"},
    "bound-max-runs": {"max_runs": "3"},
    "retired": {"max_runs": "2"},
}
#: Another calendar of each type for the form (kind stays), default an hourly cron.
OTHER = {"grid-interval": "0 */20 * * * *", "offgrid-interval": "11",
         "solar": "sunset:48.8566:2.3522",
         "rrule": "@rrule DTSTART=20260105T090000;FREQ=WEEKLY;BYDAY=MO"}


@pytest.fixture(scope="module")
def runtime_dbs(databases: TempDatabases) -> dict[str, str]:
    """Per layout, a database holding every type owned at run time. Made before the
    browser starts: awa-pg's migration runs an event loop that cannot start inside
    Playwright's."""
    urls = {}
    for layout in LAYOUTS:
        url = databases.fresh(layout)
        store_catalogue(url, owner="runtime")
        urls[layout] = url
    return urls


@pytest.fixture(scope="module")
def page(runtime_dbs: dict[str, str]) -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(10_000)
        yield context.new_page()
        context.close()
        browser.close()


@pytest.fixture(scope="module", params=LAYOUTS)
def site(request: pytest.FixtureRequest, runtime_dbs: dict[str, str],
         page: Any) -> Iterator[tuple[str, str]]:
    """(the dashboard's URL, its database's URL), per layout."""
    url = runtime_dbs[str(request.param)]
    for web in serve(url, WebConfig()):
        yield web, url


def bounds_of(url: str, name: str) -> tuple[Any, ...]:
    with Database(url) as store:
        b = ScheduleBounds.of(store.schedules.get(name))
    return b.start_time, b.end_time, b.max_runs, b.one_off, b.overlap, b.deadline


def post(page: Any, web: str, path: str) -> int:
    """Submit the form; the status of the POST itself (303 when written)."""
    with page.expect_response(lambda r: r.url.startswith(f"{web}{path}")
                              and r.request.method == "POST") as response:
        page.click("#save")
    status: int = response.value.status
    return status


def edit_form(page: Any, web: str, name: str) -> None:
    response = page.goto(f"{web}/schedule/edit?name={name}")
    assert response is not None and response.status == 200, page.inner_text("body")[:300]


@pytest.mark.parametrize("name", [n for n in NAMES if CATALOGUE[n].marker != "at"])
def test_dashboard_edit_shows_sets_keeps_and_removes_each_bound(
        page: Any, site: tuple[str, str], name: str) -> None:
    web, url = site
    edit_form(page, web, name)
    for field, value in SHOWN.get(name, {}).items():
        expect(page.locator(f"input[name={field}]")).to_have_value(value)
    expect(page.locator("input[type=checkbox][name=one_off]")).to_be_checked(
        checked=name == "one-off")
    page.fill("input[name=start_time]", "2030-07-01T02:00:00+02:00")
    page.fill("input[name=end_time]", "2034-01-01T00:00:00Z")
    page.fill("input[name=max_runs]", "40")
    page.uncheck("input[type=checkbox][name=one_off]")
    page.select_option("select[name=overlap]", "skip")
    page.fill("input[name=deadline]", "15m")
    assert post(page, web, "/schedule/edit") == 303
    set_ = (datetime(2030, 7, 1, tzinfo=UTC), END, 40, False, "skip", 900.0)
    assert bounds_of(url, name) == set_
    edit_form(page, web, name)  # the calendar alone: the bounds stay
    expect(page.locator("input[name=max_runs]")).to_have_value("40")
    page.fill("input[name=schedule]", OTHER.get(name, "45 * * * *"))
    assert post(page, web, "/schedule/edit") == 303
    assert bounds_of(url, name) == set_
    edit_form(page, web, name)
    page.check("input[type=checkbox][name=one_off]")
    page.fill("input[name=max_runs]", "")
    assert post(page, web, "/schedule/edit") == 303
    assert bounds_of(url, name)[2:4] == (1, True)
    edit_form(page, web, name)  # emptied fields remove their bound
    for field in ("start_time", "end_time", "max_runs", "deadline"):
        page.fill(f"input[name={field}]", "")
    page.uncheck("input[type=checkbox][name=one_off]")
    page.select_option("select[name=overlap]", "")
    assert post(page, web, "/schedule/edit") == 303
    assert bounds_of(url, name) == (None, None, None, False, "allow", None)
    assert " | " not in stored_rows(url)[name]["cron_expr"]


def test_dashboard_at_keeps_its_one_run_and_refuses_bounds(page: Any,
                                                           site: tuple[str, str]) -> None:
    web, url = site
    before = stored_rows(url)["at"]
    edit_form(page, web, "at")
    expect(page.locator("input[name=schedule]")).to_have_value("2031-01-01T09:00:00Z")
    expect(page.locator("input[type=checkbox][name=one_off]")).to_be_checked()
    page.fill("input[name=max_runs]", "3")
    assert post(page, web, "/schedule/edit") == 400
    expect(page.locator("#problems")).to_contain_text("Nothing was written")
    expect(page.locator("#problems")).to_contain_text("options.awa_beat.max_runs")
    expect(page.locator("input[name=max_runs]")).to_have_value("3")  # kept, to fix
    assert stored_rows(url)["at"] == before


@pytest.mark.parametrize(("kind", "schedule", "zone"), [
    ("cron", "0 9 * * *", ""), ("every", "600", ""), ("every", "7", ""),
    ("solar", "sunrise:48.8566:2.3522", ""),
    ("cron", "@rrule DTSTART=20260105T090000;FREQ=WEEKLY;BYDAY=MO,WE", "Europe/Berlin"),
])
def test_dashboard_add_with_every_bound(page: Any, site: tuple[str, str], kind: str,
                                        schedule: str, zone: str) -> None:
    web, url = site
    new = f"web-{kind}-{schedule.split(' ')[0].split(':')[0]}"
    page.goto(f"{web}/schedule/new")
    page.fill("input[name=name]", new)
    page.fill("input[name=task]", "t.added")
    page.select_option("select[name=kind]", kind)
    page.fill("input[name=schedule]", schedule)
    page.fill("input[name=timezone]", zone)
    page.fill("input[name=start_time]", "2030-07-01T00:00:00Z")
    page.fill("input[name=end_time]", "2034-01-01T00:00:00Z")
    page.fill("input[name=max_runs]", "3")
    page.select_option("select[name=overlap]", "skip")
    page.fill("input[name=deadline]", "900")
    assert post(page, web, "/schedule/add") == 303
    assert bounds_of(url, new) == (datetime(2030, 7, 1, tzinfo=UTC), END, 3, False, "skip",
                                   900.0)


def test_dashboard_add_at_and_one_off(page: Any, site: tuple[str, str]) -> None:
    web, url = site
    for new, kind, schedule in (("web-at", "at", "2031-01-01T09:00:00Z"),
                                ("web-once", "cron", "45 4 * * *")):
        page.goto(f"{web}/schedule/new")
        page.fill("input[name=name]", new)
        page.fill("input[name=task]", "t.once")
        page.select_option("select[name=kind]", kind)
        page.fill("input[name=schedule]", schedule)
        page.check("input[type=checkbox][name=one_off]")
        assert post(page, web, "/schedule/add") == 303
        assert bounds_of(url, new)[2:4] == (1, True)


@pytest.mark.parametrize(("field", "value", "problem"), [
    ("max_runs", "three", "a whole number of runs"),
    ("max_runs", "0", "whole number >= 1"),
    ("start_time", "tomorrow", "ISO 8601"),
    ("deadline", "soon", "seconds after the fire"),
])
def test_dashboard_a_bad_bound_is_named_and_nothing_is_written(
        page: Any, site: tuple[str, str], field: str, value: str, problem: str) -> None:
    web, url = site
    before = stored_rows(url)["bound-end"]
    edit_form(page, web, "bound-end")
    page.fill(f"input[name={field}]", value)
    assert post(page, web, "/schedule/edit") == 400
    expect(page.locator("#problems")).to_contain_text(field)
    expect(page.locator("#problems")).to_contain_text(problem)
    assert stored_rows(url)["bound-end"] == before


@pytest.mark.parametrize("name", [n for n in NAMES if CATALOGUE[n].state != "retired"])
def test_dashboard_shows_sets_and_removes_the_window_and_the_jitter(
        page: Any, site: tuple[str, str], name: str) -> None:
    web, url = site
    edit_form(page, web, name)
    page.fill("input[name=catch_up_window]", "5m")
    page.fill("input[name=jitter]", "0.25")
    assert post(page, web, "/schedule/edit") == 303
    assert timing_of(url, name) == (300.0, 0.25)
    page.goto(f"{web}/schedule?name={name}")
    expect(page.locator("#catch-up-window")).to_contain_text("300 s")
    expect(page.locator("#jitter")).to_contain_text("up to 0.25 s")
    if CATALOGUE[name].marker != "at" and not CATALOGUE[name].paused:
        expect(page.locator("#preview td[data-run-at]").first).to_be_visible()
    edit_form(page, web, name)
    expect(page.locator("input[name=catch_up_window]")).to_have_value("300")
    expect(page.locator("input[name=jitter]")).to_have_value("0.25")
    page.fill("input[name=catch_up_window]", "")
    page.fill("input[name=jitter]", "")
    assert post(page, web, "/schedule/edit") == 303
    assert timing_of(url, name) == (None, None)
    page.goto(f"{web}/schedule?name={name}")
    expect(page.locator("#catch-up-window")).to_have_count(0)


@pytest.mark.parametrize(("field", "value", "problem"), [
    ("catch_up_window", "0.5", "at least 1 s"),
    ("catch_up_window", "soon", "older than this many seconds"),
    ("jitter", "0", "positive"),
])
def test_dashboard_a_bad_window_or_jitter_is_named_and_nothing_is_written(
        page: Any, site: tuple[str, str], field: str, value: str, problem: str) -> None:
    web, url = site
    before = stored_rows(url)["bound-end"]
    edit_form(page, web, "bound-end")
    page.fill(f"input[name={field}]", value)
    assert post(page, web, "/schedule/edit") == 400
    expect(page.locator("#problems")).to_contain_text(field)
    expect(page.locator("#problems")).to_contain_text(problem)
    assert stored_rows(url)["bound-end"] == before


def timing_of(url: str, name: str) -> tuple[Any, ...]:
    with Database(url) as store:
        b = ScheduleBounds.of(store.schedules.get(name))
    return b.catch_up_window, b.jitter


@pytest.mark.parametrize("layout", LAYOUTS)
def test_django_admin_change_page_and_runtime_form(databases: TempDatabases,
                                                    layout: str) -> None:
    """The admin's cases (django_bounds_cases.py) in a pytest of their own, on a database
    holding every type owned at run time: Django takes one configuration per process."""
    url = databases.fresh(layout)
    store_catalogue(url, owner="runtime")
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["AWA_BEAT_MATRIX_LAYOUT"] = layout
    env["AWA_BEAT_DJANGO_TEST_URL"] = url
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(ROOT / "tests" / "matrix" / "django_bounds_cases.py")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout


# -- overlap buffer_one and pause after failures (docs/operating-time.md) ---------------------


def test_dashboard_sets_buffer_one_on_every_type(page: Any, site: tuple[str, str]) -> None:
    web, url = site
    for name in NAMES:
        edit_form(page, web, name)
        page.select_option("select[name=overlap]", "buffer_one")
        assert post(page, web, "/schedule/edit") == 303, name
        assert bounds_of(url, name)[4] == "buffer_one", name
        edit_form(page, web, name)
        expect(page.locator("select[name=overlap]")).to_have_value("buffer_one")
        page.select_option("select[name=overlap]", "")
        assert post(page, web, "/schedule/edit") == 303, name
        assert bounds_of(url, name)[4] == "allow", name


def test_dashboard_pause_after_failures_its_note_and_resume(page: Any,
                                                            site: tuple[str, str]) -> None:
    from awa_beat._bridge.messages import fire_task_id
    from awa_beat.outcomes import Report, outcome_params

    web, url = site
    name = "grid-interval"
    edit_form(page, web, name)
    page.select_option("select[name=dispatch]", "awa")
    page.fill("input[name=pause_after_failures]", "2")
    assert post(page, web, "/schedule/edit") == 400  # Awa dispatch cannot be paused so
    expect(page.locator("#problems")).to_contain_text("pause_after_failures")
    expect(page.locator("#problems")).to_contain_text("cannot be paused on failure")
    if _awa_layout(url):
        return  # Celery dispatch is refused where Awa owns awa.jobs
    page.select_option("select[name=dispatch]", "celery")
    page.fill("input[name=pause_after_failures]", "2")
    assert post(page, web, "/schedule/edit") == 303
    with Database(url) as store:
        assert ScheduleBounds.of(store.schedules.get(name)).pause_after_failures == 2
        for minute in (1, 2):
            text = f"2026-01-05 09:0{minute}:00+00"
            store.outcomes.record(outcome_params([Report(
                fire_task_id(name, text, 0), name, text, None, "failed",
                finished_at=datetime.now(UTC), runtime=0.1, error="ValueError: down")]))
    page.goto(f"{web}/schedules")
    expect(page.locator("body")).to_contain_text(
        "paused after 2 consecutive failures; last error: ValueError: down")
    page.goto(f"{web}/schedule?name={name}")
    expect(page.locator("#row")).to_contain_text("by awa-beat")
    page.click("#resume")
    expect(page.locator("#pause")).to_be_visible()
    assert stored_rows(url)[name]["paused_by"] is None


def _awa_layout(url: str) -> bool:
    with Database(url) as store:
        return bool(store.awa_owned)
