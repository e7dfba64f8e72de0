"""What a stored row tells an operator: its last and next fire, whether it can fire
again, its fires to come, and the ``beat_schedule`` entry that would register it as it is.

These read a :class:`~awa_beat._db.records.ScheduleRow` with the pure schedule code and
never the database, so the command line, the dashboard and the Django admin (which builds
rows from its own model) all read a row the same way.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from .._db.records import ScheduleRow
from .._schedules.cron import load_timezone
from .._schedules.describe import offset_text
from .._schedules.explain import Explanation, FoundJob, FoundOccurrence, ScheduleState, explain
from .._schedules.fire_times import (
    POLICIES,
    calendar_for,
    can_fire_from,
    every_seconds,
    next_fire_after,
)
from .._schedules.markers import instant_text, is_marker, split_bounds
from .._schedules.preview import Preview, preview
from .._schedules.runs import fired_at
from .._schedules.stored_entries import bound_options, split_schedule
from ..errors import AwaBeatError
from .records import ScheduleView, UpcomingFire


def last_fire(row: ScheduleRow) -> datetime | None:
    """The fire time of ``row``'s latest fire, or None when it has not fired (see
    :func:`awa_beat._schedules.runs.fired_at`)."""
    return fired_at(row.cron_expr, row.timezone, row.last_enqueued_at, row.created_at)


def next_fire(row: ScheduleRow, now: datetime) -> tuple[datetime | None, str | None]:
    """The row's next fire after ``now`` (None once retired: no run is left, whatever its
    calendar says), and why it cannot fire if it cannot."""
    try:
        calendar = calendar_for(row.cron_expr, row.timezone)
    except AwaBeatError as exc:
        return None, str(exc)
    if row.missed_fire_policy not in POLICIES:
        return None, f"unknown missed-fire policy {row.missed_fire_policy!r}"
    return (None if row.retired else next_fire_after(calendar, now)), None


def never_fires_again(row: ScheduleRow, now: datetime) -> str | None:
    """Why ``row`` can never fire again, or None. A fire still due (after its cursor, or
    for a row that never fired, in the minute before it was registered) counts as one
    left; a retired row is done, as meant; an invalid one is reported as invalid."""
    if row.retired:
        return None
    try:
        calendar = calendar_for(row.cron_expr, row.timezone)
    except AwaBeatError:
        return None
    cursor = row.last_enqueued_at
    start = cursor + timedelta(seconds=1) if cursor is not None else \
        row.created_at - timedelta(seconds=60)
    if can_fire_from(calendar, min(start, now) if cursor is None else start):
        return None
    bounds = split_bounds(row.cron_expr)[1] if is_marker(row.cron_expr) else None
    if bounds is not None and bounds.end is not None and bounds.end < now:
        return f"its end_time {instant_text(bounds.end)} is past"
    if row.cron_expr.startswith("@at "):
        return f"its one fire, at {row.cron_expr[4:].partition(' ')[0]}, is past"
    return f"its calendar has no fire time after {instant_text(max(start, now))}"


def upcoming_fires(row: ScheduleRow, now: datetime, count: int) -> list[UpcomingFire]:
    """The next ``count`` fires, each noted when the zone's UTC offset changed before it."""
    try:
        calendar = calendar_for(row.cron_expr, row.timezone)
        zone = load_timezone(row.timezone)
    except AwaBeatError:
        return []
    fires: list[UpcomingFire] = []
    t = now
    previous = now.astimezone(zone).utcoffset()
    while len(fires) < count:
        nxt = next_fire_after(calendar, t)
        if nxt is None:
            break
        offset = nxt.astimezone(zone).utcoffset()
        note = (f"DST: UTC offset {offset_text(previous)} -> {offset_text(offset)}"
                if offset != previous else "")
        fires.append(UpcomingFire(nxt, note))
        previous, t = offset, nxt
    return fires


