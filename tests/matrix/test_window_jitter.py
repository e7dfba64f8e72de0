"""The catch-up window and the jitter on every schedule type of the catalogue, in both
layouts: set, shown, kept by an edit of the calendar and removed through the Python API
and ``awa-beat add|edit``; and what the real engine and fire statement do with them after
a simulated downtime, on an injected clock. The expected fires come from the catalogue's
documented calendars, not from awa-beat's. The dashboard's and the Django admin's forms
are in test_bounds_forms.py; Celery's eta through the bridge is in
tests/integration/test_bridge.py."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from click.testing import CliRunner

from awa_beat._cli import main
from awa_beat._db.database import Database, connect
from awa_beat._engine.engine import Engine
from awa_beat._schedules.fire_times import calendar_for, jitter_delay
from awa_beat._testing import FAKE_CLOCK_TOLERANCE, FakeClock
from tests.matrix.catalogue import CATALOGUE, NAMES, Entry, MatrixDB, stored_rows
from tests.matrix.test_bounds import other_calendar
from tests.matrix.test_export import export, import_app, rows, runs_under_celery

pytestmark = pytest.mark.integration
UTC = timezone.utc
ACTIVE = [n for n, e in CATALOGUE.items() if e.state == "active"]
DOWN = timedelta(hours=3)
#: The window of each policy: under coalesce, a minute, so that the latest missed fire of
#: the hourly schedules is outside it (both cannot be within a minute of now) while the
#: 7 s interval's is inside.
WINDOW = {"catch_up": 3600, "coalesce": 60}


def timing(schedules: Any, name: str) -> tuple[float | None, float | None]:
    b = schedules.get(name).bounds
    return b.catch_up_window, b.jitter


def test_api_sets_keeps_and_removes_them_on_every_type(matrix_db: MatrixDB) -> None:
    with matrix_db.schedules() as s:
        for name in NAMES:
            entry = CATALOGUE[name]
            s.update(name, force=True,
                     options={"awa_beat": {"catch_up_window": 300, "jitter": 1.5}})
            assert timing(s, name) == (300.0, 1.5), name
            row = s.get(name).row
            assert " window=300 jitter=1.5" in row.cron_expr, name
            if entry.max_runs is not None:  # The run limit stays last, where SQL reads it.
                assert row.cron_expr.endswith(f" jitter=1.5 runs={entry.max_runs}"), name
            calendar = calendar_for(row.cron_expr, row.timezone)
            assert (calendar.window, calendar.jitter) == (300.0, 1.5), name  # type: ignore[attr-defined]
            if entry.marker != "at":
                s.update(name, schedule=other_calendar(name)[0])
                assert timing(s, name) == (300.0, 1.5), name  # the calendar changed
            s.update(name, options={"awa_beat": {"catch_up_window": None}})
            assert timing(s, name) == (None, 1.5), name
            s.update(name, options={"awa_beat": {"jitter": None}})
            assert timing(s, name) == (None, None), name
            stored = s.get(name).row.cron_expr
            assert "window=" not in stored and "jitter=" not in stored, name
        # A plain Awa expression is a plain expression again, which Awa fires itself.
        assert s.get("paused").row.cron_expr == "45 * * * *"


# -- the command line -------------------------------------------------------------------------


def cli(db: MatrixDB, *args: str) -> Any:
    return CliRunner().invoke(main, [*args, "--database-url", db.url])


def test_cli_add_edit_show_and_remove(matrix_db: MatrixDB) -> None:
    added = cli(matrix_db, "add", "spread", "--task", "t.spread", "--cron", "0 0 * * *",
                "--catch-up-window", "5m", "--jitter", "0.25", "--json")
    assert added.exit_code == 0, added.output
    data = json.loads(added.stdout)
    assert (data["catch_up_window"], data["jitter"]) == (300.0, 0.25)
    assert data["schedule"] == "@cron 0 0 * * * | window=300 jitter=0.25"
    text = cli(matrix_db, "show", "spread").output
    assert re.search(r"catch-up window: +300 s", text), text
    assert re.search(r"jitter: +up to 0.25 s after each fire time", text), text
    # The preview gives each fire's run time: the fire plus the firing rules' delay.
    previewed = cli(matrix_db, "preview", "spread", "-n", "3", "--json")
    assert previewed.exit_code == 0, previewed.output
    for fire in json.loads(previewed.stdout)["fires"]:
        at = datetime.fromisoformat(fire["at"].replace("Z", "+00:00"))
        epoch = int(at.timestamp())
        delay = jitter_delay("spread", epoch, 0.25, epoch + 86400)
        assert datetime.fromisoformat(fire["run_at"].replace("Z", "+00:00")) == \
            at + timedelta(microseconds=delay)
    assert "RUNS AT (JITTER)" in cli(matrix_db, "preview", "spread").output
    for name in ACTIVE:
        edited = cli(matrix_db, "edit", name, "--force", "--catch-up-window", "90",
                     "--jitter", "1m", "--json")
        assert edited.exit_code == 0, (name, edited.output)
        data = json.loads(edited.stdout)
        assert (data["catch_up_window"], data["jitter"]) == (90.0, 60.0), name
        removed = cli(matrix_db, "edit", name, "--catch-up-window", "none", "--jitter",
                      "none", "--json")
        assert removed.exit_code == 0, removed.output
        data = json.loads(removed.stdout)
        assert (data["catch_up_window"], data["jitter"]) == (None, None), name


@pytest.mark.parametrize(("args", "field", "words"), [
    (["--catch-up-window", "soon"], "--catch-up-window", "older than this many seconds"),
    (["--catch-up-window", "0.5"], "options.awa_beat.catch_up_window", "at least 1 s"),
    (["--jitter", "0"], "options.awa_beat.jitter", "positive"),
    (["--jitter", "0.0001"], "options.awa_beat.jitter", "three decimals"),
    (["--jitter", "later"], "--jitter", "each job runs up to"),
])
def test_cli_refusals_name_the_entry_and_field_and_write_nothing(
        shared_matrix_db: MatrixDB, args: list[str], field: str, words: str) -> None:
    before = stored_rows(shared_matrix_db.url)
    for command in (["add", "fresh", "--task", "t", "--cron", "0 9 * * *"],
                    ["edit", "bound-max-runs"]):
        result = cli(shared_matrix_db, *command, *args)
        assert result.exit_code == 1, result.output
        line = result.output
        assert line.startswith(f"error: invalid schedule field: entry {command[1]!r}, "
                               f"field {field!r}: "), line
        assert line.count("\n") == 1 and words in line and "Traceback" not in line
        assert stored_rows(shared_matrix_db.url) == before


# -- the engine, after a simulated downtime -------------------------------------------------------


def documented(entry: Entry, after: datetime, until: datetime) -> list[datetime]:
    """The catalogue's fires of ``entry`` in ``(after, until]``."""
    fires: list[datetime] = []
    t = after
    while (t := entry.calendar(t)) is not None and t <= until:  # type: ignore[assignment]
        fires.append(t)
    return fires


