"""Matrix, the Django admin (run by tests/matrix/test_django_admin.py, in a pytest of its
own per layout: Django takes one configuration per process).


The catalogue in a real Django project (tests/django_settings.py) on a database of the
layout $AWA_BEAT_MATRIX_LAYOUT, through Django's test client: the changelist, its
filter and search, each type's change page, the actions, and the forms of runtime rows.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from awa_beat._db.database import connect
from awa_beat._db.records import RETIRED_BY
from tests.django_admin_cases import shown_fields
from tests.matrix.catalogue import CATALOGUE, FORMS, NAMES, PAUSED_BY, MatrixDB, stored_rows
from tests.matrix.test_views import WORDS

pytestmark = pytest.mark.integration
django = pytest.importorskip("django")

CHANGELIST = "/admin/awa_beat/schedule/"
ADD = "/admin/awa_beat/schedule/runtime/add/"


def edit_url(name: str) -> str:
    return f"/admin/awa_beat/schedule/runtime/{name}/edit/"


@pytest.fixture(scope="module")
def matrix(request: pytest.FixtureRequest) -> Iterator[MatrixDB]:
    """The catalogue's database the runner cloned ($AWA_BEAT_DJANGO_TEST_URL), else a
    clone of this process's own (run alone)."""
    layout = os.environ.get("AWA_BEAT_MATRIX_LAYOUT", "standalone")
    url = os.environ.get("AWA_BEAT_DJANGO_TEST_URL")
    db = (MatrixDB(url, layout, tuple(NAMES)) if url
          else request.getfixturevalue("matrix_templates").clone(layout))
    os.environ["AWA_BEAT_DJANGO_TEST_URL"] = db.url
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.django_settings"
    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connections

    call_command("migrate", verbosity=0)
    User.objects.create_superuser("root", "root@example.invalid", "pw")
    yield db
    from awa_beat.contrib.django._operations import close

    close()
    connections.close_all()


@pytest.fixture(scope="module")
def client(matrix: MatrixDB) -> Any:
    """A superuser's client, logged in once (a password check costs a key derivation)."""
    from django.contrib.auth.models import User
    from django.test import Client

    c = Client()
    c.force_login(User.objects.get(username="root"))
    return c


def page_text(client: Any, url: str) -> str:
    page = client.get(url)
    assert page.status_code == 200, page.content.decode()[:500]
    return page.content.decode()


def listed(html: str) -> set[str]:
    return {n for n in NAMES if f'value="{n}"' in html}  # each row's action checkbox


def test_the_changelist_shows_every_type(client: Any) -> None:
    text = page_text(client, CHANGELIST)
    assert listed(text) == set(NAMES)
    assert PAUSED_BY in text and "retired" in text


FILTERS = {
    "paused_at__isempty=0": {n for n, e in CATALOGUE.items() if e.paused},
    "paused_at__isempty=1": {n for n, e in CATALOGUE.items() if not e.paused},
    "q=interval": {"grid-interval", "offgrid-interval"},
    "q=matrix.bound": {"bound-start", "bound-end", "bound-max-runs"},  # the task
}


@pytest.mark.parametrize("query", list(FILTERS))
def test_each_filter_and_search(client: Any, query: str) -> None:
    text = page_text(client, f"{CHANGELIST}?{query}")
    assert listed(text) == FILTERS[query]


def changelist_rows(html_text: str) -> dict[str, str]:
    """The changelist's rows by schedule name."""
    found = {}
    for row in re.findall(r"<tr>(.*?)</tr>", html_text, re.S):
        name = re.search(r'name="_selected_action" value="([^"]+)"', row)
        if name:
            found[name.group(1)] = row
    return found


def test_the_changelist_describes_every_type_in_words(client: Any) -> None:
    rows = changelist_rows(html.unescape(page_text(client, CHANGELIST)))
    for name in NAMES:
        assert WORDS[name] in rows[name], rows[name]


