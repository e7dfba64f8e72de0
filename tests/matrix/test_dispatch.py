"""The dispatch cells of the matrix: who runs the jobs of a schedule added at run time,
and where its unpublished jobs show.

``awa-beat add`` without an app gets deployment ``default`` and dispatch ``awa``; it says
so in one line, and refuses a row whose jobs nothing would run while the beats seen show
what would (a beat of another deployment publishes Celery jobs), naming the fix. Jobs
that no beat of their deployment publishes show, with their deployment and the same
count, in ``awa-beat status``, ``awa-beat doctor``, the dashboard's cluster page and every
beat's ``awa_beat_outbox_backlog``. A real ``celery beat`` of deployment ``proj`` runs
with its endpoint on.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from wsgiref.util import setup_testing_defaults

import pytest
from click.testing import CliRunner

from awa_beat import Schedules
from awa_beat._cli import main
from awa_beat._config import Settings
from awa_beat._db.database import connect
from awa_beat._testing import wait_for
from tests.acceptance.test_observability import Beat
from tests.brokers import broker_conf
from tests.matrix.beats import running_beat

pytestmark = pytest.mark.acceptance
STRANDED = 3
"""Jobs of deployment ``default`` that no beat publishes."""


def cli(url: str, *args: str):
    return CliRunner().invoke(main, [*args, "--database-url", url])


def stored(url: str, name: str) -> bool:
    with connect(url) as conn:
        return conn.execute("SELECT 1 FROM awa.cron_jobs WHERE name = %s",
                            (name,)).fetchone() is not None


def heartbeats(url: str) -> int:
    with connect(url) as conn:
        return conn.execute("SELECT count(*) FROM awa_beat.beats").fetchone()[0]


@pytest.fixture
def beat(databases, tmp_path: Path) -> Iterator[tuple[Beat, str]]:
    """A beat of deployment ``proj`` that publishes to Celery, seen by the cluster."""
    url = databases.fresh("standalone")
    broker = json.dumps(broker_conf("filesystem", tmp_path))
    with running_beat("tests.matrix.dispatchapp", url, tmp_path,
                      DISPATCHAPP_BROKER=broker) as beat:
        wait_for(lambda: heartbeats(url), 30, "the beat's heartbeat")
        yield beat, url


def test_add_without_an_app_refuses_a_row_nothing_would_run(beat: tuple[Beat, str]) -> None:
    proc, url = beat
    # The README's example: deployment 'default', dispatch awa; no Awa worker can run it
    # here, while proj's beat publishes to Celery.
    readme = cli(url, "add", "ping", "--task", "health.ping", "--every", "30s")
    assert readme.exit_code == 1, readme.output
    assert readme.output.startswith("error: ping: dispatch awa: Awa is not installed")
    assert "--dispatch celery --deployment proj" in readme.output
    assert len(readme.output.strip().splitlines()) == 1 and "Traceback" not in readme.output
    # Celery dispatch for deployment 'default', which no beat publishes.
    unserved = cli(url, "add", "ping", "--task", "health.ping", "--every", "30s",
                   "--dispatch", "celery")
    assert unserved.exit_code == 1, unserved.output
    assert unserved.output.startswith(
        "error: ping: no beat of deployment 'default' publishes Celery jobs")
    assert "give --deployment proj" in unserved.output
    assert not stored(url, "ping")
    # Named: one line says what the row gets, and nothing is on stderr.
    served = cli(url, "add", "ping", "--task", "health.ping", "--every", "30s",
                 "--dispatch", "celery", "--deployment", "proj")
    assert served.exit_code == 0, served.output
    assert served.stdout.splitlines()[1] == (
        "deployment proj, dispatch celery: published to Celery by the beat of deployment "
        "'proj'")
    assert served.stderr == ""
    # An edit that moves it to a deployment no beat publishes is refused the same way.
    moved = cli(url, "edit", "ping", "--deployment", "default")
    assert moved.exit_code == 1 and "give --deployment proj" in moved.output, moved.output
    shown = json.loads(cli(url, "show", "ping", "--json").stdout)
    assert shown["metadata"]["celery"]["deployment"] == "proj"
    assert cli(url, "edit", "ping", "--every", "1m").exit_code == 0
    assert "Traceback" not in proc.output()


def cluster_page(url: str) -> str:
    from awa_beat.web import create_app

    app = create_app(url)
    environ: dict[str, object] = {"PATH_INFO": "/cluster", "REMOTE_ADDR": "127.0.0.1",
                                  "wsgi.input": io.BytesIO()}
    setup_testing_defaults(environ)
    answered: list[str] = []
    try:
        body = b"".join(app(environ, lambda status, headers: answered.append(status)))
    finally:
        app.close()
    assert answered == ["200 OK"], answered
    return body.decode()


def test_status_doctor_dashboard_and_metrics_agree_per_deployment(
        beat: tuple[Beat, str]) -> None:
    proc, url = beat
    # Jobs for Celery of deployment 'default' (through the API, which a beat of that
    # deployment would publish): no beat of it runs.
    settings = Settings(deployment="default", dispatch="celery")
    with Schedules(url, settings=settings) as schedules:
        schedules.add("stranded", task="t.stranded", schedule="0 0 1 1 *")
        for _ in range(STRANDED):
            schedules.trigger("stranded")

    status = cli(url, "status", "--json")
    assert status.exit_code == 0, status.output
    by_deployment = {b["deployment"]: (b["jobs"], b["publishing_beats"])
                     for b in json.loads(status.stdout)["backlog_by_deployment"]}
    assert by_deployment == {"default": (STRANDED, 0), "proj": (0, 1)}
    text = cli(url, "status").output
    assert (f"deployment default: {STRANDED} job(s)" in text
            and "NO beat of this deployment publishes them" in text)

    doctor = cli(url, "doctor")
    assert doctor.exit_code == 1
    assert (f"[FAIL] {STRANDED} unpublished Celery job(s) (default: {STRANDED}, proj: 0)"
            in doctor.output)
    assert f"deployment default: {STRANDED} job(s) wait, no beat of it publishes them" in (
        doctor.output)

    page = cluster_page(url)
    assert 'id="unpublished"' in page and f"{STRANDED} of deployment default" in page
    assert (f'<tr data-deployment="default"><td>default</td><td class="num">{STRANDED}</td>'
            in page)

    # The beat of proj shows every deployment's backlog, its own at 0.
    def scraped() -> dict[str, float] | None:
        scrape = proc.scrape()
        backlog = {k: v for k, v in scrape.items()
                   if k.startswith("awa_beat_outbox_backlog{")}
        return backlog if backlog.get("awa_beat_outbox_backlog{deployment=default}") else None

    assert wait_for(scraped, 30, "the backlog in /metrics") == {
        "awa_beat_outbox_backlog{deployment=default}": STRANDED,
        "awa_beat_outbox_backlog{deployment=proj}": 0}


def test_add_without_an_app_says_what_the_row_gets(databases) -> None:
    # No beat runs yet: nothing tells what would run the jobs, so the row is written
    # with a warning on stderr (a beat may be started next).
    url = databases.fresh("standalone")
    added = cli(url, "add", "ping", "--task", "health.ping", "--every", "30s")
    assert added.exit_code == 0, added.output
    assert added.stdout.splitlines()[1] == (
        "deployment default, dispatch awa: left in awa.jobs for Awa workers")
    assert added.stderr.startswith("warning: ping: dispatch awa: Awa is not installed")
    assert len(added.stderr.splitlines()) == 1
    # Its jobs pile up: status, doctor and the dashboard say so, with the deployment.
    for _ in range(2):
        assert cli(url, "trigger", "ping").exit_code == 0
    status = json.loads(cli(url, "status", "--json").stdout)
    assert status["stranded_awa_jobs"] == {"default": 2}
    assert "Awa is not installed here (NOTHING runs them): 2" in cli(url, "status").output
    doctor = cli(url, "doctor")
    assert doctor.exit_code == 1
    assert ("[FAIL] 2 job(s) left for Awa workers where Awa is not installed\n"
            "       - deployment default: 2 job(s) wait, nothing runs them") in doctor.output
    page = cluster_page(url)
    assert 'id="stranded"' in page and "2 of deployment default" in page
    celery = cli(url, "add", "pong", "--task", "health.pong", "--every", "30s",
                 "--dispatch", "celery", "--json")
    assert celery.exit_code == 0, celery.output
    shown = json.loads(celery.stdout)
    assert (shown["deployment"], shown["dispatch"]) == ("default", "celery")
    assert celery.stderr.startswith(
        "warning: pong: no beat of deployment 'default' publishes Celery jobs")
    # Where Awa owns the tables its workers run the jobs: no warning.
    awa = databases.fresh("awa")
    owned = cli(awa, "add", "ping", "--task", "health.ping", "--every", "30s")
    assert owned.exit_code == 0 and owned.stderr == "", owned.output
