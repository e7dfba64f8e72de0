"""``awa-beat add|edit``: schedules written at run time, as the Python API writes them.

The options build a ``beat_schedule`` entry (:func:`entry_from_options`), which the
operations layer validates exactly as beat validates its configuration, with the app's
settings under ``celery -A proj awa``. A mistake writes nothing and ends in an error
message and a non-zero exit code.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from datetime import timedelta, timezone
from typing import Any, TypeVar

import click

from ..calendars import at
from ..cron import load_timezone
from ..errors import ScheduleError
from ..fire_times import parse_iso
from ..spec import MAX_INTERVAL_SECONDS
from .context import database_url_option, friendly_errors, json_option, operations
from .format import fmt, schedule_json

F = TypeVar("F", bound=Callable[..., Any])

# ASCII digits only: str.isdigit() and \d also take "²" and other scripts' digits.
_EVERY = re.compile(r"([0-9]+)\s*([smhd])", re.ASCII)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_every(text: str) -> timedelta:
    """``30s``, ``5m``, ``1h30m``, ``2d`` or a plain number of seconds."""
    value = text.strip().lower()
    if re.fullmatch(r"[0-9]+", value, re.ASCII):
        seconds = int(value)
    else:
        parts = _EVERY.findall(value)
        if not parts or _EVERY.sub("", value).strip():
            raise ScheduleError(f"--every {text!r}: give an interval such as 30s, 5m, 1h30m "
                                "or 2d")
        seconds = sum(int(n) * _UNITS[u] for n, u in parts)
    if seconds > MAX_INTERVAL_SECONDS:
        raise ScheduleError(f"--every {text!r}: at most {MAX_INTERVAL_SECONDS // 86400} days "
                            "(about ten years)")
    return timedelta(seconds=seconds)


def parse_at(text: str, zone: str | None = None) -> at:
    """An ISO 8601 instant (``2026-12-24T09:00+01:00``); one without a UTC offset is read
    in ``zone`` (``--tz``), and refused without one."""
    try:
        instant = parse_iso(text.strip())
    except ValueError:
        raise ScheduleError(f"--at {text!r}: give an ISO 8601 instant, e.g. "
                            "2026-12-24T09:00+01:00") from None
    if instant.tzinfo is None:
        if zone is None:
            raise ScheduleError(f"--at {text!r} has no UTC offset; add one (e.g. +01:00) "
                                "or give --tz")
        instant = instant.replace(tzinfo=load_timezone(zone))
    try:
        instant.astimezone(timezone.utc)
    except OverflowError:
        raise ScheduleError(f"--at {text!r} is out of range: give an instant from 1970 to "
                            "9999") from None
    return at(instant)


def parse_solar(text: str) -> Any:
    """``EVENT:LAT:LON`` (``sunset:48.85:2.35``) as Celery's ``solar`` schedule."""
    from celery.schedules import solar

    parts = text.split(":")
    try:
        if len(parts) != 3:
            raise ValueError("three parts separated by ':'")
        return solar(parts[0], float(parts[1]), float(parts[2]))
    except ValueError as exc:
        raise ScheduleError(f"--solar {text!r}: give EVENT:LAT:LON, e.g. sunset:48.85:2.35 "
                            f"({exc})") from None


def _json_value(option: str, text: str | None, kind: type) -> Any:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ScheduleError(f"{option}: not valid JSON ({exc})") from None
    except RecursionError:
        raise ScheduleError(f"{option}: nested too deep") from None
    if not isinstance(value, kind):
        raise ScheduleError(f"{option}: must be a JSON {'list' if kind is list else 'object'}")
    return value


def entry_from_options(*, task: str | None = None, cron: str | None = None,
                       every: str | None = None, at_: str | None = None,
                       solar: str | None = None, args: str | None = None,
                       kwargs: str | None = None, queue: str | None = None,
                       tz: str | None = None, policy: str | None = None,
                       dispatch: str | None = None, priority: int | None = None,
                       max_attempts: int | None = None, tags: tuple[str, ...] = (),
                       option: tuple[str, ...] = ()) -> dict[str, Any]:
    """The parts of a beat_schedule entry the options give, and only those (``edit``
    changes exactly these). ``--queue`` is both Celery's ``queue`` option and Awa's queue,
    so the task runs on that queue whichever worker runs it."""
    given = [flag for flag, value in (("--cron", cron), ("--every", every), ("--at", at_),
                                      ("--solar", solar)) if value is not None]
    if len(given) > 1:
        raise click.UsageError(f"give one schedule, not {' and '.join(given)}")
    entry: dict[str, Any] = {}
    if task is not None:
        entry["task"] = task
    if cron is not None:
        entry["schedule"] = cron
    elif every is not None:
        entry["schedule"] = parse_every(every)
    elif at_ is not None:
        entry["schedule"] = parse_at(at_, tz)
    elif solar is not None:
        entry["schedule"] = parse_solar(solar)
    if args is not None:
        entry["args"] = _json_value("--args", args, list)
    if kwargs is not None:
        entry["kwargs"] = _json_value("--kwargs", kwargs, dict)
    options: dict[str, Any] = {}
    for item in option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ScheduleError(f"--option {item!r}: give KEY=JSON, e.g. expires=3600")
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value  # a bare word: a string
        except RecursionError:
            raise ScheduleError(f"--option {key}: nested too deep") from None
    awa: dict[str, Any] = {}
    if queue is not None:
        options["queue"] = awa["queue"] = queue
    for key, setting in (("timezone", tz), ("missed_fire_policy", policy),
                         ("dispatch", dispatch), ("priority", priority),
                         ("max_attempts", max_attempts)):
        if setting is not None:
            awa[key] = setting
    if tags:
        awa["tags"] = list(tags)
    if awa:
        options["awa_beat"] = awa
    if options:
        entry["options"] = options
    return entry


