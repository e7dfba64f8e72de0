"""The ``awa-beat`` command line.

User mistakes (a bad URL, an unreachable database, an unknown name) end in a one-line
error and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import getpass
import json
import pprint
import re
import socket
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from functools import wraps
from typing import Any, TypeVar

import click

from . import __version__
from .config import DATABASE_URL_ENV, database_url, redact
from .cron import load_timezone
from .errors import AwaBeatError
from .fire_times import POLICIES, calendar_for, next_fire_after
from .records import ScheduleRow
from .store import Store

F = TypeVar("F", bound=Callable[..., Any])


def friendly_errors(func: F) -> F:
    """Print awa-beat errors as ``error: ...`` and exit 1 instead of a traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except AwaBeatError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


database_url_option = click.option(
    "--database-url",
    envvar=DATABASE_URL_ENV,
    show_envvar=True,
    help="PostgreSQL URL, e.g. postgresql://user:pass@host:5432/db.",
)


def open_store(url: str | None) -> Store:
    """The store for ``--database-url``/$AWA_BEAT_DATABASE_URL, or the Celery app's
    ``awa_beat_database_url`` under ``celery -A proj awa``; not yet opened (use ``with``)."""
    resolved = database_url(url) or _celery_app_database_url()
    if resolved is None:
        raise click.UsageError(f"no database: pass --database-url or set {DATABASE_URL_ENV}")
    return Store(resolved, max_size=1)


def _celery_app_database_url() -> str | None:
    ctx = click.get_current_context(silent=True)
    app = getattr(ctx.find_root().obj, "app", None) if ctx is not None else None
    if app is None:
        return None
    from .config import Settings

    return Settings.from_app(app.conf, app_name=app.main).database_url


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="awa-beat")
def main() -> None:
    """awa-beat: a PostgreSQL-backed, highly available Celery beat."""


@main.command()
@database_url_option
@friendly_errors
def migrate(database_url: str | None) -> None:
    """Create or upgrade awa-beat's tables (safe to run from many replicas at once)."""
    with open_store(database_url) as store:
        info = store.migrate()
    layout = f"Awa schema v{info.awa_version}" if info.awa_owned else "standalone awa schema"
    if info.applied:
        click.echo(f"migrated to awa-beat schema v{info.version} ({layout})")
    else:
        click.echo(f"already at awa-beat schema v{info.version} ({layout})")


# -- schedules ------------------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(timezone.utc).isoformat() if value else None


def _fmt(value: datetime | None, zone: str | None = None) -> str:
    if value is None:
        return "-"
    if zone:
        try:
            return value.astimezone(load_timezone(zone)).strftime("%Y-%m-%d %H:%M:%S %Z")
        except AwaBeatError:
            return "-"
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _next_fire(row: ScheduleRow, now: datetime) -> tuple[datetime | None, str | None]:
    """The next fire after ``now`` (or after the cursor when behind), and any problem."""
    try:
        calendar = calendar_for(row.cron_expr, row.timezone)
    except AwaBeatError as exc:
        return None, str(exc)
    if row.missed_fire_policy not in POLICIES:
        return None, f"unknown missed-fire policy {row.missed_fire_policy!r}"
    return next_fire_after(calendar, now), None


def _describe(row: ScheduleRow, now: datetime) -> dict[str, Any]:
    next_fire, problem = _next_fire(row, now)
    return {
        "name": row.name, "schedule": row.cron_expr, "timezone": row.timezone,
        "task": row.kind, "policy": row.missed_fire_policy,
        "next_fire": _iso(next_fire), "last_enqueued_at": _iso(row.last_enqueued_at),
        "paused_at": _iso(row.paused_at), "paused_by": row.paused_by,
        "deployment": row.deployment, "invalid": problem,
    }


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in rows]
    return "\n".join(lines)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


