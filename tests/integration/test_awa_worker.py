"""A job fired through an Awa-migrated database is run by a real awa-pg 0.6.9 worker."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from awa_beat.records import FireRequest
from awa_beat.store import Store, connect
from awa_beat.testing import awa_url

pytestmark = pytest.mark.integration
awa = pytest.importorskip("awa", reason="awa-pg is not installed")


@dataclass
class CeleryCall:
    """The job args awa-beat writes for a Celery entry."""

    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)


def test_awa_worker_runs_a_job_fired_by_awa_beat(awa_db_url: str) -> None:
    t0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
    with Store(awa_db_url) as store:
        assert store.awa_owned
        store.sync([{
            "name": "nightly", "cron_expr": "0 2 * * *", "timezone": "UTC",
            "kind": "reports.nightly", "queue": "reports",
            "args": {"args": [7], "kwargs": {"full": True}}, "priority": 2,
            "max_attempts": 3, "tags": ["beat"], "metadata": {"celery": {"options": {}}},
            "missed_fire_policy": "coalesce",
        }], deployment="test")
        conn = connect(awa_db_url)
        conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (t0,))
        (fired,) = store.fire([FireRequest("nightly", t0, [t0 + timedelta(hours=17)])]).jobs

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
