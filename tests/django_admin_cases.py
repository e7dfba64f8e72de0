"""awa-beat's schedules in a real Django project's admin, on a throw-away PostgreSQL
database, through Django's test client.

Run by tests/integration/test_django_admin.py in a pytest of its own: Django takes one
configuration per process, and the import tests configure theirs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from awa_beat._db.database import Database, connect
from awa_beat._testing import TempDatabases

pytestmark = pytest.mark.integration
django = pytest.importorskip("django")

CHANGELIST = "/admin/awa_beat/schedule/"


def row(name: str, cron_expr: str) -> dict[str, Any]:
    return {"name": name, "cron_expr": cron_expr, "timezone": "Europe/Paris",
            "kind": f"t.{name}", "queue": "default", "args": {"args": [], "kwargs": {}},
            "priority": 2, "max_attempts": 25, "tags": [], "metadata": {},
            "missed_fire_policy": "coalesce"}


@pytest.fixture(scope="module")
def project(databases: TempDatabases) -> Iterator[str]:
    url = databases.fresh("standalone")
    with Database(url) as store:
        store.schedules.sync([row("nightly", "0 2 * * *"), row("ticker", "*/10 * * * * *")],
                             deployment="proj")
    os.environ["AWA_BEAT_DJANGO_TEST_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.django_settings"
    django.setup()
    from django.core.management import call_command
    from django.db import connections

    call_command("migrate", verbosity=0)
    from django.contrib.auth.models import User

    User.objects.create_superuser("root", "root@example.invalid", "pw")
    User.objects.create_user("visitor", "v@example.invalid", "pw")
    yield url
    from awa_beat.contrib.django._operations import close

    close()
    connections.close_all()


@pytest.fixture
def client(project: str) -> Any:
    from django.test import Client

    c = Client()
    c.login(username="root", password="pw")
    return c


def test_the_app_has_no_migration_of_its_own(project: str) -> None:
    from django.apps import apps
    from django.db.migrations.loader import MigrationLoader

    assert "awa_beat" not in MigrationLoader(None, ignore_no_migrations=True).migrated_apps
    assert all(not m._meta.managed for m in apps.get_app_config("awa_beat").get_models())


def test_the_changelist_shows_the_schedules(client: Any) -> None:
    page = client.get(CHANGELIST)
    assert page.status_code == 200
    text = page.content.decode()
    assert "nightly" in text and "ticker" in text
    assert "every 10 seconds" in text and "at 02:00, every day" in text
    assert "proj" in text  # owner


def test_the_pause_action_pauses_in_the_database(client: Any, project: str) -> None:
    page = client.post(CHANGELIST, {"action": "pause", "_selected_action": ["nightly"]},
                       follow=True)
    assert page.status_code == 200 and "Paused 1 schedule(s)." in page.content.decode()
    with connect(project) as conn:
        assert conn.execute("SELECT paused_by FROM awa.cron_jobs WHERE name = 'nightly'"
                            ).fetchone() == ("root (Django admin)",)
        assert conn.execute("SELECT actor, source, action, outcome FROM awa_beat.audit_log "
                            "ORDER BY id DESC LIMIT 1").fetchone() == (
            "root", "django", "pause", "ok")
    client.post(CHANGELIST, {"action": "resume", "_selected_action": ["nightly"]})
    with connect(project) as conn:
        assert conn.execute("SELECT paused_at FROM awa.cron_jobs WHERE name = 'nightly'"
                            ).fetchone() == (None,)
        count = "SELECT count(*) FROM awa.jobs WHERE metadata ->> 'cron_name' = 'ticker'"
        (before,) = conn.execute(count).fetchone()
        client.post(CHANGELIST, {"action": "trigger", "_selected_action": ["ticker"]})
        assert conn.execute(count).fetchone() == (before + 1,)


def test_non_staff_are_refused(project: str) -> None:
    from django.test import Client

    visitor = Client()
    visitor.login(username="visitor", password="pw")
    page = visitor.get(CHANGELIST)
    assert page.status_code == 302 and "/admin/login/" in page["Location"]
    refused = visitor.post(CHANGELIST, {"action": "pause", "_selected_action": ["ticker"]})
    assert refused.status_code == 302
    with connect(project) as conn:
        assert conn.execute("SELECT paused_at FROM awa.cron_jobs WHERE name = 'ticker'"
                            ).fetchone() == (None,)


ADD = "/admin/awa_beat/schedule/runtime/add/"


def shown_fields(html: str) -> dict[str, str]:
    """The form's fields as the browser would post them back untouched."""
    from html.parser import HTMLParser

    found: dict[str, str] = {}

    class Fields(HTMLParser):
        select: str | None = None

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            a = dict(attrs)
            if tag == "input" and a.get("type") == "text" and "disabled" not in a:
                found[str(a["name"])] = a.get("value") or ""
            elif tag == "input" and a.get("type") == "checkbox" and "checked" in a:
                found[str(a["name"])] = a.get("value") or "on"
            elif tag == "select":
                self.select = a.get("name")
                found.setdefault(str(self.select), "")
            elif tag == "option" and self.select and "selected" in a:
                found[self.select] = a.get("value") or ""

    Fields().feed(html)
    return found


