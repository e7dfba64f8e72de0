"""Overlap buffer_one and pause on failure, for every schedule type that fires, in both
table layouts and both dispatches (docs/operating-time.md).

buffer_one: each type fires its first fire time with the real engine and fire statement
on an injected clock; its second, due while that run has not finished, is held; its
third is skipped; once the first run finishes (Awa's job state for Awa dispatch, a
worker's report for Celery dispatch) the engine starts the held fire, with its own fire
time and ``buffered: true``. The ``at`` and ``start_time`` schedules fire years ahead,
and a one-off fires once, so nothing of theirs can be held.

pause_after_failures: every type is paused by awa-beat after its failed runs in a row,
shown as paused with the note, and resumed by an operator. It needs Celery dispatch
with outcome tracking, so the awa layout (Celery dispatch refused there) and Awa
dispatch refuse it, naming the field.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from click.testing import CliRunner

from awa_beat import Schedules
from awa_beat._bridge.messages import fire_task_id
from awa_beat._cli import main
from awa_beat._db.database import Database, connect
from awa_beat._engine.engine import Engine
from awa_beat._engine.firing import BUFFER_POLL
from awa_beat._testing import FakeClock
from awa_beat.errors import AwaBeatError, ValidationError
from awa_beat.outcomes import Report, outcome_params
from tests.matrix.catalogue import CATALOGUE, SETTINGS, Entry
from tests.matrix.conftest import CatalogueTemplates

pytestmark = pytest.mark.integration
UTC = timezone.utc
TEXT = "%Y-%m-%d %H:%M:%S+00"
#: Fire times are taken after this instant: in the past, so that the database, whose
#: clock dates every fire, fires them all.
BASE = datetime(2020, 1, 1, tzinfo=UTC)
#: Every type that fires more than once before now.
HOLDING = [n for n, e in CATALOGUE.items()
           if e.state == "active" and n not in ("at", "bound-start", "one-off")]
#: Every type whose row can pause (the retired one is paused already).
PAUSABLE = [n for n, e in CATALOGUE.items() if e.state != "retired"]
#: (layout, dispatch): Celery dispatch needs the standalone layout.
CELLS = [("standalone", "awa"), ("standalone", "celery"), ("awa", "awa")]
TRACKED = dataclasses.replace(SETTINGS, track_outcomes=True)


def fire_times(entry: Entry, count: int) -> list[datetime]:
    times, t = [], BASE
    for _ in range(count):
        nxt = entry.calendar(t)
        assert nxt is not None, entry.name
        times.append(nxt)
        t = nxt
    return times


def jobs_of(url: str, name: str) -> list[dict[str, Any]]:
    with connect(url) as conn:
        return [r[0] for r in conn.execute(
            "SELECT metadata || jsonb_build_object('id', id) FROM awa.jobs"
            " WHERE metadata ->> 'cron_name' = %s ORDER BY id", (name,))]


def finish_run(store: Database, job: dict[str, Any], dispatch: str) -> None:
    """The run of ``job`` ends: Awa's worker completes it, or a Celery worker reports."""
    if dispatch == "awa":
        with connect(store.conninfo) as conn:
            conn.execute("UPDATE awa.jobs SET state = 'completed' WHERE id = %s",
                         (job["id"],))
        return
    name, text = job["cron_name"], job["cron_fire_time"]
    store.outcomes.record(outcome_params([Report(
        fire_task_id(name, text, 0), name, text, job["id"], "succeeded",
        finished_at=datetime.now(UTC), runtime=0.1)]))


@pytest.mark.parametrize(("layout", "dispatch"), CELLS)
def test_buffer_one_holds_one_fire_of_every_type_and_starts_it_after_the_run(
        matrix_templates: CatalogueTemplates, layout: str, dispatch: str) -> None:
    db = matrix_templates.clone(layout)
    with Schedules(db.url, settings=SETTINGS) as schedules:
        for name in HOLDING:
            schedules.update(name, options={"awa_beat": {
                "overlap": "buffer_one", "dispatch": dispatch}}, force=True)
    with Database(db.url) as store, connect(db.url) as conn:
        for name in HOLDING:
            t1, t2, t3 = fire_times(CATALOGUE[name], 3)
            conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = %s WHERE name = %s",
                         (t1 - timedelta(seconds=1), name))
            clock = FakeClock(t1)
            engine = Engine(store.evaluator, clock=clock)
            engine.run_pass()
            (first,) = jobs_of(db.url, name)
            assert first["cron_fire_time"] == t1.strftime(TEXT), name
            clock.advance(seconds=(t2 - t1).total_seconds())
            engine.run_pass()
            clock.advance(seconds=(t3 - t2).total_seconds())
            engine.run_pass()
            assert len(jobs_of(db.url, name)) == 1, name  # held, then skipped
            assert engine.stats.buffered == 1, name
            finish_run(store, first, dispatch)
            clock.advance(seconds=BUFFER_POLL + 0.5)
            engine.run_pass()
            jobs = jobs_of(db.url, name)
            assert [(j["cron_fire_time"], j.get("buffered")) for j in jobs] == [
                (t1.strftime(TEXT), None), (t2.strftime(TEXT), True)], name
            assert engine.firing.held_check_at is None, name  # nothing held: no look
            kinds = {(r[0], r[1]) for r in conn.execute(
                "SELECT kind, fire_time FROM awa_beat.occurrences WHERE schedule = %s",
                (name,))}
            assert kinds == {("buffered", t2), ("skipped", t3)}, name
            # Out of the way of the next type's clock.
            conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = now() WHERE name = %s",
                         (name,))


