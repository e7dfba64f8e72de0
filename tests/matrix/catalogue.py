"""The catalogue of the matrix suite: one schedule of every type, and how to store them.

:data:`CATALOGUE` maps a name to an :class:`Entry`: a real ``beat_schedule`` entry (Celery's
``crontab``, ``timedelta``, ``solar``, dateutil's ``rrule``, :func:`awa_beat.at`,
bounds in ``options["awa_beat"]``) with what awa-beat must store for it (``cron_expr``,
``timezone``, the marker kind), who owns the row (``config``: a beat's ``beat_schedule``;
``runtime``: the Python API), the state it is left in (``active``, ``paused`` by an
operator, ``retired`` by the fire of its last run) and its documented calendar
(:meth:`Entry.next_after`), computed here without awa-beat's own calendar code.

:func:`store_catalogue` writes them into a migrated database the way they get there in
real life: config-owned entries by a beat's start-up sync (:class:`~awa_beat._beat.node.BeatNode`
of deployment :data:`DEPLOYMENT`), runtime-owned ones through :class:`awa_beat.Schedules`,
the pause through the API, and the retired one by the real fire statement (an
:class:`~awa_beat._engine.engine.Engine` on an injected clock fires its last run). The fixtures in
``tests/matrix/conftest.py`` give each test such a database, in either table layout::

    def test_every_type_is_listed(matrix_db: MatrixDB) -> None:
        with matrix_db.schedules() as schedules:
            assert {v.name for v in schedules.list()} == set(matrix_db.names)

    @pytest.mark.parametrize("name", NAMES)
    def test_each_type(matrix_db: MatrixDB, name: str) -> None:
        entry = CATALOGUE[name]
        ...

Instants are fixed and years ahead (the ``at`` instant, ``start_time``), so the stored
forms below never change; a test that wants a schedule to fire drives the engine with a
clock of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

from celery.schedules import crontab, solar
from dateutil.rrule import MO, WE, WEEKLY, rrule

from awa_beat import Schedules
from awa_beat._beat.node import BeatNode
from awa_beat._config import Settings
from awa_beat._db.database import Database, connect
from awa_beat._db.records import RETIRED_BY
from awa_beat._engine.engine import Engine
from awa_beat._schedules.calendars import at
from awa_beat._schedules.spec import specs_from_beat_schedule
from awa_beat._testing import FakeClock

UTC = timezone.utc
#: The deployment whose beat registers the config-owned entries (and that runtime rows
#: are written through).
DEPLOYMENT = "matrix"
SETTINGS = Settings(deployment=DEPLOYMENT, default_timezone="UTC", dispatch="awa")
#: ``paused_by`` of the paused entry.
PAUSED_BY = "matrix operator"

AT_INSTANT = datetime(2031, 1, 1, 9, 0, tzinfo=UTC)
START_TIME = datetime(2030, 6, 1, 0, 0, tzinfo=UTC)
END_TIME = datetime(2035, 1, 1, 0, 0, tzinfo=UTC)
PARIS = ZoneInfo("Europe/Paris")
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
SOLAR = ("sunrise", 48.8566, 2.3522)  # Paris
RRULE_START = datetime(2026, 1, 5, 9, 0, tzinfo=BERLIN)  # a Monday


# -- the documented calendars, computed without awa-beat ------------------------------------


def _daily_at(t: datetime, wall: time, zone: ZoneInfo) -> datetime:
    """The first wall time ``wall`` in ``zone`` strictly after ``t`` (never in a DST gap)."""
    day = t.astimezone(zone).date()
    for d in range(3):
        candidate = datetime.combine(day + timedelta(days=d), wall, tzinfo=zone)
        if candidate > t:
            return candidate.astimezone(UTC)
    raise AssertionError("unreachable: a day has this wall time")


def _grid(seconds: int) -> Callable[[datetime], datetime]:
    """An interval on the grid anchored at the Unix epoch in UTC (README: Intervals)."""
    def next_after(t: datetime) -> datetime:
        n = math.floor(t.timestamp() / seconds) + 1
        return datetime.fromtimestamp(n * seconds, UTC)
    return next_after


def _hourly_at(minute: int) -> Callable[[datetime], datetime]:
    def next_after(t: datetime) -> datetime:
        u = t.astimezone(UTC)
        candidate = u.replace(minute=minute, second=0, microsecond=0)
        return candidate if candidate > u else candidate + timedelta(hours=1)
    return next_after


def _friday_13th_at_9(t: datetime) -> datetime:
    """09:00 UTC on a day that is the 13th and a Friday (Celery needs both)."""
    day = t.astimezone(UTC).date()
    while True:
        if day.day == 13 and day.weekday() == 4:
            candidate = datetime.combine(day, time(9, 0), tzinfo=UTC)
            if candidate > t:
                return candidate
        day += timedelta(days=1)


def _solar_next(t: datetime) -> datetime:
    """The next sunrise in Paris after ``t`` as Celery's own solar computes it, rounded up
    to the second (README: solar)."""
    sched = solar(*SOLAR, nowfun=lambda: t)
    event = t + sched.remaining_estimate(t)
    floor = event.replace(microsecond=0)
    return (floor if floor == event else floor + timedelta(seconds=1)).astimezone(UTC)


RRULE = rrule(WEEKLY, byweekday=(MO, WE), dtstart=RRULE_START)


def _rrule_next(t: datetime) -> datetime | None:
    nxt = RRULE.after(t.astimezone(BERLIN))
    return None if nxt is None else nxt.astimezone(UTC)


def _at_next(t: datetime) -> datetime | None:
    return AT_INSTANT if t < AT_INSTANT else None


def _starting(inner: Callable[[datetime], datetime | None], start: datetime
              ) -> Callable[[datetime], datetime | None]:
    """``inner``'s fires from ``start`` on (inclusive)."""
    def next_after(t: datetime) -> datetime | None:
        return inner(max(t, start - timedelta(microseconds=1)))
    return next_after


