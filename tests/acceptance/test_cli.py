"""The awa-beat command line against a real database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone

import pytest
from click.testing import CliRunner

from awa_beat.cli import main
from awa_beat.store import Store, connect

pytestmark = pytest.mark.acceptance


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def url(db_url: str) -> str:
    with Store(db_url) as store:
        store.sync([{
            "name": "report", "cron_expr": "0 9 * * 1-5", "timezone": "Europe/Paris",
            "kind": "t.report", "queue": "default", "args": {"args": [], "kwargs": {}},
            "priority": 2, "max_attempts": 25, "tags": [], "metadata": {},
            "missed_fire_policy": "coalesce"}], deployment="proj")
    return db_url


def test_migrate_on_an_empty_database(empty_db_url: str) -> None:
    result = run("migrate", "--database-url", empty_db_url)
    assert result.exit_code == 0, result.output
    assert "migrated to awa-beat schema v" in result.output
    again = run("migrate", "--database-url", empty_db_url)
    assert "already at awa-beat schema" in again.output


def test_list_pause_trigger_resume_remove(url: str) -> None:
    listed = json.loads(run("list", "--json", "--database-url", url).output)
    assert [r["name"] for r in listed] == ["report"]
    nxt = datetime.fromisoformat(listed[0]["next_fire"])
    assert nxt > datetime.now(timezone.utc) and nxt.astimezone().minute == 0
    assert run("pause", "report", "--by", "oncall", "--database-url", url).exit_code == 0
    table = run("list", "--database-url", url).output
    assert "by oncall" in table and "Europe/Paris" in table
    assert "job" in run("trigger", "report", "--database-url", url).output
    assert run("resume", "report", "--database-url", url).exit_code == 0
    assert run("remove", "report", "--database-url", url, input="n\n").exit_code == 1
    assert run("remove", "report", "--yes", "--database-url", url).exit_code == 0
    assert json.loads(run("list", "--json", "--database-url", url).output) == []
    conn = connect(url)
    assert conn.execute("SELECT count(*) FROM awa.jobs").fetchone()[0] == 1
    conn.close()


@pytest.mark.parametrize("command", ["pause", "resume", "trigger", "remove"])
def test_unknown_name_is_a_one_line_error(url: str, command: str) -> None:
    result = subprocess.run([sys.executable, "-m", "awa_beat", command, "nope",
                             "--database-url", url], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr == "error: no schedule named 'nope'\n"


def test_unreachable_database_hides_the_password() -> None:
    result = subprocess.run([sys.executable, "-m", "awa_beat", "list", "--database-url",
                             "postgresql://u:s3cret@127.0.0.1:1/x"], capture_output=True,
                            text=True)
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot connect to")
    assert "s3cret" not in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_malformed_url() -> None:
    result = subprocess.run([sys.executable, "-m", "awa_beat", "migrate", "--database-url",
                             "not a url"], capture_output=True, text=True)
    assert result.returncode == 1
    assert "malformed" in result.stderr and "Traceback" not in result.stderr


def test_show_marks_dst_changes_and_lists_jobs(url: str) -> None:
    run("trigger", "report", "--database-url", url)
    shown = json.loads(run("show", "report", "-n", "400", "--json", "--database-url", url).output)
    assert shown["timezone"] == "Europe/Paris" and len(shown["next_fires"]) == 400
    assert [j["triggered_manually"] for j in shown["last_jobs"]] == [True]
    text = run("show", "report", "-n", "400", "--database-url", url).output
    assert "DST: UTC offset +01:00 -> +02:00" in text  # 400 weekdays cross a DST change


def test_history_and_export(url: str) -> None:
    run("trigger", "report", "--database-url", url)
    history = json.loads(run("history", "--json", "--database-url", url).output)
    assert [h["schedule"] for h in history] == ["report"]
    assert run("history", "nope", "--database-url", url).exit_code == 1
    exported = json.loads(run("export", "--format", "json", "--database-url", url).output)
    assert exported["report"]["schedule"] == "0 9 * * 1-5"
    assert exported["report"]["options"]["awa_beat"]["timezone"] == "Europe/Paris"
    module = run("export", "--database-url", url).output
    namespace: dict = {}
    exec(compile(module, "exported", "exec"), namespace)  # a valid beat_schedule module
    assert namespace["beat_schedule"] == exported


def test_celery_plugin_takes_the_database_from_the_app(url: str, tmp_path) -> None:
    (tmp_path / "plugapp.py").write_text(
        "from celery import Celery\napp = Celery('plug')\n"
        f"app.conf.awa_beat_database_url = {url!r}\n")
    result = subprocess.run([sys.executable, "-m", "celery", "-A", "plugapp", "awa", "list",
                             "--json"], capture_output=True, text=True, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)
    assert [r["name"] for r in listed] == ["report"]
    assert listed[0]["orphan"] is False  # registered by deployment "proj", not by "plug"


def test_the_celery_plugin_costs_other_celery_commands_no_imports() -> None:
    # Celery loads every celery.commands entry point on each start of any celery command.
    probe = ("from importlib.metadata import entry_points\n"
             "import sys\n"
             "[plugin] = [ep for ep in entry_points(group='celery.commands') if ep.name == 'awa']\n"
             "plugin.load()\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in"
             " ('psycopg', 'psycopg_pool', 'awa_beat')))\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['awa_beat', 'awa_beat.celery_command']"


def test_doctor_passes_on_a_healthy_database_and_names_each_problem(url: str) -> None:
    healthy = run("doctor", "--database-url", url)
    assert healthy.exit_code == 0, healthy.output
    assert "[ok] session advisory locks hold across transactions" in healthy.output
    c = connect(url)
    c.execute("INSERT INTO awa.cron_jobs (name, cron_expr, kind) VALUES ('bad', '@midnight', 'k')")
    c.close()
    sick = run("doctor", "--database-url", url)
    assert sick.exit_code == 1
    assert "[FAIL] 2 schedule(s), 1 invalid" in sick.output and "- bad:" in sick.output
    assert "fix:" in sick.output


def test_status_shows_the_leader_and_standbys(url: str, tmp_path) -> None:
    from .test_beat_processes import Beats, wait_for

    beats = Beats(url, tmp_path)
    beats.start()
    beats.start()
    try:
        def both() -> dict | None:
            status = json.loads(run("status", "--json", "--database-url", url).output)
            return status if status["leaders"] and status["standbys"] else None

        status = wait_for(both, 30, "a leader and a standby in status")
    finally:
        beats.stop_all()
    assert len(status["leaders"]) == 1 and len(status["standbys"]) == 1
    assert status["leaders"][0]["lock_key"] == 4708303812828676436
    assert status["unpublished_backlog"] == 0
    text = run("status", "--database-url", url).output
    assert text.startswith("leader: NONE")  # both stopped and said goodbye


def test_list_flags_rows_the_apps_beat_schedule_no_longer_has(url: str, tmp_path) -> None:
    (tmp_path / "projapp.py").write_text(
        "from celery import Celery\napp = Celery('proj')\n"
        f"app.conf.awa_beat_database_url = {url!r}\napp.conf.beat_schedule = {{}}\n")
    result = subprocess.run([sys.executable, "-m", "celery", "-A", "projapp", "awa", "list"],
                            capture_output=True, text=True, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert "proj (orphan: not in beat_schedule)" in result.stdout
