"""``celery beat -S awa_beat.Scheduler``: Celery's beat loop driving a :class:`BeatNode`.

A thin adapter. It maps Celery's lifecycle onto the runtime node: the constructor and
``setup_schedule`` validate the app's ``beat_schedule`` and open the node; ``tick``
ticks it and returns what it asks to sleep; ``close`` closes it, also when Celery's
signal handler calls it mid-tick. Start-up errors a user can fix end in one line on
stderr and exit code 1, never a traceback.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any, ClassVar, NoReturn

from celery import beat

from .._beat.node import BeatNode, NodeHooks
from .._beat.opening import Opening
from .._config import Settings
from .._db.conninfo import redact, settings_from_app
from .._db.database import process_identity
from .._engine.engine import utcnow
from .._logs import event, use_json
from .._schedules.spec import specs_from_beat_schedule
from ..errors import AwaBeatError, SessionLockUnsupported, UnknownSchema

# The logger keeps the name it had before the modules moved into layer packages, so
# logging configurations that select it by name go on working.
logger = logging.getLogger('awa_beat.celery_scheduler')
#: Celery's beat_schedule_filename by default: what ``celery beat`` passes without ``-s``.
_DEFAULT_SCHEDULE_FILE = "celerybeat-schedule"


def _refuse(message: str, *, hard: bool = False) -> NoReturn:
    """Exit 1 with ``message`` and no traceback."""
    event(logger, logging.CRITICAL, "beat.refused", "awa-beat %s", message, reason=message)
    sys.stderr.write(f"awa-beat: {message}\n")
    sys.stderr.flush()
    if hard:
        os._exit(1)
    raise SystemExit(1)


def configured_entries(app: Any, settings: Settings) -> dict[str, Any]:
    """The app's ``beat_schedule`` plus what Celery's own beat adds: the result backend's
    nightly cleanup, when results expire and the backend cannot expire them itself.

    That entry is added only when jobs are dispatched to Celery (Awa workers have no such
    task), and named per deployment so that deployments sharing a database do not
    overwrite each other's row.
    """
    entries = dict(app.conf.beat_schedule or {})
    conf = app.conf
    if (settings.dispatch == "celery" and conf.result_expires
            and not any(e.get("task") == "celery.backend_cleanup" for e in entries.values()
                        if isinstance(e, dict))
            and not app.backend.supports_autoexpire):
        from celery.schedules import crontab

        entries[f"{settings.deployment}.celery.backend_cleanup"] = {
            "task": "celery.backend_cleanup", "schedule": crontab("0", "4", "*"),
            "options": {"expires": 12 * 3600}}
    return entries


class Scheduler(beat.Scheduler):
    """Celery beat scheduler backed by PostgreSQL, safe to run as many replicas."""

    #: Celery's banner shows this; the node's real cadence is per step (see tick()).
    max_interval = 1.0
    #: Fault hooks for tests: a subclass sets them (never set in production).
    hooks: ClassVar[NodeHooks | None] = None
    #: A scheduler of this process is in setup_schedule() (see __init__). Process-wide
    #: on purpose: it is the one thing the two schedulers Celery builds can share.
    _setting_up: ClassVar[bool] = False

    def __init__(self, app: Any, *args: Any, lazy: bool = False,
                 clock: Callable[[], datetime] = utcnow, **kwargs: Any) -> None:
        if Scheduler._setting_up:
            # Celery's SIGTERM handler, run while this process's scheduler starts, reads
            # Service.scheduler, which is not set yet, so Celery builds a second
            # scheduler inside the handler. That one must stay empty: a second start-up
            # would wait forever on the first one's migration lock, or at best run twice.
            lazy = True
        self.clock = clock
        try:
            self.settings = settings_from_app(app.conf, app_name=app.main)
        except AwaBeatError as exc:
            _refuse(f"invalid configuration: {exc}")
        self.database_url = self.settings.database_url
        self.node: BeatNode | None = None
        self._opening: Opening | None = None
        self.endpoint: Any = None
        """The metrics and probes endpoint (:class:`awa_beat._beat.http.Endpoint`), if on."""
        self._collector: Any = None
        self._ticking = False
        self._stopping = False
        """close() was called during a tick (Celery's SIGTERM handler): the tick closes."""
        # celery beat --max-interval (or beat_max_loop_interval): the longest wait between
        # two steps, honoured; Celery passes 0 or None when neither is set.
        given = kwargs.pop("max_interval", None)
        self.max_interval_given = (float(given) if isinstance(given, (int, float))
                                   and not isinstance(given, bool) and given > 0 else None)
        if self.max_interval_given is not None:
            self.max_interval = self.max_interval_given
        self.schedule_file = kwargs.get("schedule_filename")
        super().__init__(app, *args, lazy=lazy, max_interval=self.max_interval, **kwargs)

    # -- Celery's contract ----------------------------------------------------------------------

    def setup_schedule(self) -> None:
        Scheduler._setting_up = True
        try:
            if self.settings.log_format == "json":
                use_json()  # Celery has set its handlers up by now
            self._log_command_line()
            if self.database_url is not None:
                # The database side of the start-up (connections, schema, statistics) runs
                # on a thread while this one reads and encodes the configuration. Not with
                # the embedded server: an entry refused should not have started it.
                self._opening = Opening(self.settings, self.database_url, process_identity())
            self.node = self._node()
            if self.settings.http_port is not None:
                # Before the start-up: probes answer while it syncs or waits for the
                # database (alive, not ready).
                self.endpoint = self._endpoint(self.node)
            self.node.open()
        except AwaBeatError as exc:
            # A user mistake or an unreachable database: say so and exit, no traceback.
            self._close()
            _refuse(f"cannot start: {exc}")
        except BaseException:
            # A signal (Celery's handler raises SystemExit) while the configuration is
            # read: the connections being opened are closed, as the node closes its own.
            if self._opening is not None:
                self._opening.cancel()
                self._opening = None
            raise
        finally:
            Scheduler._setting_up = False

    def _log_command_line(self) -> None:
        """Say what becomes of ``celery beat``'s ``--max-interval`` and ``-s FILE``."""
        if self.max_interval_given is not None:
            event(logger, logging.INFO, "beat.max_interval",
                  "beat: --max-interval %s s honoured: at most that long between two "
                  "steps (a step is also taken whenever a fire is due)",
                  f"{self.max_interval_given:g}", seconds=self.max_interval_given)
        if self.schedule_file and self.schedule_file != _DEFAULT_SCHEDULE_FILE:
            event(logger, logging.WARNING, "beat.schedule_file",
                  "beat: -s %s ignored: awa-beat keeps the schedule and its last runs in "
                  "PostgreSQL and writes no schedule file (import one with awa-beat import "
                  "--from-file)", self.schedule_file, path=self.schedule_file)

    def _node(self) -> BeatNode:
        settings = self.settings
        specs = specs_from_beat_schedule(
            configured_entries(self.app, settings),
            default_timezone=settings.default_timezone,
            default_dispatch=settings.dispatch or "awa", default_dst=settings.dst)
        if self.database_url is None:
            from .._db.embedded import default_data_dir, resolve_database_url

            self.database_url = resolve_database_url(None)
            event(logger, logging.WARNING, "beat.embedded",
                  "beat: no awa_beat_database_url / AWA_BEAT_DATABASE_URL set; using an "
                  "embedded PostgreSQL in %s, for trying things out only", default_data_dir())
        if settings.dispatch == "celery" or any(s.dispatch == "celery" for s in specs):
            # The bridge is loaded while the database side of the start-up runs.
            from .. import _bridge  # noqa: F401
        opening = self._opening
        node = BeatNode(settings, specs, database_url=self.database_url, clock=self.clock,
                        make_outbox=self._outbox, hooks=self.hooks, opening=opening,
                        identity=opening.identity if opening is not None else None)
        self._opening = None  # the node's now: it closes the connections with its own
        if self.max_interval_given is not None:
            node.max_wait = self.max_interval_given
        return node

    def _endpoint(self, node: BeatNode) -> Any:
        from .._beat.http import Endpoint
        from .._beat.metrics import registry_for

        registry, self._collector = registry_for(node, **self.metrics_sources())
        assert self.settings.http_port is not None
        return Endpoint(node, registry, host=self.settings.http_bind,
                        port=self.settings.http_port).start()

    def metrics_sources(self) -> dict[str, Any]:
        """Keyword arguments of :class:`awa_beat._beat.metrics.BeatCollector`: the pluggable
        sources (``overdue``, ``outcomes``). Here both come from the workers' reports
        (docs/outcomes.md), read on a thread at most every ``REPORT_TTL`` seconds while
        the endpoint is scraped; a subclass may return others."""
        from .._beat.metrics import REPORT_TTL, cached, run_report_sources
        from .._ops.operations import node_run_report

        assert self.node is not None
        return run_report_sources(cached(node_run_report(self.node), REPORT_TTL,
                                         "run-report"), self.node)

    def _outbox(self, store: Any) -> Any:
        from .._bridge import Bridge, Dispatcher

        return Dispatcher(Bridge(self.app, store.outbox, deployment=self.settings.deployment))

    def tick(self, *args: Any, **kwargs: Any) -> float:
        """One step of the beat loop; returns seconds until the next step is needed."""
        if self.node is None:
            return self.max_interval  # lazy: never set up
        self._ticking = True
        try:
            return self.node.tick()
        except SessionLockUnsupported as exc:
            # Celery's loop swallows SystemExit (and would exit 0): leave with 1.
            _refuse(f"cannot lead: {exc}", hard=True)
        except UnknownSchema as exc:
            _refuse(f"stopped: {exc}", hard=True)
        finally:
            self._ticking = False
            if self._stopping:
                self._close()
                raise SystemExit  # whatever the tick raised or returned: beat is stopping

    def close(self) -> None:
        if self._ticking:
            # Celery's SIGTERM and SIGINT handler calls this in the middle of a tick (a
            # signal handler runs between two bytecodes of whatever it interrupted),
            # then raises SystemExit. Sockets closed under the tick would replace that
            # SystemExit with their own error (py-amqp's confirm wait resets the timeout
            # of its socket in a `finally`: EBADF), which the tick would take for a
            # broker outage and survive, leaving beat running, closed, for good. The
            # tick closes everything on its way out instead, a moment later.
            self._stopping = True
            return
        self._close()

    def _close(self) -> None:
        if self._opening is not None:  # the configuration was refused: no node to close
            self._opening.cancel()
            self._opening = None
        if self.node is not None:
            self.node.close()
        if self.endpoint is not None:
            self.endpoint.close()
            self.endpoint = None
        if self._collector is not None:
            self._collector.close()

    def should_sync(self) -> bool:
        return False  # every fire is already durable; there is nothing to save

    def get_schedule(self) -> dict[str, Any]:
        return {}

    def set_schedule(self, schedule: dict[str, Any]) -> None:
        pass

    schedule = property(get_schedule, set_schedule)

    @property
    def info(self) -> str:
        url = redact(self.database_url) if self.database_url else "embedded PostgreSQL"
        return (f"awa-beat: database {url}, lock key {self.settings.lock_key}, "
                f"deployment {self.settings.deployment!r}")
