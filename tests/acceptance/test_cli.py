"""The awa-beat command line as real processes (`awa-beat`, `celery -A proj awa`)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from awa_beat._db.database import Database
from awa_beat._db.embedded import default_data_dir, embedded_database_url
from awa_beat.errors import ConfigError
from tests.integration.test_cli import run

from .test_beat_processes import ROOT

pytestmark = pytest.mark.acceptance


def app_env(app_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a `celery -A` run of an app module written to ``app_dir``:
    that directory and this checkout importable, no AWA_BEAT_* setting of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWA_BEAT_")}
    return {**env, "PYTHONPATH": os.pathsep.join([str(app_dir), str(ROOT)]), **extra}


@pytest.mark.parametrize("command", ["pause", "resume", "trigger", "remove"])
def test_unknown_name_is_a_one_line_error(report_url: str, command: str) -> None:
    result = subprocess.run([sys.executable, "-m", "awa_beat", command, "nope",
                             "--database-url", report_url], capture_output=True, text=True)
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


def test_celery_plugin_takes_the_database_from_the_app(report_url: str, tmp_path) -> None:
    (tmp_path / "plugapp.py").write_text(
        "from celery import Celery\napp = Celery('plug')\n"
        f"app.conf.awa_beat_database_url = {report_url!r}\n")
    result = subprocess.run([sys.executable, "-m", "celery", "-A", "plugapp", "awa", "list",
                             "--json"], capture_output=True, text=True, cwd=tmp_path,
                            env=app_env(tmp_path))
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
    # awa_beat.errors comes with the package (the public errors, a module of no imports);
    # the adapter's package holds only its docstring.
    assert result.stdout.strip() == ("['awa_beat', 'awa_beat._celery', "
                                     "'awa_beat._celery.command', 'awa_beat.errors']")


def test_status_shows_the_leader_and_standbys(report_url: str, tmp_path) -> None:
    from .test_beat_processes import Beats, wait_for

    beats = Beats(report_url, tmp_path)
    beats.start()
    beats.start()
    try:
        def both() -> dict | None:
            status = json.loads(run("status", "--json", "--database-url", report_url).output)
            return status if status["leaders"] and status["standbys"] else None

        status = wait_for(both, 30, "a leader and a standby in status")
    finally:
        beats.stop_all()
    assert len(status["leaders"]) == 1 and len(status["standbys"]) == 1
    assert status["leaders"][0]["lock_key"] == 4708303812828676436
    assert status["unpublished_backlog"] == 0
    text = run("status", "--database-url", report_url).output
    assert text.startswith("leader: NONE")  # both stopped and said goodbye


def test_list_flags_rows_the_apps_beat_schedule_no_longer_has(report_url: str, tmp_path) -> None:
    (tmp_path / "projapp.py").write_text(
        "from celery import Celery\napp = Celery('proj')\n"
        f"app.conf.awa_beat_database_url = {report_url!r}\napp.conf.beat_schedule = {{}}\n")
    result = subprocess.run([sys.executable, "-m", "celery", "-A", "projapp", "awa", "list"],
                            capture_output=True, text=True, cwd=tmp_path,
                            env=app_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "proj (orphan: not in beat_schedule)" in result.stdout


def test_celery_awa_finds_the_embedded_database_a_beat_started(tmp_path: Path,
                                                               monkeypatch) -> None:
    # As after the README's quickstart: no URL anywhere, and the embedded server in
    # ./.awa-beat/pgdata of the directory the commands run in.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AWA_BEAT_EMBEDDED_DIR", raising=False)
    try:
        url = embedded_database_url(default_data_dir())
    except ConfigError as exc:
        pytest.skip(f"the embedded PostgreSQL is not installed: {exc}")
    with Database(url) as store:
        store.migrate()
        store.schedules.sync([{
            "name": "quickstart", "cron_expr": "*/5 * * * *", "timezone": "UTC",
            "kind": "t.tick", "queue": "default", "args": {"args": [], "kwargs": {}},
            "priority": 2, "max_attempts": 25, "tags": [], "metadata": {},
            "missed_fire_policy": "coalesce"}], deployment="embedapp")
    (tmp_path / "embedapp.py").write_text("from celery import Celery\napp = Celery('embedapp')\n")
    result = subprocess.run([sys.executable, "-m", "celery", "-A", "embedapp", "awa", "list",
                             "--json"], capture_output=True, text=True, cwd=tmp_path,
                            env=app_env(tmp_path), timeout=120)
    assert result.returncode == 0, result.stderr
    assert [r["name"] for r in json.loads(result.stdout)] == ["quickstart"]


def test_web_on_a_busy_port_is_one_line(databases, tmp_path: Path) -> None:
    pytest.importorskip("jinja2")
    url = databases.fresh("standalone")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "awa_beat", "web", "--port", str(port),
                                 "--database-url", url], capture_output=True, text=True,
                                cwd=tmp_path, env=app_env(tmp_path), timeout=60)
    assert result.returncode == 1, result.stderr
    assert result.stderr == (f"error: the dashboard cannot listen on 127.0.0.1:{port}: "
                             "Address already in use\n")


@pytest.mark.parametrize("bind, shown", [("127.0.0.1", "127.0.0.1"), ("::1", "[::1]")])
def test_web_says_where_it_listens(databases, tmp_path: Path, bind: str, shown: str) -> None:
    pytest.importorskip("jinja2")
    if ":" in bind and not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    url = databases.fresh("standalone")
    server = subprocess.Popen(
        [sys.executable, "-m", "awa_beat", "web", "--port", "0", "--bind", bind,
         "--database-url", url], stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env=app_env(tmp_path))
    try:
        assert server.stderr is not None
        line = server.stderr.readline()  # the first thing it prints, once listening
        prefix = f"awa-beat web on http://{shown}:"
        assert line.startswith(prefix) and line.endswith("/ (no login: loopback only)\n"), line
        port = int(line[len(prefix):].split("/", 1)[0])
        with socket.create_connection((bind, port), timeout=10) as conn:
            # Without a login, a request must name this host (DNS rebinding).
            conn.sendall(f"GET /schedules HTTP/1.0\r\nHost: {shown}:{port}\r\n\r\n".encode())
            assert conn.recv(12).startswith(b"HTTP/1.0 200")
    finally:
        server.terminate()
        server.wait(timeout=30)
