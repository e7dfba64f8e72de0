"""How the commands print: aligned tables, times in UTC or in a schedule's zone, and the
JSON shapes of ``--json``. Those shapes are stable, because scripts read them."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from .._ops.records import (
    BeatView,
    Check,
    DeploymentBacklog,
    JobRecord,
    Occurrence,
    Overdue,
    ScheduleBounds,
    ScheduleView,
)
from .._schedules.cron import load_timezone
from ..errors import AwaBeatError


def iso(value: datetime | None) -> str | None:
    """Return an instant in ISO 8601, in UTC. None stays None."""
    return value.astimezone(timezone.utc).isoformat() if value else None


def fmt(value: datetime | None, zone: str | None = None) -> str:
    """Return an instant as a table shows it: ``YYYY-MM-DD HH:MM:SS`` in UTC, or in
    ``zone`` with the zone's abbreviation. Return ``-`` when there is no instant or the
    zone is unknown."""
    if value is None:
        return "-"
    if zone:
        try:
            return value.astimezone(load_timezone(zone)).strftime("%Y-%m-%d %H:%M:%S %Z")
        except AwaBeatError:
            return "-"
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Return the rows as left-aligned columns two spaces apart, without trailing blanks."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in rows]
    return "\n".join(lines)


def schedule_json(view: ScheduleView) -> dict[str, Any]:
    """Return a schedule's JSON shape. ``next_fire`` is None while the schedule is paused,
    and ``next_fire_if_resumed`` says when it would be. ``last_fire`` is None when the
    schedule never fired, and ``last_enqueued_at`` holds the cursor."""
    row = view.row
    return {
        "name": row.name, "schedule": row.cron_expr, "timezone": row.timezone,
        "task": row.kind, "policy": row.missed_fire_policy,
        "next_fire": None if view.paused else iso(view.next_fire),
        "next_fire_if_resumed": iso(view.next_fire) if view.paused else None,
        "last_fire": iso(view.last_fire), "last_enqueued_at": iso(row.last_enqueued_at),
        "paused_at": iso(row.paused_at), "paused_by": row.paused_by,
        "retired": row.retired,
        "deployment": row.deployment, "owner": row.owner, "invalid": view.problem,
        **bounds_json(view.bounds),
        "never_fires": view.never_fires,
    }


def bounds_json(bounds: ScheduleBounds) -> dict[str, Any]:
    """Return a schedule's bounds and outcome settings in the form that ``add`` and
    ``edit`` take them."""
    return {"start_time": iso(bounds.start_time), "end_time": iso(bounds.end_time),
            "max_runs": bounds.max_runs, "one_off": bounds.one_off,
            "overlap": bounds.overlap, "deadline": bounds.deadline,
            "catch_up_window": bounds.catch_up_window, "jitter": bounds.jitter,
            "pause_after_failures": bounds.pause_after_failures}


def bounds_lines(bounds: ScheduleBounds) -> list[tuple[str, str]]:
    """Return the same settings for ``show``, as one labelled line each."""
    return [("start", f"{fmt(bounds.start_time)} UTC" if bounds.start_time else "-"),
            ("end", f"{fmt(bounds.end_time)} UTC" if bounds.end_time else "-"),
            ("max runs", str(bounds.max_runs) if bounds.max_runs is not None else "-"),
            ("one-off", "yes" if bounds.one_off else "no"), ("overlap", bounds.overlap),
            ("deadline", f"{bounds.deadline:g} s" if bounds.deadline is not None else "-"),
            ("catch-up window", f"{bounds.catch_up_window:g} s (older missed fires are "
                                "skipped)" if bounds.catch_up_window is not None else "-"),
            ("jitter", f"up to {bounds.jitter:g} s after each fire time"
             if bounds.jitter is not None else "-"),
            ("pause after", f"{bounds.pause_after_failures} failures in a row"
             if bounds.pause_after_failures is not None else "-")]


def next_fire_text(view: ScheduleView) -> str:
    """Return the next fire in UTC, or the reason why there is none: the schedule is
    invalid, never fires again, is retired or is paused."""
    if view.problem:
        return "INVALID: " + view.problem
    if view.never_fires:
        return "NEVER FIRES: " + view.never_fires
    if view.row.retired:
        return "retired (no run left)"
    if view.paused:
        return "paused"
    return fmt(view.next_fire)


def last_fire_text(view: ScheduleView) -> str:
    """Return the latest fire in UTC, ``never``, or ``none since <the calendar's change>``."""
    if view.last_fire is not None:
        return fmt(view.last_fire)
    if view.quiet_since is not None:
        return f"none since {fmt(view.quiet_since)}"
    return "never"


