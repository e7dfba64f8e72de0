"""``awa-beat add|edit``: these commands write schedules at run time, as the Python API
writes them.

The options build a ``beat_schedule`` entry (with
:func:`awa_beat._schedules.entries.entry_from_options`, which the dashboard's forms share).
The operations layer validates the entry exactly as beat validates its configuration, and
under ``celery -A proj awa`` it uses the app's settings. A mistake writes nothing and ends
in an error message and a non-zero exit code.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from .._ops.records import Delivery
from .._schedules.entries import NONE_WORD, entry_from_options, parse_at, parse_every, parse_solar
from ..errors import DispatchUnserved
from .context import database_url_option, friendly_errors, json_option, operations
from .format import fmt, schedule_json

__all__ = ["add", "edit", "entry_from_options", "parse_at", "parse_every", "parse_solar"]

F = TypeVar("F", bound=Callable[..., Any])


def entry_options(func: F) -> F:
    """Add the options that add and edit share."""
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
        click.option("--start", metavar="INSTANT",
                     help="No fire before this ISO 8601 instant (without an offset: in "
                          f"--tz). On edit, '{NONE_WORD}' removes it."),
        click.option("--end", metavar="INSTANT",
                     help="No fire after this ISO 8601 instant (without an offset: in "
                          f"--tz). On edit, '{NONE_WORD}' removes it."),
        click.option("--max-runs", metavar="N",
                     help="At most N runs in all (counted in the database; the last one "
                          f"retires the schedule). On edit, '{NONE_WORD}' removes the "
                          "limit."),
        click.option("--one-off/--no-one-off", "one_off", default=None,
                     help="Run once, then retire (max runs 1); --no-one-off makes it "
                          "recurring again."),
        click.option("--overlap", type=click.Choice(["allow", "skip", "buffer_one",
                                                      NONE_WORD]),
                     help="skip: no fire while the last run has not finished; buffer_one: "
                          "hold one fire until it has (docs/operating-time.md). On edit, "
                          f"'{NONE_WORD}' is the default, allow."),
        click.option("--pause-after-failures", metavar="N",
                     help="Pause the schedule after N failed runs in a row (Celery "
                          "dispatch with outcome tracking). On edit, "
                          f"'{NONE_WORD}' removes it."),
        click.option("--deadline", metavar="SECONDS",
                     help="Overdue unless a fire succeeded within this long (900, 15m, "
                          f"1h). On edit, '{NONE_WORD}' removes it."),
        click.option("--catch-up-window", "catch_up_window", metavar="SECONDS",
                     help="After downtime or a pause, fire times older than this are "
                          "skipped and recorded, not fired (300, 5m, 1h). On edit, "
                          f"'{NONE_WORD}' removes it."),
        click.option("--jitter", metavar="SECONDS",
                     help="Each job runs up to this long after its fire time, by a delay "
                          "fixed per schedule and fire (60, 0.5, 1m). On edit, "
                          f"'{NONE_WORD}' removes it."),
        click.option("--option", multiple=True, metavar="KEY=JSON",
                     help="An apply_async option, e.g. expires=3600 (repeatable); "
                          "awa-beat's own settings with 'awa_beat={...}', merged with the "
                          "flags above. Unknown or ignored keys are refused."),
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


def _entry(name: str, params: dict[str, Any], *, edit: bool) -> dict[str, Any]:
    return entry_from_options(name, edit=edit, **params)


def _report(verb: str, name: str, database_url: str | None, as_json: bool,
            delivery: Delivery | None = None) -> None:
    with operations(database_url) as ops:
        view = ops.get(name)
    if as_json:
        shown = schedule_json(view)
        if delivery is not None:
            shown.update(dispatch=delivery.dispatch, runner=delivery.runner,
                         warning=delivery.warning)
        click.echo(json.dumps(shown, indent=2))
        return
    row = view.row
    nxt = ("INVALID: " + view.problem if view.problem
           else f"next fire {fmt(view.next_fire)} UTC" if view.next_fire else "no further fire")
    click.echo(f"{verb} {name}: {row.cron_expr} ({row.timezone}), {nxt}")
    if delivery is not None:
        click.echo(f"deployment {delivery.deployment}, dispatch {delivery.dispatch}: "
                   f"{delivery.runner}")


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
    awa-beat add trial --task t.trial --cron '0 9 * * *' --max-runs 3 --end 2030-01-01T00:00Z
    """
    entry = _entry(name, params, edit=False)
    if "task" not in entry:
        raise click.UsageError("add needs --task")
    if "schedule" not in entry:
        raise click.UsageError("add needs a schedule: --cron, --every, --at or --solar")
    with operations(database_url) as ops:
        if deployment:
            ops.settings = dataclasses.replace(ops.settings, deployment=deployment)
        (spec,) = ops.specs({name: entry})
        # Without an app, the defaults (deployment 'default', dispatch awa) are rarely what
        # the beats serve. The command therefore says what the row gets, and it refuses a
        # row that nothing would run.
        delivery = ops.cluster.delivery(ops.settings.deployment, spec.dispatch)
        _refuse_unserved(name, delivery)
        ops.add({name: entry}, replace=replace, force=force)
    _report("replaced" if replace else "added", name, database_url, as_json, delivery)
    _warn_unserved(name, delivery)


def _refuse_unserved(name: str, delivery: Delivery) -> None:
    if delivery.refusal is not None:
        raise DispatchUnserved(f"{name}: {delivery.refusal}; nothing was written")


def _warn_unserved(name: str, delivery: Delivery | None) -> None:
    if delivery is not None and delivery.warning is not None:
        click.echo(f"warning: {name}: {delivery.warning}", err=True)


@click.command()
@click.argument("name")
@entry_options
@friendly_errors
def edit(name: str, database_url: str | None, as_json: bool, force: bool,
         deployment: str | None, **params: Any) -> None:
    """Change only the given parts of schedule NAME (the rest stays).

    \b
    awa-beat edit report --cron '0 8 * * *'          (its bounds stay)
    awa-beat edit report --tz Asia/Tokyo --kwargs '{"full": true}'
    awa-beat edit trial --max-runs 5 --end none      (5 runs in all, no end)

    A retired schedule (its last allowed run fired) whose run limit is raised past the
    runs it already made, or removed, is resumed: it fires again from now on.
    """
    changes = _entry(name, params, edit=True)
    if not changes and not deployment:
        raise click.UsageError("nothing to change; give at least one option")
    dispatch = changes.get("options", {}).get("awa_beat", {}).get("dispatch")
    with operations(database_url) as ops:
        delivery = None
        if deployment or dispatch:
            # The edit changes who runs the schedule's jobs, so the row is vetted as add
            # vets a new row.
            delivery = ops.edit_delivery(name, deployment=deployment, dispatch=dispatch)
            _refuse_unserved(name, delivery)
        ops.update(name, changes, force=force, deployment=deployment)
    _report("changed", name, database_url, as_json, delivery)
    _warn_unserved(name, delivery)
