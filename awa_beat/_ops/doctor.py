"""Doctor: the checks of a database and of this host that ``awa-beat doctor`` runs.

Each check is a :class:`~awa_beat._ops.records.Check`: what was checked, whether it
passed, and how to fix it when it did not. :func:`diagnose` first finds out whether the
database can be reached at all, then runs :func:`checks` on it; the checks read through
the operations layer, so they see exactly what ``awa-beat list`` and ``status`` show.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._db.conninfo import redact
from .._db.lock import Leadership, skew_words
from .._schedules.cron import load_timezone
from ..errors import AwaBeatError, SchemaError, SessionLockUnsupported, UnknownSchema
from .operations import Operations
from .records import Check
from .rows import view_of


def checks(ops: Operations) -> Iterator[Check]:
    """Doctor's checks of ``ops``' database (which answers) and of this host, one at a
    time."""
    store = ops.store
    yield Check(True, f"database reachable ({redact(store.conninfo)})")
    try:
        info = store.check_schema()
        layout = (f"Awa schema v{info.awa_version}" if info.awa_owned
                  else "standalone awa schema")
        yield Check(True, f"awa-beat schema v{info.version}, {layout}")
    except AwaBeatError as exc:
        yield Check(False, f"schema: {exc}",
                    "run `awa-beat migrate` (and Awa's own migrations)")
    yield session_locks_hold(store.conninfo)
    yield from _clock_checks(ops)
    yield timezone_data()
    try:
        rows = store.schedules.list_all()
    except AwaBeatError:
        rows = []
    now = ops.clock()
    views = [view_of(r, now) for r in rows]
    invalid = [f"{v.name}: {v.problem}" for v in views if v.problem]
    yield Check(not invalid, f"{len(rows)} schedule(s), {len(invalid)} invalid",
                "fix the expression or time zone in beat_schedule, or "
                "`awa-beat remove NAME`", tuple(invalid))
    spent = [f"{v.name}: {v.never_fires}" for v in views if v.never_fires]
    yield Check(not spent, f"{len(spent)} schedule(s) that can never fire again",
                "give each a calendar with fires to come (beat_schedule, `awa-beat edit "
                "NAME`), or `awa-beat remove NAME`", tuple(spent))
    try:
        overdue = ops.overdue()
    except AwaBeatError as exc:
        yield Check(False, f"overdue schedules: {exc}", "run `awa-beat migrate`")
    else:
        yield Check(not overdue, f"{len(overdue)} overdue schedule(s)",
                    "see `awa-beat history NAME`: is beat running, do the tasks fail?",
                    tuple(f"{o.name}: {'; '.join(o.reasons)}" for o in overdue))
    yield from _backlog_checks(ops)
    orphans = ops.orphans()
    if orphans is not None:
        yield Check(not orphans,
                    f"{len(orphans)} stored schedule(s) no longer in beat_schedule",
                    "`awa-beat remove NAME` for each, if no other deployment needs it",
                    tuple(orphans))


def _clock_checks(ops: Operations) -> Iterator[Check]:
    """This host's clock and every beat's, against the database's: a beat beyond the
    tolerance does not lead (and fails /readyz)."""
    tolerance = ops.settings.clock_tolerance
    skew = ops.store.clock_skew()
    fix = (f"synchronise the clocks (NTP); a beat whose clock is more than "
           f"awa_beat_clock_tolerance ({tolerance:g} s) off does not lead")
    yield Check(abs(skew) <= tolerance, f"this host's clock: {skew_words(skew)}", fix)
    try:
        beats = ops.cluster.beats()
    except AwaBeatError:
        return
    measured = [(b, b.clock_skew_ms / 1000) for b in beats if b.clock_skew_ms is not None]
    off = [f"{b.host} pid {b.pid}: {skew_words(s)}" for b, s in measured
           if abs(s) > tolerance]
    yield Check(not off, f"{len(measured)} beat(s) measured their clock, {len(off)} "
                f"beyond {tolerance:g} s (those cannot lead)", fix, tuple(off))


def _backlog_checks(ops: Operations) -> Iterator[Check]:
    """Jobs that nothing publishes or runs: a deployment's Celery jobs with no beat of it
    seen, and jobs for Awa workers where Awa is not installed."""
    try:
        cluster = ops.cluster.status()
    except AwaBeatError as exc:
        yield Check(False, f"outbox backlog: {exc}", "run `awa-beat migrate`")
        return
    per = ", ".join(f"{b.deployment or '(none)'}: {b.jobs}" for b in cluster.backlogs)
    yield Check(not cluster.unpublished,
                f"{cluster.backlog} unpublished Celery job(s)" + (f" ({per})" if per else ""),
                "start a beat of that deployment with awa_beat_dispatch = 'celery' (or "
                "move its schedules: `awa-beat edit NAME --deployment D`)",
                tuple(f"deployment {b.deployment or '(none)'}: {b.jobs} job(s) wait, "
                      "no beat of it publishes them" for b in cluster.unpublished))
    stranded = cluster.stranded
    total = sum(stranded.values())
    yield Check(not total, f"{total} job(s) left for Awa workers where Awa is not "
                "installed", "dispatch them to Celery: `awa-beat edit NAME --dispatch "
                "celery --deployment D` (or options.awa_beat.dispatch)",
                tuple(f"deployment {d or '(none)'}: {n} job(s) wait, nothing runs them"
                      for d, n in stranded.items()))


def diagnose(url: str, **kwargs: Any) -> Iterator[Check]:
    """Doctor's checks of the database at ``url`` (``kwargs`` as for
    :class:`Operations`): first whether it can be reached at all."""
    try:
        ops = Operations.open(url, **kwargs)
    except SchemaError as exc:  # it answered: what it holds is what awa-beat cannot use
        yield Check(True, f"database reachable ({redact(url)})")
        yield Check(False, f"schema: {exc}", "run `awa-beat migrate` (and Awa's own "
                    "migrations)" if not isinstance(exc, UnknownSchema) else
                    "keep an awa-beat release that supports this Awa schema")
        return
    except AwaBeatError as exc:
        yield Check(False, f"database reachable: {exc}",
                    "check the URL, that PostgreSQL runs and accepts connections from here")
        return
    with ops:
        yield from checks(ops)


def session_locks_hold(conninfo: str) -> Check:
    """Whether a session advisory lock holds here (no PgBouncer transaction pooling),
    checked exactly as a beat checks it when it wins the election."""
    fix = ("connect to PostgreSQL directly or through session pooling, not PgBouncer in "
           "transaction or statement pooling")
    probe = Leadership(conninfo, int.from_bytes(b"AWA_DOCT", "big"))
    try:
        if not probe.try_acquire():
            return Check(False, "session advisory locks: could not take a test lock", fix)
    except SessionLockUnsupported:
        return Check(False, "session advisory locks do NOT hold on this connection", fix)
    finally:
        probe.resign()
    return Check(True, "session advisory locks hold across transactions", fix)


def timezone_data() -> Check:
    """Whether the IANA time-zone data is there, and where it comes from."""
    import zoneinfo

    fix = "`pip install tzdata`"
    try:
        zones = zoneinfo.available_timezones()
        load_timezone("America/New_York")
    except Exception as exc:  # any failure means the data is unusable
        return Check(False, f"time-zone data: {exc}", fix)
    try:
        from importlib.metadata import version

        source = f"tzdata {version('tzdata')}"
    except Exception:  # the system zoneinfo is fine too
        source = "system zoneinfo"
    return Check(bool(zones), f"time-zone data present ({len(zones)} zones, {source})", fix)


