"""Matrix, explain (``Schedules.explain``, ``awa-beat explain``, the dashboard's schedule
page): every type of the catalogue, in both layouts, explained at a fire time of its
documented calendar (:attr:`~tests.matrix.catalogue.Entry.calendar`, computed without
awa-beat) and between two of them, and at a fire time that the real engine fired.

* E1: the Python API on the stored catalogue: a fire to come (will fire, paused by the
  catalogue's operator, or retired), between two fires (the two named), out of bounds.
* E2: the engine fires each active type at its next fire time (a clock of its own), and
  explain says it fired, with the job.
* E3: the command line, in process for each type and in a subprocess for its exit codes.
* E4: the dashboard's schedule page over HTTP: the explain form's answer, escaped, and
  one list of next fires (the preview's).
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

from awa_beat._db.database import Database
from awa_beat._engine.engine import Engine
from awa_beat._ops.operations import Operations
from awa_beat._testing import FakeClock
from awa_beat.errors import NotFound, ValidationError
from tests.integration.test_cli import run
from tests.matrix.catalogue import CATALOGUE, END_TIME, NAMES, PAUSED_BY, START_TIME, MatrixDB
from tests.matrix.test_views import get
from tests.web_server import serve

pytestmark = pytest.mark.integration
UTC = timezone.utc
ACTIVE = [n for n in NAMES if CATALOGUE[n].state == "active"]
#: How far ahead of the test's clock the fire explained is: explain reads the database's
#: clock a moment later, and the fire must still be to come then.
AHEAD = timedelta(minutes=2)


def fire_ahead(name: str) -> datetime:
    """The catalogue's first fire time at least :data:`AHEAD` from now."""
    fire = CATALOGUE[name].calendar(datetime.now(UTC) + AHEAD)
    assert fire is not None, name
    return fire


def expected_ahead(name: str) -> str:
    return {"paused": "paused", "retired": "retired"}.get(CATALOGUE[name].state, "will_fire")


def between(name: str, fire: datetime) -> tuple[datetime, datetime | None] | None:
    """An instant strictly between ``fire`` and the next fire (a day later if there is
    none), and that next fire; None when the next fire is a second later."""
    nxt = CATALOGUE[name].calendar(fire)
    if nxt is None:
        return fire + timedelta(days=1), None
    if nxt - fire <= timedelta(seconds=1):
        return None
    return fire + (nxt - fire) / 2, nxt


# -- E1: the Python API ---------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_the_api_explains_each_type_at_and_between_fire_times(shared_matrix_db: MatrixDB,
                                                              name: str) -> None:
    fire = fire_ahead(name)
    with shared_matrix_db.schedules() as schedules:
        at_fire = schedules.explain(name, fire + timedelta(milliseconds=400))
        middle = between(name, fire)
        found = schedules.explain(name, middle[0]) if middle else None
    assert (at_fire.kind, at_fire.fire_time) == (expected_ahead(name), fire), at_fire
    if CATALOGUE[name].state == "paused":
        assert f"paused by {PAUSED_BY}" in at_fire.summary
    if at_fire.kind == "will_fire":
        assert at_fire.next == CATALOGUE[name].calendar(fire)
    if middle is not None:
        assert found is not None
        assert (found.kind, found.previous, found.next) == (
            "not_a_fire_time", fire, middle[1]), found
        assert found.fire_time is None


def test_the_api_explains_out_of_bounds(shared_matrix_db: MatrixDB) -> None:
    with shared_matrix_db.schedules() as schedules:
        early = schedules.explain("bound-start", START_TIME - timedelta(hours=1))
        late = schedules.explain("bound-end", END_TIME + timedelta(hours=1))
    assert early.kind == "out_of_bounds" and "start_time" in early.summary
    assert early.next == START_TIME
    assert late.kind == "out_of_bounds" and "end_time" in late.summary
    assert (late.previous, late.next) == (END_TIME, None)


def test_the_api_refuses_a_bad_explain(shared_matrix_db: MatrixDB) -> None:
    with shared_matrix_db.schedules() as schedules:
        with pytest.raises(NotFound):
            schedules.explain("no-such-schedule", datetime.now(UTC))
        with pytest.raises(ValidationError) as err:
            schedules.explain("cron-zone", datetime(2027, 1, 1))
    assert err.value.problems[0][:2] == ("cron-zone", "at")


# -- E2: a fire of the real engine ----------------------------------------------------------


@pytest.fixture
def fired_store(matrix_db: MatrixDB) -> Iterator[Database]:
    with Database(matrix_db.url) as store:
        store.clock_tolerance = 10 ** 10  # the engine's clock is years ahead of the server's
        yield store


