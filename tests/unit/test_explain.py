"""Explain, the pure part: every answer, decided from a schedule's state and the records
found, with the DST gap and fold of New York and London."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from awa_beat._schedules.explain import (
    KINDS,
    Explanation,
    FoundJob,
    FoundOccurrence,
    ScheduleState,
    explain,
    fire_at_or_before,
    fire_time_of,
    instant_problem,
    parse_instant,
)
from awa_beat._schedules.fire_times import calendar_for, run_times

UTC = timezone.utc
CREATED = datetime(2027, 1, 1, tzinfo=UTC)
#: New York's 02:30 report: on 2027-03-14 02:00-03:00 does not exist (EST -> EDT).
REPORT = ScheduleState("report", "30 2 * * *", "America/New_York", CREATED,
                       cursor=datetime(2027, 3, 20, 6, 30, tzinfo=UTC))
MOVED = datetime(2027, 3, 14, 7, 0, tzinfo=UTC)  # 03:00 EDT, the end of the gap
#: London's 01:30 job: on 2027-10-31 01:00-02:00 happens twice (BST -> GMT).
LONDON = ScheduleState("night", "30 1 * * *", "Europe/London", CREATED,
                       cursor=datetime(2027, 11, 1, 1, 30, tzinfo=UTC))
FIRST_PASS = datetime(2027, 10, 31, 0, 30, tzinfo=UTC)  # 01:30 BST
SECOND_PASS = datetime(2027, 10, 31, 1, 30, tzinfo=UTC)  # 01:30 GMT: not a fire time
MINUTELY = ScheduleState("minutely", "0 * * * * *", "UTC", CREATED,
                         cursor=datetime(2027, 6, 1, 12, 0, tzinfo=UTC))
NOON = datetime(2027, 6, 1, 12, 0, tzinfo=UTC)
LATER = datetime(2027, 12, 1, tzinfo=UTC)


def job(kind: str = "fired", **over: object) -> FoundJob:
    return FoundJob(kind=kind, job_id=over.pop("job_id", 7), **over)  # type: ignore[arg-type]


def test_fired_with_outcome_and_the_instant_within_its_second() -> None:
    found = explain(MINUTELY, NOON + timedelta(milliseconds=999), LATER,
                    jobs=(job(fire_time=NOON, outcome="failed", error="ValueError: x"),))
    assert (found.kind, found.fire_time) == ("fired", NOON)
    assert "job 7, failed" in found.summary
    assert any("error: ValueError: x" in d for d in found.details)


@pytest.mark.parametrize("cron_expr, kind, jittered", [
    ("@cron 0 * * * * * | jitter=30", "fired", True),
    ("0 * * * * *", "fired", False),                          # run_at: its insert, a moment late
    ("@cron 0 * * * * * | jitter=30", "backfilled", False),  # runs from its insert
    ("@cron 0 * * * * * | jitter=30", "buffered", False),    # started when the run ended
])
def test_only_a_jittered_fire_has_its_run_time_called_a_jitter(
        cron_expr: str, kind: str, jittered: bool) -> None:
    created = NOON + timedelta(seconds=0.02 if kind == "fired" else 3600)
    found = explain(replace(MINUTELY, cron_expr=cron_expr), NOON, LATER, jobs=(job(
        kind, fire_time=NOON, created_at=created,
        run_at=created + timedelta(seconds=4 if jittered else 0)),))
    assert any("(jitter)" in d for d in found.details) is jittered, found.details


@pytest.mark.parametrize("kind, words", [
    ("backfilled", "was backfilled (job 7)"),
    ("buffered", "held by overlap buffer_one and fired when the run before it finished"),
])
def test_backfilled_and_buffered_jobs(kind: str, words: str) -> None:
    found = explain(MINUTELY, NOON, LATER, jobs=(job(kind, fire_time=NOON),))
    assert found.kind == kind and words in found.summary


def test_a_backfill_whose_job_was_pruned() -> None:
    found = explain(MINUTELY, NOON, LATER, jobs=(job("backfilled", present=False),))
    assert found.kind == "backfilled" and "job 7 has since been pruned" in found.summary


def test_skipped_by_overlap_and_by_the_catch_up_window() -> None:
    overlap = FoundOccurrence("skipped", NOON, None, 1, "overlap: the previous run had not "
                              "finished")
    found = explain(MINUTELY, NOON, LATER, occurrences=(overlap,))
    assert found.kind == "skipped" and "the previous run had not finished" in found.summary
    window = FoundOccurrence("skipped", NOON - timedelta(minutes=5), NOON, 6,
                             "catch-up window: older than 300 s")
    found = explain(MINUTELY, NOON, LATER, occurrences=(window,))
    assert found.kind == "skipped" and "older than the catch-up window" in found.summary
    assert any("6 fire times" in d for d in found.details)


def test_buffered_and_waiting_and_coalesced() -> None:
    held = FoundOccurrence("buffered", NOON, None, 1, "overlap buffer_one: held")
    found = explain(MINUTELY, NOON, LATER, occurrences=(held,))
    assert found.kind == "buffered" and "no job has been made" in found.summary
    left_out = FoundOccurrence("coalesced", NOON - timedelta(minutes=3), NOON, 4,
                               "coalesce: fires missed")
    found = explain(MINUTELY, NOON, LATER, occurrences=(left_out,))
    assert found.kind == "coalesced" and "one of 4 fire times" in found.summary


def test_triggered_by_hand_between_fire_times() -> None:
    at = NOON + timedelta(seconds=17, microseconds=300)
    found = explain(MINUTELY, at, LATER, jobs=(job("triggered"),))
    assert found.kind == "triggered" and found.fire_time is None
    assert (found.previous, found.next) == (NOON, NOON + timedelta(minutes=1))


def test_before_created_no_record_due_and_will_fire() -> None:
    early = explain(MINUTELY, CREATED - timedelta(minutes=1), LATER)
    assert early.kind == "before_created"
    assert explain(MINUTELY, CREATED, LATER).kind == "before_created"  # the cursor's start
    pruned = explain(MINUTELY, NOON, LATER)
    assert pruned.kind == "no_record" and "pruned" in pruned.summary
    due = explain(MINUTELY, NOON + timedelta(minutes=1), NOON + timedelta(minutes=3))
    assert due.kind == "due" and "120 s ago" in due.summary
    ahead = explain(MINUTELY, NOON + timedelta(minutes=5), NOON)
    assert ahead.kind == "will_fire" and ahead.run_at is None
    assert ahead.next == NOON + timedelta(minutes=6)


def test_will_fire_with_its_jittered_run_time() -> None:
    jittered = replace(MINUTELY, cron_expr="@cron 0 * * * * * | jitter=30")
    at = NOON + timedelta(minutes=5)
    found = explain(jittered, at, NOON)
    (expected,) = run_times("minutely", calendar_for(jittered.cron_expr, "UTC"), [at]) or []
    assert found.kind == "will_fire" and found.run_at == expected
    assert at <= expected < at + timedelta(seconds=30)
    assert any("jitter of up to 30 s" in d for d in found.details)


def test_paused_by_whom_with_the_note_past_and_future() -> None:
    paused = replace(MINUTELY, paused_at=NOON - timedelta(hours=1), paused_by="awa-beat",
                     pause_note="paused after 3 consecutive failures; last error: boom")
    past = explain(paused, NOON + timedelta(minutes=1), NOON + timedelta(minutes=2))
    assert past.kind == "paused" and "did not fire" in past.summary
    assert "paused automatically by awa-beat" in past.summary and "3 consecutive" in past.summary
    future = explain(paused, NOON + timedelta(minutes=9), NOON)
    assert future.kind == "paused" and "will not fire unless resumed" in future.summary


def test_retired() -> None:
    retired = replace(MINUTELY, paused_at=NOON, paused_by="awa-beat: retired", retired=True)
    assert explain(retired, NOON + timedelta(minutes=9), NOON).kind == "retired"
    assert explain(retired, NOON + timedelta(minutes=1), LATER).kind == "retired"
    between = explain(retired, NOON + timedelta(seconds=30), NOON)
    assert between.kind == "not_a_fire_time" and "retired" in between.summary


def test_out_of_bounds_either_side() -> None:
    bounded = replace(MINUTELY, cron_expr="@cron 0 * * * * * | start=2027-06-01T12:00:00Z "
                      "end=2027-06-01T13:00:00Z")
    before = explain(bounded, NOON - timedelta(minutes=1), LATER)
    assert before.kind == "out_of_bounds" and "before its start_time" in before.summary
    assert before.fire_time == NOON - timedelta(minutes=1)
    after = explain(bounded, NOON + timedelta(hours=2), LATER)
    assert after.kind == "out_of_bounds" and "after its end_time" in after.summary
    assert after.next is None
    assert fire_time_of(bounded.cron_expr, "UTC", NOON + timedelta(hours=2)) == \
        NOON + timedelta(hours=2)


def test_not_a_fire_time_names_the_fire_times_either_side() -> None:
    found = explain(MINUTELY, NOON + timedelta(seconds=30), LATER)
    assert found.kind == "not_a_fire_time" and found.fire_time is None
    assert (found.previous, found.next) == (NOON, NOON + timedelta(minutes=1))
    assert found.dst == ""
    assert fire_time_of(MINUTELY.cron_expr, "UTC", NOON + timedelta(seconds=30)) is None


def test_an_at_schedule_long_after_its_one_fire() -> None:
    once = replace(MINUTELY, cron_expr="@at 2027-02-01T00:00:00Z | runs=1")
    found = explain(once, LATER, LATER)
    assert found.kind == "not_a_fire_time" and found.next is None
    assert found.previous == datetime(2027, 2, 1, tzinfo=UTC)
    assert "never fires again" in found.summary


def test_invalid_calendar() -> None:
    found = explain(replace(MINUTELY, cron_expr="@midnight"), NOON, LATER)
    assert found.kind == "invalid" and "@midnight" in found.summary


def test_new_york_gap_the_report_asked_at_0230_in_either_offset() -> None:
    # "Why didn't my 02:30 report run on the DST Sunday?" 02:30 EST is 03:30 EDT.
    est = explain(REPORT, datetime.fromisoformat("2027-03-14T02:30:00-05:00"), LATER)
    assert est.kind == "not_a_fire_time" and est.previous == MOVED
    assert "moved by the DST gap: 02:00-03:00 is skipped on 2027-03-14" in est.dst
    edt = explain(REPORT, datetime.fromisoformat("2027-03-14T02:30:00-04:00"), LATER)
    assert edt.kind == "not_a_fire_time" and edt.next == MOVED
    assert "the next fire" in edt.dst and "fires at 03:00:00" in edt.dst


def test_new_york_gap_at_the_moved_fire() -> None:
    found = explain(REPORT, MOVED, LATER, jobs=(job(fire_time=MOVED, outcome="succeeded"),))
    assert found.kind == "fired" and found.fire_time == MOVED
    assert found.dst.startswith("moved by the DST gap")
    assert any(d.startswith("DST: moved by the DST gap") for d in found.details)


def test_london_fold_second_pass_is_not_a_fire_time() -> None:
    found = explain(LONDON, SECOND_PASS, LATER)
    assert found.kind == "not_a_fire_time" and found.previous == FIRST_PASS
    assert found.dst.startswith("01:30:00 happens twice on 2027-10-31 in Europe/London")
    assert "first pass only" in found.dst


def test_london_fold_first_pass_fires() -> None:
    found = explain(LONDON, FIRST_PASS, LATER, jobs=(job(fire_time=FIRST_PASS),))
    assert found.kind == "fired"
    assert "in the repeated hour" in found.dst and "first pass" in found.dst


def test_london_gap_moves_the_0130_job_to_0200() -> None:
    moved = datetime(2027, 3, 28, 1, 0, tzinfo=UTC)  # 02:00 BST
    found = explain(LONDON, moved, datetime(2027, 3, 1, tzinfo=UTC))
    assert found.kind == "will_fire"
    assert "01:00-02:00 is skipped on 2027-03-28 in Europe/London" in found.dst


def test_fire_at_or_before() -> None:
    calendar = calendar_for("0 9 * * 1-5", "Europe/Paris")  # weekdays at 09:00
    monday = datetime(2027, 6, 7, 7, 0, tzinfo=UTC)
    assert fire_at_or_before(calendar, monday) == monday
    assert fire_at_or_before(calendar, monday - timedelta(seconds=1)) == \
        datetime(2027, 6, 4, 7, 0, tzinfo=UTC)  # the Friday before
    assert fire_at_or_before(calendar_for("@at 2027-01-01T00:00:00Z | runs=1", "UTC"),
                             datetime(2026, 1, 1, tzinfo=UTC)) is None


def test_every_kind_is_named_and_the_answer_is_typed() -> None:
    assert len(set(KINDS)) == len(KINDS) == 15
    assert isinstance(explain(MINUTELY, NOON, LATER), Explanation)


def test_the_catch_up_window_and_the_jitter_of_the_marker() -> None:
    timed = replace(MINUTELY, cron_expr="@cron 0 * * * * * | window=60 jitter=30")
    due = explain(timed, NOON + timedelta(minutes=1), NOON + timedelta(minutes=3))
    assert due.kind == "due"
    assert any("older than the schedule's catch-up window (60 s)" in d for d in due.details)
    fresh = explain(timed, NOON + timedelta(minutes=1), NOON + timedelta(seconds=90))
    assert not any("catch-up window" in d for d in fresh.details)
    ahead = explain(timed, NOON + timedelta(minutes=5), NOON)
    assert ahead.kind == "will_fire" and ahead.run_at is not None
    assert any("jitter of up to 30 s" in d for d in ahead.details)


def test_the_one_line_answer_names_the_dst_change() -> None:
    est = explain(REPORT, datetime.fromisoformat("2027-03-14T02:30:00-05:00"), LATER)
    assert "at or just before it is 2027-03-14 07:00:00 UTC (moved by the DST gap)" in \
        est.summary
    fold = explain(LONDON, SECOND_PASS, LATER)
    assert "the second pass of a repeated hour" in fold.summary
    assert "(in the repeated hour)" in fold.summary


@pytest.mark.parametrize("text, words", [
    ("2027-01-01T07:30:00", "has no UTC offset"), ("tomorrow", "is not an instant"),
    ("0001-01-01T00:00:00Z", "out of range: an instant from 1970 to 9999"),
    ("1969-12-31T23:59:59Z", "out of range"),
])
def test_the_instant_refused(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_instant(text, LATER)


def test_the_instant_read() -> None:
    assert parse_instant(" now ", LATER) == LATER
    assert parse_instant("2027-03-14T02:30:00-05:00", LATER) == MOVED + timedelta(minutes=30)
    assert parse_instant("2027-03-14T07:00:00.5Z", LATER) == MOVED + timedelta(
        milliseconds=500)
    assert instant_problem(datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)) is None
