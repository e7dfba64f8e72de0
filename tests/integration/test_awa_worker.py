"""A job fired through an Awa-migrated database is run by a real awa-pg 0.6.9 worker."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from awa_beat._db.database import Database, connect
from awa_beat._db.records import FireRequest
from awa_beat._testing import awa_url

pytestmark = pytest.mark.integration
awa = pytest.importorskip("awa", reason="awa-pg is not installed")


@dataclass
class CeleryCall:
    """The job args awa-beat writes for a Celery entry."""

    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)


def test_awa_worker_runs_a_job_fired_by_awa_beat(awa_db_url: str) -> None:
    t0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
    with Database(awa_db_url) as store:
        assert store.awa_owned
        store.schedules.sync([{
            "name": "nightly", "cron_expr": "0 2 * * *", "timezone": "UTC",
            "kind": "reports.nightly", "queue": "reports",
            "args": {"args": [7], "kwargs": {"full": True}}, "priority": 2,
            "max_attempts": 3, "tags": ["beat"], "metadata": {"celery": {"options": {}}},
            "missed_fire_policy": "coalesce",
        }], deployment="test")
        conn = connect(awa_db_url)
        conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (t0,))
        request = FireRequest("nightly", t0, [t0 + timedelta(hours=17)])
        (fired,) = store.evaluator.fire([request]).jobs

    seen: list[tuple[Any, Any]] = []

    async def run_worker() -> None:
        client = awa.AsyncClient(awa_url(awa_db_url))

        @client.task(CeleryCall, kind="reports.nightly", queue="reports")
        async def handle(job: Any) -> None:
            seen.append((job.args, job.metadata))

        await client.start([("reports", 1)], poll_interval_ms=50)
        try:
            deadline = asyncio.get_running_loop().time() + 30
            while not seen and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.05)
        finally:
            await client.shutdown()
            await client.close()

    asyncio.run(run_worker())
    assert seen, "the Awa worker never ran the job"
    args, metadata = seen[0]
    assert (args.args, args.kwargs) == ([7], {"full": True})
    assert metadata["cron_name"] == "nightly"
    assert metadata["cron_fire_time"] == "2026-01-06 02:00:00+00"
    deadline = time.monotonic() + 10
    state = None
    while time.monotonic() < deadline:
        state = conn.execute("SELECT state::text FROM awa.jobs WHERE id = %s",
                             (fired.job_id,)).fetchone()
        if state and state[0] == "completed":
            break
        time.sleep(0.05)
    conn.close()
    assert state and state[0] == "completed"


#: One marker of each kind awa-beat writes for what Awa cannot evaluate.
MARKERS = [
    "@every 7s", "@every 7s | runs=3", "@cron * * * * * * | runs=2",
    "@cron * * * * * * | start=2020-01-01T00:00:00Z end=2099-01-01T00:00:00Z",
    "@solar sunrise 51.5 -0.12", "@at 2026-01-05T09:00:01Z | runs=1",
    "@rrule DTSTART=20260101T000000+0000;FREQ=SECONDLY",
    "@crontab * * 1-31 * 0-6", "@crontab * * * * * dst=celery",
]


@dataclass
class Idle:
    """A job kind nobody inserts; Awa will not start without one handler."""


def test_an_awa_leader_never_fires_awa_beats_markers(awa_db_url: str) -> None:
    """Awa's own leader, evaluating every row, fires the control row but none of ours."""
    from awa_beat._schedules.fire_times import calendar_for

    start = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=5)
    rows = [("control", "* * * * * *"), *((f"marker-{i}", m) for i, m in enumerate(MARKERS))]
    with Database(awa_db_url) as store:
        store.schedules.sync([{
            "name": name, "cron_expr": expr, "timezone": "UTC", "kind": "probe.k",
            "queue": "awa_beat_marker_probe", "args": {}, "priority": 2, "max_attempts": 3,
            "tags": [], "metadata": {}, "missed_fire_policy": "catch_up"}
            for name, expr in rows], deployment="test")
    for _, expr in rows:
        calendar_for(expr, "UTC")  # each is a schedule awa-beat itself can run
    conn = connect(awa_db_url)
    conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (start,))

    def fired() -> dict[str, int]:
        return dict(conn.execute(
            "SELECT metadata ->> 'cron_name', count(*) FROM awa.jobs GROUP BY 1").fetchall())

    async def lead() -> dict[str, int]:
        client = awa.AsyncClient(awa_url(awa_db_url))

        @client.task(Idle, queue="awa_beat_marker_idle")
        async def handle(job: Any) -> None:
            pass

        await client.start([("awa_beat_marker_idle", 1)], leader_election_interval_ms=200)
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while not fired().get("control") and loop.time() < deadline:
                await asyncio.sleep(0.1)
            await asyncio.sleep(2.5)  # two more passes of Awa's evaluator over every row
            return fired()
        finally:
            await client.shutdown()
            await client.close()

    try:
        seen = asyncio.run(lead())
    finally:
        conn.close()
    assert seen.get("control", 0) > 1, "Awa's leader never evaluated the table"
    assert set(seen) == {"control"}, f"Awa fired awa-beat's markers: {seen}"
