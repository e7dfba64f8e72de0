"""What the metrics read from a real PostgreSQL: the outbox's figures, and the store's
record of when it last reached the database."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from awa_beat._db.database import Database, connect
from awa_beat._db.records import FireRequest
from awa_beat._schedules.spec import spec_from_entry
from awa_beat.errors import DatabaseUnavailable

pytestmark = pytest.mark.integration
UTC = timezone.utc
T0 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=5)


@pytest.fixture
def store(databases) -> Database:
    s = Database(databases.fresh("standalone")).open()
    yield s
    s.close()


def register(store: Database, names: list[str], deployment: str, dispatch: str) -> None:
    entry = {"task": "t.x", "schedule": 60, "options": {"awa_beat": {"dispatch": dispatch}}}
    store.schedules.sync([spec_from_entry(n, entry).row(deployment) for n in names],
                         deployment=deployment)
    with connect(store.conninfo) as c:
        c.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s WHERE name = ANY(%s)",
                  (T0, names))


def test_outbox_backlogs_count_each_deployments_pending_celery_jobs(store: Database) -> None:
    if store.awa_owned:
        pytest.skip("Celery dispatch needs the standalone schema")
    assert store.outbox.backlogs() == []
    register(store, ["a", "b"], "bt", "celery")
    register(store, ["c"], "other", "celery")
    register(store, ["d"], "bt", "awa")  # for Awa workers: not the bridge's
    fires = [T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)]
    result = store.evaluator.fire([FireRequest(n, T0, fires) for n in "abcd"])
    assert len(result.jobs) == 8
    with connect(store.conninfo) as c:
        c.execute("UPDATE awa.jobs SET created_at = now() - interval '90 seconds'"
                  " WHERE id = (SELECT min(id) FROM awa.jobs)")
    bt, other = store.outbox.backlogs()
    assert (bt.deployment, bt.jobs, other.deployment, other.jobs) == ("bt", 4, "other", 2)
    assert bt.oldest_age is not None and 90 <= bt.oldest_age < 120
    assert other.oldest_age is not None and other.oldest_age < 60
    ids = [j.job_id for j in result.jobs if j.name in "ab"]
    store.outbox.mark_published(ids, [f"task-{i}" for i in ids])
    assert [(b.deployment, b.jobs) for b in store.outbox.backlogs()] == [("other", 2)]
    assert store.outbox.stranded_awa_jobs() == {"bt": 2}  # d's: no Awa worker runs them here


def test_contact_records_reaching_and_losing_the_database(store: Database) -> None:
    store.schedules.list_all()
    assert store.contact.reachable and store.contact.errors == 0
    with connect(store.conninfo) as c:
        c.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                  " WHERE datname = current_database() AND pid <> pg_backend_pid()")
    with pytest.raises(DatabaseUnavailable):
        store.schedules.list_all()  # the pooled session was killed under it
    assert not store.contact.reachable and store.contact.errors == 1
    store.schedules.list_all()  # the pool reconnects
    assert store.contact.reachable
