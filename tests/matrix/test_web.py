"""Matrix, the dashboard in Chromium: the list with every filter and a search, the page of
every type, and the add and edit forms, in both layouts.

One ``awa-beat web`` server per layout and one browser serve the module. The list page
with every type is saved as ``matrix-schedules-<layout>.png`` in $AWA_BEAT_SCREENSHOTS
(else the test's temporary directory).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

# Skips this module as it skips its own without Chromium or Playwright.
from tests.acceptance.test_web import CHROMIUM, WebConfig, expect, serve, sync_api
from tests.conftest import LAYOUTS
from tests.matrix.catalogue import (
    CATALOGUE,
    FORMS,
    NAMES,
    PAUSED_BY,
    MatrixDB,
    as_if_on_time,
    stored_rows,
)

pytestmark = pytest.mark.acceptance
UTC = timezone.utc
SHOTS = os.environ.get("AWA_BEAT_SCREENSHOTS")


@pytest.fixture(scope="module")
def web_url(shared_matrix_db: MatrixDB) -> Iterator[str]:
    yield from serve(shared_matrix_db.url, WebConfig())


@pytest.fixture(scope="module")
def browser(matrix_templates: Any) -> Iterator[Any]:
    # Both layouts' databases first: awa-pg's migration runs an event loop of its own,
    # which cannot start inside Playwright's.
    for layout in LAYOUTS:
        matrix_templates.template(layout)
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def page(browser: Any) -> Iterator[Any]:
    """One page for the module's tests, each of which starts with a navigation."""
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    context.set_default_timeout(10_000)
    yield context.new_page()
    context.close()


def forms_on_standalone(db: MatrixDB) -> None:
    """The forms write through the operations the API and CLI cells drive in both layouts:
    they run on the standalone layout only."""
    if db.layout != "standalone":
        pytest.skip("forms: standalone layout only")


def goto(page: Any, url: str) -> None:
    response = page.goto(url)
    assert response is not None and response.status == 200, (
        response and response.status, page.inner_text("body")[:300])


def saved(page: Any) -> None:
    """Submit the form; the page it leads to must answer."""
    with page.expect_navigation() as navigation:
        page.click("#save")
    response = navigation.value
    assert response is not None and response.status == 200, (
        response and response.status, page.inner_text("body")[:300])


def shown_names(page: Any) -> set[str]:
    rows = page.locator("#schedules tbody tr[data-name]")
    return {rows.nth(i).get_attribute("data-name") for i in range(rows.count())}


def utc_text(t: datetime | None) -> str:
    assert t is not None
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


# -- the list ----------------------------------------------------------------------------------


def test_the_list_shows_every_type(page: Any, web_url: str, shared_matrix_db: MatrixDB,
                                   tmp_path: Path) -> None:
    response = page.goto(f"{web_url}/schedules")
    shots = Path(SHOTS) if SHOTS else tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / f"matrix-schedules-{shared_matrix_db.layout}.png"),
                    full_page=True)
    assert response is not None and response.status == 200, page.inner_text("body")[:300]
    expect(page.locator("#total")).to_have_text(f"{len(NAMES)} matching")
    assert shown_names(page) == set(NAMES)
    for name, entry in CATALOGUE.items():
        row = page.locator(f"tr[data-name='{name}']")
        expect(row).to_contain_text(name)
        if entry.state == "paused":
            expect(row).to_contain_text(PAUSED_BY)
        if entry.paused:  # no countdown to a fire that will not come
            assert row.locator(".countdown").count() == 0, name


def expected(**where: Any) -> set[str]:
    return {n for n, e in CATALOGUE.items()
            if all(getattr(e, k) == v if not callable(v) else v(e) for k, v in where.items())}


#: query -> the names it must show
FILTERS: dict[str, set[str]] = {
    "paused=yes": expected(paused=True),
    "paused=no": expected(paused=False),
    "owner=matrix": set(NAMES),  # runtime rows written through it included
    "owner=~runtime": expected(owner="runtime"),
    "owner=~none": set(),
    "state=failing": set(),
    "q=INTERVAL": {"grid-interval", "offgrid-interval"},
    "q=bound&paused=no&owner=~runtime": {"bound-start", "bound-max-runs"},
    "q=zone": {"cron-zone"},
}


