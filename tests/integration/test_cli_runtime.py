"""`awa-beat add|edit` (and `celery -A proj awa add|edit`) against a real database."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from awa_beat._celery.command import command as celery_awa
from awa_beat._cli import main
from awa_beat._db.database import connect
from tests.apps import celery_app

pytestmark = pytest.mark.integration


def run(*args: str, obj: object = None):
    return CliRunner().invoke(main, list(args), obj=obj)


def count(url: str) -> int:
    conn = connect(url)
    try:
        return conn.execute("SELECT count(*) FROM awa.cron_jobs").fetchone()[0]
    finally:
        conn.close()


def test_add_then_edit_changes_only_the_given_fields(db_url: str) -> None:
    added = run("add", "report", "--task", "reports.build", "--cron", "30 7 * * 1-5",
                "--tz", "Europe/Paris", "--kwargs", '{"tenant": 42}', "--queue", "reports",
                "--json", "--database-url", db_url)
    assert added.exit_code == 0, added.output
    shown = json.loads(added.stdout)
    assert (shown["schedule"], shown["timezone"], shown["owner"]) == (
        "30 7 * * 1-5", "Europe/Paris", "runtime")
    edited = run("edit", "report", "--cron", "0 8 * * *", "--database-url", db_url)
    assert edited.exit_code == 0, edited.output
    assert edited.output.startswith("changed report: 0 8 * * * (Europe/Paris), next fire")
    row = json.loads(run("show", "report", "--json", "--database-url", db_url).output)
    assert row["task"] == "reports.build" and row["args"]["kwargs"] == {"tenant": 42}
    assert row["metadata"]["celery"]["options"] == {"queue": "reports"}
    assert row["queue"] == "reports"
    assert "runtime" in run("show", "report", "--database-url", db_url).output


def test_mistakes_write_nothing_and_end_in_an_error_line(db_url: str) -> None:
    for args, message in [
        (["--task", "t", "--cron", "61 * * * *"], "invalid schedule field"),
        (["--task", "t", "--every", "soon"], "'--every': 'soon'"),
        (["--task", "t", "--every", "5s", "--tz", "Mars/Olympus"], "Mars/Olympus"),
        (["--task", "t", "--every", "5s", "--kwargs", "[1]"], "must be a JSON object"),
    ]:
        result = run("add", "x", *args, "--database-url", db_url)
        assert result.exit_code == 1, result.output
        assert result.output.startswith("error: ") and message in result.output
        assert "Traceback" not in result.output
    usage = run("add", "x", "--task", "t", "--database-url", db_url)
    assert usage.exit_code == 2 and "needs a schedule" in usage.output
    assert count(db_url) == 0
    assert run("add", "x", "--task", "t", "--every", "5s", "--database-url", db_url
               ).exit_code == 0
    again = run("add", "x", "--task", "t2", "--every", "5s", "--database-url", db_url)
    assert again.exit_code == 1 and "exist already" in again.output and "--replace" in again.output
    assert run("add", "x", "--task", "t2", "--every", "5s", "--replace", "--database-url",
               db_url).exit_code == 0
    missing = run("edit", "nope", "--task", "t", "--database-url", db_url)
    assert missing.exit_code == 1 and "no schedule named 'nope'" in missing.output


def test_edit_of_a_beat_schedule_row_needs_force(report_url: str) -> None:
    refused = run("edit", "report", "--cron", "0 10 * * *", "--database-url", report_url)
    assert refused.exit_code == 1
    assert "beat_schedule of deployment proj" in refused.output and "--force" in refused.output
    forced = run("edit", "report", "--cron", "0 10 * * *", "--force", "--json",
                 "--database-url", report_url)
    assert forced.exit_code == 0, forced.output
    assert json.loads(forced.output)["owner"] == "runtime"


def test_celery_awa_add_reads_the_entry_with_the_apps_settings(db_url: str, layout: str) -> None:
    if layout == "awa":
        pytest.skip("Celery dispatch needs the standalone schema")
    app = celery_app("proj", db_url=db_url, timezone="Asia/Tokyo", awa_beat_dispatch="celery")
    result = CliRunner().invoke(celery_awa, ["add", "ping", "--task", "t.ping", "--cron",
                                             "0 9 * * *", "--json"],
                                obj=SimpleNamespace(app=app))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["timezone"] == "Asia/Tokyo"
    shown = json.loads(CliRunner().invoke(celery_awa, ["show", "ping", "--json"],
                                          obj=SimpleNamespace(app=app)).output)
    assert shown["metadata"]["celery"]["dispatch"] == "celery"
    assert shown["metadata"]["celery"]["deployment"] == "proj"


def test_at_and_solar_store_calendars_awa_never_fires(db_url: str) -> None:
    once = run("add", "nye", "--task", "t.greet", "--at", "2030-01-01T00:00+01:00", "--json",
               "--database-url", db_url)
    assert once.exit_code == 0, once.output
    shown = json.loads(once.stdout)
    assert shown["schedule"] == "@at 2029-12-31T23:00:00Z | runs=1"
    upcoming = json.loads(run("show", "nye", "--json", "--database-url", db_url).output)
    assert upcoming["next_fires"][0].startswith("2029-12-31T23:00:00")
    assert len(upcoming["next_fires"]) == 1  # once, and never again

    dusk = run("add", "dusk", "--task", "t.lights", "--solar", "sunset:48.85:2.35", "--json",
               "--database-url", db_url)
    assert dusk.exit_code == 0, dusk.output
    assert json.loads(dusk.stdout)["schedule"] == "@solar sunset 48.85 2.35"
    bad = run("add", "dawn", "--task", "t", "--solar", "sunfoo:48.85:2.35",
              "--database-url", db_url)
    assert bad.exit_code == 1 and bad.output.startswith(
        "error: invalid schedule field: entry 'dawn', field '--solar': 'sunfoo:48.85:2.35'")
    assert count(db_url) == 2
