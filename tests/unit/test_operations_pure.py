"""The operations layer's and the CLI's pure parts: finding the database, fire views,
export entries and formatting (no database)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from awa_beat._cli import main
from awa_beat._cli.format import check_text, fmt, iso, occurrence_table, table
from awa_beat._db.records import ScheduleRow
from awa_beat._ops.operations import find_database_url
from awa_beat._ops.records import Check, Occurrence, ScheduleView
from awa_beat._ops.rows import beat_entry, next_fire, upcoming_fires
from awa_beat._schedules.describe import offset_text
from awa_beat._schedules.fire_times import every_seconds
from awa_beat.errors import ConfigError, NoDatabase
from tests.apps import celery_app

UTC = timezone.utc
T = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def schedule(**over: Any) -> ScheduleRow:
    fields: dict[str, Any] = {
        "name": "r", "cron_expr": "0 9 * * *", "timezone": "UTC", "kind": "t.r",
        "queue": "default", "args": {"args": [], "kwargs": {}}, "priority": 2,
        "max_attempts": 25, "tags": [], "metadata": {}, "missed_fire_policy": "coalesce",
        "last_enqueued_at": None, "created_at": T, "updated_at": T, "paused_at": None,
        "paused_by": None}
    return ScheduleRow(**{**fields, **over})


# -- finding the database ------------------------------------------------------------------


@pytest.fixture
def no_embedded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No URL in the environment and an empty embedded data directory."""
    monkeypatch.delenv("AWA_BEAT_DATABASE_URL", raising=False)
    monkeypatch.setenv("AWA_BEAT_EMBEDDED_DIR", str(tmp_path / "pgdata"))
    return tmp_path


def test_the_explicit_url_then_the_environment_then_the_app(no_embedded: Path) -> None:
    app = celery_app(db_url="postgresql://app@h/db")
    env = {"AWA_BEAT_DATABASE_URL": "postgresql://env@h/db"}
    assert find_database_url("postgresql://flag@h/db", app, env) == "postgresql://flag@h/db"
    assert find_database_url(None, app, env) == "postgresql://env@h/db"
    assert find_database_url(None, app, {}) == "postgresql://app@h/db"
    with pytest.raises(NoDatabase, match=r"^no database: "):
        find_database_url(None, celery_app(), {})
    with pytest.raises(ConfigError, match="malformed") as bad:
        find_database_url("not a url", None, {})
    assert not isinstance(bad.value, NoDatabase)


def test_no_database_is_a_one_line_error_exiting_1(no_embedded: Path) -> None:
    result = CliRunner().invoke(main, ["list"])
    assert result.exit_code == 1  # as the README promises
    assert result.stderr.startswith("error: no database: pass --database-url")
    assert len(result.stderr.strip().splitlines()) == 1 and "Usage" not in result.output
    assert not (no_embedded / "pgdata").exists()  # no server made for a typo'd setting


# -- fires, problems and exports -----------------------------------------------------------


def test_next_fire_or_the_problem() -> None:
    assert next_fire(schedule(), T) == (T + timedelta(days=1), None)
    assert next_fire(schedule(timezone="Mars/Olympus"), T)[1] is not None
    assert next_fire(schedule(missed_fire_policy="never"), T) == (
        None, "unknown missed-fire policy 'never'")


def test_upcoming_fires_across_a_fall_back() -> None:
    row = schedule(cron_expr="0 9 * * *", timezone="America/New_York")
    fires = upcoming_fires(row, datetime(2026, 10, 31, 15, 0, tzinfo=UTC), 2)
    assert [(f.at.hour, f.note) for f in fires] == [
        (14, "DST: UTC offset -04:00 -> -05:00"), (14, "")]
    assert upcoming_fires(schedule(timezone="Mars/Olympus"), T, 3) == []


def test_offset_text() -> None:
    assert offset_text(timedelta(hours=5, minutes=30)) == "+05:30"
    assert offset_text(timedelta(hours=-3, minutes=-30)) == "-03:30"
    assert offset_text(None) == "+00:00"


def test_every_seconds() -> None:
    assert every_seconds("@every 90s") == 90
    assert every_seconds("@every 0s") is None  # not an interval fire_times would run
    assert every_seconds("*/5 * * * *") is None


