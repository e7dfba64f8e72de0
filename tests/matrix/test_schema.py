"""Awa's schema moves on: every surface refuses a table it does not know, and a write the
database skipped is reported, never taken for done.

Awa's 0.7 line adds columns to ``awa.cron_jobs`` (``owner_id``, ``retired_at``,
``retired_by``, ``retired_revision``, its migration v045) and a trigger that skips some
updates (it returns NULL for a retired row) and refuses some deletes (SQLSTATE 55000 for
a row another owner holds). :func:`make_awa07` turns a catalogue database of either layout
into that: the columns, the trigger, two retired rows and an owned one, and, where Awa
owns the tables, Awa's migration table past the versions awa-beat knows.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from awa_beat import Schedules
from awa_beat._db.database import connect
from awa_beat._ops.operations import Operations
from awa_beat._testing import terminate, wait_for
from awa_beat.errors import NotFound, UnknownSchema, WriteNotApplied
from awa_beat.web import create_app
from awa_beat.web.server import make
from tests.matrix.catalogue import CATALOGUE, SETTINGS, MatrixDB, beat_schedule, stored_rows

ROOT = Path(__file__).resolve().parents[2]
NEW_COLUMNS = ("owner_id", "retired_at", "retired_by", "retired_revision")
#: Rows the 0.7 trigger guards: updates of these change nothing ...
RETIRED = ("retired", "bound-max-runs")
#: ... and deletes of this one fail with SQLSTATE 55000.
OWNED = "rrule"

AWA07 = """
ALTER TABLE awa.cron_jobs ADD COLUMN owner_id TEXT, ADD COLUMN retired_at TIMESTAMPTZ,
    ADD COLUMN retired_by TEXT, ADD COLUMN retired_revision BIGINT;
CREATE FUNCTION awa.cron_jobs_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND OLD.owner_id IS NOT NULL THEN
        RAISE EXCEPTION 'cron job % is owned by %', OLD.name, OLD.owner_id
            USING ERRCODE = '55000';
    END IF;
    IF OLD.retired_at IS NOT NULL THEN
        RETURN NULL;  -- a retired row is left as it is
    END IF;
    RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
END $$;
CREATE TRIGGER cron_jobs_guard BEFORE UPDATE OR DELETE ON awa.cron_jobs
    FOR EACH ROW EXECUTE FUNCTION awa.cron_jobs_guard();
"""


def make_awa07(url: str, layout: str) -> None:
    """What Awa 0.7's migrations (up to v045) and its leader leave in the database."""
    with connect(url) as conn, conn.transaction():
        conn.execute(AWA07)
        conn.execute("UPDATE awa.cron_jobs SET owner_id = 'awa-leader-1' WHERE name = %s",
                     (OWNED,))
        conn.execute("UPDATE awa.cron_jobs SET retired_at = now(), retired_by = 'awa'"
                     " WHERE name = ANY(%s)", (list(RETIRED),))
        if layout == "awa":
            conn.execute("INSERT INTO awa.schema_version (version, description)"
                         " VALUES (44, 'v044'), (45, 'cron ownership and retirement')")


def beat_env(matrix_db: MatrixDB, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a real `celery -A awa07app beat` (written to ``tmp_path``), whose
    beat_schedule is the catalogue's own plus one new entry, on ``matrix_db``."""
    (tmp_path / "awa07app.py").write_text(
        "from celery import Celery\n"
        "from tests.matrix.catalogue import beat_schedule\n"
        "app = Celery('matrix', broker='memory://')\n"
        "app.conf.beat_schedule = {**beat_schedule(),\n"
        "    'new': {'task': 'matrix.new', 'schedule': 5.0}}\n")
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{tmp_path}:{ROOT}",
            "AWA_BEAT_DATABASE_URL": matrix_db.url, **extra}


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


def refusal_reasons(message: str, layout: str) -> None:
    """The refusal names what it found: the new columns and the trigger (and, where Awa
    owns the tables, its version beyond the known ones)."""
    assert "awa.cron_jobs is not the table awa-beat knows" in message, message
    assert all(c in message for c in NEW_COLUMNS) and "cron_jobs_guard" in message, message
    assert ("newer than the v43 awa-beat knows" in message) == (layout == "awa"), message


