"""What benchmarks/chaos/chaos.py concludes from a run: pure functions over plain data.

A run leaves two records: the jobs in ``awa.jobs`` (every one the harness saw during
the run, also those gone by the end) and the lines the worker wrote, one per task it
ran. Everything here reads only those, so the checks run (and are tested, with the
corruptions of :data:`CORRUPTIONS`) without a database, a broker or a process.

Times are Unix epoch seconds (floats) throughout.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: name -> (period in seconds, policy), as in benchmarks/chaos/chaosapp.py.
Schedules = dict[str, tuple[int, str]]


@dataclass(frozen=True)
class Job:
    """A row of awa.jobs as last seen; ``state`` is ``"deleted"`` for a row that was
    seen during the run and was gone at the end."""

    id: int
    name: str
    fire_time: float
    state: str
    created_at: float
    finalized_at: float | None
    task_id: str
    """The task id the bridge derives from (schedule, fire time), published or not."""


@dataclass(frozen=True)
class Execution:
    """One line of the worker's record: a task it ran."""

    task_id: str
    args: tuple[Any, ...]
    at: float
    pid: int


@dataclass
class Fault:
    """One injected fault: ``start`` (injected), ``end`` (healed; the same instant for a
    kill), ``window_end`` (the next fault's start, or the end of the run)."""

    kind: str
    start: float
    end: float
    window_end: float = math.inf
    detail: str = ""
    recovered: bool = True
    """Whether the harness saw the group recover before its deadline."""


@dataclass
class Data:
    schedules: Schedules
    jobs: list[Job]
    runs: list[Execution]
    until: float
    """Fire times up to here must have fired (schedules were paused just after)."""
    faults: list[Fault] = field(default_factory=list)

    def coalesce(self) -> list[str]:
        return [n for n, (_, policy) in self.schedules.items() if policy == "coalesce"]

    def catch_up(self) -> list[str]:
        return [n for n, (_, policy) in self.schedules.items() if policy == "catch_up"]


# -- the overall checks -------------------------------------------------------------------


def duplicates(data: Data) -> list[dict[str, Any]]:
    """Every (schedule, fire time) with more than one job."""
    by_fire: dict[tuple[str, float], list[int]] = defaultdict(list)
    for job in data.jobs:
        if job.state != "deleted":
            by_fire[(job.name, job.fire_time)].append(job.id)
    return [{"schedule": name, "fire_time": fire, "jobs": sorted(ids)}
            for (name, fire), ids in sorted(by_fire.items()) if len(ids) > 1]


def catch_up_gaps(data: Data) -> list[dict[str, Any]]:
    """Every fire time of a catch_up schedule, from its first fire to ``until``, with no
    job; a catch_up schedule that never fired at all is one gap (fire_time None)."""
    gaps: list[dict[str, Any]] = []
    for name in data.catch_up():
        period = data.schedules[name][0]
        fired = {j.fire_time for j in data.jobs if j.name == name and j.state != "deleted"}
        if not fired:
            gaps.append({"schedule": name, "fire_time": None})
            continue
        t = min(fired)
        while t <= data.until:
            if t not in fired:
                gaps.append({"schedule": name, "fire_time": t})
            t += period
    return gaps


def lost(data: Data) -> list[dict[str, Any]]:
    """Every job the worker never ran: still pending, published but never run, or
    gone from the table before it ran."""
    ran = {r.task_id for r in data.runs}
    out = []
    for job in sorted(data.jobs, key=lambda j: j.id):
        if job.task_id in ran:
            continue
        why = {"available": "never published", "completed": "published, never executed",
               "deleted": "deleted before it ran"}.get(job.state, f"state {job.state}")
        out.append({"job": job.id, "schedule": job.name, "fire_time": job.fire_time,
                    "why": why})
    return out


def re_executions(data: Data) -> list[dict[str, Any]]:
    """Every task id the worker ran more than once."""
    counts = Counter(r.task_id for r in data.runs)
    names = {j.task_id: j.name for j in data.jobs}
    return [{"task_id": tid, "runs": n, "schedule": names.get(tid)}
            for tid, n in sorted(counts.items()) if n > 1]


CHECKS: dict[str, Callable[[Data], list[dict[str, Any]]]] = {
    "duplicates": duplicates,
    "catch_up_gaps": catch_up_gaps,
    "lost": lost,
    "re_executions": re_executions,
}


def check_all(data: Data) -> dict[str, list[dict[str, Any]]]:
    return {name: check(data) for name, check in CHECKS.items()}


