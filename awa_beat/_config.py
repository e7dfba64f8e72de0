"""awa-beat's settings, read from a Celery app's configuration and the environment.

The database URL is held as text here. Whether it is well formed, and how it is shown
without its password, is the database layer's business (:mod:`awa_beat._db.conninfo`),
because only that layer imports the driver whose parser decides it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

DATABASE_URL_ENV = "AWA_BEAT_DATABASE_URL"
#: The bytes of "AWA_BEAT" make the default leader lock key. It must never be Awa's own
#: "AWA_MAIN" (4708303813012965710), which would shut Awa workers out of all their
#: maintenance.
DEFAULT_LOCK_KEY = int.from_bytes(b"AWA_BEAT", "big")
AWA_MAIN_LOCK_KEY = 4708303813012965710
#: The seconds after which the server drops the lock of a leader that stopped answering.
DEFAULT_LOCK_TIMEOUT = 8.0
#: How many seconds a beat's clock may differ from the database's before the beat may
#: not lead, and how far past the database's now() a fire may be dated.
DEFAULT_CLOCK_TOLERANCE = 2.0
HOUR = 3600
DAY = 24 * HOUR


def celery_dispatch_refused(entries: list[str], fix: str) -> ConfigError:
    """Return the refusal to dispatch ``entries`` to Celery where Awa owns ``awa.jobs``,
    because Awa workers would run those jobs too. Beat and the importer both refuse."""
    shown = f"; entries: {', '.join(entries)}" if entries else ""
    return ConfigError("Celery dispatch needs awa-beat's standalone schema, but Awa owns "
                       f"awa.jobs in this database (Awa workers would run those jobs too); "
                       f"{fix}{shown}")


@dataclass(frozen=True)
class Settings:
    """awa-beat's settings, read Celery-style from the app's configuration.

    Each key ``awa_beat_<name>`` may also be given in the environment as
    ``AWA_BEAT_<NAME>`` (which is handy in containers). The app's configuration wins.
    """

    database_url: str | None = None
    """PostgreSQL URL, reached directly or through session pooling (PgBouncer's transaction
    or statement pooling is refused). None: an embedded PostgreSQL in ``./.awa-beat/pgdata``
    (or ``$AWA_BEAT_EMBEDDED_DIR``), for trying things out."""
    lock_key: int = DEFAULT_LOCK_KEY
    """Advisory lock key of the leader election (default: the bytes ``AWA_BEAT``). Replicas
    with the same key and database form one group. Never Awa's own key."""
    sync_interval: float = 60.0
    """Seconds between the leader's re-syncs of ``beat_schedule`` to the database and
    re-reads of every row."""
    ping_interval: float = 30.0
    """Seconds between the leader's checks of its lock connection; on a failure it stops
    firing at once and goes back to the election."""
    election_interval: float = 1.0
    """Seconds between a standby's attempts to take the lock."""
    catch_up_limit: int = 1000
    """Fires per ``catch_up`` schedule per pass (as in Awa); the rest follow in the next passes."""
    default_timezone: str = "UTC"
    """Time zone of entries that name none: the app's ``timezone``, else UTC."""
    dispatch: str | None = None
    """Who runs fired jobs: ``"celery"`` publishes them to the app's broker (the dispatch
    bridge), ``"awa"`` (None: the default) leaves them in ``awa.jobs`` for Awa workers.
    Entries may override it (``options["awa_beat"]["dispatch"]``)."""
    deployment: str = "default"
    """Label of the rows this app registers (the app's name, else ``default``), used to spot
    rows its configuration no longer has and to publish only its own jobs."""
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    """Seconds the server keeps the lock of a leader that stopped answering (a dead host, a
    silent partition) before dropping it so that a standby takes over."""
    startup_timeout: float = 300.0
    """Seconds a beat started while the database is unreachable keeps retrying."""
    http_port: int | None = None
    """Port of the metrics and probes endpoint (docs/observability.md); None: off."""
    http_bind: str = "127.0.0.1"
    """Address that endpoint listens on: loopback unless told otherwise."""
    log_format: str = "text"
    """``"json"``: beat's log lines as one JSON object per line."""
    metrics_schedule_limit: int = 100
    """Most schedules with series of their own in the metrics (0: none)."""
    stuck_after: float = 60.0
    """Seconds past its planned next step after which the loop counts as stuck."""
    track_outcomes: bool = False
    """A worker records what became of every task awa-beat fired (docs/outcomes.md)."""
    at_most_once: bool = False
    """A worker never runs a fire whose task already started (every schedule's)."""
    outcome_retention: float = 30.0
    """Days outcomes and skipped or coalesced occurrences are kept."""
    dst: str = "awa"
    """Whose rule a crontab follows in a skipped or repeated wall hour: ``awa`` (Awa's,
    which an Awa leader sharing the table also fires) or ``celery`` (Celery's, stored as
    a marker only awa-beat fires). An entry's ``options["awa_beat"]["dst"]`` wins."""
    clock_tolerance: float = DEFAULT_CLOCK_TOLERANCE
    """Seconds this host's clock may differ from the database's: beyond it the beat does
    not lead, and no fire is dated later than the database's now() plus this."""

    @classmethod
    def from_app(cls, conf: Any, environ: Mapping[str, str] | None = None,
                 *, app_name: str | None = None) -> Settings:
        environ = os.environ if environ is None else environ

        def get(name: str) -> Any:
            value = _conf_get(conf, f"awa_beat_{name}")
            if value is None:
                value = environ.get(f"AWA_BEAT_{name.upper()}") or None
            return value

        defaults = cls()
        app_timezone = _conf_get(conf, "timezone")
        url = get("database_url")
        lock_key = _number(get("lock_key"), "lock_key", int, defaults.lock_key,
                           minimum=-(2**63), maximum=2**63 - 1)
        if lock_key == AWA_MAIN_LOCK_KEY:
            raise ConfigError("awa_beat_lock_key must not be Awa's own lock key "
                              f"({AWA_MAIN_LOCK_KEY}): Awa workers would lose their maintenance")
        return cls(
            # Checked by awa_beat._db.conninfo.settings_from_app, which reads the settings
            # for every caller that uses the database.
            database_url=str(url) if url else None,
            lock_key=lock_key,
            sync_interval=_number(get("sync_interval"), "sync_interval", float,
                                  defaults.sync_interval, minimum=1, maximum=DAY),
            ping_interval=_number(get("ping_interval"), "ping_interval", float,
                                  defaults.ping_interval, minimum=0.1, maximum=HOUR),
            election_interval=_number(get("election_interval"), "election_interval", float,
                                      defaults.election_interval, minimum=0.05,
                                      maximum=HOUR),
            catch_up_limit=_number(get("catch_up_limit"), "catch_up_limit", int,
                                   defaults.catch_up_limit, minimum=1, maximum=1_000_000),
            default_timezone=str(get("default_timezone") or app_timezone or "UTC"),
            dispatch=_choice(get("dispatch"), "dispatch", ("celery", "awa")),
            deployment=str(get("deployment") or app_name or "default"),
            lock_timeout=_number(get("lock_timeout"), "lock_timeout", float,
                                 defaults.lock_timeout, minimum=2, maximum=3600),
            startup_timeout=_number(get("startup_timeout"), "startup_timeout", float,
                                    defaults.startup_timeout, minimum=0, maximum=7 * DAY),
            http_port=_number(get("http_port"), "http_port", int, None, minimum=0,
                              maximum=65535),
            http_bind=str(get("http_bind") or defaults.http_bind),
            log_format=_choice(get("log_format"), "log_format", ("text", "json"))
            or defaults.log_format,
            metrics_schedule_limit=_number(get("metrics_schedule_limit"),
                                           "metrics_schedule_limit", int,
                                           defaults.metrics_schedule_limit, minimum=0,
                                           maximum=1_000_000),
            stuck_after=_number(get("stuck_after"), "stuck_after", float,
                                defaults.stuck_after, minimum=1, maximum=DAY),
            track_outcomes=_flag(get("track_outcomes"), "track_outcomes"),
            at_most_once=_flag(get("at_most_once"), "at_most_once"),
            outcome_retention=_number(get("outcome_retention"), "outcome_retention", float,
                                      defaults.outcome_retention, minimum=0.01,
                                      maximum=36_500),
            dst=_choice(get("dst"), "dst", ("awa", "celery")) or defaults.dst,
            clock_tolerance=_number(get("clock_tolerance"), "clock_tolerance", float,
                                    defaults.clock_tolerance, minimum=0.1, maximum=600),
        )