def preview_of(row: ScheduleRow, now: datetime, *, runs_left: int | None = None,
               count: int | None = None, until: datetime | None = None) -> Preview:
    """``row``'s next fires after ``now`` (:func:`awa_beat._schedules.preview.preview`),
    no more than the ``runs_left`` it has, with notices that say what its state does to
    them: retired (none), paused (the fires are those it would have if resumed), an
    end_time that stops it."""
    if row.retired:
        runs_left = 0
    found = preview(row.cron_expr, row.timezone, now, count=count, until=until,
                    runs_left=runs_left, name=row.name, stored=True)
    notices: list[str] = []
    if row.retired:
        notices.append("retired: its last run fired, so it never fires again (the calendar "
                       "is not listed)")
    elif row.paused_at is not None:
        notices.append(f"paused by {row.paused_by or '?'} since {instant_text(row.paused_at)}:"
                       " nothing fires until it is resumed; these are the fires it would "
                       "have if resumed")
    bounds = split_bounds(row.cron_expr)[1] if is_marker(row.cron_expr) else None
    if bounds is not None and bounds.end is not None and not found.more \
            and not row.retired:
        notices.append(f"its end_time {instant_text(bounds.end)} ends it: no fire after")
    return replace(found, notices=(*notices, *found.notices))


def explain_of(row: ScheduleRow, at: datetime, now: datetime,
               records: list[dict[str, Any]], pause_note: str | None = None) -> Explanation:
    """What happened or will happen at ``at`` to ``row``
    (:func:`awa_beat._schedules.explain.explain`), from the records that the
    ``explain_records`` statement found."""
    jobs = tuple(FoundJob(
        kind=r["kind"], job_id=r["job_id"], fire_time=r["fire_time"], state=r["job_state"],
        outcome=r["outcome"], created_at=r["created_at"], run_at=r["run_at"],
        started_at=r["started_at"], finished_at=r["finished_at"], error=r["error"],
        task_id=r["task_id"], present=r["source"] == "job")
        for r in records if r["source"] in ("job", "backfill"))
    occurrences = tuple(FoundOccurrence(
        kind=r["kind"], fire_time=r["fire_time"], last_fire_time=r["last_fire_time"],
        count=r["count"], reason=r["reason"], recorded_at=r["recorded_at"])
        for r in records if r["source"] == "occurrence")
    state = ScheduleState(
        name=row.name, cron_expr=row.cron_expr, timezone=row.timezone,
        created_at=row.created_at, cursor=row.last_enqueued_at, paused_at=row.paused_at,
        paused_by=row.paused_by, pause_note=pause_note, retired=row.retired)
    return explain(state, at, now, jobs=jobs, occurrences=occurrences)


def beat_entry(row: ScheduleRow) -> dict[str, Any]:
    """The row as a Celery ``beat_schedule`` entry that would register it as it is: the
    bounds of its marker come back as ``options["awa_beat"]`` settings, so that a change
    of the schedule keeps them and a change of one of them (None: removed) is a change
    of that one alone."""
    call = row.args if isinstance(row.args, dict) else {}
    meta = dict(row.metadata or {})
    celery = meta.pop("celery", {}) or {}
    outcome_options = meta.pop("awa_beat", {}) or {}
    schedule, bounds = split_schedule(row.cron_expr)
    awa: dict[str, Any] = {"timezone": row.timezone, "missed_fire_policy": row.missed_fire_policy,
                           **outcome_options, **bound_options(bounds)}
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
    seconds = every_seconds(schedule)
    return {
        "task": row.kind,
        "schedule": seconds if seconds is not None else schedule,
        "args": call.get("args", []), "kwargs": call.get("kwargs", {}),
        "options": {**(celery.get("options") or {}), "awa_beat": awa},
    }




def view_of(row: ScheduleRow, now: datetime, orphan: bool = False) -> ScheduleView:
    """``row`` as an operator sees it at ``now``: its next fire, or why it has none."""
    fire, problem = next_fire(row, now)
    never = never_fires_again(row, now) if fire is None and problem is None else None
    return ScheduleView(row, fire, problem, orphan=orphan, never_fires=never)
