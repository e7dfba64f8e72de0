"""Matrix, the preview (``awa-beat preview``, ``Schedules.preview``, the dashboard's
schedule page): every type of the catalogue, in both layouts, lists the fires of its
documented calendar (:attr:`~tests.matrix.catalogue.Entry.calendar`, computed without
awa-beat), within its runs left, none once retired, those it would have if resumed while
paused. The Django admin's change page is checked in django_cases.py (P4).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from awa_beat.errors import NotFound, ValidationError
from awa_beat.web._views import PAGE_FIRES
from tests.integration.test_cli import run
from tests.matrix.catalogue import CATALOGUE, NAMES, PAUSED_BY, MatrixDB

pytestmark = pytest.mark.integration
UTC = timezone.utc


def runs_left(name: str) -> int | None:
    entry = CATALOGUE[name]
    if entry.state == "retired":
        return 0
    return None if entry.max_runs is None else entry.max_runs - entry.runs


def expected_fires(name: str, after: datetime, count: int = 10,
                   until: datetime | None = None) -> list[datetime]:
    """The catalogue's calendar after ``after``: ``count`` fires or those up to ``until``,
    within the runs left."""
    entry, left = CATALOGUE[name], runs_left(name)
    limit = 1000 if until is not None else count
    limit = limit if left is None else min(limit, left)
    fires: list[datetime] = []
    t = after
    while len(fires) < limit:
        nxt = entry.calendar(t)
        if nxt is None or (until is not None and nxt > until):
            break
        fires.append(nxt)
        t = nxt
    return fires


def next_spring_gap(zone: ZoneInfo, after: datetime) -> datetime:
    """Noon UTC of the day after the next change of ``zone``'s offset that moves clocks
    forward."""
    day = after.replace(hour=12, minute=0, second=0, microsecond=0)
    for _ in range(800):
        nxt = day + timedelta(days=1)
        before, later = day.astimezone(zone).utcoffset(), nxt.astimezone(zone).utcoffset()
        if before is not None and later is not None and later > before:
            return nxt
        day = nxt
    raise AssertionError(f"{zone} has no forward change ahead")


#: The warnings of each type that has one: the retired one fires every second, and
#: 02:30 does not exist in New York on the day clocks go forward.
WARNED = {"retired": ["fires every second"],
          "crontab-dst-celery": ["moves a fire in a DST change"]}


def check_notices(name: str, notices: list[str] | tuple[str, ...]) -> None:
    entry, left = CATALOGUE[name], runs_left(name)
    text = " ".join(notices)
    assert (f"paused by {PAUSED_BY}" in text) == (entry.state == "paused"), text
    assert text.startswith("retired") == (entry.state == "retired"), text
    if left:
        assert f"{left} run{'s' if left > 1 else ''} left: it retires after" in text, text


# -- P1: the Python API ---------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_the_api_previews_each_type(shared_matrix_db: MatrixDB, name: str) -> None:
    with shared_matrix_db.schedules() as schedules:
        found = schedules.preview(name)
        short = schedules.preview(name, count=2)
    assert found.start is not None
    assert [f.at for f in found.fires] == expected_fires(name, found.start), name
    assert [f.at for f in short.fires] == expected_fires(name, short.start, 2)
    assert (found.cron_expr, found.timezone) == (CATALOGUE[name].cron_expr,
                                                 CATALOGUE[name].timezone)
    assert all(f.local.utcoffset() == f.at.astimezone(ZoneInfo(found.timezone)).utcoffset()
               for f in found.fires)
    check_notices(name, found.notices)
    warned = [w.split(",")[0].split(":")[0] for w in found.warnings]
    assert warned == WARNED.get(name, []), found.warnings


@pytest.mark.parametrize("name", ["cron-zone", "crontab-dst-celery"])
def test_the_api_preview_over_a_dst_change_is_the_catalogues(shared_matrix_db: MatrixDB,
                                                             name: str) -> None:
    zone = ZoneInfo(CATALOGUE[name].timezone)
    until = next_spring_gap(zone, datetime.now(UTC)) + timedelta(days=1)
    with shared_matrix_db.schedules() as schedules:
        found = schedules.preview(name, until=until)
    assert [f.at for f in found.fires] == expected_fires(name, found.start, until=until)
    marks = [f.mark for f in found.fires if f.mark]
    if name == "crontab-dst-celery":  # 02:30 does not exist that day in New York
        assert marks == ["gap"], [(f.at, f.note) for f in found.fires if f.mark]
        assert any(w.startswith("moves a fire in a DST change") for w in found.warnings)
    else:  # 07:30 in Paris is never skipped nor repeated: the offset changes, noted
        assert marks == ["offset"]
        assert not found.warnings


def test_the_api_refuses_a_bad_preview(shared_matrix_db: MatrixDB) -> None:
    with shared_matrix_db.schedules() as schedules:
        with pytest.raises(NotFound):
            schedules.preview("no-such-schedule")
        with pytest.raises(ValidationError) as err:
            schedules.preview("cron-zone", count=0)
        assert err.value.problems[0][:2] == ("cron-zone", "count")
        with pytest.raises(ValidationError) as err:
            schedules.preview("cron-zone", until=datetime(2000, 1, 1, tzinfo=UTC))
        assert err.value.problems[0][:2] == ("cron-zone", "until")


# -- P2: the command line -----------------------------------------------------------------


def cli(db: MatrixDB, *args: str) -> Any:
    return run("preview", *args, "--database-url", db.url)


@pytest.mark.parametrize("name", NAMES)
def test_the_cli_previews_each_type(shared_matrix_db: MatrixDB, name: str) -> None:
    entry = CATALOGUE[name]
    text = cli(shared_matrix_db, name)
    assert text.exit_code == 0, text.output
    assert entry.cron_expr in text.output and entry.timezone in text.output
    result = cli(shared_matrix_db, name, "--json", "-n", "4")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    after = datetime.fromisoformat(shown["after"])
    assert [datetime.fromisoformat(f["at"]) for f in shown["fires"]] == expected_fires(
        name, after, 4)
    assert shown["name"] == name and shown["schedule"] == entry.cron_expr
    check_notices(name, shown["notices"])
    for line in shown["notices"]:
        assert f"note: {line}" in text.output
    until = run("preview", name, "--database-url", shared_matrix_db.url, "--json",
                "--until", (after + timedelta(days=3)).isoformat())
    assert until.exit_code == 0, until.output
    listed = json.loads(until.output)
    assert [datetime.fromisoformat(f["at"]) for f in listed["fires"]] == expected_fires(
        name, datetime.fromisoformat(listed["after"]), until=after + timedelta(days=3))


@pytest.mark.parametrize("name", NAMES)
def test_the_cli_previews_each_types_calendar_as_given(name: str) -> None:
    """``--cron`` and ``--tz`` need no database: the stored form of each type, given on
    the command line, lists its calendar (its state is the stored row's, so not here)."""
    entry = CATALOGUE[name]
    result = run("preview", "--cron", entry.cron_expr, "--tz", entry.timezone, "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    fires = [datetime.fromisoformat(f["at"]) for f in shown["fires"]]
    after = datetime.fromisoformat(shown["after"])
    expected: list[datetime] = []
    t = after
    while len(expected) < 10 and (nxt := entry.calendar(t)) is not None:
        expected.append(nxt)
        t = nxt
    assert fires == expected and shown["name"] is None


def test_the_cli_errors_name_the_field_with_their_exit_codes(
        shared_matrix_db: MatrixDB) -> None:
    db = shared_matrix_db
    missing = cli(db, "no-such-schedule")
    assert missing.exit_code == 1 and "error: no schedule named 'no-such-schedule'" in \
        missing.output
    past = cli(db, "cron-zone", "--until", "2000-01-01T00:00:00Z")
    assert past.exit_code == 1 and "field 'until'" in past.output, past.output
    bad_cron = run("preview", "--cron", "61 * * * *")
    assert bad_cron.exit_code == 1 and "minute field '61'" in bad_cron.output
    bad_zone = run("preview", "--cron", "0 * * * *", "--tz", "Mars/Olympus")
    assert bad_zone.exit_code == 1 and "Mars/Olympus" in bad_zone.output
    for args, words in [
        (("cron-zone", "--cron", "0 * * * *"), "not both or neither"),
        ((), "not both or neither"),
        (("cron-zone", "--tz", "UTC"), "--tz goes with --cron"),
        (("cron-zone", "-n", "2", "--until", "2099-01-01"), "--count or --until"),
        (("cron-zone", "-n", "0"), "'--count'"),
        (("cron-zone", "--until", "soon"), "'--until'"),
    ]:
        result = run("preview", *args, "--database-url", db.url)
        assert result.exit_code == 2 and words in result.output, (args, result.output)


# -- P3: the dashboard, in Chromium ------------------------------------------------------


@pytest.fixture(scope="module")
def web_page(shared_matrix_db: MatrixDB, matrix_templates: Any) -> Iterator[tuple[Any, str]]:
    from tests.acceptance.test_web import CHROMIUM, WebConfig, serve, sync_api
    from tests.conftest import LAYOUTS

    # Both layouts' databases first: awa-pg's migration runs an event loop of its own,
    # which cannot start inside Playwright's.
    for layout in LAYOUTS:
        matrix_templates.template(layout)
    server = serve(shared_matrix_db.url, WebConfig())
    url = next(server)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1600, "height": 1000})
        context.set_default_timeout(10_000)
        yield context.new_page(), url
        context.close()
        browser.close()
    server.close()


