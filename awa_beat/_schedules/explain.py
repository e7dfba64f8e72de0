"""What happened, or will happen, at one instant of a schedule, and why.

The module is pure, like :mod:`awa_beat._schedules.preview`: it is given the schedule's
stored state, the records found at the instant (jobs, occurrences) and the current time,
and decides the answer. The operations layer reads the records
(``Operations.explain``); the command line, the Python API and the dashboard show the
answer.

**Which fire time an instant stands for.** Fires are whole seconds, so an instant stands
for the second it falls in (``09:00:00.700`` is ``09:00:00``). When the calendar fires at
that second, the instant *is* that fire time, and the answer says what became of that
fire. Otherwise the instant is not a fire time, and the answer names the fire time at or
just before it (the latest fire of the calendar not after it) and the next one after it.

**The answers** (:attr:`Explanation.kind`), in the order they are decided for a fire
time: a job was made for it (``fired``, ``backfilled``, ``buffered``), or an occurrence
records why not (``skipped``: overlap or the catch-up window; ``buffered``: held by
overlap buffer_one; ``coalesced``: left out by a coalesce after downtime or a pause).
With no record: ``before_created`` (the schedule did not exist yet), ``will_fire``,
``paused`` or ``retired`` (in the future, or past and after the cursor), ``due`` (past,
after the cursor, and neither paused nor retired: beat has not fired it yet), or
``no_record`` (the cursor passed it and nothing is recorded: the records were pruned by
retention, or a calendar change or Awa's own evaluator passed it over). An instant that
is no fire time is ``not_a_fire_time``, ``out_of_bounds`` (the calendar would fire then
but for its ``start_time``/``end_time``), or ``triggered`` (a job triggered by hand in
that second). ``invalid``: the stored calendar cannot be read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo

from ..errors import AwaBeatError
from .cron import load_timezone
from .fire_times import (
    Calendar,
    calendar_for,
    jitter_of,
    next_fire_after,
    parse_iso,
    run_times,
)
from .markers import BoundedCalendar
from .preview import fold_pass, mark_fire, wall_matcher

UTC = timezone.utc
_SECOND = timedelta(seconds=1)
#: How far back the fire time at or before an instant is looked for. A calendar whose
#: previous fire is older than that (an ``at`` decades ago) reads as having none.
LOOKBACK = timedelta(days=366 * 50)

KINDS = ("fired", "triggered", "backfilled", "buffered", "skipped", "coalesced",
         "before_created", "will_fire", "paused", "retired", "due", "no_record",
         "not_a_fire_time", "out_of_bounds", "invalid")
"""Every :attr:`Explanation.kind`; the module's notes say what each means."""


@dataclass(frozen=True)
class FoundJob:
    """A job of the schedule found at the instant: made for its fire time (fired,
    backfilled, or buffered and started later), or triggered by hand in its second."""

    kind: str
    """``fired``, ``triggered``, ``backfilled`` or ``buffered``."""
    job_id: int | None
    fire_time: datetime | None = None
    state: str | None = None
    """Awa's job state (``available``, ``running``, ``completed`` ...), None once gone."""
    outcome: str | None = None
    """What became of the run, as ``awa-beat history`` says it (``succeeded``,
    ``failed``, ``lost`` ...), or None while nothing is known."""
    created_at: datetime | None = None
    run_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None
    task_id: str | None = None
    present: bool = True
    """False for a backfill whose job is no longer in ``awa.jobs`` (pruned)."""


@dataclass(frozen=True)
class FoundOccurrence:
    """An occurrence that made no job (``awa_beat.occurrences``) and covers the fire
    time: from ``fire_time`` to ``last_fire_time`` when it stands for several."""

    kind: str
    """``skipped``, ``coalesced`` or ``buffered``."""
    fire_time: datetime
    last_fire_time: datetime | None
    count: int
    reason: str
    recorded_at: datetime | None = None


@dataclass(frozen=True)
class ScheduleState:
    """What the stored row says, as of the read."""

    name: str
    cron_expr: str
    timezone: str
    created_at: datetime
    cursor: datetime | None
    """``last_enqueued_at``: fire times up to it are done with."""
    paused_at: datetime | None = None
    paused_by: str | None = None
    pause_note: str | None = None
    retired: bool = False
    """Paused by the fire statement because its last allowed run fired."""


