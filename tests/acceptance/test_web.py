"""The dashboard in a real browser: headless Chromium (Playwright) against ``awa-beat
web``'s server, started here on a throw-away database.

Three servers on one database: without login (loopback), with a password, read-only.
With AWA_BEAT_SCREENSHOTS=docs/images the pages are saved there for docs/web.md.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from awa_beat._db.database import Database, connect
from awa_beat._testing import TempDatabases

pytestmark = pytest.mark.acceptance

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("no Chromium installed (apt-get install chromium): the browser tests skip",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
expect = sync_api.expect

from awa_beat.web import WebConfig  # noqa: E402 - only with the web extra
from tests.web_server import serve  # noqa: E402 - re-exported for the matrix's tests

PASSWORD = "correct horse battery staple"
DSN_PASSWORD = "dsn-pw-never-shown"
SHOTS = os.environ.get("AWA_BEAT_SCREENSHOTS")


def row(name: str, cron_expr: str, zone: str = "UTC", **over: Any) -> dict[str, Any]:
    return {"name": name, "cron_expr": cron_expr, "timezone": zone, "kind": f"reports.{name}",
            "queue": "default", "args": {"args": [], "kwargs": {}}, "priority": 2,
            "max_attempts": 25, "tags": [], "metadata": {}, "missed_fire_policy": "coalesce",
            **over}


@pytest.fixture(scope="module")
def db_url(databases: TempDatabases) -> str:
    url = databases.fresh("standalone")
    with Database(url) as store:
        store.schedules.sync([
            row("nightly-report", "0 2 * * *", "Europe/Paris"),
            row("weekday-digest", "0 9 * * 1-5", "America/New_York"),
            row("heartbeat", "*/10 * * * * *"),
            row("invoice-sweep", "0 30 6 1 * *", "Europe/London"),
        ], deployment="billing")
        store.schedules.sync([row(f"tenant-{i:03d}-sync", "*/15 * * * *") for i in range(60)],
                             deployment="tenants")
        store.cluster.heartbeat(identity="web-test:1", host="beat-a", pid=4242,
                                deployment="billing", lock_key=1, role="standby",
                                started_at=datetime.now(timezone.utc), leader_since=None,
                                last_lag_ms=None)
    with connect(url) as conn:  # a row Awa would refuse, written by someone else
        conn.execute("INSERT INTO awa.cron_jobs (name, cron_expr, kind) "
                     "VALUES ('legacy-midnight', '@midnight', 'legacy.task')")
    # The server's trust authentication ignores this password: it is there to be hidden.
    return make_conninfo(url, password=DSN_PASSWORD)


@pytest.fixture
def conn(db_url: str) -> Iterator[psycopg.Connection]:
    c = connect(db_url)
    yield c
    c.close()


@pytest.fixture(scope="module")
def open_url(db_url: str) -> Iterator[str]:
    yield from serve(db_url, WebConfig())


@pytest.fixture(scope="module")
def auth_url(db_url: str) -> Iterator[str]:
    yield from serve(db_url, WebConfig(password=PASSWORD))


@pytest.fixture(scope="module")
def read_only_url(db_url: str) -> Iterator[str]:
    yield from serve(db_url, WebConfig(read_only=True))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    context.set_default_timeout(10_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield page
    context.close()
    # A wrong password and a form with a bad field, on purpose.
    refused = ("the server responded with a status of 401",
               "the server responded with a status of 400")
    assert [e for e in errors if not any(r in e for r in refused)] == []  # nothing blocked


def shot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def no_dsn_password(page: Any) -> None:
    assert DSN_PASSWORD not in page.content()


def test_the_list_renders_pages_and_filters(page: Any, open_url: str) -> None:
    page.goto(f"{open_url}/schedules")
    table = page.locator("#schedules")
    expect(page.locator("#total")).to_have_text("65 matching")
    heartbeat = table.locator("tr[data-name='heartbeat']")
    expect(heartbeat).to_contain_text("every 10 seconds")  # 6 fields: seconds first
    countdown = table.locator("tr[data-name='nightly-report'] .countdown")  # hours away
    expect(countdown).to_have_text(re.compile(r"^in (\d+ h )?\d+ min \d+ s$"))
    expect(countdown).not_to_have_text(countdown.inner_text())  # the script ticks
    expect(table.locator("tr[data-name='invoice-sweep']")).to_contain_text(
        "at 06:30, on day 1 of the month")
    expect(table.locator("tr[data-name='legacy-midnight']")).to_contain_text("invalid")
    expect(table.locator("tr[data-name='legacy-midnight']")).to_contain_text("not awa-beat")
    expect(table.locator("tr[data-name='nightly-report']")).to_contain_text("CET")
    expect(table.locator("tbody tr")).to_have_count(50)
    no_dsn_password(page)
    shot(page, "schedules")
    page.click("#next")
    expect(table.locator("tbody tr")).to_have_count(15)
    expect(table.locator("tbody tr").last).to_have_attribute("data-name", "weekday-digest")
    page.click("#prev")
    expect(table.locator("tbody tr").first).to_have_attribute("data-name", "heartbeat")
    page.fill("input[name=q]", "NIGHT")
    page.select_option("select[name=owner]", "billing")
    page.click("button:has-text('Filter')")
    expect(page.locator("#total")).to_have_text("1 matching")
    expect(table.locator("tbody tr")).to_have_count(1)


def test_pause_with_a_note_and_resume_round_trip(page: Any, open_url: str, conn: Any
                                                 ) -> None:
    page.goto(f"{open_url}/schedule?name=nightly-report")
    expect(page.locator("#upcoming")).to_contain_text("CET")
    page.fill("input[name=note]", "vendor outage <until Monday>")
    page.click("#pause")
    expect(page.locator("#flash")).to_have_text("Paused.")
    paused_at, paused_by = conn.execute(
        "SELECT paused_at, paused_by FROM awa.cron_jobs WHERE name = 'nightly-report'"
    ).fetchone()
    assert paused_at is not None and paused_by == "anonymous (awa-beat web)"
    expect(page.locator("#row")).to_contain_text("“vendor outage <until Monday>”")  # escaped
    expect(page.locator("#audit")).to_contain_text("pause")
    shot(page, "schedule")
    page.goto(f"{open_url}/schedules?paused=yes")
    expect(page.locator("tr[data-name='nightly-report']")).to_contain_text(
        "vendor outage <until Monday>")
    page.goto(f"{open_url}/schedule?name=nightly-report")
    page.click("#resume")
    expect(page.locator("#flash")).to_have_text("Resumed.")
    assert conn.execute("SELECT paused_at FROM awa.cron_jobs WHERE name = 'nightly-report'"
                        ).fetchone() == (None,)
    page.goto(f"{open_url}/audit")
    audit = page.locator("#audit tbody tr")
    expect(audit.first).to_contain_text("resume")
    expect(audit.nth(1)).to_contain_text("vendor outage")
    expect(audit.first).to_contain_text("127.0.0.1")
    shot(page, "audit")


def test_a_schedules_page_marks_the_dst_changes_of_its_next_fires(page: Any, open_url: str
                                                                  ) -> None:
    page.goto(f"{open_url}/schedule?name=invoice-sweep")  # monthly, in London
    expect(page.locator("#row")).to_contain_text("at 06:30, on day 1 of the month")
    marks = page.locator("#upcoming .dst")
    expect(marks.first).to_have_text(re.compile(r"DST: UTC offset \+0[01]:00 -> \+0[01]:00"))
    assert marks.count() >= 2  # twenty monthly fires cross both changes of a year
    shot(page, "schedule-dst")


def test_trigger_inserts_one_job(page: Any, open_url: str, conn: Any) -> None:
    count = "SELECT count(*) FROM awa.jobs WHERE metadata ->> 'cron_name' = 'weekday-digest'"
    (before,) = conn.execute(count).fetchone()
    page.goto(f"{open_url}/schedule?name=weekday-digest")
    page.click("#trigger")
    expect(page.locator("#flash")).to_have_text(re.compile(r"Triggered: job \d+\."))
    assert conn.execute(count).fetchone() == (before + 1,)
    expect(page.locator("#history tbody tr")).to_have_count(1)
    expect(page.locator("#history")).to_contain_text("triggered by hand")


def test_remove_asks_first(page: Any, open_url: str, conn: Any) -> None:
    page.goto(f"{open_url}/schedule?name=tenant-059-sync")
    page.click("#remove")
    expect(page.locator("h1")).to_have_text("Remove tenant-059-sync?")
    page.click("#confirm-remove")
    expect(page.locator("#schedules")).to_be_visible()
    assert conn.execute("SELECT count(*) FROM awa.cron_jobs WHERE name = 'tenant-059-sync'"
                        ).fetchone() == (0,)


def test_a_forged_form_is_refused(page: Any, open_url: str, conn: Any) -> None:
    page.goto(f"{open_url}/schedule?name=heartbeat")
    token = page.locator("input[name=csrf_token]").first.get_attribute("value")
    url = f"{open_url}/schedule/pause"
    forged = page.request.post(url, form={"name": "heartbeat"}, max_redirects=0)
    assert forged.status == 403 and "CSRF" in forged.text()
    wrong = page.request.post(url, form={"name": "heartbeat", "csrf_token": "x" * 43},
                              max_redirects=0)
    assert wrong.status == 403
    other_site = page.request.post(url, form={"name": "heartbeat", "csrf_token": token},
                                   headers={"Origin": "https://evil.example"},
                                   max_redirects=0)
    assert other_site.status == 403 and "Origin" in other_site.text()
    assert conn.execute("SELECT paused_at FROM awa.cron_jobs WHERE name = 'heartbeat'"
                        ).fetchone() == (None,)
    bad_note = page.request.post(url, form={"name": "heartbeat", "csrf_token": token,
                                            "note": "x" * 501}, max_redirects=0)
    assert bad_note.status == 400 and "note: at most 500 characters" in bad_note.text()
    assert conn.execute("SELECT paused_at FROM awa.cron_jobs WHERE name = 'heartbeat'"
                        ).fetchone() == (None,)


def test_with_a_password_nothing_is_served_before_logging_in(page: Any, auth_url: str,
                                                             conn: Any) -> None:
    anonymous = page.request.get(f"{auth_url}/schedules", max_redirects=0)
    assert anonymous.status == 303 and "/login" in anonymous.headers["location"]
    action = page.request.post(f"{auth_url}/schedule/trigger", form={"name": "heartbeat"},
                               max_redirects=0)
    assert action.status == 401
    basic = page.request.get(f"{auth_url}/cluster", max_redirects=0,
                             headers={"Authorization": "Basic b3BzOndyb25n"})  # ops:wrong
    assert basic.status == 401
    page.goto(f"{auth_url}/schedule?name=heartbeat")
    expect(page.locator("h1")).to_have_text("Log in")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "wrong")
    page.click("button:has-text('Log in')")
    expect(page.locator("#error")).to_have_text("password: wrong password")
    shot(page, "login")
    page.fill("input[name=password]", PASSWORD)
    page.click("button:has-text('Log in')")
    expect(page.locator("h1")).to_contain_text("heartbeat")  # back where it was going
    page.fill("input[name=note]", "maintenance")
    page.click("#pause")
    expect(page.locator("#flash")).to_have_text("Paused.")
    assert conn.execute("SELECT paused_by FROM awa.cron_jobs WHERE name = 'heartbeat'"
                        ).fetchone() == ("alice (awa-beat web)",)
    page.click("#resume")
    expect(page.locator("#flash")).to_have_text("Resumed.")
    page.goto(f"{auth_url}/cluster")
    expect(page.locator("#beats")).to_contain_text("beat-a")
    expect(page.locator("#backlog")).to_contain_text("0")
    no_dsn_password(page)
    shot(page, "cluster")
    page.click("button:has-text('Log out')")
    expect(page.locator("h1")).to_have_text("Log in")


def test_read_only_shows_no_action_and_refuses_them(page: Any, read_only_url: str,
                                                    conn: Any) -> None:
    page.goto(f"{read_only_url}/schedule?name=weekday-digest")
    expect(page.locator("#read-only")).to_be_visible()
    expect(page.locator("#row")).to_be_visible()
    expect(page.locator("#pause")).to_have_count(0)
    expect(page.locator("#trigger")).to_have_count(0)
    page.goto(f"{read_only_url}/schedules")
    token = page.evaluate("document.cookie")  # HttpOnly: the page's scripts cannot read it
    assert "awa_beat_session" not in token
    refused = page.request.post(f"{read_only_url}/schedule/pause",
                                form={"name": "weekday-digest"}, max_redirects=0)
    assert refused.status == 403 and "read-only" in refused.text()
    assert conn.execute("SELECT paused_at FROM awa.cron_jobs WHERE name = 'weekday-digest'"
                        ).fetchone() == (None,)


# -- run outcomes, and runtime schedules added and edited here -----------------------------


def test_history_shows_occurrences_and_the_lists_know_failing_and_overdue(
        page: Any, open_url: str, conn: Any, db_url: str) -> None:
    from awa_beat._ops.operations import Operations

    with Database(db_url) as store:
        store.schedules.sync([row("flaky-export", "0 * * * *",
                                  metadata={"celery": {"dispatch": "celery"}})],
                             deployment="billing")
    with Operations.open(db_url) as ops:
        job = ops.trigger("flaky-export")
    fired = "2026-01-05 10:00:00+00"
    conn.execute("UPDATE awa.jobs SET metadata = (metadata - 'triggered_manually') || "
                 "jsonb_build_object('cron_fire_time', %s::text, 'celery', "
                 "jsonb_build_object('dispatch', 'celery')) WHERE id = %s", (fired, job))
    conn.execute("INSERT INTO awa_beat.outcomes (task_id, schedule, fire_time, job_id, state, "
                 "started_at, finished_at, runtime, worker, error) VALUES ('t-flaky', "
                 "'flaky-export', %s, %s, 'failed', %s::timestamptz, %s::timestamptz, 1.25, "
                 "'worker-1', 'boom <b>')", (fired, job, fired, fired))
    conn.execute("INSERT INTO awa_beat.occurrences (schedule, kind, fire_time, reason) VALUES "
                 "('flaky-export', 'skipped', '2026-01-05 11:00+00', 'still running')")
    conn.execute("INSERT INTO awa_beat.occurrences (schedule, kind, fire_time, last_fire_time, "
                 "count, reason) VALUES ('flaky-export', 'coalesced', '2026-01-05 12:00+00', "
                 "'2026-01-05 14:00+00', 3, 'beat was down')")
    # Ten-second fires that stopped an hour ago: overdue.
    conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = now() - interval '1 hour' "
                 "WHERE name = 'heartbeat'")
    conn.commit()

    page.goto(f"{open_url}/schedule?name=flaky-export")
    history = page.locator("#history tbody tr")
    expect(history).to_have_count(3)
    assert [history.nth(i).get_attribute("data-kind") for i in range(3)] == [
        "coalesced", "skipped", "fired"]  # newest first
    expect(history.nth(0)).to_contain_text("3 fire(s), to 2026-01-05 14:00:00")
    expect(history.nth(1)).to_contain_text("still running")
    expect(history.nth(2)).to_contain_text("failed")
    expect(history.nth(2)).to_contain_text("1.250 s")
    expect(history.nth(2)).to_contain_text("boom <b>")  # escaped
    shot(page, "schedule-history")

    page.goto(f"{open_url}/schedules")
    page.select_option("select[name=state]", "failing")
    page.click("button:has-text('Filter')")
    expect(page.locator("#total")).to_have_text("1 matching")
    expect(page.locator("#schedules tbody tr")).to_have_attribute("data-name", "flaky-export")
    page.goto(f"{open_url}/schedules?state=overdue")
    expect(page.locator("tr[data-name='heartbeat']")).to_be_visible()
    page.goto(f"{open_url}/cluster")
    expect(page.locator("#overdue tr[data-name='heartbeat']")).to_be_visible()


def test_add_a_schedule_through_the_form(page: Any, open_url: str, conn: Any) -> None:
    page.goto(f"{open_url}/schedules")
    page.click("#add")
    page.fill("input[name=name]", "web-added")
    page.fill("input[name=task]", "proj.tasks.added")
    page.select_option("select[name=kind]", "cron")
    page.fill("input[name=schedule]", "*/5 * * * *")
    page.fill("input[name=kwargs]", '{"region": "eu"}')
    page.fill("input[name=timezone]", "Europe/Paris")
    shot(page, "schedule-add")
    page.click("#save")
    expect(page.locator("#flash")).to_have_text("Added.")
    expect(page.locator("#row")).to_contain_text("runtime")
    stored = conn.execute(
        "SELECT c.cron_expr, c.kind, c.timezone, c.args, s.owner FROM awa.cron_jobs c "
        "JOIN awa_beat.schedules s USING (name) WHERE name = 'web-added'").fetchone()
    assert stored == ("*/5 * * * *", "proj.tasks.added", "Europe/Paris",
                      {"args": [], "kwargs": {"region": "eu"}}, "runtime")
    page.goto(f"{open_url}/schedules?owner=~runtime")
    expect(page.locator("#schedules tbody tr")).to_have_count(1)
    expect(page.locator("tr[data-name='web-added']")).to_contain_text("runtime")
    page.goto(f"{open_url}/audit")
    expect(page.locator("#audit tbody tr").first).to_contain_text("add")
    expect(page.locator("#audit tbody tr").first).to_contain_text("web-added")


def test_a_bad_cron_shows_the_problem_and_writes_nothing(page: Any, open_url: str,
                                                         conn: Any) -> None:
    page.goto(f"{open_url}/schedule/new")
    page.fill("input[name=name]", "web-bad")
    page.fill("input[name=task]", "proj.tasks.bad")
    page.fill("input[name=schedule]", "61 * * * *")
    with page.expect_response(f"{open_url}/schedule/add") as response:
        page.click("#save")
    assert response.value.status == 400
    expect(page.locator("#problems")).to_contain_text("schedule")
    expect(page.locator("#problems")).to_contain_text("Nothing was written")
    expect(page.locator("input[name=schedule]")).to_have_value("61 * * * *")  # kept to fix
    assert conn.execute("SELECT count(*) FROM awa.cron_jobs WHERE name = 'web-bad'"
                        ).fetchone() == (0,)
    page.goto(f"{open_url}/audit")
    expect(page.locator("#audit tbody tr").first).to_contain_text("error")


def test_edit_changes_only_the_given_field(page: Any, open_url: str, conn: Any) -> None:
    query = ("SELECT cron_expr, kind, timezone, args, queue, missed_fire_policy "
             "FROM awa.cron_jobs WHERE name = 'web-added'")
    before = conn.execute(query).fetchone()
    page.goto(f"{open_url}/schedule?name=web-added")
    page.click("#edit")
    expect(page.locator("input[name=schedule]")).to_have_value("*/5 * * * *")
    page.fill("input[name=queue]", "reports")
    page.click("#save")
    expect(page.locator("#flash")).to_have_text("Saved.")
    after = conn.execute(query).fetchone()
    assert after == (*before[:4], "reports", before[5])
    page.goto(f"{open_url}/audit")
    expect(page.locator("#audit tbody tr").first).to_contain_text("edit")


def test_a_config_row_offers_no_edit_and_a_forged_edit_is_refused(page: Any, open_url: str,
                                                                  conn: Any) -> None:
    query = "SELECT cron_expr, queue, updated_at FROM awa.cron_jobs WHERE name = 'weekday-digest'"
    before = conn.execute(query).fetchone()
    page.goto(f"{open_url}/schedule?name=weekday-digest")
    expect(page.locator("#trigger")).to_be_visible()
    expect(page.locator("#edit")).to_have_count(0)
    token = page.locator("input[name=csrf_token]").first.get_attribute("value")
    form = page.request.get(f"{open_url}/schedule/edit?name=weekday-digest")
    assert form.status == 403 and "billing" in form.text()
    forged = page.request.post(f"{open_url}/schedule/edit", max_redirects=0, form={
        "csrf_token": token, "name": "weekday-digest", "kind": "cron", "queue": "stolen"})
    assert forged.status == 403 and "beat_schedule" in forged.text()
    assert conn.execute(query).fetchone() == before


def test_read_only_refuses_add_and_edit(page: Any, read_only_url: str, conn: Any) -> None:
    page.goto(f"{read_only_url}/schedules")
    expect(page.locator("#add")).to_have_count(0)
    page.goto(f"{read_only_url}/schedule?name=web-added")
    expect(page.locator("#edit")).to_have_count(0)
    for path in ("/schedule/add", "/schedule/edit"):
        refused = page.request.post(f"{read_only_url}{path}", max_redirects=0,
                                    form={"name": "web-added", "kind": "cron",
                                          "queue": "nope"})
        assert refused.status == 403 and "read-only" in refused.text()
    assert conn.execute("SELECT queue FROM awa.cron_jobs WHERE name = 'web-added'"
                        ).fetchone() == ("reports",)