def _ending(inner: Callable[[datetime], datetime | None], end: datetime
            ) -> Callable[[datetime], datetime | None]:
    """``inner``'s fires up to ``end`` (inclusive)."""
    def next_after(t: datetime) -> datetime | None:
        nxt = inner(t)
        return nxt if nxt is not None and nxt <= end else None
    return next_after


# -- the catalogue -------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One schedule of the catalogue."""

    name: str
    type: str
    """The schedule type, in words (a row of the matrix)."""
    entry: Mapping[str, Any]
    """The ``beat_schedule`` entry: task, schedule (a real Celery/awa-beat object), args,
    kwargs, options."""
    cron_expr: str
    """``awa.cron_jobs.cron_expr`` as awa-beat must store it."""
    timezone: str
    """``awa.cron_jobs.timezone`` as stored."""
    marker: str | None
    """The marker kind (``every``, ``cron``, ``solar``, ``at``, ``rrule``, ``crontab``),
    or None for a
    plain Awa cron expression that Awa itself would fire identically."""
    calendar: Callable[[datetime], datetime | None] = field(repr=False)
    """The documented calendar: the first fire strictly after an instant (UTC), ignoring
    pauses and run limits; None when there is none."""
    owner: str = "runtime"
    """``config`` (registered by :data:`DEPLOYMENT`'s beat) or ``runtime`` (the API)."""
    state: str = "active"
    """``active``, ``paused`` (by :data:`PAUSED_BY`) or ``retired`` (paused by
    :data:`~awa_beat._schedules.markers.RETIRED_BY`, by the fire of its last run)."""
    max_runs: int | None = None
    """The run limit stored in the marker (``runs=``), if any."""
    runs: int = 0
    """Runs counted in ``awa_beat.schedule_runs`` once stored (the retired one's)."""

    @property
    def task(self) -> str:
        return str(self.entry["task"])

    @property
    def paused(self) -> bool:
        return self.state != "active"

    def form_schedule(self) -> tuple[str, str]:
        """The schedule as the dashboard's and the Django admin's edit forms show it,
        bounds aside (they have fields of their own): ``(kind, text)``."""
        base = self.cron_expr.partition(" | ")[0]
        if self.marker == "every":
            return "every", base.removeprefix("@every ").removesuffix("s")
        if self.marker == "at":
            return "at", base.removeprefix("@at ")
        if self.marker == "solar":
            return "solar", ":".join(base.split(" ")[1:])
        if self.marker == "cron":
            return "cron", base.removeprefix("@cron ")
        return "cron", base

    def next_after(self, t: datetime) -> datetime | None:
        """The next automatic fire after ``t``: the calendar's, or None while paused or
        retired."""
        return None if self.paused else self.calendar(t)