def test_beat_cli_and_api_refuse_a_newer_awa_schema(matrix_db: MatrixDB,
                                                    tmp_path: Path) -> None:
    make_awa07(matrix_db.url, matrix_db.layout)
    before = stored_rows(matrix_db.url)

    # The Python API
    with pytest.raises(UnknownSchema) as refused:
        Schedules(matrix_db.url, settings=SETTINGS)
    refusal_reasons(one_line(str(refused.value)), matrix_db.layout)

    # The CLI: a read, a write, the migration and the dashboard refuse in one line, exit 1.
    for command in (["list"], ["pause", "cron-zone"], ["migrate"], ["web", "--port", "0"]):
        result = subprocess.run([sys.executable, "-m", "awa_beat", *command,
                                 "--database-url", matrix_db.url],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, (command, result.stdout, result.stderr)
        line = one_line(result.stderr)
        assert line.startswith("error: "), line
        refusal_reasons(line, matrix_db.layout)

    # `doctor` says the database answers, and what it holds that awa-beat cannot use.
    doctor = subprocess.run([sys.executable, "-m", "awa_beat", "doctor", "--database-url",
                             matrix_db.url], capture_output=True, text=True, timeout=60)
    assert doctor.returncode == 1 and doctor.stdout.startswith("[ok] database reachable")
    (schema_line,) = [line for line in doctor.stdout.splitlines()
                      if line.startswith("[FAIL] schema: ")]
    refusal_reasons(schema_line, matrix_db.layout)

    # A real `celery beat` whose beat_schedule is the catalogue's own plus one new entry.
    env = beat_env(matrix_db, tmp_path, AWA_BEAT_STARTUP_TIMEOUT="0")
    beat = subprocess.run([sys.executable, "-m", "celery", "-A", "awa07app", "beat",
                           "-S", "awa_beat.Scheduler", "--pidfile=",
                           "-s", str(tmp_path / "unused")],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    output = beat.stdout + beat.stderr
    assert beat.returncode == 1 and "Traceback" not in output, output[-3000:]
    # Its log line and its line on stderr (which Celery logs too): one message, one line.
    said = {line.split("cannot start: ", 1)[1] for line in output.splitlines()
            if "cannot start: " in line}
    assert len(said) == 1, output[-3000:]
    refusal_reasons(said.pop(), matrix_db.layout)

    assert stored_rows(matrix_db.url) == before  # nothing synced, paused or migrated
    assert set(beat_schedule()) <= set(before)


def test_a_running_beat_stops_once_awa_is_migrated_under_it(matrix_db: MatrixDB,
                                                             tmp_path: Path) -> None:
    """Awa's migrations run while beat leads: at its next resync the leader stops, in one
    line, exit 1, instead of firing on a table it no longer knows."""
    log = tmp_path / "beat.log"
    with open(log, "wb") as out:
        beat = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "awa07app", "beat", "-S",
             "awa_beat.Scheduler", "-l", "info", "--pidfile=", "-s", str(tmp_path / "unused")],
            cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
            env=beat_env(matrix_db, tmp_path, AWA_BEAT_SYNC_INTERVAL="1"))
    try:
        def leading() -> bool:
            assert beat.poll() is None, log.read_text(errors="replace")[-3000:]
            return "is now the leader" in log.read_text(errors="replace")

        wait_for(leading, 60, "beat to lead")
        make_awa07(matrix_db.url, matrix_db.layout)
        assert beat.wait(30) == 1
    finally:
        terminate([beat])
    output = log.read_text(errors="replace")
    assert "Traceback" not in output, output[-3000:]
    said = {line.split("stopped: ", 1)[1] for line in output.splitlines()
            if "awa-beat: stopped: " in line}
    assert len(said) == 1, output[-3000:]
    refusal_reasons(said.pop(), matrix_db.layout)