def cli(url: str, *args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner(env=env).invoke(main, [*args, "--database-url", url])


def test_pause_after_failures_pauses_every_type_until_an_operator_resumes(
        matrix_templates: CatalogueTemplates) -> None:
    db = matrix_templates.clone("standalone")
    with Schedules(db.url, settings=TRACKED) as schedules:
        for name in PAUSABLE:
            schedules.update(name, options={"awa_beat": {
                "pause_after_failures": 2, "dispatch": "celery"}}, force=True)
        if "paused" in PAUSABLE:
            schedules.resume("paused")
    with Database(db.url) as store:
        for name in PAUSABLE:
            t1, t2 = BASE + timedelta(minutes=1), BASE + timedelta(minutes=2)
            for t, state in ((t1, "failed"), (t2, "failed")):
                text = t.strftime(TEXT)
                store.outcomes.record(outcome_params([Report(
                    fire_task_id(name, text, 0), name, text, None, state,
                    finished_at=datetime.now(UTC), runtime=0.1,
                    error=f"ValueError: {name} broke")]))
    for name in PAUSABLE:
        shown = json.loads(cli(db.url, "show", name, "--json").stdout)
        assert shown["paused_by"] == "awa-beat", name
        assert shown["pause_after_failures"] == 2, name
        assert shown["pause_note"] == ("paused after 2 consecutive failures; last error: "
                                       f"ValueError: {name} broke"), name
        text = cli(db.url, "show", name).output
        assert "by awa-beat: paused after 2 consecutive failures" in text, name
        assert "2 failures in a row" in text, name
        assert cli(db.url, "resume", name).exit_code == 0, name
        assert json.loads(cli(db.url, "show", name, "--json").stdout)["paused_at"] is None
    listed = cli(db.url, "list").output.splitlines()
    assert not [line for line in listed  # all resumed; the retired one stays retired
                if "by awa-beat" in line and "retired" not in line]


@pytest.mark.parametrize("layout", ["standalone", "awa"])
def test_pause_after_failures_is_refused_without_tracking_or_on_awa_dispatch(
        matrix_templates: CatalogueTemplates, layout: str) -> None:
    db = matrix_templates.clone(layout)
    name = "grid-interval"
    with Schedules(db.url, settings=SETTINGS) as schedules:
        with pytest.raises(ValidationError, match="needs outcome tracking") as untracked:
            schedules.update(name, options={"awa_beat": {
                "pause_after_failures": 3, "dispatch": "celery"}}, force=True)
        assert untracked.value.problems[0][:2] == (
            name, "options.awa_beat.pause_after_failures")
    with Schedules(db.url, settings=TRACKED) as schedules:
        with pytest.raises(ValidationError, match="cannot be paused on failure"):
            schedules.update(name, options={"awa_beat": {
                "pause_after_failures": 3, "dispatch": "awa"}}, force=True)
        if layout == "awa":  # Celery dispatch itself is refused where Awa owns the jobs
            with pytest.raises(AwaBeatError, match="Celery dispatch needs"):
                schedules.update(name, options={"awa_beat": {
                    "pause_after_failures": 3, "dispatch": "celery"}}, force=True)
    refused = cli(db.url, "add", "new", "--task", "t", "--every", "10m", "--dispatch",
                  "celery", "--pause-after-failures", "3")
    assert refused.exit_code == 1
    assert ("entry 'new', field 'options.awa_beat.pause_after_failures': needs outcome "
            "tracking") in refused.output
    bad = cli(db.url, "add", "new", "--task", "t", "--every", "10m",
              "--pause-after-failures", "often")
    assert bad.exit_code == 1 and "'--pause-after-failures'" in bad.output
    with connect(db.url) as conn:
        assert conn.execute("SELECT count(*) FROM awa.cron_jobs WHERE name = 'new'"
                            ).fetchone()[0] == 0


def test_cli_add_and_edit_take_buffer_one_and_pause_after_failures(
        matrix_templates: CatalogueTemplates) -> None:
    db = matrix_templates.clone("standalone")
    env = {"AWA_BEAT_TRACK_OUTCOMES": "1"}
    added = cli(db.url, "add", "new", "--task", "t.new", "--every", "10m", "--dispatch",
                "celery", "--overlap", "buffer_one", "--pause-after-failures", "3", "--json",
                env=env)
    assert added.exit_code == 0, added.output
    data = json.loads(added.stdout)
    assert (data["overlap"], data["pause_after_failures"]) == ("buffer_one", 3)
    text = cli(db.url, "show", "new").output
    assert "buffer_one" in text and "3 failures in a row" in text
    edited = cli(db.url, "edit", "new", "--overlap", "none", "--pause-after-failures",
                 "none", "--json", env=env)
    assert edited.exit_code == 0, edited.output
    data = json.loads(edited.stdout)
    assert (data["overlap"], data["pause_after_failures"]) == ("allow", None)
    for name in HOLDING:  # buffer_one on every type, through the command line
        done = cli(db.url, "edit", name, "--force", "--overlap", "buffer_one", "--json")
        assert done.exit_code == 0, (name, done.output)
        assert json.loads(done.stdout)["overlap"] == "buffer_one", name


def test_export_carries_buffer_one_and_pause_after_failures_of_every_type(
        matrix_templates: CatalogueTemplates) -> None:
    from awa_beat._schedules.spec import specs_from_beat_schedule

    db = matrix_templates.clone("standalone")
    with Schedules(db.url, settings=TRACKED) as schedules:
        for name in PAUSABLE:
            schedules.update(name, options={"awa_beat": {
                "overlap": "buffer_one", "pause_after_failures": 2, "dispatch": "celery"}},
                force=True)
    result = CliRunner().invoke(main, ["export", "--format", "python", "--database-url",
                                       db.url], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    namespace: dict[str, Any] = {}
    exec(compile(result.stdout, "exported.py", "exec"), namespace)
    exported = namespace["beat_schedule"]
    for name in PAUSABLE:
        if name not in exported:  # left out with a comment: a type Celery cannot run
            continue
        awa = exported[name]["options"]["awa_beat"]
        assert (awa["overlap"], awa["pause_after_failures"]) == ("buffer_one", 2), name
    # Read back as a beat reads its configuration: the same settings.
    specs = specs_from_beat_schedule(exported, default_timezone="UTC")
    assert specs and all(
        (s.outcomes["overlap"], s.outcomes["pause_after_failures"]) == ("buffer_one", 2)
        for s in specs)


def test_import_of_an_app_refuses_pause_after_failures_without_tracking(
        matrix_templates: CatalogueTemplates, tmp_path: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    db = matrix_templates.clone("standalone")
    (tmp_path / "pausing_app.py").write_text(
        "from celery import Celery\n"
        "app = Celery('pausing', set_as_current=False)\n"
        "app.conf.beat_schedule = {'charge': {'task': 't.charge', 'schedule': 3600,"
        " 'options': {'awa_beat': {'dispatch': 'celery', 'pause_after_failures': 3,"
        " 'overlap': 'buffer_one'}}}}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("AWA_BEAT_TRACK_OUTCOMES", raising=False)
    refused = CliRunner().invoke(main, ["import", "-A", "pausing_app", "--database-url",
                                        db.url])
    assert refused.exit_code == 1
    assert ("entry 'charge', field 'options.awa_beat.pause_after_failures': needs outcome "
            "tracking") in refused.output
    monkeypatch.setenv("AWA_BEAT_TRACK_OUTCOMES", "1")
    done = CliRunner().invoke(main, ["import", "-A", "pausing_app", "--database-url",
                                     db.url])
    assert done.exit_code == 0, done.output
    shown = json.loads(cli(db.url, "show", "charge", "--json").stdout)
    assert (shown["overlap"], shown["pause_after_failures"]) == ("buffer_one", 3)


@pytest.mark.parametrize("layout", ["standalone", "awa"])
def test_beat_refuses_pause_after_failures_without_tracking_and_writes_nothing(
        matrix_templates: CatalogueTemplates, layout: str) -> None:
    from awa_beat._beat.node import BeatNode
    from awa_beat._schedules.spec import specs_from_beat_schedule

    db = matrix_templates.clone(layout)
    entry = {"task": "t.charge", "schedule": 3600,
             "options": {"awa_beat": {"dispatch": "celery", "pause_after_failures": 3}}}
    specs = specs_from_beat_schedule({"charge": entry}, default_timezone="UTC")
    with pytest.raises(ValidationError) as refused:
        BeatNode(SETTINGS, specs, database_url=db.url)
    assert refused.value.problems == [(
        "charge", "options.awa_beat.pause_after_failures",
        "needs outcome tracking: set awa_beat_track_outcomes = True (or "
        "AWA_BEAT_TRACK_OUTCOMES=1) for the app, on its workers and here, or remove the "
        "option")]
    with connect(db.url) as conn:
        assert conn.execute("SELECT count(*) FROM awa.cron_jobs WHERE name = 'charge'"
                            ).fetchone()[0] == 0
    if layout == "standalone":  # where Celery dispatch may run at all
        BeatNode(TRACKED, specs, database_url=db.url).open().close()
        with connect(db.url) as conn:
            assert conn.execute("SELECT count(*) FROM awa.cron_jobs WHERE name = 'charge'"
                                ).fetchone()[0] == 1