@pytest.mark.parametrize("query", list(FILTERS))
def test_each_filter_and_search_shows_its_types(page: Any, web_url: str, query: str) -> None:
    goto(page, f"{web_url}/schedules?{query}")
    assert shown_names(page) == FILTERS[query]
    expect(page.locator("#total")).to_have_text(f"{len(FILTERS[query])} matching")


def test_the_overdue_filter(page: Any, web_url: str, shared_matrix_db: MatrixDB) -> None:
    as_if_on_time(shared_matrix_db.url, late=["offgrid-interval"])
    goto(page, f"{web_url}/schedules?state=overdue")
    assert shown_names(page) == {"offgrid-interval"}
    expect(page.locator("#total")).to_have_text("1 matching")


def test_filtering_through_the_form(page: Any, web_url: str) -> None:
    goto(page, f"{web_url}/schedules")
    page.fill("input[name=q]", "e")  # in both names
    page.select_option("select[name=paused]", "yes")
    page.select_option("select[name=owner]", "matrix")
    page.click("button:has-text('Filter')")
    expect(page.locator("#total")).to_have_text("2 matching")
    assert shown_names(page) == {"paused", "retired"}


# -- each schedule's page ------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_the_page_of_each_type(page: Any, web_url: str, name: str) -> None:
    entry = CATALOGUE[name]
    goto(page, f"{web_url}/schedule?name={name}")
    row = page.locator("#row")
    expect(row).to_contain_text(entry.cron_expr)
    expect(row).to_contain_text(entry.timezone)
    upcoming = page.locator("#upcoming")
    if entry.state == "active":
        now = datetime.now(UTC)
        first = {utc_text(entry.calendar(now)), utc_text(entry.calendar(datetime.now(UTC)))}
        assert any(t in upcoming.inner_text() for t in first), upcoming.inner_text()
    else:  # no countdown to a fire that will not come
        assert page.locator(".countdown").count() == 0
    # Only runtime rows are edited here; a beat_schedule's are changed where configured.
    expect(page.locator("#edit")).to_have_count(1 if entry.owner == "runtime" else 0)


# -- the forms ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(FORMS))
def test_add_each_type_through_the_form(page: Any, web_url: str, shared_matrix_db: MatrixDB,
                                        name: str) -> None:
    forms_on_standalone(shared_matrix_db)
    entry, new = CATALOGUE[name], f"web-{name}"
    kind, schedule, zone, bounds = FORMS[name]
    goto(page, f"{web_url}/schedule/new")
    page.fill("input[name=name]", new)
    page.fill("input[name=task]", entry.task)
    page.select_option("select[name=kind]", kind)
    page.fill("input[name=schedule]", schedule)
    page.fill("input[name=timezone]", zone)
    for field_, value in bounds.items():
        field = page.locator(f"[name={field_}]:not([type=hidden])")
        assert field.count() == 1, f"no {field_} field"
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        elif field.get_attribute("type") == "checkbox":
            field.check()
        else:
            field.fill(value)
    saved(page)
    expect(page.locator("#flash")).to_have_text("Added.")
    expect(page.locator("#row")).to_contain_text(entry.cron_expr)
    row = stored_rows(shared_matrix_db.url)[new]
    assert (row["cron_expr"], row["timezone"], row["owner"]) == (
        entry.cron_expr, entry.timezone, "runtime")
    if entry.state == "paused":
        page.click("#pause")
        expect(page.locator("#flash")).to_have_text("Paused.")


@pytest.mark.parametrize("name", [n for n in NAMES if CATALOGUE[n].owner == "runtime"])
def test_edit_each_runtime_type_through_the_form(page: Any, web_url: str,
                                                 shared_matrix_db: MatrixDB, name: str) -> None:
    forms_on_standalone(shared_matrix_db)
    entry = CATALOGUE[name]
    before = stored_rows(shared_matrix_db.url)[name]
    goto(page, f"{web_url}/schedule?name={name}")
    page.click("#edit")
    kind, schedule = entry.form_schedule()
    expect(page.locator("select[name=kind]")).to_have_value(kind)
    expect(page.locator("input[name=schedule]")).to_have_value(schedule)
    page.fill("input[name=queue]", "reports")
    saved(page)
    expect(page.locator("#flash")).to_have_text("Saved.")
    assert stored_rows(shared_matrix_db.url)[name] == before  # calendar, state, owner stay
    expect(page.locator("#row")).to_contain_text("reports")