def test_a_write_the_database_skips_is_reported(matrix_db: MatrixDB) -> None:
    """Awa upgraded under an awa-beat that already runs: each write that must change a
    row and changed none says so, names the schedule, and leaves everything as it was."""
    with matrix_db.schedules() as schedules, Operations.open(matrix_db.url) as ops:
        make_awa07(matrix_db.url, matrix_db.layout)
        before = stored_rows(matrix_db.url)
        retired, limited = RETIRED
        attempts = {
            "pause": lambda: schedules.pause(limited, by="op"),
            "pause with a note (the dashboard's)": lambda: ops.pause(limited, "op", "why"),
            "resume": lambda: schedules.resume(retired),
            "update": lambda: schedules.update(retired, kwargs={"changed": True}),
            "replace": lambda: schedules.add(
                limited, replace=True, **_fields(beat_schedule([CATALOGUE[limited]]))),
            "remove (skipped)": lambda: schedules.remove(retired),
            "remove (refused, 55000)": lambda: schedules.remove(OWNED),
        }
        for what, attempt in attempts.items():
            with pytest.raises(WriteNotApplied) as err:
                attempt()
            message = one_line(str(err.value))
            assert repr(retired if "remove (s" in what or what in ("resume", "update")
                        else OWNED if "55000" in what else limited) in message, (what, message)
        assert stored_rows(matrix_db.url) == before  # owners and run counts kept too
        assert ops.pause_note(limited) is None

        # Writes the trigger lets through still succeed; an unknown name is still that.
        schedules.pause("cron-zone", by="op")
        with pytest.raises(NotFound):
            schedules.pause("no-such-schedule")
        with pytest.raises(NotFound):
            schedules.remove("no-such-schedule")
    assert stored_rows(matrix_db.url)["cron-zone"]["paused_by"] == "op"


def test_the_dashboard_answers_409_for_a_skipped_write(matrix_db: MatrixDB) -> None:
    """The dashboard, started before Awa was migrated under it: a pause the database
    skips is a conflict naming the schedule (not "unavailable"), and recorded so."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    app = create_app(matrix_db.url)
    server = make(app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        # Any page with a form gives the session's token (a plain cron one's).
        page = opener.open(f"{base}/schedule?name=cron-zone", timeout=10).read().decode()
        token = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert token is not None, page[:2000]
        make_awa07(matrix_db.url, matrix_db.layout)
        form = urllib.parse.urlencode({"name": RETIRED[1], "csrf_token": token[1]}).encode()
        request = urllib.request.Request(f"{base}/schedule/pause", data=form,
                                         headers={"Origin": base})
        with pytest.raises(urllib.error.HTTPError) as answered:
            opener.open(request, timeout=10)
        body = answered.value.read().decode()
        assert answered.value.code == 409, body[:2000]
        assert f"pausing &#39;{RETIRED[1]}&#39; changed nothing" in body, body[:3000]
        (entry, *_) = app.ops.audit_log(schedule=RETIRED[1])
        assert entry.action == "pause" and entry.outcome.startswith("error: pausing")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
        app.close()


def _fields(schedule: dict[str, dict[str, object]]) -> dict[str, object]:
    """The one entry of ``schedule`` as keyword arguments of :meth:`Schedules.add`."""
    ((_, entry),) = schedule.items()
    return dict(entry)


@pytest.mark.parametrize(("change", "named"), [
    ("CREATE RULE keep AS ON DELETE TO awa.cron_jobs DO INSTEAD NOTHING", "rules keep"),
    ("ALTER TABLE awa.cron_jobs DROP COLUMN paused_by", "missing columns paused_by"),
    ("CREATE FUNCTION awa.noop() RETURNS trigger LANGUAGE plpgsql AS"
     " $$ BEGIN RETURN NEW; END $$;"
     " CREATE TRIGGER audit AFTER UPDATE ON awa.cron_jobs"
     " FOR EACH ROW EXECUTE FUNCTION awa.noop()", "triggers audit"),
], ids=["rule", "dropped-column", "trigger"])
def test_each_change_to_the_table_is_named(db_url: str, change: str, named: str) -> None:
    """Whatever changed the table, a version of Awa's or a hand, the refusal names it; a
    trigger that is disabled changes nothing and is not refused."""
    with connect(db_url) as conn:
        conn.execute(change)
    with pytest.raises(UnknownSchema) as refused:
        Schedules(db_url, settings=SETTINGS)
    message = one_line(str(refused.value))
    assert f"({named})" in message and "newer than" not in message, message
    if named.startswith("triggers"):
        with connect(db_url) as conn:
            conn.execute("ALTER TABLE awa.cron_jobs DISABLE TRIGGER audit")
        Schedules(db_url, settings=SETTINGS).close()