def unknown_runs(data: Data) -> int:
    """Tasks the worker ran whose id is no job's (a job deleted after it ran)."""
    ids = {j.task_id for j in data.jobs}
    return sum(1 for r in data.runs if r.task_id not in ids)


def missing_catch_up(data: Data, start: float, end: float) -> list[tuple[str, float]]:
    """Fire times of the catch_up schedules in [start, end] with no job (yet)."""
    out = []
    for name in data.catch_up():
        period = data.schedules[name][0]
        fired = {j.fire_time for j in data.jobs if j.name == name}
        t = math.ceil(start / period) * period
        while t <= end:
            if t not in fired:
                out.append((name, t))
            t += period
    return out


# -- the figures of one fault ---------------------------------------------------------------


def skipped_seconds(data: Data, start: float, end: float) -> list[int]:
    """Fire times of the coalesce schedules in [start, end] that got no job."""
    out: list[int] = []
    for name in data.coalesce():
        period = data.schedules[name][0]
        fired = {j.fire_time for j in data.jobs if j.name == name}
        t = math.ceil(start / period) * period
        while t <= end:
            if t not in fired:
                out.append(int(t))
            t += period
    return sorted(out)


def fault_figures(data: Data, fault: Fault) -> dict[str, Any]:
    """recovery: fault end to the first job created after it; longest_gap: the longest
    time without a new job around the fault; skipped: coalesce fire times from the
    fault's start to the next fault's (or the run's end) with no job; drain_published /
    drain_executed: fault end until every job fired for a time up to the fault's end
    was published / run (None: some never were); lag_p99: the 99th percentile of
    created_at - fire time of the jobs fired for times within the fault (the ones fired
    late after a stop are what skipped and longest_gap count); re_executions: jobs fired
    in the fault's window that the worker ran more than once."""
    window_end = min(fault.window_end, data.until)
    created = sorted(j.created_at for j in data.jobs)
    after = [c for c in created if c > fault.end]
    recovery = after[0] - fault.end if after and after[0] <= fault.window_end else None
    before = [c for c in created if c <= fault.start]
    inside = [c for c in created if fault.start < c <= window_end]
    points = ([before[-1]] if before else [fault.start]) + inside
    longest_gap = max((b - a for a, b in itertools.pairwise(points)), default=None)
    backlog = [j for j in data.jobs if fault.start - 2 <= j.fire_time <= fault.end]
    first_run: dict[str, float] = {}
    for r in data.runs:
        first_run[r.task_id] = min(r.at, first_run.get(r.task_id, math.inf))

    def drain(times: Iterable[float | None]) -> float | None:
        times = list(times)
        if not times:
            return 0.0
        if any(t is None for t in times):
            return None
        return max(0.0, max(t for t in times if t is not None) - fault.end)

    skipped = skipped_seconds(data, fault.start, window_end - 1.5)
    # Fire lag of the jobs fired on time while the fault lasted: created_at - fire time.
    lags = sorted(j.created_at - j.fire_time for j in data.jobs
                  if fault.start <= j.fire_time <= fault.end
                  and j.created_at - j.fire_time < 1.0)
    lag_p99 = lags[min(len(lags) - 1, math.ceil(0.99 * len(lags)) - 1)] if lags else None
    twice = {r["task_id"] for r in re_executions(data)}
    rerun = [j for j in data.jobs if j.task_id in twice
             and fault.start - 2 <= j.fire_time <= window_end]
    return {
        "fault": fault.kind, "detail": fault.detail, "recovered": fault.recovered,
        "seconds": round(fault.end - fault.start, 3),
        "recovery_s": recovery, "longest_gap_s": longest_gap,
        "skipped": len(skipped), "skipped_at": skipped, "lag_p99_s": lag_p99,
        "drain_published_s": drain(j.finalized_at if j.state == "completed" else None
                                   for j in backlog),
        "drain_executed_s": drain(first_run.get(j.task_id) for j in backlog),
        "backlog_jobs": len(backlog),
        "re_executions": len(rerun),
    }


# -- corruptions: each must make its check fail ---------------------------------------------


def _copy(data: Data) -> Data:
    return dataclasses.replace(data, jobs=list(data.jobs), runs=list(data.runs))