def test_beat_entry_round_trips_the_options() -> None:
    row = schedule(cron_expr="@every 90s", queue="q", priority=1, max_attempts=3,
                   tags=["a"], args={"args": [1], "kwargs": {"k": 2}},
                   metadata={"celery": {"options": {"expires": 5}, "dispatch": "celery"},
                             "team": "x"})
    assert beat_entry(row) == {
        "task": "t.r", "schedule": 90, "args": [1], "kwargs": {"k": 2},
        "options": {"expires": 5, "awa_beat": {
            "timezone": "UTC", "missed_fire_policy": "coalesce", "queue": "q",
            "priority": 1, "max_attempts": 3, "tags": ["a"], "metadata": {"team": "x"},
            "dispatch": "celery"}}}


# -- formatting ----------------------------------------------------------------------------


def test_table_aligns_without_trailing_blanks() -> None:
    assert table(["A", "LONG"], [["xyz", ""], ["1", "2"]]) == "A    LONG\nxyz\n1    2"
    assert table(["A", "B"], []) == "A  B"


def test_times() -> None:
    summer = datetime(2026, 7, 1, 7, 0, tzinfo=UTC)
    assert fmt(summer) == "2026-07-01 07:00:00"
    assert fmt(summer, "Europe/Paris") == "2026-07-01 09:00:00 CEST"
    assert fmt(summer, "Mars/Olympus") == "-" and fmt(None) == "-"
    assert iso(summer.astimezone(timezone(timedelta(hours=2)))) == "2026-07-01T07:00:00+00:00"
    assert iso(None) is None


def test_history_tables_show_outcomes_never_the_bare_job_state() -> None:
    # A Celery job is 'completed' once published, whatever its task then did.
    failed = Occurrence("fired", T, job_id=1, job_state="completed", outcome="failed",
                        error="boom", schedule="r")
    unknown = Occurrence("fired", T, job_id=2, job_state="completed", schedule="s")
    text = occurrence_table([failed, unknown], schedules=True)
    lines = text.splitlines()
    assert lines[0].split()[:6] == ["FIRE", "TIME", "(UTC)", "SCHEDULE", "KIND", "JOB"]
    assert "failed" in lines[1] and "boom" in lines[1] and " r " in lines[1]
    assert "unreported" in lines[2] and "completed" not in text


def test_check_text() -> None:
    assert check_text(Check(True, "fine", "unused")) == "[ok] fine"
    assert check_text(Check(False, "2 bad", "fix them", ("a: x", "b: y"))) == (
        "[FAIL] 2 bad\n       - a: x\n       - b: y\n       fix: fix them")


def test_the_last_fire_is_never_the_registration_nor_a_change_of_the_calendar() -> None:
    registered = T.replace(minute=47, second=12, microsecond=400_000)  # 09:47:12.4
    def view(cursor: datetime | None, expr: str = "0 9 * * *") -> ScheduleView:
        return ScheduleView(schedule(cron_expr=expr, last_enqueued_at=cursor,
                                     created_at=registered), None)

    assert (view(None).last_fire, view(None).quiet_since) == (None, None)  # Awa's, unfired
    at_registration = view(registered.replace(microsecond=0))
    assert (at_registration.last_fire, at_registration.quiet_since) == (None, None)
    # Even on a calendar that fires that very second, the registration is no fire.
    assert view(registered.replace(microsecond=0), "* * * * * *").last_fire is None
    changed = view(T.replace(hour=11, minute=3))  # the calendar changed at 11:03
    assert (changed.last_fire, changed.quiet_since) == (None, T.replace(hour=11, minute=3))
    fired = T + timedelta(days=1)  # 09:00 the next day: a fire time
    assert (view(fired).last_fire, view(fired).quiet_since) == (fired, None)
    imported = T - timedelta(days=3, minutes=7)  # a last run carried over by import
    assert view(imported).last_fire == imported
    assert view(registered.replace(microsecond=0), "nope").last_fire is None
    assert view(fired, "nope").last_fire == fired  # unreadable: the cursor as it is


def test_a_paused_schedule_reads_paused_and_a_retired_one_retired() -> None:
    from awa_beat._cli.format import last_fire_text, next_fire_text
    from awa_beat._db.records import RETIRED_BY

    nxt = T + timedelta(days=1)
    assert next_fire_text(ScheduleView(schedule(), nxt)) == "2026-01-06 09:00:00"
    assert next_fire_text(ScheduleView(schedule(paused_at=T, paused_by="ops"), nxt)) == "paused"
    retired = schedule(paused_at=T, paused_by=RETIRED_BY)
    assert next_fire_text(ScheduleView(retired, None)) == "retired (no run left)"
    assert last_fire_text(ScheduleView(schedule(last_enqueued_at=T), None)) == "never"