def _entry(schedule: Any, name: str, *, kwargs: Mapping[str, Any] | None = None,
           **awa: Any) -> dict[str, Any]:
    return {"task": f"matrix.{name.replace('-', '_')}", "schedule": schedule,
            "args": [name], "kwargs": dict(kwargs or {"type": name}),
            "options": {"queue": "matrix", "awa_beat": awa}}


def _catalogue() -> list[Entry]:
    hourly = _hourly_at(0)
    return [
        Entry("cron-zone", "cron with a time zone (crontab, Europe/Paris)",
              _entry(crontab(hour=7, minute=30), "cron-zone", timezone="Europe/Paris"),
              "30 7 * * *", "Europe/Paris", None,
              lambda t: _daily_at(t, time(7, 30), PARIS), owner="config"),
        Entry("grid-interval", "interval on a cron grid (timedelta(minutes=10))",
              _entry(timedelta(minutes=10), "grid-interval"),
              "0 */10 * * * *", "UTC", None, _grid(600), owner="config"),
        Entry("offgrid-interval", "interval off the cron grids (7 s)",
              _entry(7, "offgrid-interval"),
              "@every 7s", "UTC", "every", _grid(7), owner="config"),
        Entry("solar", "solar (sunrise in Paris)",
              _entry(solar(*SOLAR), "solar"),
              "@solar sunrise 48.8566 2.3522", "UTC", "solar", _solar_next, owner="config"),
        Entry("at", "at (one instant, calendars.at)",
              _entry(at(AT_INSTANT), "at"),
              "@at 2031-01-01T09:00:00Z | runs=1", "UTC", "at", _at_next, max_runs=1),
        Entry("rrule", "rrule (dateutil, weekly on Monday and Wednesday)",
              _entry(RRULE, "rrule"),
              "@rrule DTSTART=20260105T090000;FREQ=WEEKLY;BYDAY=MO,WE", "Europe/Berlin",
              "rrule", _rrule_next),
        Entry("crontab-and", "Celery's AND of the day fields (09:00 on a Friday the 13th)",
              _entry(crontab(minute=0, hour=9, day_of_month=13, day_of_week="fri"),
                     "crontab-and"),
              "@crontab 0 9 13 * 5", "UTC", "crontab", _friday_13th_at_9, owner="config"),
        Entry("crontab-dst-celery", "Celery's DST rule (crontab 02:30, America/New_York)",
              _entry(crontab(hour=2, minute=30), "crontab-dst-celery",
                     timezone="America/New_York", dst="celery"),
              "@crontab 30 2 * * * dst=celery", "America/New_York", "crontab",
              lambda t: _daily_at(t, time(2, 30), NEW_YORK)),
        Entry("bound-start", "start_time bound (hourly)",
              _entry(crontab(minute=0), "bound-start", start_time=START_TIME),
              "@cron 0 * * * * | start=2030-06-01T00:00:00Z", "UTC", "cron",
              _starting(hourly, START_TIME)),
        Entry("bound-end", "end_time bound (hourly)",
              _entry(crontab(minute=0), "bound-end", end_time="2035-01-01T00:00:00+00:00"),
              "@cron 0 * * * * | end=2035-01-01T00:00:00Z", "UTC", "cron",
              _ending(hourly, END_TIME), owner="config"),
        Entry("bound-max-runs", "max_runs bound (3 runs, hourly at :15)",
              _entry(crontab(minute=15), "bound-max-runs", max_runs=3),
              "@cron 15 * * * * | runs=3", "UTC", "cron", _hourly_at(15), max_runs=3),
        Entry("one-off", "one_off (daily at 04:45, once)",
              _entry(crontab(hour=4, minute=45), "one-off", one_off=True),
              "@cron 45 4 * * * | runs=1", "UTC", "cron",
              lambda t: _daily_at(t, time(4, 45), ZoneInfo("UTC")), max_runs=1),
        Entry("paused", "paused by an operator (cron 03:00)",
              _entry("0 3 * * *", "paused"),
              "0 3 * * *", "UTC", None,
              lambda t: _daily_at(t, time(3, 0), ZoneInfo("UTC")),
              owner="config", state="paused"),
        Entry("retired", "retired: its last run fired (every second, 2 runs)",
              _entry(1, "retired", missed_fire_policy="catch_up", max_runs=2),
              "@cron * * * * * * | runs=2", "UTC", "cron", _grid(1),
              state="retired", max_runs=2, runs=2),
    ]


