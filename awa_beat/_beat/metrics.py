"""Prometheus metrics of one beat process, read from its node at scrape time.

:func:`registry_for` builds a registry of its own for a :class:`~awa_beat._beat.node.BeatNode`
(never prometheus_client's global one, so several nodes in one process, and tests, do
not clash) with one :class:`BeatCollector`. Every series and what it means is listed in
docs/observability.md.

What a scrape costs, and who pays it:

* Counters and per-schedule series are read from what the node, the engine and the
  bridge keep in memory anyway: nothing is counted on the loop's thread that it did not
  count before but a few integer additions per fire batch.
* Counts over every row held (paused, invalid, overdue) walk the engine's rows on the
  scrape's thread, at most once per ``census_ttl`` seconds.
* What only the database knows (standbys seen, the outbox's backlog and its oldest job)
  is read by a thread of the collector's own, at most once per ``database_ttl``
  seconds, and only while someone scrapes: a scrape never waits on the database
  but for the very first read, and an endpoint no one scrapes costs nothing.

Two sources are pluggable, for what other modules know better than the engine's view:
``overdue`` (a count of overdue schedules) and ``outcomes`` (the last outcome of each
schedule with series of its own). Each is called on the scrape's thread, so one that
queries must cache (see :class:`Refresher`).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from .. import __version__
from .._db.records import OutboxBacklog
from .._engine.engine import SKIP_REASONS, Census
from .._logs import event
from ..errors import StoreError, first_line
from .node import LAG_BUCKETS

if TYPE_CHECKING:
    from .node import BeatNode

# The logger keeps the name it had before the modules moved into layer packages, so
# logging configurations that select it by name go on working.
logger = logging.getLogger('awa_beat.metrics')

#: Seconds past its next fire time after which a schedule counts as overdue (the default
#: source): long enough for a standby's view (refreshed every 5 s) and a busy pass.
OVERDUE_AFTER = 60.0
#: Seconds a census of the rows held is reused by later scrapes.
CENSUS_TTL = 5.0
#: Seconds the database's figures are reused before the next scrape asks for new ones.
DATABASE_TTL = 15.0
#: Seconds the workers' reports (overdue schedules, last run outcomes) are reused: one
#: read walks every schedule, so it is kept rarer than the other figures.
REPORT_TTL = 60.0
#: Longest the first scrape waits for the first read of the database's figures.
FIRST_READ_WAIT = 0.5

OverdueSource = Callable[[], int | None]
"""The number of overdue schedules, or None when unknown (the series is then left out)."""
OutcomeSource = Callable[[Collection[str]], Mapping[str, str]]
"""The last outcome of each of the given schedules that has one."""

T = TypeVar("T")


class Refresher(Generic[T]):
    """A value read by ``fetch`` on a daemon thread of its own, at most every ``ttl``
    seconds, and only when :meth:`get` is called: what an endpoint that must answer
    fast uses for figures that need a query.

    :meth:`get` returns the last value read (None until the first read, for which only
    the first call waits, up to ``first_wait`` seconds). A ``fetch`` that raises keeps
    the last value and is tried again on the next call past the ``ttl``: whatever it
    raises, the thread lives on (and one that died anyway is started again), and a
    failure is logged in one line, not a traceback.
    """

    def __init__(self, fetch: Callable[[], T], ttl: float, *, name: str = "awa-beat-metrics",
                 first_wait: float = FIRST_READ_WAIT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.fetch = fetch
        self.ttl = ttl
        self.first_wait = first_wait
        self.clock = clock
        self.name = name
        self.value: T | None = None
        self.read_at: float | None = None
        self._asked = threading.Event()
        self._read = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()
        self._failing: str | None = None
        """The failure of the last read (None: it succeeded), logged once per run."""

    def get(self) -> T | None:
        first = self._thread is None
        if first or self.read_at is None or self.clock() - self.read_at >= self.ttl:
            self._ensure_thread()
            self._asked.set()
            if first:
                self._read.wait(self.first_wait)
        return self.value

    def _ensure_thread(self) -> None:
        with self._start:
            alive = self._thread is not None and self._thread.is_alive()
            if not alive and not self._stopped:
                self._thread = threading.Thread(target=self._run, name=self.name,
                                                daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            self._asked.wait()
            self._asked.clear()
            if self._stopped:
                return
            try:
                self.value = self.fetch()
                self._failing = None
                self.read_at = self.clock()
            except Exception as exc:  # whatever it is: the next scrape tries again
                # read_at stays: the next get() asks again at once, not a ttl later.
                self._failed(exc)
            finally:
                self._read.set()

    def _failed(self, exc: Exception) -> None:
        """One line per run of failures; the database being away is reported by the
        beat itself (and by awa_beat_database_up), so that one is only a debug line."""
        text = f"{type(exc).__name__}: {first_line(exc)}"
        quiet = isinstance(exc, StoreError) or text == self._failing
        self._failing = text
        event(logger, logging.DEBUG if quiet else logging.WARNING, "metrics.read_failed",
              "metrics: cannot read %s (the next scrape tries again): %s", self.name, text,
              error=text)

    def close(self) -> None:
        self._stopped = True
        self._asked.set()


@dataclass(frozen=True)
class DatabaseFigures:
    """What the collector reads from the database rather than from memory."""

    standbys: int
    """Standbys of this lock key that wrote a heartbeat in the last minute."""
    backlogs: list[OutboxBacklog]
    """Every deployment's jobs for Celery not yet accepted by the broker, this node's own
    (0 when none wait) first when it publishes; the deployments that have none else
    left out."""


class BeatCollector(Collector):
    """Every series of one node, built at scrape time (docs/observability.md)."""

    def __init__(self, node: BeatNode, *, overdue: OverdueSource | None = None,
                 outcomes: OutcomeSource | None = None, census_ttl: float = CENSUS_TTL,
                 database_ttl: float = DATABASE_TTL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.node = node
        self.overdue = overdue
        self.outcomes = outcomes or self._engine_outcomes
        self.census_ttl = census_ttl
        self.clock = clock
        self._census: tuple[float, Census] | None = None
        self.database = Refresher(self._read_database, database_ttl,
                                  name="awa-beat-metrics-db", clock=clock)

    def close(self) -> None:
        self.database.close()

    def describe(self) -> list[Metric]:
        return []  # nothing to check at registration; collect() is the truth

    # -- sources ------------------------------------------------------------------------

    def census(self) -> Census | None:
        engine = self.node.engine
        if engine is None:
            return None
        now = self.clock()
        cached = self._census
        if cached is None or now - cached[0] >= self.census_ttl:
            cached = self._census = (now, engine.census(OVERDUE_AFTER))
        return cached[1]

    def _engine_outcomes(self, names: Collection[str]) -> Mapping[str, str]:
        engine = self.node.engine
        if engine is None:
            return {}
        outcomes = engine.stats.outcomes
        return {n: o for n in names if (o := outcomes.get(n)) is not None}

    def _read_database(self) -> DatabaseFigures:
        node = self.node
        store = node.store
        if store is None:
            raise StoreError("the node is closed")
        key = node.settings.lock_key
        standbys = len([b for b in store.cluster.beats()
                        if b["role"] == "standby" and b["lock_key"] == key])
        backlogs = store.outbox.backlogs()
        own = node.settings.deployment
        if node.outbox is not None and all(b.deployment != own for b in backlogs):
            backlogs.insert(0, OutboxBacklog(own, 0, None))
        return DatabaseFigures(standbys, backlogs)

    # -- the series ---------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        node = self.node
        now = self.clock()
        status = node.status()
        stats = node.stats
        settings = node.settings

        info = GaugeMetricFamily("awa_beat_info", "This beat process (always 1).",
                                 labels=["identity", "deployment", "version"])
        info.add_metric([node.identity, settings.deployment, __version__], 1)
        yield info
        leader = GaugeMetricFamily(
            "awa_beat_leader", "1 while this process holds the leader lock, else 0.",
            labels=["lock_key"])
        leader.add_metric([str(settings.lock_key)], 1 if status.role == "leader" else 0)
        yield leader
        changes = CounterMetricFamily(
            "awa_beat_leadership_changes", "Times this process won or lost the leader lock.",
            labels=["change"])
        changes.add_metric(["won"], stats.won)
        changes.add_metric(["lost"], stats.lost)
        yield changes
        yield CounterMetricFamily("awa_beat_fires", "Jobs fired by this process.",
                                  value=stats.fires)
        yield self._lag(stats.lag_counts, stats.lag_sum)
        if stats.back_by is not None:
            yield GaugeMetricFamily(
                "awa_beat_loop_behind_seconds",
                "Seconds the beat loop is past the time it planned its next step for "
                "(0 while on time; /healthz fails past awa_beat_stuck_after).",
                value=max(0.0, now - stats.back_by))
        if status.role == "leader" and stats.last_pass_at is not None:
            yield GaugeMetricFamily(
                "awa_beat_seconds_since_last_pass",
                "Seconds since the leader's last successful evaluation pass.",
                value=max(0.0, now - stats.last_pass_at))
        store = node.store
        if store is not None:
            contact = store.contact
            yield GaugeMetricFamily(
                "awa_beat_database_up",
                "1 if the last database operation of this process reached the database.",
                value=1 if contact.reachable else 0)
            yield CounterMetricFamily(
                "awa_beat_database_errors", "Database operations that failed.",
                value=contact.errors)
        yield from self._engine_series(now)
        yield from self._outbox_series()
        yield from self._database_series()

    @staticmethod
    def _lag(counts: list[int], total: float) -> HistogramMetricFamily:
        cumulative = list(itertools.accumulate(counts))
        bounds = [*(repr(b) for b in LAG_BUCKETS), "+Inf"]
        return HistogramMetricFamily(
            "awa_beat_fire_lag_seconds",
            "Seconds from each job's fire time to its insertion by this process.",
            buckets=list(zip(bounds, cumulative, strict=True)), sum_value=total)

    def _engine_series(self, now: float) -> Iterator[Metric]:
        engine = self.node.engine
        if engine is None:
            return
        estats = engine.stats
        yield CounterMetricFamily(
            "awa_beat_coalesced_fires",
            "Missed fire times folded into one later fire (missed_fire_policy coalesce).",
            value=estats.coalesced)
        skipped = CounterMetricFamily(
            "awa_beat_skipped_fires", "Fire times due that this process did not fire.",
            labels=["reason"])
        for reason in SKIP_REASONS:
            skipped.add_metric([reason], estats.skipped[reason])
        yield skipped
        yield CounterMetricFamily(
            "awa_beat_buffered_fires",
            "Fire times held by overlap buffer_one while the run before them had not "
            "finished.", value=estats.buffered)
        yield CounterMetricFamily(
            "awa_beat_buffered_fires_started",
            "Held fires (overlap buffer_one) that got their job once the run before them "
            "finished.", value=estats.buffered_started)
        yield GaugeMetricFamily(
            "awa_beat_catch_up_backlog",
            "Schedules that hit the catch-up limit on their last fire: more missed fires "
            "follow in the next passes.", value=len(estats.behind))
        census = self.census()
        if census is not None:
            for name, doc, value in (
                ("awa_beat_schedules", "Schedules in the table (every deployment's).",
                 census.total),
                ("awa_beat_paused_schedules", "Schedules paused.", census.paused),
                ("awa_beat_invalid_schedules",
                 "Schedules that cannot fire (bad expression, zone or policy, or a job "
                 "Awa would reject).", census.invalid),
            ):
                yield GaugeMetricFamily(name, doc, value=value)
        overdue = self.overdue() if self.overdue is not None else (
            None if census is None else census.overdue)
        if overdue is not None:
            yield GaugeMetricFamily(
                "awa_beat_overdue_schedules",
                "Schedules whose next fire time has passed without a fire.", value=overdue)
        yield from self._schedule_series()

    def _schedule_series(self) -> Iterator[Metric]:
        node = self.node
        engine = node.engine
        names = node.watched
        if engine is None or not names:
            return
        last = GaugeMetricFamily(
            "awa_beat_schedule_last_fire_timestamp_seconds",
            "The schedule's last fire time (before its first: when it was registered).",
            labels=["schedule"])
        nxt = GaugeMetricFamily(
            "awa_beat_schedule_next_fire_timestamp_seconds",
            "The schedule's next fire time (absent while paused or invalid).",
            labels=["schedule"])
        paused = GaugeMetricFamily("awa_beat_schedule_paused",
                                   "1 while the schedule is paused.", labels=["schedule"])
        for name in names:
            held = engine.schedule(name)
            if held is None:
                continue
            row, due = held
            if row.last_enqueued_at is not None:
                last.add_metric([name], row.last_enqueued_at.timestamp())
            if due is not None:
                nxt.add_metric([name], due)
            paused.add_metric([name], 0 if row.paused_at is None else 1)
        yield last
        yield nxt
        yield paused
        outcome = GaugeMetricFamily(
            "awa_beat_schedule_last_outcome",
            "1 for the outcome of the schedule's last fire (one series per schedule).",
            labels=["schedule", "outcome"])
        for name, value in sorted(self.outcomes(names).items()):
            outcome.add_metric([name, value], 1)
        yield outcome

    def _outbox_series(self) -> Iterator[Metric]:
        stats_of = getattr(self.node.outbox, "stats", None)
        if stats_of is None:
            return
        stats = stats_of()
        yield CounterMetricFamily("awa_beat_published",
                                  "Messages the broker accepted from this process.",
                                  value=stats.published)
        yield CounterMetricFamily("awa_beat_publish_errors",
                                  "Failed attempts to publish to the broker.",
                                  value=stats.publish_errors)
        yield GaugeMetricFamily("awa_beat_broker_up",
                                "0 while publishing to the broker fails, else 1.",
                                value=1 if stats.broker_up else 0)

    def _database_series(self) -> Iterator[Metric]:
        figures = self.database.get()
        if figures is None:
            return
        yield GaugeMetricFamily(
            "awa_beat_standbys_seen",
            "Standbys of this lock key that wrote a heartbeat in the last minute.",
            value=figures.standbys)
        if not figures.backlogs:
            return
        # Every deployment's, as `awa-beat status` shows them: a backlog that no beat of
        # its deployment publishes shows up in every beat's scrape.
        backlog = GaugeMetricFamily(
            "awa_beat_outbox_backlog",
            "Jobs for Celery not yet accepted by the broker, by the deployment whose beat "
            "publishes them.", labels=["deployment"])
        oldest = GaugeMetricFamily(
            "awa_beat_outbox_oldest_age_seconds",
            "Seconds since the oldest job waiting for the broker was fired (0: none), by "
            "deployment.", labels=["deployment"])
        for b in figures.backlogs:
            backlog.add_metric([b.deployment], b.jobs)
            oldest.add_metric([b.deployment], b.oldest_age or 0.0)
        yield backlog
        yield oldest


def registry_for(node: BeatNode, **sources: Any) -> tuple[CollectorRegistry, BeatCollector]:
    """A registry of its own with one :class:`BeatCollector` of ``node`` (``sources``:
    its keyword arguments)."""
    registry = CollectorRegistry(auto_describe=False)
    collector = BeatCollector(node, **sources)
    registry.register(collector)
    return registry, collector


def run_report_sources(report: Callable[[], tuple[Sequence[Any], Mapping[str, str]] | None],
                       node: BeatNode) -> dict[str, Any]:
    """``overdue`` and ``outcomes`` sources from one cached
    :meth:`~awa_beat._ops.operations.Operations.run_report`: the overdue count, and each
    schedule's last reported run outcome, else beat's own outcome of its last fire."""

    def overdue() -> int | None:
        got = report()
        return None if got is None else len(got[0])

    def outcomes(names: Collection[str]) -> Mapping[str, str]:
        got = report()
        engine = node.engine
        own = engine.stats.outcomes if engine is not None else {}
        reported = got[1] if got is not None else {}
        return {n: o for n in names
                if (o := reported.get(n) or own.get(n)) is not None}

    return {"overdue": overdue, "outcomes": outcomes}


def cached(fetch: Callable[[], T], ttl: float, name: str) -> Callable[[], T | None]:
    """``fetch`` as a source that answers at once: read on a thread, at most every
    ``ttl`` seconds (e.g. ``overdue=cached(ops_overdue_count, 30, "overdue")``)."""
    refresher = Refresher(fetch, ttl, name=f"awa-beat-metrics-{name}")
    return refresher.get
