"""Export, every schedule type of the catalogue: ``awa-beat export --format python`` is a
module a stock ``celery beat`` runs (a real one, PersistentScheduler, fires it), every
entry a Celery schedule object or a comment saying why it is left out; and an export
imported back (``import -A`` of the module or of the JSON, ``import --from-file`` of the
file the stock beat wrote) gives back the same rows."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from celery.schedules import BaseSchedule, crontab, schedule, solar
from click.testing import CliRunner

from awa_beat._cli import main
from awa_beat._db.database import connect
from awa_beat._testing import TempDatabases, terminate, wait_for
from tests.brokers import broker_conf
from tests.matrix.catalogue import CATALOGUE, DEPLOYMENT, NAMES, Entry, MatrixDB

pytestmark = pytest.mark.integration
UTC = timezone.utc
ROOT = Path(__file__).resolve().parents[2]
#: Instants the exported crontabs and solar events are compared with the catalogue at:
#: either side of Europe's DST changes, and an ordinary day.
INSTANTS = [datetime(2027, 3, 27, 12, 0, tzinfo=UTC), datetime(2027, 3, 28, 5, 0, tzinfo=UTC),
            datetime(2027, 10, 30, 6, 29, 59, tzinfo=UTC),
            datetime(2027, 7, 14, 8, 0, 3, 250000, tzinfo=UTC)]
#: The columns an import writes from an entry (the schedule, the call, the job's fields).
COLUMNS = ("cron_expr", "timezone", "kind", "queue", "args", "priority", "max_attempts",
           "tags", "metadata", "missed_fire_policy")


def runs_under_celery(entry: Entry) -> bool:
    """What the README says a stock Celery gets: active crontabs (Celery's own, stored as
    ``@crontab``, included), intervals and solar events; no ``at``, rrule, bounds, paused
    or retired schedule."""
    return entry.state == "active" and entry.marker in (None, "every", "solar", "crontab")


def export(url: str, *args: str) -> str:
    result = CliRunner().invoke(main, ["export", *args, "--database-url", url],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def load(module: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(module, "exported.py", "exec"), namespace)
    return namespace["beat_schedule"]


def celery_next(sched: BaseSchedule, t: datetime, app: Celery) -> datetime:
    """The first fire after ``t`` as Celery's own object computes it."""
    sched.app = app
    sched.nowfun = lambda: t
    return (t + sched.remaining_estimate(t)).astimezone(UTC)


@pytest.fixture(scope="module")
def utc_app() -> Celery:
    app = Celery("exported", set_as_current=False)
    app.conf.timezone = "UTC"
    return app


def test_python_export_is_celery_objects_or_comments(shared_matrix_db: MatrixDB,
                                                     utc_app: Celery) -> None:
    url = shared_matrix_db.url
    module = export(url)
    assert export(url) == module  # deterministic
    beat_schedule = load(module)
    for name in shared_matrix_db.names:
        entry = CATALOGUE[name]
        if not runs_under_celery(entry):
            assert name not in beat_schedule
            assert f"# Left out: {name!r}: " in module, name
            continue
        got = beat_schedule[name]
        assert isinstance(got["schedule"], BaseSchedule), (name, got["schedule"])
        want = entry.entry
        assert (got["task"], got["args"], got["kwargs"]) == (
            want["task"], list(want["args"]), dict(want["kwargs"]))
        assert got["options"]["queue"] == want["options"]["queue"]
        assert got["options"]["awa_beat"]["timezone"] == entry.timezone
        sched = got["schedule"]
        if entry.marker == "every" or isinstance(want["schedule"], (int, timedelta)):
            assert type(sched) is schedule
            seconds = want["schedule"]
            seconds = seconds.total_seconds() if isinstance(seconds, timedelta) else seconds
            assert sched.run_every == timedelta(seconds=seconds)
            continue
        assert isinstance(sched, (crontab, solar))
        for t in INSTANTS:
            documented = entry.calendar(t)
            assert documented is not None
            assert abs(celery_next(sched, t, utc_app) - documented) < timedelta(seconds=1), (
                name, t)


def test_a_crontab_runs_in_its_zone_whatever_the_app_zone(shared_matrix_db: MatrixDB) -> None:
    tokyo = Celery("tokyo", set_as_current=False)
    tokyo.conf.timezone = "Asia/Tokyo"
    sched = load(export(shared_matrix_db.url))["cron-zone"]["schedule"]
    t = INSTANTS[0]
    assert celery_next(sched, t, tokyo) == CATALOGUE["cron-zone"].calendar(t)
    # Given the app's zone, crontabs in it are plain (the app's zone is theirs).
    plain = load(export(shared_matrix_db.url, "--timezone", "Europe/Paris"))["cron-zone"]
    assert "crontab(minute='30', hour='7')" in export(shared_matrix_db.url, "--timezone",
                                                      "Europe/Paris")
    paris = Celery("paris", set_as_current=False)
    paris.conf.timezone = "Europe/Paris"
    assert celery_next(plain["schedule"], t, paris) == CATALOGUE["cron-zone"].calendar(t)


def test_an_unknown_app_time_zone_is_a_one_line_error(shared_matrix_db: MatrixDB) -> None:
    result = CliRunner().invoke(main, ["export", "--timezone", "Mars/Olympus",
                                       "--database-url", shared_matrix_db.url])
    assert result.exit_code == 1
    assert result.output.startswith("error: ") and "Mars/Olympus" in result.output
    assert "Traceback" not in result.output


# -- round trips -----------------------------------------------------------------------------