def edit_url(name: str) -> str:
    return f"/admin/awa_beat/schedule/runtime/{name}/edit/"


def test_add_a_runtime_schedule_through_the_admin(client: Any, project: str) -> None:
    assert "Add a runtime schedule" in client.get(CHANGELIST).content.decode()
    page = client.post(ADD, {"name": "from-admin", "task": "t.added", "kind": "every",
                             "schedule": "300", "args": "[1]", "kwargs": "{}",
                             "timezone": "UTC"}, follow=True)
    assert page.status_code == 200 and "Added from-admin." in page.content.decode()
    assert '<td class="field-owner">runtime' in page.content.decode()  # the owner column
    with connect(project) as conn:
        assert conn.execute(
            "SELECT c.kind, c.args, s.owner FROM awa.cron_jobs c JOIN awa_beat.schedules s "
            "USING (name) WHERE name = 'from-admin'").fetchone() == (
            "t.added", {"args": [1], "kwargs": {}}, "runtime")
        assert conn.execute("SELECT actor, source, action, outcome FROM awa_beat.audit_log "
                            "ORDER BY id DESC LIMIT 1").fetchone() == (
            "root", "django", "add", "ok")


def test_a_bad_cron_in_the_admin_writes_nothing(client: Any, project: str) -> None:
    page = client.post(ADD, {"name": "bad-admin", "task": "t.bad", "kind": "cron",
                             "schedule": "61 * * * *"})
    assert page.status_code == 400
    text = page.content.decode()
    assert "Nothing was written" in text and "errorlist" in text
    with connect(project) as conn:
        assert conn.execute("SELECT count(*) FROM awa.cron_jobs WHERE name = 'bad-admin'"
                            ).fetchone() == (0,)


def test_edit_in_the_admin_changes_only_the_given_field(client: Any, project: str) -> None:
    query = ("SELECT cron_expr, kind, args, timezone, queue FROM awa.cron_jobs "
             "WHERE name = 'from-admin'")
    with connect(project) as conn:
        before = conn.execute(query).fetchone()
    form = client.get(edit_url("from-admin"))
    assert form.status_code == 200
    initial = shown_fields(form.content.decode())
    assert initial["schedule"] == before[0] and initial["task"] == "t.added"  # as stored
    page = client.post(edit_url("from-admin"), {**initial, "kwargs": '{"n": 2}'}, follow=True)
    assert page.status_code == 200 and "Saved from-admin." in page.content.decode()
    with connect(project) as conn:
        after = conn.execute(query).fetchone()
    assert after == (before[0], before[1], {"args": [1], "kwargs": {"n": 2}}, *before[3:])


def test_config_rows_stay_read_only_in_the_admin(client: Any, project: str) -> None:
    text = client.get(CHANGELIST).content.decode()
    assert edit_url("from-admin") in text and edit_url("nightly") not in text
    assert client.get(edit_url("nightly")).status_code == 403
    query = "SELECT kind, updated_at FROM awa.cron_jobs WHERE name = 'nightly'"
    with connect(project) as conn:
        before = conn.execute(query).fetchone()
    refused = client.post(edit_url("nightly"), {"kind": "cron", "task": "t.stolen"})
    assert refused.status_code == 403
    with connect(project) as conn:
        assert conn.execute(query).fetchone() == before
    # The model's own change view stays read-only too.
    assert client.post(f"{CHANGELIST}nightly/change/", {"kind": "t.x"}).status_code == 403
