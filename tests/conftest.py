"""Shared fixtures: real PostgreSQL databases in both layouts awa-beat supports.

The server comes from :func:`awa_beat._testing.server_url` (``AWA_BEAT_TEST_DATABASE_URL``,
else 127.0.0.1:5432 when it answers, else an embedded one). Every run creates fresh
databases of its own and drops them at the end.

Two templates are built once per run: ``standalone`` (awa-beat's own schema) and ``awa``
(migrated by awa-pg 0.6.9 itself, where ``awa.jobs`` is a view). Each test gets a clone.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from awa_beat._db.database import Database, connect
from awa_beat._testing import FAKE_CLOCK_TOLERANCE, TempDatabases, server_url

LAYOUTS = ("standalone", "awa")


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """A maintenance URL (database ``postgres``) of the server the tests use."""
    with server_url() as url:
        yield url


@pytest.fixture(scope="session")
def databases(pg_server_url: str) -> Iterator[TempDatabases]:
    dbs = TempDatabases(pg_server_url)
    yield dbs
    dbs.close()


@pytest.fixture(params=LAYOUTS)
def layout(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(databases: TempDatabases, layout: str) -> str:
    """A fresh, migrated database in the layout under test."""
    return databases.fresh(layout)


@pytest.fixture
def awa_db_url(databases: TempDatabases) -> str:
    """A fresh database migrated by awa-pg 0.6.9 itself (and by awa-beat)."""
    return databases.fresh("awa")


@pytest.fixture
def empty_db_url(databases: TempDatabases) -> str:
    """A fresh database with nothing in it."""
    return databases.fresh()


@pytest.fixture
def report_url(db_url: str) -> str:
    """The test database with one schedule, ``report`` (weekdays at 09:00 in Paris),
    registered by deployment ``proj``."""
    with Database(db_url) as store:
        store.schedules.sync([{
            "name": "report", "cron_expr": "0 9 * * 1-5", "timezone": "Europe/Paris",
            "kind": "t.report", "queue": "default", "args": {"args": [], "kwargs": {}},
            "priority": 2, "max_attempts": 25, "tags": [], "metadata": {},
            "missed_fire_policy": "coalesce"}], deployment="proj")
    return db_url


@pytest.fixture
def store(db_url: str) -> Iterator[Database]:
    with Database(db_url) as store:
        store.clock_tolerance = FAKE_CLOCK_TOLERANCE  # tests drive time with a FakeClock
        yield store


@pytest.fixture
def conn(db_url: str) -> Iterator[psycopg.Connection]:
    """A plain autocommit UTC connection to the test database, for inspecting it."""
    c = connect(db_url)
    yield c
    c.close()