def test_next_and_last_fire_say_paused_and_never(client: Any) -> None:
    # Issue 34 defect 5: no time to count to while paused; the cursor a registration
    # left is no fire.
    rows = changelist_rows(html.unescape(page_text(client, CHANGELIST)))
    instant = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
    for name in NAMES:
        entry, row = CATALOGUE[name], rows[name]
        next_cell = re.search(r'<td class="field-next_fire">(.*?)</td>', row, re.S)
        last_cell = re.search(r'<td class="field-last_fire[^"]*">(.*?)</td>', row, re.S)
        assert next_cell and last_cell, row
        if entry.state == "retired":
            assert next_cell.group(1) == "retired: no run left"
            assert re.fullmatch(instant, last_cell.group(1))  # its last run fired
            continue
        assert last_cell.group(1) == "never", (name, last_cell.group(1))
        if entry.paused:
            assert next_cell.group(1).startswith("paused"), next_cell.group(1)
        else:
            assert re.fullmatch(instant, next_cell.group(1)), next_cell.group(1)


@pytest.mark.parametrize("name", NAMES)
def test_the_change_page_of_each_type(client: Any, name: str) -> None:
    entry = CATALOGUE[name]
    text = page_text(client, f"{CHANGELIST}{name}/change/")
    assert entry.cron_expr in text and entry.task in text
    # Read-only: Django's own save is refused, whoever owns the row.
    assert client.post(f"{CHANGELIST}{name}/change/", {"kind": "t.x"}).status_code == 403