def job_json(job: JobRecord) -> dict[str, Any]:
    return {"job_id": job.job_id, "schedule": job.schedule, "fire_time": job.fire_time,
            "triggered_manually": job.triggered_manually, "backfilled": job.backfilled,
            "state": job.state,
            "task_id": job.task_id, "created_at": iso(job.created_at)}


def beat_json(beat: BeatView) -> dict[str, Any]:
    return {"host": beat.host, "pid": beat.pid, "deployment": beat.deployment,
            "lock_key": beat.lock_key, "since": iso(beat.leader_since),
            "started_at": iso(beat.started_at), "seen_at": iso(beat.seen_at),
            "last_pass_lag_ms": beat.last_lag_ms, "publishes": beat.publishes,
            "clock_skew_ms": beat.clock_skew_ms}


def backlog_json(b: DeploymentBacklog) -> dict[str, Any]:
    return {"deployment": b.deployment, "jobs": b.jobs, "oldest_age_seconds": b.oldest_age,
            "publishing_beats": b.publishers}


def backlog_text(b: DeploymentBacklog) -> str:
    """Describe one deployment's outbox, such as ``deployment proj: 3 job(s), oldest 12 s;
    2 beat(s) publish``. The line is loud when no beat publishes."""
    oldest = f", oldest {b.oldest_age:.0f} s" if b.oldest_age is not None else ""
    who = (f"{b.publishers} beat(s) publish" if b.publishers
           else "NO beat of this deployment publishes them")
    return f"deployment {b.deployment or '(none)'}: {b.jobs} job(s){oldest}; {who}"


def check_text(check: Check) -> str:
    """Return ``[ok] what``, or ``[FAIL] what`` followed by the offending items and the fix."""
    return (f"[{'ok' if check.ok else 'FAIL'}] {check.what}"
            + "".join(f"\n       - {item}" for item in check.details)
            + ("" if check.ok else f"\n       fix: {check.fix}"))


def occurrence_json(o: Occurrence) -> dict[str, Any]:
    return {"schedule": o.schedule, "kind": o.kind, "fire_time": iso(o.at),
            "job_id": o.job_id, "task_id": o.task_id,
            "job_state": o.job_state, "outcome": o.outcome, "started_at": iso(o.started_at),
            "finished_at": iso(o.finished_at), "runtime": o.runtime, "worker": o.worker,
            "error": o.error, "duplicates": o.duplicates,
            "last_fire_time": iso(o.last_fire_time), "count": o.count, "reason": o.reason}


def occurrence_time(o: Occurrence) -> str:
    if o.kind == "coalesced":
        more = f" .. {fmt(o.last_fire_time)}" if o.count > 1 else ""
        return f"{fmt(o.at)}{more} ({o.count})"
    return fmt(o.at)


def occurrence_outcome(o: Occurrence) -> str:
    if o.kind in ("skipped", "coalesced"):
        return "-"
    text = o.outcome or ("unreported" if o.job_state == "completed" else o.job_state or "-")
    return text + (f" (+{o.duplicates} duplicate)" if o.duplicates else "")


def occurrence_run_time(o: Occurrence) -> str:
    return "-" if o.runtime is None else f"{o.runtime:.3f} s"


def occurrence_table(found: list[Occurrence], *, schedules: bool = False) -> str:
    """Return the occurrences with what became of each one. The bare job state is never
    shown, because a Celery job is ``completed`` once it is published, whatever its task
    then did. With ``schedules``, each line also names the schedule it belongs to."""
    headers = ["FIRE TIME (UTC)", "KIND", "JOB", "OUTCOME", "RUN TIME", "WORKER", "DETAIL"]
    rows = [[occurrence_time(o), o.kind, str(o.job_id or "-"), occurrence_outcome(o),
             occurrence_run_time(o), o.worker or "-", o.error or o.reason or ""]
            for o in found]
    if schedules:
        headers.insert(1, "SCHEDULE")
        for o, r in zip(found, rows, strict=True):
            r.insert(1, o.schedule or "")
    return table(headers, rows)


def overdue_json(o: Overdue) -> dict[str, Any]:
    return {"name": o.name, "reasons": list(o.reasons), "last_fire": iso(o.last_fire),
            "last_outcome": o.last_outcome}