CATALOGUE: dict[str, Entry] = {e.name: e for e in _catalogue()}
"""Every schedule of the matrix, by name."""
NAMES: list[str] = list(CATALOGUE)
"""The names, in the catalogue's order (for ``pytest.mark.parametrize``)."""


def beat_schedule(entries: Iterable[Entry] | None = None) -> dict[str, dict[str, Any]]:
    """``entries`` (default: all) as a Celery ``beat_schedule``."""
    chosen = CATALOGUE.values() if entries is None else entries
    return {e.name: dict(e.entry) for e in chosen}


# -- storing them ----------------------------------------------------------------------------


def register_config(url: str, entries: Sequence[Entry]) -> None:
    """Register ``entries`` as :data:`DEPLOYMENT`'s beat does at start-up (its sync of
    ``beat_schedule``), then stop that beat."""
    specs = specs_from_beat_schedule(beat_schedule(entries),
                                     default_timezone=SETTINGS.default_timezone,
                                     default_dispatch=SETTINGS.dispatch or "awa")
    BeatNode(SETTINGS, specs, database_url=url).open().close()


def add_runtime(url: str, entries: Sequence[Entry]) -> None:
    """Add ``entries`` as runtime schedules through the Python API."""
    with Schedules(url, settings=SETTINGS) as schedules:
        schedules.add_many(beat_schedule(entries))


def retire(url: str, entry: Entry) -> None:
    """Fire ``entry``'s runs with the real engine and fire statement, on a clock past its
    last allowed run, so that the statement retires it. Only ``entry`` may be stored yet:
    the engine fires whatever is due."""
    assert entry.max_runs is not None
    with Database(url) as store, connect(url) as conn:
        registered = store.schedules.get(entry.name).last_enqueued_at
        assert registered is not None
        # Registered a moment earlier, so that its runs fall before now, as they would.
        conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s WHERE name = %s",
                     (registered - timedelta(seconds=entry.max_runs + 1), entry.name))
        clock = FakeClock(registered)
        engine = Engine(store.evaluator, clock=clock)
        for _ in range(entry.max_runs + 1):
            engine.run_pass()
        row = store.schedules.get(entry.name)
    assert row.paused_by == RETIRED_BY, (entry.name, row)