def rows(url: str, names: Any = None) -> dict[str, dict[str, Any]]:
    with connect(url) as conn:
        cur = conn.execute(f"SELECT name, {', '.join(COLUMNS)} FROM awa.cron_jobs")
        found = {r[0]: dict(zip(COLUMNS, r[1:], strict=True)) for r in cur}
    return {n: r for n, r in found.items() if names is None or n in names}


def import_app(url: str, tmp: Path, module: str, source: str,
               monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """``awa-beat import -A <module>`` of an app whose beat_schedule is ``source``."""
    (tmp / f"{module}.py").write_text(
        "from celery import Celery\n" + source +
        f"\napp = Celery({DEPLOYMENT!r}, set_as_current=False)\n"
        "app.conf.beat_schedule = beat_schedule\n")
    monkeypatch.chdir(tmp)
    monkeypatch.syspath_prepend(str(tmp))
    result = CliRunner().invoke(main, ["import", "-A", module, "--database-url", url,
                                       "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_json_export_imported_back_gives_the_same_rows(matrix_db: MatrixDB,
                                                       databases: TempDatabases,
                                                       tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    exported = export(matrix_db.url, "--format", "json")
    target = databases.fresh(matrix_db.layout)
    out = import_app(target, tmp_path, f"json_export_{matrix_db.layout}",
                     f"import json\nbeat_schedule = json.loads({exported!r})\n", monkeypatch)
    assert out["not_carried_over"] == []
    assert rows(target) == rows(matrix_db.url)
    assert set(rows(target)) == set(NAMES)


def test_python_export_imported_back_gives_the_same_rows(matrix_db: MatrixDB,
                                                         databases: TempDatabases,
                                                         tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         ) -> None:
    module = export(matrix_db.url)
    target = databases.fresh(matrix_db.layout)
    out = import_app(target, tmp_path, f"python_export_{matrix_db.layout}", module,
                     monkeypatch)
    assert out["not_carried_over"] == []
    kept = {n for n in NAMES if runs_under_celery(CATALOGUE[n])}
    assert rows(target) == rows(matrix_db.url, kept)


# -- a stock celery beat ---------------------------------------------------------------------


APP = """\
from celery import Celery
from exported_schedule import beat_schedule

app = Celery("rollback")
app.conf.update({conf!r})
app.conf.timezone = "UTC"
app.conf.beat_schedule = beat_schedule
"""


@pytest.fixture(scope="module")
def stock_beat(matrix_templates: Any, tmp_path_factory: pytest.TempPathFactory,
               ) -> Iterator[tuple[MatrixDB, Path, subprocess.Popen[bytes]]]:
    """One stock ``celery beat`` (PersistentScheduler) running the export of the
    catalogue, with kombu's filesystem transport as its broker."""
    db = matrix_templates.clone("standalone")
    tmp = tmp_path_factory.mktemp("rollback")
    (tmp / "exported_schedule.py").write_text(export(db.url))
    (tmp / "rollback_app.py").write_text(APP.format(conf=broker_conf("filesystem", tmp)))
    log = open(tmp / "beat.log", "wb")  # noqa: SIM115 - closed after the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "rollback_app", "beat", "-l", "info",
         "--max-interval", "1", "--pidfile=", "-s", str(tmp / "celerybeat-schedule")],
        cwd=tmp, env={**os.environ, "PYTHONPATH": f"{tmp}{os.pathsep}{ROOT}"},
        stdout=log, stderr=subprocess.STDOUT)
    try:
        yield db, tmp, proc
    finally:
        terminate([proc])
        log.close()


def published_tasks(folder: Path) -> list[str]:
    """The tasks of the messages on the filesystem broker."""
    tasks = []
    for path in folder.glob("*.msg"):
        try:
            message = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being written
        tasks.append(message["headers"]["task"])
        assert json.loads(base64.b64decode(message["body"]))  # a Celery task message
    return tasks


def test_a_stock_celery_beat_runs_the_export(
        stock_beat: tuple[MatrixDB, Path, subprocess.Popen[bytes]]) -> None:
    _, tmp, proc = stock_beat
    log = tmp / "beat.log"
    wanted = CATALOGUE["offgrid-interval"]  # the entry that fires within seconds
    try:
        tasks = wait_for(lambda: proc.poll() is not None or [
            t for t in published_tasks(tmp / "broker") if t == wanted.task], timeout=60,
            what=f"{wanted.task} published by the stock beat")
    finally:
        text = log.read_text(errors="replace")
    assert proc.poll() is None, text
    assert tasks, text
    assert "Sending due task offgrid-interval (matrix.offgrid_interval)" in text
    assert "Traceback" not in text and "ERROR" not in text, text


def test_the_stock_beat_file_imported_back_gives_the_same_rows(
        stock_beat: tuple[MatrixDB, Path, subprocess.Popen[bytes]],
        databases: TempDatabases, monkeypatch: pytest.MonkeyPatch) -> None:
    db, tmp, proc = stock_beat
    wait_for(lambda: list(tmp.glob("celerybeat-schedule*")), timeout=30,
             what="the stock beat's schedule file")  # dbm names its files as it likes
    terminate([proc])  # the file is complete once beat has closed it
    assert proc.returncode == 0, (tmp / "beat.log").read_text(errors="replace")
    target = databases.fresh("standalone")
    monkeypatch.chdir(tmp)
    monkeypatch.syspath_prepend(str(tmp))
    result = CliRunner().invoke(main, [
        "import", "--from-file", str(tmp / "celerybeat-schedule"), "-A", "rollback_app",
        "--deployment", DEPLOYMENT, "--database-url", target, "--json"],
        catch_exceptions=False)
    assert result.exit_code == 0, result.output
    kept = {n for n in NAMES if runs_under_celery(CATALOGUE[n])}
    assert rows(target) == rows(db.url, kept)