@main.command("list")
@database_url_option
@click.argument("pattern", required=False)
@json_option
@friendly_errors
def list_(database_url: str | None, pattern: str | None, as_json: bool) -> None:
    """Every schedule (PATTERN: a SQL LIKE pattern on the name, e.g. 'report-%')."""
    with open_store(database_url) as store:
        rows = store.schedules(pattern)
        orphans = set(_orphans(store) or ())
    now = datetime.now(timezone.utc)
    described = [{**_describe(row, now), "orphan": row.name in orphans} for row in rows]
    if as_json:
        click.echo(json.dumps(described, indent=2))
        return
    table = []
    for row, d in zip(rows, described, strict=True):
        next_fire = datetime.fromisoformat(d["next_fire"]) if d["next_fire"] else None
        paused = f"since {_fmt(row.paused_at)} by {row.paused_by or '?'}" if row.paused_at else ""
        owner = row.deployment or "(not awa-beat)"
        if d["orphan"]:
            owner += " (orphan: not in beat_schedule)"
        table.append([
            row.name, row.cron_expr, row.timezone, row.missed_fire_policy,
            "INVALID: " + d["invalid"] if d["invalid"] else _fmt(next_fire),
            _fmt(next_fire, row.timezone) if next_fire else "",
            _fmt(row.last_enqueued_at), paused, owner,
        ])
    click.echo(_table(["NAME", "SCHEDULE", "TZ", "POLICY", "NEXT FIRE (UTC)", "NEXT (LOCAL)",
                       "CURSOR (UTC)", "PAUSED", "DEPLOYMENT"], table))


@main.command()
@database_url_option
@click.argument("name")
@click.option("--by", default=None, help="Who paused it (shown by list).")
@friendly_errors
def pause(database_url: str | None, name: str, by: str | None) -> None:
    """Stop NAME's automatic fires (survives redeploys; trigger still works)."""
    with open_store(database_url) as store:
        store.pause(name, by or _whoami())
    click.echo(f"paused {name}")


@main.command()
@database_url_option
@click.argument("name")
@friendly_errors
def resume(database_url: str | None, name: str) -> None:
    """Resume NAME; its missed-fire policy decides what is caught up."""
    with open_store(database_url) as store:
        store.resume(name)
    click.echo(f"resumed {name}")


@main.command()
@database_url_option
@click.argument("name")
@friendly_errors
def trigger(database_url: str | None, name: str) -> None:
    """Enqueue one job for NAME now, even while paused; the schedule is unchanged."""
    with open_store(database_url) as store:
        job_id = store.trigger(name)
    click.echo(f"triggered {name}: job {job_id}")


@main.command()
@database_url_option
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@friendly_errors
def remove(database_url: str | None, name: str, yes: bool) -> None:
    """Delete NAME's row (jobs it already fired stay)."""
    with open_store(database_url) as store:
        store.get(name)  # an unknown name is an error before any question
        if not yes:
            click.confirm(f"remove schedule {name!r}?", abort=True)
        store.remove(name)
    click.echo(f"removed {name}")


@main.command()
@database_url_option
@click.argument("name")
@click.option("-n", "count", default=10, show_default=True, help="How many fires and jobs.")
@json_option
@friendly_errors
def show(database_url: str | None, name: str, count: int, as_json: bool) -> None:
    """NAME's whole row, its next fire times (DST changes marked) and its last jobs."""
    with open_store(database_url) as store:
        row = store.get(name)
        jobs = store.jobs(name, count)
    now = datetime.now(timezone.utc)
    upcoming = _upcoming(row, now, count)
    if as_json:
        click.echo(json.dumps({
            **_describe(row, now), "kind": row.kind, "queue": row.queue, "args": row.args,
            "priority": row.priority, "max_attempts": row.max_attempts, "tags": row.tags,
            "metadata": row.metadata, "created_at": _iso(row.created_at),
            "updated_at": _iso(row.updated_at),
            "next_fires": [_iso(t) for t, _ in upcoming],
            "last_jobs": [_job_json(j) for j in jobs],
        }, indent=2, default=str))
        return
    described = _describe(row, now)
    for label, value in [
        ("name", row.name), ("schedule", row.cron_expr), ("time zone", row.timezone),
        ("task", row.kind), ("args", json.dumps(row.args)),
        ("options", json.dumps((row.metadata or {}).get("celery", {}).get("options", {}))),
        ("policy", row.missed_fire_policy), ("awa queue", row.queue),
        ("priority", str(row.priority)), ("max attempts", str(row.max_attempts)),
        ("cursor", f"{_fmt(row.last_enqueued_at)} UTC"),
        ("paused", f"since {_fmt(row.paused_at)} UTC by {row.paused_by or '?'}"
         if row.paused_at else "no"),
        ("deployment", row.deployment or "(not registered by awa-beat)"),
        ("created", f"{_fmt(row.created_at)} UTC"), ("updated", f"{_fmt(row.updated_at)} UTC"),
    ] + ([("INVALID", described["invalid"])] if described["invalid"] else []):
        click.echo(f"{label + ':':<14} {value}")
    click.echo("\nnext fires:")
    click.echo(_table(["UTC", "LOCAL", ""], [
        [_fmt(t), _fmt(t, row.timezone), note] for t, note in upcoming]) if upcoming
        else "  (none)")
    click.echo("\nlast jobs:")
    click.echo(_table(["JOB", "FIRE TIME (UTC)", "STATE", "TASK ID"], [
        [str(j["id"]), _fire_label(j), j["state"],
         (j["metadata"] or {}).get("celery_task_id", "-")] for j in jobs]) if jobs
        else "  (none)")


