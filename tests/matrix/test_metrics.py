"""The metrics cells of the matrix: a real ``celery beat`` with its endpoint on, holding
every schedule of the catalogue, in both layouts.

Per schedule, ``/metrics`` must show what the catalogue says of it (paused or not, its
next fire by its documented calendar), and a schedule whose runs fail must show up in
``awa_beat_overdue_schedules`` and as ``failed`` in ``awa_beat_schedule_last_outcome``
(the series the shipped alert ``AwaBeatScheduleOverdue`` reads), with no traceback in
the beat's log. Runs are failed as an Awa worker whose task raises leaves them: the
job's state in ``awa.jobs``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

from awa_beat._db.database import connect
from awa_beat._testing import wait_for
from tests.acceptance.test_observability import Beat
from tests.conftest import LAYOUTS
from tests.matrix.beats import running_beat
from tests.matrix.catalogue import CATALOGUE, NAMES, store_catalogue
from tests.matrix.metricsapp import FAILING

pytestmark = pytest.mark.acceptance
UTC = timezone.utc


@pytest.fixture(scope="module", params=LAYOUTS)
def beat(request: pytest.FixtureRequest, databases,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Beat, str]]:
    """A beat of the catalogue's deployment, ready, on a database of each layout that
    holds the catalogue (paused and retired entries so). Nothing has scraped it yet."""
    url = databases.fresh(request.param)
    tmp_path = tmp_path_factory.mktemp(f"beat-{request.param}")
    store_catalogue(url, owner="config")
    with running_beat("tests.matrix.metricsapp", url, tmp_path) as beat:
        yield beat, url


def fail_runs(url: str, name: str) -> int:
    """Fail every waiting job of ``name``, as an Awa worker whose task raises; how many."""
    with connect(url) as conn:
        cur = conn.execute(
            "UPDATE awa.jobs SET state = 'failed', finalized_at = now()"
            " WHERE state = 'available' AND metadata ->> 'cron_name' = %s", (name,))
        return cur.rowcount


def test_a_failing_schedule_is_overdue_and_failed_in_the_metrics(
        beat: tuple[Beat, str]) -> None:
    proc, url = beat
    try:
        # Before the first scrape (which reads the runs' report): a run has failed.
        wait_for(lambda: fail_runs(url, FAILING), 30, f"a fire of {FAILING}")

        def shown() -> dict[str, float] | None:
            fail_runs(url, FAILING)
            scrape = proc.scrape()
            failed = scrape.get(
                f"awa_beat_schedule_last_outcome{{outcome=failed,schedule={FAILING}}}")
            overdue = scrape.get("awa_beat_overdue_schedules", 0)
            return scrape if failed == 1 and overdue >= 1 else None

        # The runs' report is read at most once a minute: the deadline covers a second
        # read, should a fire have come between the failure and the first.
        wait_for(shown, 90, f"{FAILING} overdue and failed in /metrics")
        output = proc.output()
        assert "Traceback" not in output and "AttributeError" not in output, output[-3000:]
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- beat log\n{proc.output()[-3000:]}") from None


def test_every_type_has_its_series(beat: tuple[Beat, str]) -> None:
    proc, _ = beat
    scrape = proc.scrape()
    now = datetime.now(UTC)
    for name in NAMES:
        entry = CATALOGUE[name]
        assert scrape[f"awa_beat_schedule_paused{{schedule={name}}}"] == int(entry.paused), name
        nxt = scrape.get(f"awa_beat_schedule_next_fire_timestamp_seconds{{schedule={name}}}")
        expected = entry.next_after(now)
        if expected is None:
            assert nxt is None, (name, nxt)
            continue
        assert nxt is not None, name
        # A schedule that fires during the scrape may be a period behind or ahead.
        period = (entry.calendar(expected) or expected) - expected
        assert abs(nxt - expected.timestamp()) <= period.total_seconds(), (
            name, datetime.fromtimestamp(nxt, UTC), expected)
    assert "Traceback" not in proc.output()
