"""Matrix, the dashboard's backfill action (issue 38, part 1) over real HTTP, in both
layouts: the form on the schedule page, its dry run, the backfill itself with its result
on the page, and the protections every action has (CSRF, Origin, Host, the login,
read-only), each recorded in the audit log.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import pytest

from awa_beat._db.database import connect
from tests.matrix.catalogue import MatrixDB
from tests.matrix.test_backfill import cursor_of, documented, jobs_of, pg_text

pytestmark = pytest.mark.integration

pytest.importorskip("jinja2", reason="the dashboard needs the web extra")
pytest.importorskip("waitress", reason="the dashboard needs the web extra")

from awa_beat.web import WebConfig  # noqa: E402 - only with the web extra
from tests.matrix.test_web_security import PASSWORD, Browser, Served  # noqa: E402

NAME = "bound-max-runs"  # hourly at :15


@pytest.fixture
def db(matrix_templates: Any, layout: str) -> MatrixDB:
    return matrix_templates.clone(layout)


@pytest.fixture
def serve(db: MatrixDB) -> Iterator[Any]:
    started: list[Served] = []

    def start(config: WebConfig | None = None) -> Served:
        started.append(Served(db.url, config or WebConfig()))
        return started[-1]

    yield start
    for served in started:
        served.close()


def audited(db: MatrixDB) -> list[tuple[str, str, str, str | None, dict[str, Any]]]:
    with connect(db.url) as conn:
        return conn.execute(
            "SELECT actor, source, outcome, schedule, detail FROM awa_beat.audit_log"
            " WHERE action = 'backfill' ORDER BY id").fetchall()


def test_the_schedule_page_backfills_with_a_dry_run_first(serve: Any, db: MatrixDB) -> None:
    cursor = cursor_of(db.url, NAME)
    assert cursor is not None
    start, end = cursor - timedelta(hours=5), cursor
    expected = documented(NAME, start, end)
    page = f"/schedule?name={quote(NAME)}"
    browser = Browser(serve())
    token = browser.token(page)
    status, _, body = browser.request("GET", page)
    assert status == 200 and 'id="backfill-form"' in body
    form = {"csrf_token": token, "name": NAME, "from": start.isoformat(),
            "to": end.isoformat().replace("+00:00", "Z"), "overlap": "allow"}

    status, _, body = browser.request("POST", "/schedule/backfill", {**form, "dry_run": "1"})
    assert status == 200, body[:500]
    result = re.search(r'id="backfill-result" data-inserted="(\d+)" data-skipped="(\d+)" '
                       r'data-dry-run="(\w+)"', body)
    assert result and result.groups() == (str(len(expected)), "0", "yes")
    assert f"{expected[0]:%Y-%m-%d %H:%M:%S}" in body
    assert jobs_of(db.url, NAME) == [] and audited(db) == []  # a dry run writes nothing

    status, _, body = browser.request("POST", "/schedule/backfill", {**form, "dry_run": "0"})
    assert status == 200, body[:500]
    result = re.search(r'data-inserted="(\d+)" data-skipped="(\d+)" data-dry-run="(\w+)"', body)
    assert result and result.groups() == (str(len(expected)), "0", "no")
    assert [t for _, t, _ in jobs_of(db.url, NAME)] == [pg_text(t) for t in expected]
    (actor, source, outcome, schedule, detail), = audited(db)
    assert (actor, source, outcome, schedule) == ("anonymous", "web", "ok", NAME)
    assert (detail["inserted"], detail["skipped"]) == (len(expected), 0)

    # Again: every fire time has its job; the page says so, and nothing is added.
    status, _, body = browser.request("POST", "/schedule/backfill", {**form, "dry_run": "0"})
    result = re.search(r'data-inserted="(\d+)" data-skipped="(\d+)"', body)
    assert status == 200 and result and result.groups() == ("0", str(len(expected)))
    assert len(jobs_of(db.url, NAME)) == len(expected)
    # The history on the page shows them as backfilled.
    status, _, body = browser.request("GET", page)
    assert status == 200 and body.count('data-kind="backfilled"') == len(expected)

    # A refusal is shown on the page, with the form as it was, and recorded.
    status, _, body = browser.request("POST", "/schedule/backfill", {
        **form, "to": (cursor + timedelta(hours=2)).isoformat(), "dry_run": "0"})
    assert status == 400 and 'id="backfill-error"' in body and "after its cursor" in body
    status, _, body = browser.request("POST", "/schedule/backfill", {
        **form, "from": "2026-11-01T00:00:00", "dry_run": "0"})
    assert status == 400 and "from: &#39;2026-11-01T00:00:00&#39; has no offset" in body
    assert [o.split(":")[0] for _, _, o, _, _ in audited(db)] == ["ok", "ok", "error",
                                                                  "refused (400)"]
    assert len(jobs_of(db.url, NAME)) == len(expected)


def test_the_backfill_action_is_protected_like_the_others(serve: Any, db: MatrixDB) -> None:
    cursor = cursor_of(db.url, NAME)
    assert cursor is not None
    form = {"name": NAME, "from": (cursor - timedelta(hours=3)).isoformat(),
            "to": cursor.isoformat()}
    served = serve()
    browser = Browser(served)
    token = browser.token(f"/schedule?name={quote(NAME)}")
    assert browser.request("POST", "/schedule/backfill", {**form, "csrf_token": "wrong"}
                           )[0] == 403
    assert browser.request("POST", "/schedule/backfill", {**form, "csrf_token": token},
                           Origin="https://evil.example")[0] == 403
    evil = f"attacker.example:{served.port}"
    assert browser.request("POST", "/schedule/backfill", {**form, "csrf_token": token},
                           Host=evil, Origin=f"http://{evil}")[0] == 421
    read_only = Browser(serve(WebConfig(read_only=True)))
    assert read_only.request("POST", "/schedule/backfill", form)[0] == 403
    locked = serve(WebConfig(password=PASSWORD))
    assert locked.request("POST", "/schedule/backfill", form=form)[0] == 401
    assert jobs_of(db.url, NAME) == []
    assert [(a, o, s) for a, _, o, s, _ in audited(db)] == [
        ("anonymous", "refused: the form's CSRF token is missing or wrong; reload the page",
         NAME),
        ("anonymous", "refused: this form did not come from this site (Origin)", NAME),
        ("anonymous", "refused: this dashboard is read-only", NAME)]
    # Logged in, the same form goes through, recorded under the user's name.
    user = Browser(locked)
    assert user.log_in()[0] == 303
    token = user.token(f"/schedule?name={quote(NAME)}")
    status, _, body = user.request("POST", "/schedule/backfill", {**form, "csrf_token": token})
    assert status == 200 and 'id="backfill-result"' in body
    assert audited(db)[-1][:3] == ("alice", "web", "ok")