@pytest.mark.parametrize("name", NAMES)
def test_the_preview_on_the_change_page_of_each_type(client: Any, name: str) -> None:
    """P4: the change page lists the schedule's next fires, those of its documented
    calendar (before the actions below pause and resume anything)."""
    from datetime import datetime, timezone

    from tests.matrix.test_preview import WARNED, check_notices, expected_fires

    before = datetime.now(timezone.utc)
    text = page_text(client, f"{CHANGELIST}{name}/change/")
    after = datetime.now(timezone.utc)
    found = re.search(r'<div id="awa-beat-preview">(.*?)</div>', text, re.S)
    assert found is not None, text[:2000]
    shown = [datetime.strptime(t, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
             for t in re.findall(r"<li data-mark=\"\w*\">(\S+ \S+) UTC", found.group(1))]
    assert shown in (expected_fires(name, before), expected_fires(name, after)), shown
    check_notices(name, [html.unescape(n) for n in re.findall(r"<p>(.*?)</p>",
                                                               found.group(1))])
    warnings = re.findall(r'<p class="warning"[^>]*>warning: ([^:,]*)', found.group(1))
    assert warnings == WARNED.get(name, []), warnings


def test_the_preview_escapes_what_it_shows(client: Any, matrix: MatrixDB) -> None:
    """P4: text an operator wrote (who paused it) is shown as text, not markup."""
    with matrix.schedules() as schedules:
        schedules.add("preview-escape", task="matrix.escape", schedule=60)
        schedules.pause("preview-escape", by="<b>x</b>")
    text = page_text(client, f"{CHANGELIST}preview-escape/change/")
    found = re.search(r'<div id="awa-beat-preview">(.*?)</div>', text, re.S)
    assert found is not None
    assert "paused by &lt;b&gt;x&lt;/b&gt;" in found.group(1)
    assert "<b>x</b>" not in found.group(1)


def act(client: Any, action: str, name: str) -> None:
    response = client.post(CHANGELIST, {"action": action, "_selected_action": [name]})
    assert response.status_code == 302, response.content.decode()[:500]


@pytest.mark.parametrize("name", NAMES)
def test_the_actions_on_each_type(client: Any, matrix: MatrixDB, name: str) -> None:
    entry = CATALOGUE[name]
    count = ("SELECT count(*) FROM awa.jobs WHERE metadata ->> 'cron_name' = %s"
             " AND metadata ? 'triggered_manually'")
    with connect(matrix.url) as conn:
        act(client, "trigger", name)  # one job now, even while paused
        assert conn.execute(count, (name,)).fetchone() == (1,)
        if entry.paused:
            act(client, "resume", name)
            assert stored_rows(matrix.url)[name]["paused_by"] is None
        act(client, "pause", name)
        assert stored_rows(matrix.url)[name]["paused_by"] == "root (Django admin)"
        act(client, "resume", name)
        assert stored_rows(matrix.url)[name]["paused_by"] is None
        assert conn.execute(
            "SELECT action FROM awa_beat.audit_log WHERE schedule = %s ORDER BY id",
            (name,)).fetchall()[-1] == ("resume",)


@pytest.mark.parametrize("name", list(FORMS))
def test_add_each_type_through_the_form(client: Any, matrix: MatrixDB, name: str) -> None:
    entry, new = CATALOGUE[name], f"admin-{name}"
    kind, schedule, zone, bounds = FORMS[name]
    form = page_text(client, ADD)
    for field_ in bounds:
        assert f'name="{field_}"' in form, f"no {field_} field"
    response = client.post(ADD, {"name": new, "task": entry.task, "kind": kind,
                                 "schedule": schedule, "timezone": zone, "args": "[]",
                                 "kwargs": "{}", **bounds})
    assert response.status_code == 302, response.content.decode()[-3000:]
    if entry.state == "paused":
        act(client, "pause", new)
    row = stored_rows(matrix.url)[new]
    assert (row["cron_expr"], row["timezone"], row["owner"]) == (
        entry.cron_expr, entry.timezone, "runtime")
    assert row["paused_by"] == ("root (Django admin)" if entry.paused else None)


@pytest.mark.parametrize("name", NAMES)
def test_edit_each_runtime_type_through_the_form(client: Any, matrix: MatrixDB,
                                                 name: str) -> None:
    entry = CATALOGUE[name]
    before = stored_rows(matrix.url)[name]
    form = client.get(edit_url(name))
    if entry.owner != "runtime":  # a beat_schedule's row is changed where configured
        assert form.status_code == 403
        return
    assert form.status_code == 200
    initial = shown_fields(form.content.decode())
    assert (initial["kind"], initial["schedule"]) == entry.form_schedule()
    response = client.post(edit_url(name), {**initial, "queue": "reports"})
    assert response.status_code == 302, response.content.decode()[-3000:]
    after = stored_rows(matrix.url)[name]
    assert after == before  # calendar, state and owner stay
    assert after["paused_by"] in (None, PAUSED_BY, RETIRED_BY)
    with connect(matrix.url) as conn:
        assert conn.execute("SELECT queue FROM awa.cron_jobs WHERE name = %s",
                            (name,)).fetchone() == ("reports",)


# -- backfill (issue 38, part 1) ---------------------------------------------------------------


def backfill_url(name: str) -> str:
    return f"/admin/awa_beat/schedule/backfill/{name}/"


@pytest.mark.parametrize("name", NAMES)
def test_backfill_each_type_through_the_admin(client: Any, matrix: MatrixDB, name: str
                                              ) -> None:
    from datetime import timedelta

    from tests.matrix.test_backfill import cursor_of, documented, jobs_of, pg_text

    # The action leads to the schedule's backfill page.
    response = client.post(CHANGELIST, {"action": "backfill", "_selected_action": [name]})
    assert response.status_code == 302 and response["Location"] == backfill_url(name)
    assert 'id="backfill-form"' in page_text(client, backfill_url(name))
    cursor = cursor_of(matrix.url, name)
    assert cursor is not None
    # Two days (a minute of the every-second one, whose two days pass the limit).
    start = cursor - (timedelta(minutes=1) if name == "retired" else timedelta(days=2))
    fired = {t for _, t, _ in jobs_of(matrix.url, name, backfilled=False)}
    expected = [t for t in documented(name, start, cursor) if pg_text(t) not in fired]
    form = {"start": start.isoformat(), "end": cursor.isoformat(), "overlap": "allow"}

    def post(**changes: str) -> tuple[int, str]:
        page = client.post(backfill_url(name), {**form, **changes})
        return page.status_code, page.content.decode()

    status, body = post(dry_run="1")
    assert status == 200 and (f'data-inserted="{len(expected)}"' in body
                              and 'data-dry-run="yes"' in body), body[-2000:]
    assert jobs_of(matrix.url, name) == []
    status, body = post(dry_run="0")
    assert status == 200 and f'data-inserted="{len(expected)}"' in body
    assert [t for _, t, _ in jobs_of(matrix.url, name)] == [pg_text(t) for t in expected]
    status, body = post(dry_run="0")
    assert status == 200 and 'data-inserted="0"' in body  # idempotent
    later = cursor + timedelta(days=1)
    if documented(name, cursor + timedelta(seconds=1), later):  # else nothing to refuse
        status, body = post(dry_run="0", end=later.isoformat())
        assert status == 400 and "after its cursor" in html.unescape(body)
    status, body = post(dry_run="0", start="2026-11-01T00:00:00")
    assert status == 400 and "has no offset" in body
    assert len(jobs_of(matrix.url, name)) == len(expected)
    with connect(matrix.url) as conn:
        audited = conn.execute(
            "SELECT actor, source, outcome, detail FROM awa_beat.audit_log"
            " WHERE action = 'backfill' AND schedule = %s ORDER BY id", (name,)).fetchall()
    assert [(a, s, o.split(":")[0]) for a, s, o, _ in audited][:2] == [
        ("root", "django", "ok"), ("root", "django", "ok")]
    assert all(o.startswith("error: ") for _, _, o, _ in audited[2:])
    assert (audited[0][3]["inserted"], audited[1][3]["inserted"]) == (len(expected), 0)
    assert audited[1][3]["skipped"] >= len(expected)


def test_backfill_takes_one_schedule_at_a_time(client: Any) -> None:
    response = client.post(CHANGELIST, {"action": "backfill",
                                        "_selected_action": NAMES[:2]}, follow=True)
    assert "Select one schedule to backfill." in response.content.decode()


# -- explain (issue 38, part 6) ----------------------------------------------------------------


def explain_url(name: str) -> str:
    return f"/admin/awa_beat/schedule/explain/{name}/"


@pytest.mark.parametrize("name", NAMES)
def test_explain_each_type_through_the_admin(client: Any, matrix: MatrixDB, name: str
                                             ) -> None:
    """The admin answers as awa-beat explain does: at the schedule's next fire time and a
    second after it (not a fire time, unless the calendar fires every second)."""
    from datetime import timedelta

    from awa_beat.contrib.django._operations import operations

    ops = operations()
    change = page_text(client, f"{CHANGELIST}{name}/change/")
    assert f'href="{explain_url(name)}"' in change
    assert 'id="explain-form"' in page_text(client, explain_url(name))
    fires = ops.preview(name, count=1).fires
    if not fires:  # retired, or past its end: explain an instant of its past
        at = ops.clock() - timedelta(days=1)
        instants = [at]
    else:
        instants = [fires[0].at, fires[0].at + timedelta(seconds=1)]
    for at in instants:
        body = page_text(client, f"{explain_url(name)}?at={at.isoformat().replace('+', '%2B')}")
        expected = ops.explain(name, at)
        assert f'data-kind="{expected.kind}"' in body, (expected, body[-1500:])
        assert html.escape(expected.summary) in body


def test_explain_refuses_a_bad_instant_and_escapes_it(client: Any) -> None:
    page = client.get(explain_url(NAMES[0]) + "?at=%3Cb%3Ebold%3C/b%3E")
    body = page.content.decode()
    assert page.status_code == 400 and 'id="explain-error"' in body
    assert "<b>bold</b>" not in body and "&lt;b&gt;bold&lt;/b&gt;" in body
    assert client.get(explain_url("no-such-schedule") + "?at=now").status_code == 404
