"""``awa_beat.fire_time``: a real Celery worker on RabbitMQ sees the nominal fire time of
each job that the bridge published, and None for a plain ``.delay()`` and a manual trigger.
An Awa job's metadata answers the same way."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from celery.contrib.testing.worker import start_worker
from celery.signals import task_received

import awa_beat
from awa_beat._bridge import Bridge
from awa_beat._bridge.messages import parse_fire_time
from awa_beat._db.database import Database, connect
from awa_beat._db.records import FireRequest
from awa_beat._schedules.spec import spec_from_entry
from awa_beat._testing import wait_for
from tests.apps import celery_app
from tests.brokers import RABBITMQ_URL, answers

from .test_bridge import T0, fire, register

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def root_logger_restored() -> Iterator[None]:
    """Put back the root logger's level and handlers after the test. An in-process worker
    sets up logging as a worker process would (the root logger at ERROR), which would hide
    the warnings that later tests in this process look for."""
    root = logging.getLogger()
    level, handlers = root.level, root.handlers[:]
    yield
    root.setLevel(level)
    root.handlers[:] = handlers


@pytest.fixture
def standalone(databases) -> Database:
    store = Database(databases.fresh("standalone")).open()
    yield store
    store.close()


def test_a_worker_sees_the_nominal_fire_time_and_none_for_other_tasks(
        standalone: Database) -> None:
    if not answers(5672):
        pytest.skip("RabbitMQ does not answer on this machine")
    queue = f"ft-{uuid.uuid4().hex[:8]}"
    app = celery_app("firetime", broker_url=RABBITMQ_URL, task_default_queue=queue)
    seen: dict[str, dict[str, Any]] = {}
    lock = threading.Lock()

    @app.task(name="ft.window", bind=True)
    def window(self: Any, label: str) -> None:
        with lock:
            seen.setdefault(self.request.id, {}).update(
                label=label, from_task=awa_beat.fire_time(self),
                from_request=awa_beat.fire_time(self.request))

    def received(sender: Any = None, request: Any = None, **_: Any) -> None:
        # The worker's Request, before the task runs.
        with lock:
            seen.setdefault(request.id, {})["from_worker_request"] = awa_beat.fire_time(request)

    task_received.connect(received, weak=False)
    try:
        register(standalone, app, {"hourly": {"task": "ft.window", "schedule": 60,
                                              "args": ["fired"],
                                              "options": {"queue": queue}}})
        fire(standalone, ["hourly"], minutes=2)
        standalone.schedules.trigger("hourly")
        bridge = Bridge(app, standalone.outbox, deployment="bt")
        assert bridge.drain() == 3
        bridge.close()
        with start_worker(app, perform_ping_check=False, shutdown_timeout=30):
            window.apply_async(("plain",), queue=queue)
            wait_for(lambda: sum("label" in s for s in seen.values()) == 4, timeout=30)
    finally:
        task_received.disconnect(received)
    c = connect(standalone.conninfo)
    jobs = c.execute("SELECT metadata ->> 'celery_task_id', metadata ->> 'cron_fire_time',"
                     " metadata ? 'triggered_manually' FROM awa.jobs").fetchall()
    c.close()
    recorded = {task_id: (parse_fire_time(fire_text), manual)
                for task_id, fire_text, manual in jobs}
    fired = sorted(v[0] for v in recorded.values() if v[0] is not None)
    assert fired == [T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)]
    for task_id, got in seen.items():
        answers_ = {got["from_task"], got["from_request"], got["from_worker_request"]}
        assert len(answers_) == 1, got
        answer = answers_.pop()
        if got["label"] == "plain":
            assert task_id not in recorded and answer is None
        elif recorded[task_id][1]:  # a manual trigger stands for no fire time
            assert answer is None
        else:
            assert answer == recorded[task_id][0]
            assert answer is not None and answer.tzinfo is not None
            assert answer.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    assert sorted(a["from_task"] for a in seen.values() if a["from_task"]) == fired


def test_an_awa_job_answers_its_cron_fire_time(standalone: Database) -> None:
    row = spec_from_entry("awa-side", {"task": "t.x", "schedule": 60}).row("bt")
    standalone.schedules.sync([row], deployment="bt")
    c = connect(standalone.conninfo)
    c.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (T0,))
    c.commit()
    standalone.evaluator.fire([FireRequest("awa-side", T0, [T0 + timedelta(minutes=1)])])
    standalone.schedules.trigger("awa-side")
    metadata = [m for (m,) in c.execute("SELECT metadata FROM awa.jobs ORDER BY id")]
    c.close()
    assert [awa_beat.fire_time(SimpleNamespace(metadata=m)) for m in metadata] == [
        T0 + timedelta(minutes=1), None]
    # Nothing awa-beat fired: no metadata, no request, forged or empty headers.
    assert awa_beat.fire_time(SimpleNamespace(metadata={})) is None
    assert awa_beat.fire_time(object()) is None
    forged = SimpleNamespace(id="not-derived", awa_beat_job="1", awa_beat_schedule="x",
                             awa_beat_fire_time="2026-01-01 10:00:00+00")
    assert awa_beat.fire_time(forged) is None