def _conf_get(conf: Any, key: str) -> Any:
    try:
        return conf.get(key)
    except AttributeError:  # pragma: no cover - The configuration is a plain object.
        return getattr(conf, key, None)


def _number(value: Any, key: str, kind: type, default: Any, *, minimum: float,
            maximum: float | None = None) -> Any:
    if value is None:
        return default
    try:
        number = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"awa_beat_{key} must be a {kind.__name__}, not {value!r}") from None
    if not math.isfinite(number):
        # NaN compares false with every bound, and a timer cannot wait forever, so both
        # are refused.
        raise ConfigError(f"awa_beat_{key} is {value!r}; it must be a finite number")
    if number < minimum or (maximum is not None and number > maximum):
        raise ConfigError(f"awa_beat_{key} is {value!r}; it must be at least {minimum}"
                          + (f" and at most {maximum}" if maximum is not None else ""))
    return number


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _flag(value: Any, key: str) -> bool:
    """Read a boolean setting: True or False in the app, or 1/0, true/false, yes/no or
    on/off."""
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise ConfigError(f"awa_beat_{key} is {value!r}; use True or False "
                      "(in the environment: 1/0, true/false, yes/no, on/off)")


def _choice(value: Any, key: str, allowed: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    if value not in allowed:
        raise ConfigError(f"awa_beat_{key} is {value!r}; use one of {', '.join(allowed)}")
    return str(value)
