"""Matrix, validation on the dashboard in Chromium (issue 34, defects 7 and 8): rows that
can never fire again carry a flag on the list and their page; the add form refuses by
field, never with a 500. Both layouts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

# Skips this module as it skips its own without Chromium or Playwright.
from tests.acceptance.test_web import WebConfig, serve
from tests.matrix.test_validation import SPENT, nested, spent_url
from tests.matrix.test_web import browser, page

pytestmark = pytest.mark.acceptance
__all__ = ["browser", "page", "spent_url"]  # fixtures


@pytest.fixture
def dashboard(spent_url: str) -> Iterator[str]:
    yield from serve(spent_url, WebConfig())


def test_dashboard_flags_rows_that_can_never_fire(dashboard: str, page: Any) -> None:
    page.goto(f"{dashboard}/schedules")
    flagged = page.locator("tr:has(.never-fires) td:first-child a")
    assert sorted(flagged.all_inner_texts()) == sorted(SPENT)
    page.goto(f"{dashboard}/schedule?name=spent-end")
    assert "its end_time 2026-01-01T00:00:00Z is past" in \
        page.locator("#never-fires").inner_text()
    page.goto(f"{dashboard}/schedule?name=healthy")
    assert page.locator("#never-fires").count() == 0


@pytest.mark.parametrize(("schedule", "args", "words"), [
    ("*/5 * * * *", nested(1999), ["args", "nested too deep"]),
    ("*/5 * * * *", nested(150), ["args", "nested more than 100"]),
    ("0 0 30 2 *", "[]", ["schedule", "never fire"]),
])
def test_dashboard_add_form_refuses_by_field_not_500(dashboard: str, page: Any, schedule: str,
                                                     args: str, words: list[str]) -> None:
    page.goto(f"{dashboard}/schedule/new")
    page.fill("input[name=name]", "web-refused")
    page.fill("input[name=task]", "t")
    page.fill("input[name=schedule]", schedule)
    page.fill("input[name=args]", args)
    with page.expect_response(f"{dashboard}/schedule/add") as response:
        page.click("#save")
    assert response.value.status == 400
    problems = page.locator("#problems").inner_text()
    assert "Nothing was written" in problems and all(w in problems for w in words), problems