@dataclass(frozen=True)
class Explanation:
    """What happened or will happen at :attr:`at`, and why. Returned by
    ``Schedules.explain``, ``awa-beat explain`` and shown on the dashboard."""

    name: str
    at: datetime
    """The instant asked about, in UTC."""
    kind: str
    """One of :data:`KINDS` (the module's notes say what each means)."""
    summary: str
    """The answer in one sentence."""
    details: tuple[str, ...] = ()
    """The reasons and facts behind it, one sentence each."""
    fire_time: datetime | None = None
    """The fire time the instant is (for ``out_of_bounds``, the one it would be)."""
    previous: datetime | None = None
    """Not a fire time: the fire time at or just before the instant."""
    next: datetime | None = None
    """Not a fire time, or a fire time to come: the next fire time after the instant."""
    dst: str = ""
    """How a DST gap or fold in the schedule's zone moved or repeated the fire (or the
    fires either side of the instant), in words; empty when none did."""
    jobs: tuple[FoundJob, ...] = ()
    occurrences: tuple[FoundOccurrence, ...] = ()
    run_at: datetime | None = None
    """A fire to come of a schedule with jitter: when its job will run."""
    timezone: str = "UTC"
    now: datetime | None = None


INSTANT_HELP = ("ISO 8601 with a UTC offset or Z (e.g. 2027-03-14T02:30:00-05:00, "
                "2027-03-14T07:30:00Z) or 'now'")


def parse_instant(text: str, now: datetime) -> datetime:
    """Read the instant to explain: ``now`` (the ``now`` given), or ISO 8601 with a UTC
    offset or ``Z``. Raises ``ValueError`` saying what is allowed. A time without an
    offset is refused rather than guessed: the schedule's zone and UTC would read it
    differently."""
    value = text.strip()
    if value.lower() == "now":
        return now
    try:
        at: datetime | None = parse_iso(value)
    except ValueError:
        at = None
    if at is None or at.tzinfo is None or at.utcoffset() is None:
        why = "has no UTC offset" if at is not None else "is not an instant"
        raise ValueError(f"{text[:64]!r} {why}: give {INSTANT_HELP}")
    problem = instant_problem(at)
    if problem:
        raise ValueError(f"{text[:64]!r} {problem}")
    return at


#: The instants explain answers for: the calendars' range (markers write instants from
#: 1970 to 9999), and room for the search of the fire time before one.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def instant_problem(at: datetime) -> str | None:
    """Why ``at`` cannot be explained (no UTC offset, or outside :data:`EARLIEST` to
    :data:`LATEST`), or None."""
    if at.tzinfo is None or at.utcoffset() is None:
        return "must be a datetime with a UTC offset"
    try:
        utc = at.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not EARLIEST <= utc <= LATEST:
        return "is out of range: an instant from 1970 to 9999 (UTC)"
    return None