def entry_options(func: F) -> F:
    """The options shared by add and edit."""
    for decorator in reversed([
        click.option("--task", help="The task's name."),
        click.option("--cron", metavar="EXPR",
                     help="An Awa cron expression: 5 fields, or 6 with seconds first."),
        click.option("--every", metavar="INTERVAL", help="An interval: 30s, 5m, 1h30m, 2d."),
        click.option("--at", "at_", metavar="INSTANT",
                     help="Fire once, at an ISO 8601 instant: 2026-12-24T09:00+01:00."),
        click.option("--solar", metavar="EVENT:LAT:LON",
                     help="A solar event at a place: sunset:48.85:2.35."),
        click.option("--args", metavar="JSON", help="Positional arguments, a JSON list."),
        click.option("--kwargs", metavar="JSON", help="Keyword arguments, a JSON object."),
        click.option("--queue", help="The queue the task runs on."),
        click.option("--tz", metavar="ZONE",
                     help="IANA time zone of the calendar (default: the app's)."),
        click.option("--policy", type=click.Choice(["coalesce", "catch_up"]),
                     help="What a missed fire does (default: coalesce)."),
        click.option("--dispatch", type=click.Choice(["celery", "awa"]),
                     help="Who runs the job (default: the app's awa_beat_dispatch)."),
        click.option("--priority", type=click.IntRange(1, 4), help="Awa priority, 1-4."),
        click.option("--max-attempts", type=click.IntRange(1, 1000)),
        click.option("--tag", "tags", multiple=True, help="An Awa tag (repeatable)."),
        click.option("--option", multiple=True, metavar="KEY=JSON",
                     help="An apply_async option, e.g. expires=3600 (repeatable)."),
        click.option("--deployment",
                     help="Whose beat publishes jobs dispatched to Celery (default: the "
                          "app's awa_beat_deployment)."),
        click.option("--force", is_flag=True,
                     help="Take over a schedule that a beat_schedule owns."),
        database_url_option,
        json_option,
    ]):
        func = decorator(func)
    return func


def _entry(params: dict[str, Any]) -> dict[str, Any]:
    keys = ("task", "cron", "every", "at_", "solar", "args", "kwargs", "queue", "tz",
            "policy", "dispatch", "priority", "max_attempts", "tags", "option")
    return entry_from_options(**{k: params[k] for k in keys})


def _report(verb: str, name: str, database_url: str | None, as_json: bool) -> None:
    with operations(database_url) as ops:
        view = ops.get(name)
    if as_json:
        click.echo(json.dumps(schedule_json(view), indent=2))
        return
    row = view.row
    nxt = ("INVALID: " + view.problem if view.problem
           else f"next fire {fmt(view.next_fire)} UTC" if view.next_fire else "no further fire")
    click.echo(f"{verb} {name}: {row.cron_expr} ({row.timezone}), {nxt}")


@click.command()
@click.argument("name")
@entry_options
@click.option("--replace", is_flag=True, help="Overwrite a schedule of that name.")
@friendly_errors
def add(name: str, database_url: str | None, as_json: bool, replace: bool, force: bool,
        deployment: str | None, **params: Any) -> None:
    """Add schedule NAME at run time (beat fires it within a second, no restart).

    \b
    awa-beat add report --task reports.build --cron '30 7 * * *' --tz Europe/Paris
    awa-beat add ping --task health.ping --every 30s --kwargs '{"deep": true}'
    """
    entry = _entry(params)
    if "task" not in entry:
        raise click.UsageError("add needs --task")
    if "schedule" not in entry:
        raise click.UsageError("add needs a schedule: --cron, --every, --at or --solar")
    with operations(database_url) as ops:
        if deployment:
            ops.settings = dataclasses.replace(ops.settings, deployment=deployment)
        ops.add({name: entry}, replace=replace, force=force)
    _report("replaced" if replace else "added", name, database_url, as_json)


@click.command()
@click.argument("name")
@entry_options
@friendly_errors
def edit(name: str, database_url: str | None, as_json: bool, force: bool,
         deployment: str | None, **params: Any) -> None:
    """Change only the given parts of schedule NAME (the rest stays).

    \b
    awa-beat edit report --cron '0 8 * * *'
    awa-beat edit report --tz Asia/Tokyo --kwargs '{"full": true}'
    """
    changes = _entry(params)
    if not changes and not deployment:
        raise click.UsageError("nothing to change; give at least one option")
    with operations(database_url) as ops:
        ops.update(name, changes, force=force, deployment=deployment)
    _report("changed", name, database_url, as_json)