def _upcoming(row: ScheduleRow, now: datetime, count: int) -> list[tuple[datetime, str]]:
    """The next ``count`` fires, each noted when the zone's UTC offset changed before it."""
    try:
        calendar = calendar_for(row.cron_expr, row.timezone)
        zone = load_timezone(row.timezone)
    except AwaBeatError:
        return []
    fires: list[tuple[datetime, str]] = []
    t = now
    previous = now.astimezone(zone).utcoffset()
    while len(fires) < count:
        nxt = next_fire_after(calendar, t)
        if nxt is None:
            break
        offset = nxt.astimezone(zone).utcoffset()
        note = f"DST: UTC offset {_offset(previous)} -> {_offset(offset)}" \
            if offset != previous else ""
        fires.append((nxt, note))
        previous, t = offset, nxt
    return fires


def _offset(delta: Any) -> str:
    minutes = int(delta.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _fire_label(job: dict[str, Any]) -> str:
    meta = job["metadata"] or {}
    if meta.get("triggered_manually"):
        return f"(triggered {_fmt(job['created_at'])})"
    return str(meta.get("cron_fire_time", "-"))


def _job_json(job: dict[str, Any]) -> dict[str, Any]:
    meta = job["metadata"] or {}
    return {"job_id": job["id"], "schedule": meta.get("cron_name"),
            "fire_time": meta.get("cron_fire_time"),
            "triggered_manually": bool(meta.get("triggered_manually")),
            "state": job["state"], "task_id": meta.get("celery_task_id"),
            "created_at": _iso(job["created_at"])}


@main.command()
@database_url_option
@click.argument("name", required=False)
@click.option("-n", "count", default=20, show_default=True, help="How many fires.")
@json_option
@friendly_errors
def history(database_url: str | None, name: str | None, count: int, as_json: bool) -> None:
    """Recent fires (of NAME, or of every schedule): fire time, job, state, task id."""
    with open_store(database_url) as store:
        if name is not None:
            store.get(name)  # an unknown name is an error, not an empty history
            jobs = store.jobs(name, count)
        else:
            jobs = store.recent_jobs(count)
    if as_json:
        click.echo(json.dumps([_job_json(j) for j in jobs], indent=2))
        return
    click.echo(_table(["JOB", "SCHEDULE", "FIRE TIME (UTC)", "STATE", "TASK ID"], [
        [str(j["id"]), (j["metadata"] or {}).get("cron_name", ""), _fire_label(j), j["state"],
         (j["metadata"] or {}).get("celery_task_id", "-")] for j in jobs]))


@main.command()
@database_url_option
@click.option("--format", "fmt", type=click.Choice(["python", "json"]), default="python",
              show_default=True)
@click.argument("pattern", required=False)
@friendly_errors
def export(database_url: str | None, fmt: str, pattern: str | None) -> None:
    """The stored schedules as a beat_schedule Python module, or as JSON."""
    with open_store(database_url) as store:
        rows = store.schedules(pattern)
    schedule = {row.name: _entry_for(row) for row in rows}
    if fmt == "json":
        click.echo(json.dumps(schedule, indent=2))
        return
    click.echo('"""beat_schedule exported by awa-beat; schedules are Awa cron strings."""\n')
    click.echo(f"beat_schedule = {pprint.pformat(schedule, indent=4, sort_dicts=False)}")


def _entry_for(row: ScheduleRow) -> dict[str, Any]:
    call = row.args if isinstance(row.args, dict) else {}
    meta = dict(row.metadata or {})
    celery = meta.pop("celery", {}) or {}
    awa: dict[str, Any] = {"timezone": row.timezone, "missed_fire_policy": row.missed_fire_policy}
    if row.queue != "default":
        awa["queue"] = row.queue
    if row.priority != 2:
        awa["priority"] = row.priority
    if row.max_attempts != 25:
        awa["max_attempts"] = row.max_attempts
    if row.tags:
        awa["tags"] = row.tags
    if meta:
        awa["metadata"] = meta
    if celery.get("dispatch"):
        awa["dispatch"] = celery["dispatch"]
    match = re.fullmatch(r"@every (\d+)s", row.cron_expr)
    return {
        "task": row.kind,
        "schedule": int(match[1]) if match else row.cron_expr,
        "args": call.get("args", []), "kwargs": call.get("kwargs", {}),
        "options": {**(celery.get("options") or {}), "awa_beat": awa},
    }


@main.command()
@database_url_option
@json_option
@friendly_errors
def status(database_url: str | None, as_json: bool) -> None:
    """The current leader, the standbys seen recently, the last pass lag, the backlog."""
    with open_store(database_url) as store:
        beats = store.beats()
        backlog = store.count_all_pending_celery_jobs()
    leaders = [b for b in beats if b["role"] == "leader" and b["holds_lock"]]
    standbys = [b for b in beats if b["role"] == "standby"]
    if as_json:
        click.echo(json.dumps({
            "leaders": [_beat_json(b) for b in leaders],
            "standbys": [_beat_json(b) for b in standbys],
            "unpublished_backlog": backlog}, indent=2))
        return
    if not leaders:
        click.echo("leader: NONE (no beat holds the lock; is any running?)")
    for b in leaders:
        lag = f"{b['last_lag_ms']:.0f} ms" if b["last_lag_ms"] is not None else "-"
        click.echo(f"leader: {b['host']} pid {b['pid']} (deployment {b['deployment']}, "
                   f"lock key {b['lock_key']}), leading since {_fmt(b['leader_since'])} UTC, "
                   f"last pass lag {lag}")
    click.echo(f"standbys seen in the last minute: {len(standbys)}")
    for b in standbys:
        click.echo(f"  {b['host']} pid {b['pid']} (deployment {b['deployment']}), "
                   f"seen {b['age'].total_seconds():.0f} s ago")
    click.echo(f"unpublished Celery jobs (bridge backlog): {backlog}")


def _beat_json(b: dict[str, Any]) -> dict[str, Any]:
    return {"host": b["host"], "pid": b["pid"], "deployment": b["deployment"],
            "lock_key": b["lock_key"], "since": _iso(b["leader_since"]),
            "started_at": _iso(b["started_at"]), "seen_at": _iso(b["seen_at"]),
            "last_pass_lag_ms": b["last_lag_ms"]}


@main.command()
@database_url_option
@friendly_errors
def doctor(database_url: str | None) -> None:
    """Check the set-up; print the fix for each problem and exit 1 if there is one."""
    problems = 0

    def report(ok: bool, what: str, fix: str = "") -> None:
        nonlocal problems
        click.echo(f"[{'ok' if ok else 'FAIL'}] {what}" + ("" if ok else f"\n       fix: {fix}"))
        problems += not ok

    store = open_store(database_url)
    try:
        store.open()
    except AwaBeatError as exc:
        report(False, f"database reachable: {exc}",
               "check the URL, that PostgreSQL runs and accepts connections from here")
        sys.exit(1)
    with store:
        report(True, f"database reachable ({redact(store.conninfo)})")
        try:
            info = store.check_schema()
            layout = (f"Awa schema v{info.awa_version}" if info.awa_owned
                      else "standalone awa schema")
            report(True, f"awa-beat schema v{info.version}, {layout}")
        except AwaBeatError as exc:
            report(False, f"schema: {exc}", "run `awa-beat migrate` (and Awa's own migrations)")
        report(*_session_locks_hold(store.conninfo))
        skew = (datetime.now(timezone.utc) - store.database_clock()).total_seconds()
        report(abs(skew) < 1.0, f"clock skew between this host and the database: {skew:+.3f} s",
               "synchronise the clocks (NTP); fires use this host's clock, as Awa's do")
        report(*_timezone_data())
        try:
            rows = store.schedules()
        except AwaBeatError:
            rows = []
        now = datetime.now(timezone.utc)
        invalid = [(r.name, p) for r in rows for p in [_next_fire(r, now)[1]] if p]
        report(not invalid, f"{len(rows)} schedule(s), {len(invalid)} invalid"
               + "".join(f"\n       - {n}: {p}" for n, p in invalid),
               "fix the expression or time zone in beat_schedule, or `awa-beat remove NAME`")
        orphans = _orphans(store)
        if orphans is not None:
            report(not orphans, f"{len(orphans)} stored schedule(s) no longer in beat_schedule"
                   + "".join(f"\n       - {n}" for n in orphans),
                   "`awa-beat remove NAME` for each, if no other deployment needs it")
    sys.exit(1 if problems else 0)


def _session_locks_hold(conninfo: str) -> tuple[bool, str, str]:
    """Whether a session advisory lock holds here (no PgBouncer transaction pooling),
    checked exactly as a beat checks it when it wins the election."""
    from .leader import Leadership, SessionLockUnsupported

    fix = ("connect to PostgreSQL directly or through session pooling, not PgBouncer in "
           "transaction or statement pooling")
    probe = Leadership(conninfo, int.from_bytes(b"AWA_DOCT", "big"))
    try:
        if not probe.try_acquire():
            return False, "session advisory locks: could not take a test lock", fix
    except SessionLockUnsupported:
        return False, "session advisory locks do NOT hold on this connection", fix
    finally:
        probe.resign()
    return True, "session advisory locks hold across transactions", fix


def _timezone_data() -> tuple[bool, str, str]:
    import zoneinfo

    try:
        zones = zoneinfo.available_timezones()
        load_timezone("America/New_York")
    except Exception as exc:  # any failure means the data is unusable
        return False, f"time-zone data: {exc}", "`pip install tzdata`"
    try:
        from importlib.metadata import version

        source = f"tzdata {version('tzdata')}"
    except Exception:  # the system zoneinfo is fine too
        source = "system zoneinfo"
    return bool(zones), f"time-zone data present ({len(zones)} zones, {source})", \
        "`pip install tzdata`"


def _orphans(store: Store) -> list[str] | None:
    """Rows the Celery app (``celery -A proj awa doctor``) registered but no longer has."""
    ctx = click.get_current_context(silent=True)
    app = getattr(ctx.find_root().obj, "app", None) if ctx is not None else None
    if app is None:
        return None
    from .celery_scheduler import configured_entries
    from .config import Settings

    settings = Settings.from_app(app.conf, app_name=app.main)
    configured = set(configured_entries(app, settings))
    return [n for n in store.owned_names(settings.deployment) if n not in configured]


# -- import ---------------------------------------------------------------------------------


@main.command("import")
@database_url_option
@click.option("-A", "--app", "app_spec", metavar="APP",
              help="The Celery app, as for `celery -A`. Alone: import its beat_schedule. With "
                   "a --from-* source: its settings (time zone, dispatch, deployment, "
                   "database) and modules (to unpickle --from-file).")
@click.option("--from-django", metavar="URL",
              help="Import django-celery-beat's tables from this PostgreSQL database.")
@click.option("--from-redbeat", metavar="URL",
              help="Import RedBeat's entries from this Redis, e.g. redis://host:6379/0.")
@click.option("--key-prefix", default="redbeat:", show_default=True,
              help="RedBeat's key prefix (redbeat_key_prefix).")
@click.option("--from-file", metavar="PATH",
              help="Import a celerybeat-schedule file (Celery's PersistentScheduler).")
@click.option("--timezone", "zone", metavar="ZONE",
              help="Time zone of crontabs that name none: the old beat's app time zone "
                   "(default: the app's; for --from-file, the one recorded in the file).")
@click.option("--dispatch", type=click.Choice(["celery", "awa"]), default=None,
              help="Who runs the fired jobs (default: awa_beat_dispatch, else awa).")
@click.option("--deployment", default=None,
              help="Deployment the rows belong to (default: as beat's: awa_beat_deployment, "
                   "else the app's name, else 'default').")
@click.option("--dry-run", is_flag=True, help="Print what would change and write nothing.")
@json_option
@friendly_errors
def import_(database_url: str | None, app_spec: str | None, from_django: str | None,
            from_redbeat: str | None, key_prefix: str, from_file: str | None,
            zone: str | None, dispatch: str | None, deployment: str | None, dry_run: bool,
            as_json: bool) -> None:
    """Move an existing Celery schedule into awa-beat: no double and no missed run.

    From the app's beat_schedule (-A alone), django-celery-beat's tables, RedBeat, or a
    celerybeat-schedule file. Each entry's last run becomes its cursor, so its first fire
    is the next one after that run; a stored cursor only ever moves forward. Entries the
    source had disabled are imported paused (existing rows keep their pause). What cannot
    be carried over exactly is listed with the reason, and nothing else is written for it.
    """
    from .importers.celery_app import load_app
    from .importers.run import ImportOptions, run_import

    chosen = [name for name, value in (("--from-django", from_django),
                                       ("--from-redbeat", from_redbeat),
                                       ("--from-file", from_file)) if value]
    if len(chosen) > 1:
        raise click.UsageError(f"give one source, not {' and '.join(chosen)}")
    app = load_app(app_spec) if app_spec else _context_app()
    if not chosen and app is None:
        raise click.UsageError("nothing to import: give -A APP, --from-django URL, "
                               "--from-redbeat URL or --from-file PATH")
    done = run_import(ImportOptions(
        app=app, from_django=from_django, from_redbeat=from_redbeat, key_prefix=key_prefix,
        from_file=from_file, timezone=zone, dispatch=dispatch, deployment=deployment,
        database_url=database_url, dry_run=dry_run), open_store)
    plan, written = done.plan, done.written
    if as_json:
        click.echo(json.dumps(done.to_json(), indent=2))
        return
    _print_plan(plan, done.source, done.deployment)
    counts = (f"{len(plan.new)} new, {len(plan.changed)} changed, {len(plan.cursor_moves)} "
              f"cursor(s) moved forward, {len(plan.unchanged)} unchanged, "
              f"{len(plan.not_carried)} not carried over")
    if dry_run:
        click.echo(f"\ndry run, nothing written: {counts}")
    else:
        assert written is not None
        click.echo(f"\nimported {done.imported} schedule(s): {written['inserted']} new, "
                   f"{written['changed']} changed, {written['cursors_moved']} cursor(s) moved "
                   f"forward, {written['unchanged']} unchanged; {len(plan.not_carried)} not "
                   "carried over")


def _context_app() -> Any:
    """The Celery app of ``celery -A proj awa import``, if run that way."""
    ctx = click.get_current_context(silent=True)
    return getattr(ctx.find_root().obj, "app", None) if ctx is not None else None


def _print_plan(plan: Any, source: str, deployment: str) -> None:
    click.echo(f"source: {source}\ndeployment: {deployment}")
    if plan.new:
        click.echo(f"\nnew ({len(plan.new)}):")
        click.echo(_indent(_table(["NAME", "SCHEDULE", "TZ", "TASK", "CURSOR (UTC)", "PAUSED"], [
            [i.name, i.spec.cron_expr, i.spec.timezone, i.spec.kind,
             _fmt(i.cursor) if i.cursor else "now (no last run known)", i.paused_by or ""]
            for i in plan.new])))
    if plan.changed:
        click.echo(f"\nchanged ({len(plan.changed)}):")
        for name, fields in plan.changed:
            click.echo(f"  {name}")
            for key, (old, new) in fields.items():
                click.echo(f"    {key}: {_shown(old)} -> {_shown(new)}")
    if plan.cursor_moves:
        click.echo(f"\ncursor moves forward ({len(plan.cursor_moves)}):")
        click.echo(_indent(_table(["NAME", "STORED (UTC)", "IMPORTED LAST RUN (UTC)"], [
            [name, _fmt(old), _fmt(new)] for name, old, new in plan.cursor_moves])))
    if plan.cursor_kept:
        click.echo(f"\ncursor kept, the source's last run is older ({len(plan.cursor_kept)}):")
        click.echo(_indent(_table(["NAME", "STORED (UTC)", "IMPORTED LAST RUN (UTC)"], [
            [name, _fmt(old), _fmt(new)] for name, old, new in plan.cursor_kept])))
    if plan.unchanged:
        click.echo(f"\nunchanged ({len(plan.unchanged)}): {', '.join(plan.unchanged)}")
    if plan.not_carried:
        click.echo(f"\nNOT carried over ({len(plan.not_carried)}):")
        for item in plan.not_carried:
            click.echo(f"  {item.name}: {item.reason}")
    if plan.notes:
        click.echo("\nnotes:")
        for note in plan.notes:
            click.echo(f"  {note}")


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def _shown(value: Any) -> str:
    from .importers.planning import ABSENT

    return "(absent)" if value is ABSENT else json.dumps(value, default=str)


def _whoami() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()}"


if __name__ == "__main__":  # pragma: no cover
    main()