def _utc(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") + " UTC"


def _local(t: datetime, tz: tzinfo) -> str:
    return t.astimezone(tz).strftime("%Y-%m-%d %H:%M:%S %Z")


def _floor(t: datetime) -> datetime:
    return t.astimezone(UTC).replace(microsecond=0)


def is_fire_time(calendar: Calendar, second: datetime) -> bool:
    """Return whether ``calendar`` fires at ``second`` (a whole second), as the evaluator
    steps through it."""
    return next_fire_after(calendar, second - _SECOND) == second


def fire_at_or_before(calendar: Calendar, t: datetime,
                      lookback: timedelta = LOOKBACK) -> datetime | None:
    """Return the latest fire of ``calendar`` at or before ``t``, or None within
    ``lookback``. Calendars only step forward, so windows that end at ``t`` and double
    in length are probed until one holds a fire, and that window is stepped through."""
    second = _floor(t)
    look = _SECOND
    while True:
        first = next_fire_after(calendar, second - look - _SECOND)
        if first is not None and first <= second:
            latest = first
            while True:
                nxt = next_fire_after(calendar, latest)
                if nxt is None or nxt > second:
                    return latest
                latest = nxt
        if look >= lookback:
            return None
        look = min(look * 2, lookback)


def fire_time_of(cron_expr: str, zone: str, at: datetime) -> datetime | None:
    """Return the fire time that ``at`` stands for: the second it falls in when the
    calendar fires then, or the calendar without its bounds would (an ``out_of_bounds``
    instant); None when it is not a fire time, or the calendar cannot be read. The
    operations layer reads the records of this fire time."""
    try:
        calendar = calendar_for(cron_expr, zone)
    except AwaBeatError:
        return None
    second = _floor(at)
    if is_fire_time(calendar, second) or is_fire_time(_unbounded(calendar), second):
        return second
    return None


def _unbounded(calendar: Calendar) -> Calendar:
    while isinstance(calendar, BoundedCalendar):
        calendar = calendar.inner
    return calendar


def _dst_mark(calendar: Calendar, fire: datetime | None, tz: tzinfo, zone: str
              ) -> tuple[str, str]:
    """Whether a gap or a fold touched ``fire`` (preview's ``gap`` or ``fold`` mark) and
    what it did, in words; two empty strings when neither did."""
    if fire is None:
        return "", ""
    mark = mark_fire(fire, tz, zone, fire.astimezone(tz).utcoffset(), wall_matcher(calendar))
    return (mark.mark, mark.note) if mark.mark in ("gap", "fold") else ("", "")


def _dst_note(calendar: Calendar, fire: datetime | None, tz: tzinfo, zone: str) -> str:
    return _dst_mark(calendar, fire, tz, zone)[1]


#: How a fire touched by a DST change is named in a one-line answer.
_MARK_WORDS = {"gap": "moved by the DST gap", "fold": "in the repeated hour"}


def _pause_text(state: ScheduleState) -> str:
    by = state.paused_by or "?"
    # awa-beat pauses a schedule itself after failures (pause_after_failures).
    text = f"paused {'automatically ' if by == 'awa-beat' else ''}by {by}"
    if state.paused_at is not None:
        text += f" since {_utc(state.paused_at)}"
    if state.pause_note:
        text += f": {state.pause_note}"
    return text


def _job_text(job: FoundJob, calendar: Calendar) -> str:
    what = {"fired": "fired", "triggered": "triggered by hand", "backfilled": "backfilled",
            "buffered": "held by overlap buffer_one, then started"}[job.kind]
    if not job.present:
        return (f"{what}: its job {job.job_id} is no longer in awa.jobs (pruned by a "
                "retention)")
    parts = [f"{what}: job {job.job_id}"]
    if job.outcome:
        parts.append(f"outcome {job.outcome}")
    elif job.state:
        parts.append(f"state {job.state}")
    else:
        parts.append("no longer in awa.jobs")
    # Only a fire of a schedule with a jitter was given its run time; every other job
    # (a fire a moment after its fire time, a backfill of the past, a held fire started
    # late, a trigger) runs from its insert on, whatever its run_at says.
    if (job.kind == "fired" and job.run_at is not None and job.fire_time is not None
            and job.run_at > job.fire_time and jitter_of(calendar) is not None):
        parts.append(f"run time {_utc(job.run_at)} (jitter)")
    if job.started_at is not None:
        parts.append(f"started {_utc(job.started_at)}")
    if job.finished_at is not None:
        parts.append(f"finished {_utc(job.finished_at)}")
    elif job.created_at is not None:
        parts.append(f"created {_utc(job.created_at)}")
    if job.error:
        parts.append(f"error: {job.error}")
    return ", ".join(parts)


def _occurrence_text(o: FoundOccurrence) -> str:
    span = ""
    if o.last_fire_time is not None and o.last_fire_time != o.fire_time:
        span = f" ({o.count} fire times, {_utc(o.fire_time)} to {_utc(o.last_fire_time)})"
    return f"{o.kind}{span}: {o.reason}"


def explain(state: ScheduleState, at: datetime, now: datetime, *,
            jobs: tuple[FoundJob, ...] = (), occurrences: tuple[FoundOccurrence, ...] = ()
            ) -> Explanation:
    """Decide what happened or will happen at ``at`` (an aware datetime) to the schedule
    ``state``, given the ``jobs`` and ``occurrences`` found for the fire time that
    :func:`fire_time_of` names (and the jobs triggered by hand in ``at``'s second), and
    the current time ``now``."""
    at = at.astimezone(UTC)
    base = {"name": state.name, "at": at, "timezone": state.timezone, "now": now,
            "jobs": jobs, "occurrences": occurrences}
    try:
        calendar = calendar_for(state.cron_expr, state.timezone)
        tz = load_timezone(state.timezone)
    except AwaBeatError as exc:
        return Explanation(kind="invalid", summary=f"its calendar cannot be read: {exc}",
                           **base)  # type: ignore[arg-type]
    second = _floor(at)
    if is_fire_time(calendar, second):
        return _explain_fire(state, calendar, tz, second, now, base)
    return _explain_between(state, calendar, tz, second, now, base)


def _explain_fire(state: ScheduleState, calendar: Calendar, tz: tzinfo, fire: datetime,
                  now: datetime, base: dict[str, object]) -> Explanation:
    jobs: tuple[FoundJob, ...] = base["jobs"]  # type: ignore[assignment]
    occurrences: tuple[FoundOccurrence, ...] = base["occurrences"]  # type: ignore[assignment]
    dst = _dst_note(calendar, fire, tz, state.timezone)
    when = f"{_utc(fire)} ({_local(fire, tz)})"
    details = ([_job_text(j, calendar) for j in jobs]
               + [_occurrence_text(o) for o in occurrences])
    if dst:
        details.append(f"DST: {dst}")
    made = [j for j in jobs if j.kind != "triggered"]
    by_kind = {o.kind: o for o in occurrences}
    nxt = next_fire_after(calendar, fire)

    def answer(kind: str, summary: str, run_at: datetime | None = None,
               following: datetime | None = None) -> Explanation:
        return Explanation(kind=kind, summary=summary, details=tuple(details),
                           fire_time=fire, dst=dst, next=following, run_at=run_at,
                           **base)  # type: ignore[arg-type]

    if made:
        job = made[0]
        verb = {"fired": "fired", "backfilled": "was backfilled",
                "buffered": "was held by overlap buffer_one and fired when the run before "
                            "it finished"}[job.kind]
        ran = f" (job {job.job_id}" + (f", {job.outcome}" if job.outcome else "") + ")" \
            if job.present else f" (its job {job.job_id} has since been pruned)"
        return answer(job.kind, f"{when} is a fire time, and it {verb}{ran}.")
    if "skipped" in by_kind:
        o = by_kind["skipped"]
        # The reason as the fire statement recorded it: the overlap policy says which
        # (skip, or buffer_one with a fire held already).
        why = ("it was older than the catch-up window" if o.reason.startswith("catch-up window")
               else o.reason)
        return answer("skipped", f"{when} is a fire time, and it was skipped: {why}.")
    if "buffered" in by_kind:
        return answer("buffered", f"{when} is a fire time, held by overlap buffer_one "
                      "until the run before it finishes; no job has been made for it yet.")
    if "coalesced" in by_kind:
        o = by_kind["coalesced"]
        return answer("coalesced", f"{when} is a fire time, and it was coalesced: one of "
                      f"{o.count} fire times missed while beat was down or the schedule "
                      "paused, of which only the latest fired.")
    created = _floor(state.created_at)
    if fire <= created:
        details.append(f"the schedule was created at {_utc(state.created_at)}; a schedule "
                       "never fires a time from before it existed")
        return answer("before_created", f"{when} is a fire time of its calendar, but from "
                      "before the schedule existed, so it did not fire.")
    cursor = state.cursor
    if fire > now or cursor is None or fire > cursor:
        future = fire > now
        if state.retired:
            return answer("retired", f"{when} is a fire time, but the schedule is retired "
                          f"(its last allowed run fired at {_utc(state.paused_at or now)}): "
                          f"it {'will never fire' if future else 'did not fire'}.")
        if state.paused_at is not None:
            details.append(_pause_text(state))
            if future:
                return answer("paused", f"{when} is a fire time, but the schedule is "
                              f"{_pause_text(state)}: it will not fire unless resumed "
                              "before then.")
            return answer("paused", f"{when} is a fire time, but the schedule was "
                          f"{_pause_text(state)}: it did not fire; on resume its missed-"
                          "fire policy decides what is caught up.")
        if future:
            run_at = None
            jitter = jitter_of(calendar)
            # The same delay the fire gives the job (a function of the name and the fire
            # time), so this is when the job will run.
            delayed = run_times(state.name, calendar, [fire]) if jitter else None
            if jitter and delayed:
                run_at = delayed[0]
                details.append(f"with its jitter of up to {jitter:g} s, the job will run "
                               f"at {_utc(run_at)}")
            return answer("will_fire", f"{when} is a fire time to come: it will fire then.",
                          run_at=run_at, following=nxt)
        late = (now - fire).total_seconds()
        window = getattr(calendar, "window", None)
        if window is not None and late > window:
            details.append(f"it is older than the schedule's catch-up window ({window:g} s): "
                           "beat will record it as skipped instead of firing it")
        return answer("due", f"{when} is a fire time, due {late:.0f} s ago and not fired "
                      "yet: is a beat running and leading?")
    details.append(f"the schedule's cursor is at {_utc(cursor)}: fire times up to it are "
                   "done with")
    return answer("no_record", f"{when} is a fire time, and the schedule's cursor has passed "
                  "it, but no job, skip or coalesce of it is recorded: its records may have "
                  "been pruned (awa.jobs and awa_beat's outcome retention), or a change of "
                  "the calendar, a coalesce without outcome tracking, or Awa's own "
                  "evaluator passed it over.")


def _explain_between(state: ScheduleState, calendar: Calendar, tz: tzinfo,
                     second: datetime, now: datetime, base: dict[str, object]
                     ) -> Explanation:
    jobs: tuple[FoundJob, ...] = base["jobs"]  # type: ignore[assignment]
    at: datetime = base["at"]  # type: ignore[assignment]
    previous = fire_at_or_before(calendar, second)
    nxt = next_fire_after(calendar, second)
    notes = []
    marks: dict[str, str] = {}
    for label, fire in (("the fire before", previous), ("the next fire", nxt)):
        mark, note = _dst_mark(calendar, fire, tz, state.timezone)
        if note and fire is not None:
            notes.append(f"{label} ({_utc(fire)}) is {note}")
            marks[label] = f" ({_MARK_WORDS[mark]})"
    wanted = wall_matcher(calendar)
    wall = at.astimezone(tz).replace(tzinfo=None)
    second_pass = (wanted is not None and wanted(wall.replace(microsecond=0))
                   and fold_pass(second, tz) == 2)
    if second_pass:
        notes.insert(0, f"{wall:%H:%M:%S} happens twice on {wall:%Y-%m-%d} in "
                        f"{state.timezone} (clocks went back), and this instant is its "
                        "second pass: the schedule fires that wall time in the first pass "
                        "only")
    dst = "; ".join(notes)
    details = [_job_text(j, calendar) for j in jobs]
    if previous is not None:
        details.append(f"the fire time at or just before it: {_utc(previous)} "
                       f"({_local(previous, tz)})")
    if nxt is not None:
        details.append(f"the next fire time: {_utc(nxt)} ({_local(nxt, tz)})")
    if dst:
        details.append(f"DST: {dst}")
    when = f"{_utc(at)} ({_local(at, tz)})"

    def answer(kind: str, summary: str, fire: datetime | None = None) -> Explanation:
        return Explanation(kind=kind, summary=summary, details=tuple(details),
                           fire_time=fire, previous=previous, next=nxt, dst=dst,
                           **base)  # type: ignore[arg-type]

    unbounded = _unbounded(calendar)
    if unbounded is not calendar and is_fire_time(unbounded, second):
        bound = calendar
        assert isinstance(bound, BoundedCalendar)
        if bound.start is not None and second.timestamp() < bound.start:
            side = f"before its start_time {_utc(datetime.fromtimestamp(bound.start, UTC))}"
        else:
            side = f"after its end_time {_utc(datetime.fromtimestamp(bound.end or 0, UTC))}"
        return answer("out_of_bounds", f"{when} would be a fire time of its calendar, but it "
                      f"is {side}, so the schedule does not fire then.", second)
    if any(j.kind == "triggered" for j in jobs):
        return answer("triggered", f"{when} is not a fire time, but a job was triggered by "
                      "hand then.")
    if nxt is None:
        after = "it never fires again" if previous is not None else "it never fires"
    elif nxt > now and state.retired:
        after = f"the next fire time would be {_utc(nxt)}, but the schedule is retired"
    elif nxt > now and state.paused_at is not None:
        after = f"the next fire time is {_utc(nxt)}, but the schedule is {_pause_text(state)}"
    else:
        after = f"the next is {_utc(nxt)}{marks.get('the next fire', '')}"
    before = (f"the fire time at or just before it is {_utc(previous)}"
              f"{marks.get('the fire before', '')}"
              if previous is not None else "its calendar has no fire time before it")
    what = ("not a fire time (the second pass of a repeated hour: the schedule fires "
            "that wall time in the first pass only)" if second_pass else "not a fire time")
    return answer("not_a_fire_time", f"{when} is {what}: {before}; {after}.")