def store_catalogue(url: str, entries: Iterable[Entry] | None = None, *,
                    owner: str | None = None) -> list[str]:
    """Store ``entries`` (default: the whole catalogue) in the migrated database at
    ``url``, each owned as it says (or all by ``owner``), paused or retired as it says;
    the names stored. Retired entries are stored and fired first, alone."""
    chosen = list(CATALOGUE.values() if entries is None else entries)

    def owned(e: Entry) -> str:
        return owner or e.owner

    retired = [e for e in chosen if e.state == "retired"]
    for e in retired:
        (register_config if owned(e) == "config" else add_runtime)(url, [e])
        retire(url, e)
    rest = [e for e in chosen if e.state != "retired"]
    config = [e for e in rest if owned(e) == "config"]
    runtime = [e for e in rest if owned(e) == "runtime"]
    if config:
        register_config(url, config)
    if runtime:
        add_runtime(url, runtime)
    paused = [e.name for e in rest if e.state == "paused"]
    if paused:
        with Schedules(url, settings=SETTINGS) as schedules:
            for name in paused:
                schedules.pause(name, by=PAUSED_BY)
    return [e.name for e in chosen]


def as_if_on_time(url: str, *, late: Sequence[str] = ()) -> None:
    """Every cursor moved to now, as a beat that fires on time leaves them (no beat runs
    in most cells, and a schedule whose fire was due over the grace period ago counts as
    overdue), but those of ``late``, an hour back: overdue."""
    with connect(url) as conn:
        conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = CASE WHEN name = ANY(%s)"
                     " THEN now() - interval '1 hour' ELSE now() END", (list(late),))


def stored_rows(url: str) -> dict[str, dict[str, Any]]:
    """What is stored of every schedule: ``awa.cron_jobs`` with owner and run count."""
    with connect(url) as conn:
        cur = conn.execute(
            "SELECT c.name, c.cron_expr, c.timezone, c.kind, c.paused_by, s.owner,"
            "       s.deployment, r.runs"
            "  FROM awa.cron_jobs c LEFT JOIN awa_beat.schedules s USING (name)"
            "  LEFT JOIN awa_beat.schedule_runs r USING (name)")
        names = [d.name for d in cur.description or ()]
        return {row[0]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}


@dataclass(frozen=True)
class MatrixDB:
    """A database holding the catalogue: its URL, layout and the names stored."""

    url: str
    layout: str
    names: tuple[str, ...]

    def schedules(self) -> Schedules:
        """The Python API on it, as :data:`DEPLOYMENT` (close it, or use ``with``)."""
        return Schedules(self.url, settings=SETTINGS)

    def entries(self) -> list[Entry]:
        return [CATALOGUE[n] for n in self.names]


#: How the dashboard's add form and the Django admin's runtime form say each type: the
#: kind, the schedule, the time zone and the bound fields.
FORMS: dict[str, tuple[str, str, str, dict[str, str]]] = {
    "cron-zone": ("cron", "30 7 * * *", "Europe/Paris", {}),
    "grid-interval": ("every", "600", "", {}),
    "offgrid-interval": ("every", "7", "", {}),
    "solar": ("solar", "sunrise:48.8566:2.3522", "", {}),
    "at": ("at", "2031-01-01T09:00:00+00:00", "", {}),
    "rrule": ("cron", "@rrule DTSTART=20260105T090000;FREQ=WEEKLY;BYDAY=MO,WE",
              "Europe/Berlin", {}),
    "bound-start": ("cron", "0 * * * *", "", {"start_time": "2030-06-01T00:00:00Z"}),
    "bound-end": ("cron", "0 * * * *", "", {"end_time": "2035-01-01T00:00:00Z"}),
    "bound-max-runs": ("cron", "15 * * * *", "", {"max_runs": "3"}),
    "one-off": ("cron", "45 4 * * *", "", {"one_off": "yes"}),
    "paused": ("cron", "0 3 * * *", "", {}),
}
