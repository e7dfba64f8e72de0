"""What a schedule's cursor says about its runs: whether it marks a fire, when the last
fire was, and why a schedule is overdue.

Pure, like the rest of this package: every function takes the current time and the
stored values as arguments. The operations layer reads rows with these functions, and the
dashboard, the command line and the Django admin show the answers.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ..errors import AwaBeatError
from .fire_times import POLICIES, Calendar, calendar_for, due_fires

#: Seconds after a fire was due before its absence makes a schedule overdue.
OVERDUE_GRACE = 30.0


def whole_second(t: datetime) -> datetime:
    """``t`` without its microseconds: a cursor is stored to the second."""
    return t.replace(microsecond=0)


def cursor_is_fire(calendar: Calendar, cursor: datetime | None, created_at: datetime) -> bool:
    """Whether a row's cursor (``last_enqueued_at``) is the time of a fire that happened.

    The cursor starts at the second the row was registered, and moves to the second of a
    change of its calendar: neither is a fire. A fire moves it to a fire time of the
    calendar, after the registration. A cursor before the registration is a run carried
    over by ``awa-beat import`` (or the first fire of Awa's own evaluator, which looks a
    minute back). Only a registration or a calendar change that falls on a fire time of
    the calendar itself (a calendar firing every second, say) cannot be told from a fire.
    """
    if cursor is None:
        return False
    registered = whole_second(created_at)
    if cursor < registered:
        return True
    return cursor > registered and calendar.next_from(cursor, inclusive=True) == cursor


def fired_at(cron_expr: str, timezone_name: str, cursor: datetime | None,
             created_at: datetime) -> datetime | None:
    """The fire time of a row's latest fire, or None when it has not fired, as far as the
    row tells (see :func:`cursor_is_fire`). A row whose calendar cannot be read keeps its
    cursor unless that cursor is its registration."""
    try:
        calendar = calendar_for(cron_expr, timezone_name)
    except AwaBeatError:
        return cursor if cursor is not None and cursor != whole_second(created_at) else None
    return cursor if cursor_is_fire(calendar, cursor, created_at) else None


def overdue_reasons(*, cron_expr: str, timezone_name: str, policy: str,
                    cursor: datetime | None, created_at: datetime, paused: bool,
                    now: datetime, deadline: float | None, last_outcome: str | None,
                    cursor_outcome: str | None, cursor_finished_at: datetime | None,
                    grace: float = OVERDUE_GRACE) -> list[str]:
    """Why a schedule is overdue at ``now`` (empty: it is not). A paused schedule never is.

    * ``missed``: a fire was due more than ``grace`` seconds ago and did not happen.
    * ``failed``: its latest reported run failed or was lost.
    * ``deadline``: ``deadline`` seconds after its latest fire, that fire's run has not
      succeeded, or succeeded later than that.
    """
    if paused:
        return []
    reasons = []
    try:
        calendar = calendar_for(cron_expr, timezone_name)
    except AwaBeatError:
        return []
    if policy in POLICIES and due_fires(
            calendar, last_enqueued_at=cursor, created_at=created_at,
            now=now - timedelta(seconds=grace), policy="coalesce"):
        reasons.append("missed: a due fire did not happen")
    if last_outcome in ("failed", "lost"):
        reasons.append(f"failed: its last run {'was lost' if last_outcome == 'lost' else 'failed'}")
    # The deadline belongs to a fire: a cursor still at the registration (or at a change
    # of the calendar) was never due, so it has no deadline to miss.
    if deadline is not None and cursor is not None and cursor_is_fire(calendar, cursor,
                                                                      created_at):
        by = cursor + timedelta(seconds=deadline)
        in_time = (cursor_outcome == "succeeded" and cursor_finished_at is not None
                   and cursor_finished_at <= by)
        if now > by and not in_time:
            fired = cursor.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
            reasons.append(f"deadline: the fire of {fired} UTC did not succeed within "
                           f"{deadline:g} s")
    return reasons
