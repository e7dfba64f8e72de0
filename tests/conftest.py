"""Shared fixtures: real PostgreSQL databases in both layouts awa-beat supports.

The server is found through ``AWA_BEAT_TEST_DATABASE_URL``, else 127.0.0.1:5432 when it
answers, else an embedded pgserver in a temporary directory. Every run creates fresh
databases of its own (named ``awabeat_t<pid>_...``) and drops them at the end.

Two template databases are built once per run: ``standalone`` (awa-beat's own schema)
and ``awa`` (migrated by awa-pg 0.6.9 itself, where ``awa.jobs`` is a view). Each test
gets a clone of the one it asks for.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from awa_beat.store import Store, connect

LAYOUTS = ("standalone", "awa")
_counter = itertools.count()


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


def _with_db(url: str, dbname: str) -> str:
    """The same server, another database; URLs stay URLs (awa-pg accepts only those)."""
    parts = urlsplit(url)
    if parts.scheme in ("postgres", "postgresql"):
        return urlunsplit(parts._replace(path="/" + dbname))
    params = conninfo_to_dict(url)
    params["dbname"] = dbname
    return make_conninfo(**params)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """A maintenance URL (database ``postgres``) of the server the tests use."""
    explicit = os.environ.get("AWA_BEAT_TEST_DATABASE_URL")
    if explicit:
        yield explicit
        return
    local = "postgresql://postgres@127.0.0.1:5432/postgres"
    if _answers(local):
        yield local
        return
    pgserver = pytest.importorskip("pgserver", reason="no PostgreSQL server and no pgserver")
    with tempfile.TemporaryDirectory(prefix="awa-beat-pg-") as tmp:
        server = pgserver.get_server(Path(tmp), cleanup_mode="stop")
        yield server.get_uri("postgres")
        server.cleanup()


class Databases:
    """Creates and drops the run's databases on one server."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.prefix = f"awabeat_t{os.getpid()}"
        self.created: list[str] = []
        self._admin = psycopg.connect(server_url, autocommit=True)

    def create(self, *, template: str | None = None, suffix: str = "") -> str:
        name = f"{self.prefix}_{next(_counter)}{suffix}"
        query = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template:
            query += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
        self._admin.execute(query)
        self.created.append(name)
        return name

    def url(self, name: str) -> str:
        return _with_db(self.server_url, name)

    def drop_all(self) -> None:
        for name in reversed(self.created):
            self._admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
            self._admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name))
            )
        self._admin.close()


@pytest.fixture(scope="session")
def databases(pg_server_url: str) -> Iterator[Databases]:
    dbs = Databases(pg_server_url)
    yield dbs
    dbs.drop_all()


def _awa_migrate(url: str) -> None:
    import awa

    async def run() -> None:
        await awa.migrate(url)

    asyncio.run(run())


@pytest.fixture(scope="session")
def templates(databases: Databases) -> dict[str, str]:
    """Template database names per layout, built lazily once per run."""
    return {}


def _template(databases: Databases, templates: dict[str, str], layout: str) -> str:
    if layout not in templates:
        name = databases.create(suffix=f"_tmpl_{layout}")
        url = databases.url(name)
        if layout == "awa":
            pytest.importorskip("awa", reason="awa-pg is not installed")
            _awa_migrate(url)
        with Store(url) as store:
            store.migrate()
        templates[layout] = name
    return templates[layout]


@pytest.fixture(params=LAYOUTS)
def layout(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(databases: Databases, templates: dict[str, str], layout: str) -> str:
    """A fresh, migrated database in the layout under test."""
    return databases.url(databases.create(template=_template(databases, templates, layout)))


@pytest.fixture
def awa_db_url(databases: Databases, templates: dict[str, str]) -> str:
    """A fresh database migrated by awa-pg 0.6.9 itself (and by awa-beat)."""
    return databases.url(databases.create(template=_template(databases, templates, "awa")))


@pytest.fixture
def empty_db_url(databases: Databases) -> str:
    """A fresh database with nothing in it."""
    return databases.url(databases.create())


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with Store(db_url) as store:
        yield store


@pytest.fixture
def conn(db_url: str) -> Iterator[psycopg.Connection]:
    """A plain autocommit UTC connection to the test database, for inspecting it."""
    c = connect(db_url)
    yield c
    c.close()