def down_since(db: MatrixDB, cursor: datetime, **awa: Any) -> None:
    """Give every active schedule ``awa`` settings, then put its cursor at ``cursor``, as
    a beat that stopped then leaves it."""
    with db.schedules() as s:
        for name in ACTIVE:
            s.update(name, force=True, options={"awa_beat": awa})
    with connect(db.url) as conn:
        conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s", (cursor,))


def run_engine(url: str, now: datetime) -> None:
    with Database(url) as store:
        store.clock_tolerance = FAKE_CLOCK_TOLERANCE
        engine = Engine(store.evaluator, clock=FakeClock(now))
        for _ in range(3):
            engine.run_pass()


def jobs(url: str) -> dict[str, list[tuple[Any, ...]]]:
    out: dict[str, list[tuple[Any, ...]]] = {}
    with connect(url) as conn:
        for name, fire, run_at, state in conn.execute(
                "SELECT metadata ->> 'cron_name', (metadata ->> 'cron_fire_time')::timestamptz,"
                " run_at, state::text FROM awa.jobs ORDER BY id"):
            out.setdefault(name, []).append((fire, run_at, state))
    return out


def window_skips(url: str) -> dict[str, list[tuple[Any, ...]]]:
    out: dict[str, list[tuple[Any, ...]]] = {}
    with connect(url) as conn:
        for name, first, last, count, reason in conn.execute(
                "SELECT schedule, fire_time, last_fire_time, count, reason"
                " FROM awa_beat.occurrences WHERE kind = 'skipped' ORDER BY id"):
            assert reason.startswith("catch-up window"), reason
            out.setdefault(name, []).append((first, last, count))
    return out