@pytest.mark.parametrize("name", ACTIVE)
def test_the_engine_fires_each_type_and_explain_says_so(fired_store: Database,
                                                        name: str) -> None:
    cursor = fired_store.schedules.get(name).last_enqueued_at
    assert cursor is not None
    fire = CATALOGUE[name].calendar(cursor)
    assert fire is not None
    clock = FakeClock(fire)
    Engine(fired_store.evaluator, clock=clock).run_pass()
    found = Operations(fired_store, clock=clock).explain(name, fire)
    assert found.kind == "fired" and found.fire_time == fire, found
    (job,) = found.jobs
    assert job.kind == "fired" and job.fire_time == fire and job.state == "available"
    assert f"job {job.job_id}" in found.summary
    before = Operations(fired_store, clock=clock).explain(name, fire - timedelta(seconds=1))
    assert before.kind in ("not_a_fire_time", "no_record", "before_created"), before


# -- E3: the command line -------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_the_cli_explains_each_type(shared_matrix_db: MatrixDB, name: str) -> None:
    fire = fire_ahead(name)
    result = run("explain", name, "--at", fire.isoformat(), "--json",
                 "--database-url", shared_matrix_db.url)
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert (shown["name"], shown["kind"]) == (name, expected_ahead(name))
    assert datetime.fromisoformat(shown["fire_time"]) == fire
    text = run("explain", name, "--at", fire.isoformat(), "--database-url",
               shared_matrix_db.url)
    assert text.exit_code == 0 and shown["summary"] in text.output


def awa_beat(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run([sys.executable, "-m", "awa_beat", *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False)


def test_the_cli_in_a_process_answers_and_refuses_bad_input(shared_matrix_db: MatrixDB
                                                           ) -> None:
    url = shared_matrix_db.url
    fire = fire_ahead("cron-zone")
    done = awa_beat("explain", "cron-zone", "--at", fire.isoformat(), "--database-url", url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("cron-zone at ") and "will fire" in done.stdout
    now = awa_beat("explain", "cron-zone", "--at", "now", "--database-url", url)
    assert now.returncode == 0 and "not a fire time" in now.stdout, now.stderr
    for at, words in [("2027-01-01T07:30:00", "has no UTC offset"),
                      ("tomorrow", "is not an instant")]:
        bad = awa_beat("explain", "cron-zone", "--at", at, "--database-url", url)
        assert bad.returncode == 1 and bad.stdout == "", bad
        assert bad.stderr.count("\n") == 1 and "field '--at'" in bad.stderr, bad.stderr
        assert words in bad.stderr and "Traceback" not in bad.stderr
    missing = awa_beat("explain", "nope", "--at", "now", "--database-url", url)
    assert missing.returncode == 1
    assert missing.stderr == "error: no schedule named 'nope'\n", missing.stderr


# -- E4: the dashboard ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def dashboard(shared_matrix_db: MatrixDB) -> Iterator[str]:
    yield from serve(shared_matrix_db.url)


def raw(base: str, **query: str) -> str:
    """The page's HTML as sent (entities not decoded), to check the escaping."""
    url = f"{base}/schedule?{urllib.parse.urlencode(query)}"
    with urllib.request.urlopen(url, timeout=30) as response:
        return str(response.read().decode())


@pytest.mark.parametrize("name", NAMES)
def test_the_dashboard_explains_each_type(dashboard: str, name: str) -> None:
    fire = fire_ahead(name)
    page = get(dashboard, "/schedule", name=name, at=fire.isoformat())
    kind = expected_ahead(name)
    assert f'<div id="explain" data-kind="{kind}">' in page, page[-3000:]
    assert fire.strftime("%Y-%m-%d %H:%M:%S UTC") in page
    # One list of next fires: the preview's, with its form.
    assert page.count("<table id=\"preview\">") == 1 and 'id="upcoming"' in page
    assert 'id="explain-form"' in page
    middle = between(name, fire)
    if middle is not None:
        page = get(dashboard, "/schedule", name=name, at=middle[0].isoformat())
        assert '<div id="explain" data-kind="not_a_fire_time">' in page


def test_the_dashboard_names_a_bad_instant_and_escapes_it(dashboard: str) -> None:
    page = raw(dashboard, name="cron-zone", at="<b>soon</b>")
    error = re.search(r'<p class="badge invalid" id="explain-error">(.*?)</p>', page)
    assert error is not None and "<b>" not in error.group(1)
    assert "&lt;b&gt;soon&lt;/b&gt;" in error.group(1)
    assert html.unescape(error.group(1)).startswith("at: '<b>soon</b>' is not an instant")
    assert 'id="explain"' not in page
    naive = get(dashboard, "/schedule", name="cron-zone", at="2027-01-01T07:30:00")
    assert "has no UTC offset" in naive
    nothing = get(dashboard, "/schedule", name="cron-zone")
    assert 'id="explain"' not in nothing and 'id="explain-error"' not in nothing


def test_the_dashboards_history_links_each_fire_to_its_explanation(dashboard: str) -> None:
    # The retired entry's runs were fired by the real engine when the catalogue was stored.
    page = raw(dashboard, name="retired")
    links = re.findall(r'<a href="([^"]+)#explain" data-explain', page)
    assert len(links) == 2, page[-2000:]
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(html.unescape(links[0])).query))
    explained = get(dashboard, "/schedule", **query)
    assert '<div id="explain" data-kind="fired">' in explained
