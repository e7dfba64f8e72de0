"""The awa-beat command line in-process (click's runner) against a real database."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from celery.schedules import crontab
from click.testing import CliRunner

from awa_beat._cli import main
from awa_beat._db.database import connect

pytestmark = pytest.mark.integration


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def test_migrate_on_an_empty_database(empty_db_url: str) -> None:
    result = run("migrate", "--database-url", empty_db_url)
    assert result.exit_code == 0, result.output
    assert "migrated to awa-beat schema v" in result.output
    again = run("migrate", "--database-url", empty_db_url)
    assert "already at awa-beat schema" in again.output


def test_list_pause_trigger_resume_remove(report_url: str) -> None:
    listed = json.loads(run("list", "--json", "--database-url", report_url).output)
    assert [r["name"] for r in listed] == ["report"]
    nxt = datetime.fromisoformat(listed[0]["next_fire"])
    assert nxt > datetime.now(timezone.utc) and nxt.astimezone().minute == 0
    assert run("pause", "report", "--by", "oncall", "--database-url", report_url).exit_code == 0
    table = run("list", "--database-url", report_url).output
    assert "by oncall" in table and "Europe/Paris" in table
    assert "job" in run("trigger", "report", "--database-url", report_url).output
    assert run("resume", "report", "--database-url", report_url).exit_code == 0
    assert run("remove", "report", "--database-url", report_url, input="n\n").exit_code == 1
    assert run("remove", "report", "--yes", "--database-url", report_url).exit_code == 0
    assert json.loads(run("list", "--json", "--database-url", report_url).output) == []
    conn = connect(report_url)
    assert conn.execute("SELECT count(*) FROM awa.jobs").fetchone()[0] == 1
    conn.close()


def test_show_marks_dst_changes_and_lists_jobs(report_url: str) -> None:
    run("trigger", "report", "--database-url", report_url)
    shown = json.loads(run("show", "report", "-n", "400", "--json", "--database-url",
                           report_url).output)
    assert shown["timezone"] == "Europe/Paris" and len(shown["next_fires"]) == 400
    assert [j["triggered_manually"] for j in shown["last_jobs"]] == [True]
    text = run("show", "report", "-n", "400", "--database-url", report_url).output
    assert "DST: UTC offset +01:00 -> +02:00" in text  # 400 weekdays cross a DST change


def test_history_and_export(report_url: str) -> None:
    run("trigger", "report", "--database-url", report_url)
    history = json.loads(run("history", "--json", "--database-url", report_url).output)
    assert [h["schedule"] for h in history] == ["report"]
    assert run("history", "nope", "--database-url", report_url).exit_code == 1
    exported = json.loads(run("export", "--format", "json", "--database-url", report_url).output)
    assert exported["report"]["schedule"] == "0 9 * * 1-5"
    assert exported["report"]["options"]["awa_beat"]["timezone"] == "Europe/Paris"
    module = run("export", "--database-url", report_url).output
    namespace: dict = {}
    exec(compile(module, "exported", "exec"), namespace)  # a valid beat_schedule module
    report = namespace["beat_schedule"]["report"]
    assert isinstance(report["schedule"], crontab)  # a Celery object, which beat can run
    assert str(report["schedule"].tz) == "Europe/Paris"
    assert {k: v for k, v in report.items() if k != "schedule"} == {
        k: v for k, v in exported["report"].items() if k != "schedule"}


def test_doctor_passes_on_a_healthy_database_and_names_each_problem(report_url: str) -> None:
    healthy = run("doctor", "--database-url", report_url)
    assert healthy.exit_code == 0, healthy.output
    assert "[ok] session advisory locks hold across transactions" in healthy.output
    c = connect(report_url)
    c.execute("INSERT INTO awa.cron_jobs (name, cron_expr, kind) VALUES ('bad', '@midnight', 'k')")
    c.close()
    sick = run("doctor", "--database-url", report_url)
    assert sick.exit_code == 1
    assert "[FAIL] 2 schedule(s), 1 invalid" in sick.output and "- bad:" in sick.output
    assert "fix:" in sick.output