def _pick(data: Data, policy: str, offset: int = 0) -> Job:
    """A published job ``offset`` places after the middle of the run, of a schedule with
    ``policy``, that the worker ran (distinct offsets: distinct jobs)."""
    ran = {r.task_id for r in data.runs}
    names = data.coalesce() if policy == "coalesce" else data.catch_up()
    jobs = sorted((j for j in data.jobs if j.name in names and j.state == "completed"
                   and j.task_id in ran), key=lambda j: (j.fire_time, j.name))
    if len(jobs) <= abs(offset):
        raise LookupError(f"no published {policy} job to corrupt")
    return jobs[(len(jobs) // 2 + offset) % len(jobs)]


def _duplicate_job(data: Data) -> None:
    job = _pick(data, "coalesce")
    data.jobs.append(dataclasses.replace(job, id=max(j.id for j in data.jobs) + 1))


def _deleted_catch_up_job(data: Data) -> None:
    job = _pick(data, "catch_up")
    data.jobs.remove(job)
    data.runs = [r for r in data.runs if r.task_id != job.task_id]


def _dropped_record(data: Data) -> None:
    job = _pick(data, "coalesce", 1)
    data.runs.remove(next(r for r in data.runs if r.task_id == job.task_id))


def _duplicate_record(data: Data) -> None:
    job = _pick(data, "coalesce", 2)
    data.runs.append(next(r for r in data.runs if r.task_id == job.task_id))


def _extra_job(data: Data, state: str, offset: int) -> None:
    name = data.coalesce()[0]
    last = max(j.fire_time for j in data.jobs if j.name == name)
    data.jobs.append(Job(max(j.id for j in data.jobs) + 1, name, last + offset, state,
                         last + offset, None, f"injected-{state}-{offset}"))


#: kind -> (what it does, the check that must report it, the corruption on plain data).
#: benchmarks/chaos/chaos.py --inject does the same to the real table and record file.
CORRUPTIONS: dict[str, tuple[str, str, Callable[[Data], None]]] = {
    "duplicate-job": ("a second job row for a fired (schedule, fire time)", "duplicates",
                      _duplicate_job),
    "deleted-catch-up-job": ("a catch_up job deleted (and its run forgotten)",
                             "catch_up_gaps", _deleted_catch_up_job),
    "dropped-record": ("a line dropped from the worker's record", "lost", _dropped_record),
    "duplicate-record": ("a line of the worker's record written twice", "re_executions",
                         _duplicate_record),
    "unpublished-job": ("a fired job left pending, never published", "lost",
                        lambda d: _extra_job(d, "available", 1)),
    "deleted-unpublished-job": ("a pending job deleted before it was published", "lost",
                                lambda d: _extra_job(d, "deleted", 2)),
}


def corrupted(data: Data, kind: str) -> Data:
    out = _copy(data)
    CORRUPTIONS[kind][2](out)
    return out


def caught(before: dict[str, list[Any]], after: dict[str, list[Any]], kind: str) -> bool:
    """Whether the check that ``kind`` targets reports more than it did before."""
    check = CORRUPTIONS[kind][1]
    return len(after[check]) > len(before[check])


def synthetic(seconds: int = 60, start: float = 1_800_000_000.0,
              schedules: Schedules | None = None) -> Data:
    """A clean run: every fire time of every schedule fired once, published and run
    once, about as beat and the worker would leave them."""
    schedules = schedules or {"chaos-1s": (1, "coalesce"), "chaos-2s": (2, "catch_up"),
                              "chaos-3s": (3, "catch_up")}
    jobs, runs = [], []
    for t in range(int(start), int(start) + seconds):
        for name, (period, _) in schedules.items():
            if t % period == 0:
                task_id = f"{name}@{t}"
                jobs.append(Job(len(jobs) + 1, name, float(t), "completed", t + 0.002,
                                t + 0.004, task_id))
                runs.append(Execution(task_id, (name,), t + 0.01, 1))
    return Data(schedules, jobs, runs, until=start + seconds - 1)


def self_test(data: Data | None = None) -> list[dict[str, Any]]:
    """Each corruption applied on its own to a clean run (``data``, or a synthetic one):
    one row per kind with the counts of every check before and after, and whether its
    target check caught it (``caught``). A clean run must show no problem at all."""
    data = data or synthetic()
    base = check_all(data)
    rows = []
    for kind, (what, check, _) in CORRUPTIONS.items():
        after = check_all(corrupted(data, kind))
        rows.append({"kind": kind, "what": what, "check": check,
                     "before": {k: len(v) for k, v in base.items()},
                     "after": {k: len(v) for k, v in after.items()},
                     "caught": caught(base, after, kind)})
    return rows


def clean(results: dict[str, Sequence[Any]]) -> bool:
    return not any(results.values())