def listed_fires(page: Any) -> list[datetime]:
    cells = page.locator("#preview tbody tr[data-mark] td:first-child")
    return [datetime.strptime(cells.nth(i).inner_text(), "%Y-%m-%d %H:%M:%S")
            .replace(tzinfo=UTC) for i in range(cells.count())]


@pytest.mark.acceptance
@pytest.mark.parametrize("name", NAMES)
def test_the_dashboard_previews_each_type(web_page: tuple[Any, str], name: str) -> None:
    page, url = web_page
    before = datetime.now(UTC)
    response = page.goto(f"{url}/schedule?name={name}")
    after = datetime.now(UTC)
    assert response is not None and response.status == 200, page.inner_text("body")[:300]
    fires = listed_fires(page)
    # The page reads the database's clock at some instant between the two.
    # The page lists PAGE_FIRES fires unless asked for another count.
    assert fires in (expected_fires(name, before, PAGE_FIRES),
                     expected_fires(name, after, PAGE_FIRES)), name
    notices = page.locator("[data-notice]")
    check_notices(name, [notices.nth(i).inner_text() for i in range(notices.count())])
    if not fires:
        assert "none" in page.locator("#preview").inner_text()
    warnings = page.locator("#preview-warnings li")
    assert [warnings.nth(i).inner_text().split(":")[0].split(",")[0]
            for i in range(warnings.count())] == WARNED.get(name, [])
    # The form asks for another count.
    page.fill("#preview-form input[name=count]", "3")
    with page.expect_navigation():
        page.click("#preview-button")
    shown = listed_fires(page)
    assert shown in (expected_fires(name, before, 3), expected_fires(name, datetime.now(UTC), 3))


@pytest.mark.acceptance
def test_the_dashboard_names_the_field_at_fault(web_page: tuple[Any, str]) -> None:
    page, url = web_page
    for query, words in [("count=abc", "count:"), ("count=0", "field 'count'"),
                         ("until=soon", "until:"), ("until=2000-01-01", "field 'until'")]:
        response = page.goto(f"{url}/schedule?name=cron-zone&{query}")
        assert response is not None and response.status == 200
        assert words in page.locator("#preview-error").inner_text(), query
        assert page.locator("#preview").count() == 0


@pytest.mark.acceptance
def test_the_dashboard_shows_what_an_operator_wrote_as_text(
        web_page: tuple[Any, str], shared_matrix_db: MatrixDB) -> None:
    page, url = web_page
    with shared_matrix_db.schedules() as schedules:
        schedules.add("preview-escape", task="matrix.escape", schedule=60)
        schedules.pause("preview-escape", by="<img src=x onerror=alert(1)>")
    response = page.goto(f"{url}/schedule?name=preview-escape")
    assert response is not None and response.status == 200
    notice = page.locator("[data-notice]").first.inner_text()
    assert "paused by <img src=x onerror=alert(1)>" in notice
    assert page.locator("[data-notice] img").count() == 0