@pytest.mark.parametrize("policy", ["catch_up", "coalesce"])
def test_after_downtime_fires_older_than_the_window_are_recorded_not_fired(
        matrix_db: MatrixDB, policy: str) -> None:
    now = datetime.now(UTC)
    cursor = (now - DOWN).replace(microsecond=0)
    down_since(matrix_db, cursor, catch_up_window=WINDOW[policy], missed_fire_policy=policy)
    run_engine(matrix_db.url, now)
    cutoff = now - timedelta(seconds=WINDOW[policy])
    fired, skipped = jobs(matrix_db.url), window_skips(matrix_db.url)
    for name in ACTIVE:
        missed = documented(CATALOGUE[name], cursor, now)
        old = [f for f in missed if f < cutoff]
        inside = missed[len(old):]
        if policy == "catch_up":
            want_jobs, passed = inside, old
        elif inside:
            want_jobs, passed = inside[-1:], []
        else:
            want_jobs, passed = [], old
        limit = CATALOGUE[name].max_runs
        if limit is not None:
            want_jobs = want_jobs[:limit]
        assert [j[0] for j in fired.get(name, [])] == want_jobs, name
        want_skips = [(passed[0], passed[-1], len(passed))] if passed else []
        assert skipped.get(name, []) == want_skips, name
        if missed:  # The cursor is past every missed fire time, fired or not.
            row = Database(matrix_db.url)
            with row:
                assert row.schedules.get(name).last_enqueued_at == missed[-1], name
    # Something of each kind happened, so the cells above held something to check.
    assert any(skipped.values()) and any(fired.values())
    shown = next(n for n in ("grid-interval", "bound-end", "bound-max-runs") if n in skipped)
    history = cli(matrix_db, "history", shown).output
    assert "catch-up window" in history, history


def test_a_jittered_job_runs_after_its_nominal_fire_time(matrix_db: MatrixDB) -> None:
    now = datetime.now(UTC)
    cursor = (now - DOWN).replace(microsecond=0)
    jitter = 2 * 86400.0
    down_since(matrix_db, cursor, jitter=jitter, missed_fire_policy="coalesce")
    with connect(matrix_db.url) as conn:
        before = conn.execute("SELECT now()").fetchone()[0]
    run_engine(matrix_db.url, now)
    with connect(matrix_db.url) as conn:
        after = conn.execute("SELECT now()").fetchone()[0]
    fired = jobs(matrix_db.url)
    checked = 0
    for name in ACTIVE:
        entry = CATALOGUE[name]
        missed = documented(entry, cursor, now)
        if not missed:
            assert name not in fired, name
            continue
        [(fire, run_at, state)] = fired[name]
        assert fire == missed[-1], name  # the nominal fire time, on the job
        nxt = entry.calendar(fire)
        epoch = int(fire.timestamp())
        delay = jitter_delay(name, epoch, jitter, None if nxt is None else int(nxt.timestamp()))
        assert run_at == fire + timedelta(microseconds=delay), name
        assert nxt is None or run_at < nxt, name  # never at or past the next fire time
        if run_at > after:
            assert state == "scheduled", name
        elif run_at <= before:
            assert state == "available", name
        checked += 1
    assert checked >= 3


# -- export and import ---------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "python"])
def test_export_imported_back_keeps_them(matrix_db: MatrixDB, databases: Any,
                                         tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                         fmt: str) -> None:
    with matrix_db.schedules() as s:
        for name in NAMES:
            s.update(name, force=True,
                     options={"awa_beat": {"catch_up_window": 600, "jitter": 0.5}})
    exported = export(matrix_db.url, "--format", fmt)
    if fmt == "python":  # Celery runs them on the same calendar, without either setting.
        assert "Celery has no catch_up_window=600 and jitter=0.5" in exported
        source = exported
        names = {n for n in NAMES if runs_under_celery(CATALOGUE[n])}
    else:
        source = f"import json\nbeat_schedule = json.loads({exported!r})\n"
        names = set(NAMES)
    target = databases.fresh(matrix_db.layout)
    out = import_app(target, tmp_path, f"timed_{fmt}_{matrix_db.layout}", source,
                     monkeypatch)
    assert out["not_carried_over"] == []
    assert rows(target) == rows(matrix_db.url, names)
    assert all(" window=600 jitter=0.5" in r["cron_expr"] for r in rows(target).values())
