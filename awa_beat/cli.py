"""The ``awa-beat`` command line.

User mistakes (a bad URL, an unreachable database, an unknown name) end in a one-line
error and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import getpass
import json
import socket
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from functools import wraps
from typing import Any, TypeVar

import click

from . import __version__
from .config import DATABASE_URL_ENV, database_url
from .cron import load_timezone
from .errors import AwaBeatError
from .fire_times import calendar_for, next_fire_after
from .store import ScheduleRow, Store

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
    """The store for ``--database-url``/$AWA_BEAT_DATABASE_URL, not yet opened (use ``with``)."""
    resolved = database_url(url)
    if resolved is None:
        raise click.UsageError(f"no database: pass --database-url or set {DATABASE_URL_ENV}")
    return Store(resolved, max_size=1)


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
    if row.missed_fire_policy not in ("coalesce", "catch_up"):
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
    now = datetime.now(timezone.utc)
    described = [_describe(row, now) for row in rows]
    if as_json:
        click.echo(json.dumps(described, indent=2))
        return
    table = []
    for row, d in zip(rows, described, strict=True):
        next_fire, _ = _next_fire(row, now)
        paused = f"since {_fmt(row.paused_at)} by {row.paused_by or '?'}" if row.paused_at else ""
        table.append([
            row.name, row.cron_expr, row.timezone, row.missed_fire_policy,
            "INVALID: " + d["invalid"] if d["invalid"] else _fmt(next_fire),
            _fmt(next_fire, row.timezone) if next_fire else "",
            _fmt(row.last_enqueued_at), paused, row.deployment or "(not awa-beat)",
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


def _whoami() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()}"


if __name__ == "__main__":  # pragma: no cover
    main()
