"""`awa-beat import`: schedules written by the real django-celery-beat, RedBeat and Celery
PersistentScheduler (and a real -A app) move into awa.cron_jobs with their cursors."""

from __future__ import annotations

import json
import os
import shelve
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from celery import Celery
from celery.beat import PersistentScheduler
from celery.schedules import crontab
from click.testing import CliRunner

from awa_beat._celery.command import command as celery_command
from awa_beat._cli import main
from awa_beat._db.database import Database, connect
from awa_beat._db.records import RETIRED_BY
from awa_beat._engine.engine import Engine
from awa_beat._testing import TempDatabases

pytestmark = pytest.mark.acceptance

UTC = timezone.utc
REDIS_URL = "redis://127.0.0.1:6379/14"
#: The old scheduler's last run of most entries (sub-second, as Celery records it).
LAST = datetime(2026, 1, 5, 12, 0, 0, 400000, tzinfo=UTC)


def run(*args: str):
    return CliRunner().invoke(main, ["import", *args], catch_exceptions=False)


def imported(url: str, *args: str) -> dict[str, Any]:
    result = run(*args, "--database-url", url, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def stored(url: str) -> dict[str, dict[str, Any]]:
    with connect(url) as conn:
        cur = conn.execute(
            "SELECT c.*, s.deployment FROM awa.cron_jobs c "
            "LEFT JOIN awa_beat.schedules s USING (name) ORDER BY name")
        names = [d.name for d in cur.description]
        return {row[0]: dict(zip(names, row, strict=True)) for row in cur}


def not_carried(out: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item["reason"] for item in out["not_carried_over"]}


# -- django-celery-beat ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def django_url(databases: TempDatabases) -> str:
    """A database migrated by django-celery-beat's own migrations, rows made by its ORM."""
    pytest.importorskip("django_celery_beat")
    import django
    from django.conf import settings
    from django.core.management import call_command
    from psycopg.conninfo import conninfo_to_dict

    url = databases.fresh()
    params = conninfo_to_dict(url)
    if settings.configured:  # pragma: no cover - one configuration per process
        pytest.skip("Django is already configured in this process")
    settings.configure(
        DATABASES={"default": {
            "ENGINE": "django.db.backends.postgresql", "NAME": params["dbname"],
            "USER": params.get("user", "postgres"), "PASSWORD": params.get("password", ""),
            "HOST": params.get("host", "127.0.0.1"), "PORT": params.get("port", "5432")}},
        INSTALLED_APPS=["django_celery_beat"], USE_TZ=True, TIME_ZONE="UTC")
    django.setup()
    call_command("migrate", "django_celery_beat", verbosity=0)
    from django_celery_beat.models import (
        ClockedSchedule,
        CrontabSchedule,
        IntervalSchedule,
        PeriodicTask,
        SolarSchedule,
    )

    every10 = IntervalSchedule.objects.create(every=10, period=IntervalSchedule.SECONDS)
    every_min = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.MINUTES)
    half_second = IntervalSchedule.objects.create(every=500000,
                                                  period=IntervalSchedule.MICROSECONDS)

    def cron(**fields: str) -> CrontabSchedule:
        return CrontabSchedule.objects.create(**fields)

    task = PeriodicTask.objects.create
    task(name="every-10s", task="t.ping", interval=every10, last_run_at=LAST)
    task(name="paris-report", task="reports.nightly",
         crontab=cron(minute="30", hour="2", timezone="Europe/Paris"),
         args='[1, "x"]', kwargs='{"full": true}', queue="reports", exchange="ex",
         routing_key="rk", priority=5, headers='{"tenant": "acme"}', expire_seconds=3600,
         last_run_at=datetime(2026, 1, 5, 1, 30, tzinfo=UTC))  # 02:30 in Paris
    task(name="first-monday", task="t.fm",
         crontab=cron(minute="0", hour="9", day_of_month="1-7", day_of_week="1"))
    task(name="disabled", task="t.off", interval=every_min, enabled=False)
    task(name="sunrise", task="t.sun",
         solar=SolarSchedule.objects.create(event="sunrise", latitude=48.85, longitude=2.35))
    task(name="clocked", task="t.once", one_off=True, clocked=ClockedSchedule.objects.create(
        clocked_time=datetime(2030, 1, 1, tzinfo=UTC)))
    task(name="one-off", task="t.once", interval=every_min, one_off=True)
    task(name="later", task="t.later", interval=every_min,
         start_time=datetime(2099, 1, 1, tzinfo=UTC))
    task(name="started", task="t.started", interval=every_min,
         start_time=datetime(2020, 1, 1, tzinfo=UTC))
    task(name="expiring", task="t.exp", interval=every_min,
         expires=datetime(2099, 1, 1, tzinfo=UTC))
    task(name="dom-and-dow", task="t.dd",
         crontab=cron(minute="0", hour="9", day_of_month="10,20", day_of_week="1"))
    task(name="sunday-seven", task="t.sun7", crontab=cron(minute="0", hour="9",
                                                          day_of_week="7"))
    task(name="half-second", task="t.fast", interval=half_second)
    task(name="clocked-missed", task="t.once", one_off=True,
         clocked=ClockedSchedule.objects.create(clocked_time=datetime(2026, 1, 1, tzinfo=UTC)))
    task(name="ran-once", task="t.once", interval=every_min, one_off=True,
         total_run_count=1, last_run_at=LAST)
    task(name="celery.backend_cleanup", task="celery.backend_cleanup",
         crontab=cron(minute="0", hour="4"), expire_seconds=43200)
    return url


CARRIED = {"every-10s", "paris-report", "first-monday", "disabled", "started", "sunrise",
           "clocked", "one-off", "later", "expiring", "clocked-missed", "ran-once",
           "dom-and-dow"}
LEFT_OUT = {
    "sunday-seven": "has a 7: Celery's crontab rejects it",
    "half-second": "interval of 0.5 s is too short",
    "celery.backend_cleanup": "built-in result-backend cleanup",
}


def test_django_celery_beat_rows_cursors_pause_and_options(django_url: str, db_url: str) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    out = imported(db_url, "--from-django", django_url, "--deployment", "proj")
    assert {n["name"] for n in out["new"]} == CARRIED
    reasons = not_carried(out)
    assert set(reasons) == set(LEFT_OUT)
    for name, part in LEFT_OUT.items():
        assert part in reasons[name], (name, reasons[name])
    assert out["written"]["inserted"] == len(CARRIED)

    rows = stored(db_url)
    assert set(rows) == CARRIED
    ten = rows["every-10s"]
    assert (ten["cron_expr"], ten["timezone"]) == ("*/10 * * * * *", "UTC")
    assert ten["last_enqueued_at"] == LAST.replace(microsecond=0)  # last_run_at -> cursor
    assert ten["paused_at"] is None and ten["deployment"] == "proj"
    report = rows["paris-report"]
    assert (report["cron_expr"], report["timezone"]) == ("30 2 * * *", "Europe/Paris")
    assert report["last_enqueued_at"] == datetime(2026, 1, 5, 1, 30, tzinfo=UTC)
    assert report["args"] == {"args": [1, "x"], "kwargs": {"full": True}}
    assert report["metadata"]["celery"]["options"] == {
        "queue": "reports", "exchange": "ex", "routing_key": "rk", "priority": 5,
        "expires": 3600, "headers": {"tenant": "acme", "periodic_task_name": "paris-report"}}
    assert rows["first-monday"]["cron_expr"] == "0 9 * * 1#1"
    # Celery ANDs the two day fields: a Monday that is the 10th or the 20th.
    assert rows["dom-and-dow"]["cron_expr"] == "@crontab 0 9 10,20 * 1"
    disabled = rows["disabled"]
    assert disabled["paused_at"] is not None
    assert disabled["paused_by"] == "import: disabled in django-celery-beat"
    # No last run known: the cursor is the second of the import, as a sync would set it.
    assert disabled["last_enqueued_at"] >= before
    assert rows["started"]["paused_at"] is None
    # The types and bounds that used to be left out.
    expected = {
        "sunrise": "@solar sunrise 48.85 2.35", "clocked": "@at 2030-01-01T00:00:00Z | runs=1",
        "one-off": "@cron 0 * * * * * | runs=1",
        "later": "@cron 0 * * * * * | start=2099-01-01T00:00:00Z",
        "started": "@cron 0 * * * * * | start=2020-01-01T00:00:00Z",
        "expiring": "@cron 0 * * * * * | end=2098-12-31T23:59:59Z",
        "ran-once": "@cron 0 * * * * * | runs=1"}
    assert {n: rows[n]["cron_expr"] for n in expected} == expected
    assert rows["sunrise"]["timezone"] == "UTC"
    assert rows["expiring"]["metadata"]["celery"]["options"]["expires"] == \
        "2099-01-01T00:00:00+00:00"  # PeriodicTask.expires is also the messages' expiry
    assert rows["ran-once"]["paused_by"] == RETIRED_BY
    # The cutover: a clocked time that passed without a run runs once, right away; the
    # one-off that ran does not run again; a clocked time to come waits for it.
    missed = rows["clocked-missed"]
    assert missed["last_enqueued_at"] == datetime(2025, 12, 31, 23, 59, 59, tzinfo=UTC)
    now = datetime.now(UTC)
    with Database(db_url) as store, connect(db_url) as conn:
        for _ in range(2):
            Engine(store.evaluator, clock=lambda: now).run_pass()
        jobs = conn.execute("SELECT metadata ->> 'cron_name', metadata ->> 'cron_fire_time'"
                            " FROM awa.jobs WHERE metadata ->> 'cron_name' IN"
                            " ('clocked-missed', 'ran-once', 'clocked')").fetchall()
    assert jobs == [("clocked-missed", "2026-01-01 00:00:00+00")]
    assert stored(db_url)["clocked-missed"]["paused_by"] == RETIRED_BY


def test_django_dry_run_writes_nothing(django_url: str, empty_db_url: str) -> None:
    result = run("--from-django", django_url, "--database-url", empty_db_url, "--dry-run")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert f"new ({len(CARRIED)}):" in text and f"NOT carried over ({len(LEFT_OUT)}):" in text
    assert "import: disabled in django-celery-beat" in text
    assert "dry run, nothing written" in text
    with connect(empty_db_url) as conn:  # not even awa-beat's tables were created
        assert conn.execute("SELECT to_regclass('awa.cron_jobs')").fetchone()[0] is None
    out = imported(empty_db_url, "--from-django", django_url, "--dry-run")
    assert out["dry_run"] and out["written"] is None
    assert {n["name"] for n in out["new"]} == CARRIED


def test_django_without_its_tables_is_a_one_line_error(empty_db_url: str) -> None:
    result = run("--from-django", empty_db_url, "--database-url", empty_db_url)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: no django-celery-beat tables in "), result.stderr
    assert "django_celery_beat_periodictask not found" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_django_schedule_tables_that_are_missing_read_as_empty(empty_db_url: str) -> None:
    from awa_beat._importers.django import read_django

    with connect(empty_db_url) as conn:  # only the task table, as an older, partial schema
        conn.execute("CREATE TABLE django_celery_beat_periodictask (id int PRIMARY KEY, "
                     "name text, task text, interval_id int)")
        conn.execute("INSERT INTO django_celery_beat_periodictask VALUES "
                     "(2, 'b', 't.b', 1), (1, 'c', 't.c', NULL), (3, 'a', 't.a', 1)")
    tables = read_django(empty_db_url)
    assert [t["name"] for t in tables.tasks] == ["a", "b", "c"]
    assert tables.tasks[0] == {"id": 3, "name": "a", "task": "t.a", "interval_id": 1}
    assert tables.intervals == tables.crontabs == tables.solars == tables.clocked == {}

# -- RedBeat -----------------------------------------------------------------------------------


@pytest.fixture
def redbeat_app() -> Iterator[Celery]:
    redis = pytest.importorskip("redis")
    pytest.importorskip("redbeat")
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.skip(f"no Redis at {REDIS_URL}: {exc}")
    client.flushdb()
    app = Celery("redbeat-test", set_as_current=False)
    app.conf.redbeat_redis_url = REDIS_URL
    app.conf.timezone = "Europe/Paris"
    yield app
    client.flushdb()
    client.close()


def test_redbeat_entries(redbeat_app: Celery, store: Database, db_url: str) -> None:
    from celery.schedules import schedule
    from redbeat import RedBeatSchedulerEntry
    from redbeat.schedules import rrule

    def entry(name: str, sched: Any, last_run_at: datetime | None = None,
              task: str | None = None, **kwargs: Any) -> None:
        e = RedBeatSchedulerEntry(name, task or f"t.{name}", sched, app=redbeat_app,
                                  **kwargs).save()
        if last_run_at is not None:
            e.reschedule(last_run_at=last_run_at)

    entry("every-30s", schedule(timedelta(seconds=30)), LAST, args=[1], kwargs={"k": "v"},
          options={"queue": "q", "priority": 4})
    paris = ZoneInfo("Europe/Paris")
    entry("weekday-815", crontab(minute=15, hour=8, day_of_week="mon-fri"),
          datetime(2026, 1, 5, 8, 15, 0, 250000, tzinfo=paris))
    entry("fixed-offset", schedule(timedelta(minutes=5)),
          datetime(2026, 1, 5, 14, 5, tzinfo=timezone(timedelta(hours=2))))
    entry("off", schedule(timedelta(minutes=1)), enabled=False)
    start = datetime(2026, 1, 5, 9, 0, tzinfo=timezone(timedelta(hours=1)))
    entry("rrule", rrule("HOURLY", dtstart=start, count=48, byminute=[0, 30]),
          datetime(2026, 1, 5, 9, 30, 0, 200000, tzinfo=timezone(timedelta(hours=1))))
    entry("celery.backend_cleanup", crontab(minute=0, hour=4), task="celery.backend_cleanup")
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    client.set("redbeat::lock", "someone")  # RedBeat's own keys are not entries
    client.sadd("redbeat::statics", "every-30s")
    client.close()

    dry = imported(db_url, "--from-redbeat", REDIS_URL, "--timezone", "Europe/Paris",
                   "--dry-run")
    names = {"every-30s", "weekday-815", "fixed-offset", "off", "rrule"}
    assert {n["name"] for n in dry["new"]} == names
    assert store.schedules.list_all() == []
    out = imported(db_url, "--from-redbeat", REDIS_URL, "--timezone", "Europe/Paris")
    reasons = not_carried(out)
    assert set(reasons) == {"celery.backend_cleanup"}

    rows = stored(db_url)
    assert set(rows) == names
    rr = rows["rrule"]
    assert (rr["cron_expr"], rr["timezone"]) == (
        "@rrule DTSTART=20260105T090000+0100;FREQ=HOURLY;COUNT=48;BYMINUTE=0,30", "UTC")
    assert rr["last_enqueued_at"] == datetime(2026, 1, 5, 8, 30, tzinfo=UTC)
    # The first fire after the cutover is RedBeat's next one after its last run.
    with connect(db_url) as conn:
        clock = datetime(2026, 1, 5, 9, 5, tzinfo=UTC)
        Engine(store.evaluator, clock=lambda: clock).run_pass()
        fires = [r[0] for r in conn.execute(
            "SELECT metadata ->> 'cron_fire_time' FROM awa.jobs"
            " WHERE metadata ->> 'cron_name' = 'rrule'")]
    assert fires == ["2026-01-05 09:00:00+00"]
    assert rows["every-30s"]["last_enqueued_at"] == LAST.replace(microsecond=0)
    assert rows["every-30s"]["args"] == {"args": [1], "kwargs": {"k": "v"}}
    assert rows["every-30s"]["metadata"]["celery"]["options"] == {"queue": "q", "priority": 4}
    weekday = rows["weekday-815"]
    assert (weekday["cron_expr"], weekday["timezone"]) == ("15 8 * * 1-5", "Europe/Paris")
    assert weekday["last_enqueued_at"] == datetime(2026, 1, 5, 7, 15, tzinfo=UTC)
    assert rows["fixed-offset"]["last_enqueued_at"] == datetime(2026, 1, 5, 12, 5, tzinfo=UTC)
    assert rows["off"]["paused_by"] == "import: disabled in RedBeat"
    assert rows["every-30s"]["paused_at"] is None


def test_redbeat_json_decodes_as_redbeat_does() -> None:
    pytest.importorskip("redbeat")
    from celery.schedules import schedule
    from redbeat.decoder import RedBeatJSONDecoder, RedBeatJSONEncoder

    from awa_beat._importers.redbeat import decode_redbeat

    values = [datetime(2026, 1, 5, 12, tzinfo=UTC), datetime(2026, 1, 5, 12),
              datetime(2026, 7, 5, 12, 1, 2, 3, tzinfo=ZoneInfo("Europe/Paris")),
              datetime(2026, 1, 5, 12, tzinfo=timezone(-timedelta(hours=5, minutes=30))),
              schedule(timedelta(seconds=90), relative=True),
              crontab(minute="*/5", hour="8-17", day_of_week="mon-fri", day_of_month="1-7")]
    for value in values:
        text = json.dumps({"v": value, "plain": {"a": [1]}}, cls=RedBeatJSONEncoder)
        ours, theirs = decode_redbeat(text), json.loads(text, cls=RedBeatJSONDecoder)
        assert ours == theirs and type(ours["v"]) is type(theirs["v"]), text
        if isinstance(value, datetime):
            assert ours["v"].utcoffset() == theirs["v"].utcoffset()


# -- celerybeat-schedule (Celery's PersistentScheduler) ----------------------------------------


def write_schedule_file(path: Path, entries: dict[str, tuple[dict[str, Any], Any]], *,
                        zone: str = "UTC", enable_utc: bool = True) -> None:
    """A celerybeat-schedule file written by Celery's own PersistentScheduler."""
    app = Celery("oldbeat", set_as_current=False)
    app.conf.timezone = zone
    app.conf.enable_utc = enable_utc
    app.conf.result_expires = None  # no built-in cleanup entry, unless a test adds it
    app.conf.beat_schedule = {name: entry for name, (entry, _) in entries.items()}
    scheduler = PersistentScheduler(app=app, schedule_filename=str(path), lazy=False)
    for name, (_, last_run_at) in entries.items():
        scheduler.schedule[name].last_run_at = last_run_at
    scheduler.sync()
    scheduler.close()


def test_celerybeat_schedule_file(tmp_path: Path, store: Database, db_url: str) -> None:
    path = tmp_path / "celerybeat-schedule"
    write_schedule_file(path, {
        "hourly": ({"task": "t.hourly", "schedule": crontab(minute=0),
                    "options": {"queue": "hours"}}, LAST),
        "every-90s": ({"task": "t.slow", "schedule": 90.0, "args": (1, 2)}, LAST),
        "naive": ({"task": "t.naive", "schedule": crontab(minute=5)},
                  datetime(2026, 1, 5, 13, 5)),  # naive: local time in the file's zone
        "dom-and-dow": ({"task": "t.dd", "schedule": crontab(day_of_month=3, day_of_week=2)},
                        LAST),
        "celery.backend_cleanup": ({"task": "celery.backend_cleanup",
                                    "schedule": crontab(minute=0, hour=4)}, LAST),
    }, zone="Europe/Paris", enable_utc=False)
    out = imported(db_url, "--from-file", str(path))
    assert set(not_carried(out)) == {"celery.backend_cleanup"}
    rows = stored(db_url)
    assert set(rows) == {"hourly", "every-90s", "naive", "dom-and-dow"}
    assert rows["dom-and-dow"]["cron_expr"] == "@crontab * * 3 * 2"
    assert rows["hourly"]["timezone"] == "Europe/Paris"  # the file's (the app's) zone
    assert rows["hourly"]["last_enqueued_at"] == LAST.replace(microsecond=0)
    assert rows["hourly"]["metadata"]["celery"]["options"] == {"queue": "hours"}
    assert (rows["every-90s"]["cron_expr"], rows["every-90s"]["timezone"]) == ("@every 90s",
                                                                             "UTC")
    assert rows["every-90s"]["args"] == {"args": [1, 2], "kwargs": {}}
    assert rows["naive"]["last_enqueued_at"] == datetime(2026, 1, 5, 12, 5, tzinfo=UTC)


def test_naive_last_run_at_is_utc_when_utc_was_enabled(tmp_path: Path, db_url: str) -> None:
    path = tmp_path / "celerybeat-schedule"
    write_schedule_file(path, {"naive": ({"task": "t.naive", "schedule": crontab(minute=5)},
                                         datetime(2026, 1, 5, 13, 5))}, zone="Europe/Paris")
    imported(db_url, "--from-file", str(path))
    assert stored(db_url)["naive"]["last_enqueued_at"] == datetime(2026, 1, 5, 13, 5,
                                                                   tzinfo=UTC)


class _Planted:
    """Unpickled, it creates ``path``: what a hostile celerybeat-schedule file can do."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.path,))


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_schedule_file_another_user_owns_is_not_unpickled(tmp_path: Path,
                                                            db_url: str) -> None:
    path, planted = tmp_path / "celerybeat-schedule", tmp_path / "planted"
    with shelve.open(str(path)) as shelf:
        shelf["entries"] = {"x": _Planted(planted)}
    for part in tmp_path.glob("celerybeat-schedule*"):
        os.chown(part, 65534, 65534)
    for args in (("--from-file", str(path)), ("--from-file", str(path), "--dry-run")):
        result = run(*args, "--database-url", db_url)
        assert result.exit_code == 1, result.output
        assert "belongs to user id 65534, not to you or root" in result.stderr
        assert "--trust-file" in result.stderr and len(result.stderr.splitlines()) == 1
        assert not planted.exists()  # refused before anything was unpickled
    assert stored(db_url) == {}
    result = run("--from-file", str(path), "--trust-file", "--dry-run", "--database-url",
                 db_url)
    assert planted.exists()  # trusted: read, and its code ran, as --help warns
    help_text = run("--help").output
    assert "pickle" in help_text and "--trust-file" in help_text


# -- a Celery app's beat_schedule (-A) ---------------------------------------------------------


def test_from_an_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db_url: str) -> None:
    (tmp_path / "awa_import_app.py").write_text(
        "from celery import Celery\n"
        "from celery.schedules import crontab, solar\n"
        "app = Celery('importapp', set_as_current=False)\n"
        "app.conf.timezone = 'Asia/Tokyo'\n"
        "app.conf.awa_beat_deployment = 'tokyo'\n"
        "app.conf.beat_schedule = {\n"
        "    'morning': {'task': 't.morning', 'schedule': crontab(hour=7, minute=0)},\n"
        "    'every-5m': {'task': 't.five', 'schedule': 300.0,\n"
        "                 'options': {'awa_beat': {'missed_fire_policy': 'catch_up'}}},\n"
        "    'sunrise': {'task': 't.sun', 'schedule': solar('sunrise', 35.68, 139.69)},\n"
        "}\n")
    monkeypatch.chdir(tmp_path)
    before = datetime.now(UTC).replace(microsecond=0)
    out = imported(db_url, "-A", "awa_import_app")
    assert not_carried(out) == {}
    rows = stored(db_url)
    assert set(rows) == {"morning", "every-5m", "sunrise"}
    assert (rows["sunrise"]["cron_expr"], rows["sunrise"]["timezone"]) == (
        "@solar sunrise 35.68 139.69", "UTC")
    assert (rows["morning"]["timezone"], rows["morning"]["deployment"]) == ("Asia/Tokyo",
                                                                            "tokyo")
    assert rows["every-5m"]["missed_fire_policy"] == "catch_up"
    # No last run known: the cursor is now, as a normal sync.
    assert all(before <= r["last_enqueued_at"] <= datetime.now(UTC) for r in rows.values())
    assert "import" in celery_command.list_commands(None)  # `celery -A proj awa import` too


def test_the_apps_dst_policy_applies_to_every_source(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     db_url: str) -> None:
    # 02:30 is skipped in New York once a year, where Awa's and Celery's rules differ.
    (tmp_path / "awa_import_dst_app.py").write_text(
        "from celery import Celery\n"
        "from celery.schedules import crontab\n"
        "app = Celery('dstapp', set_as_current=False)\n"
        "app.conf.timezone = 'America/New_York'\n"
        "app.conf.awa_beat_dst = 'celery'\n"
        "app.conf.beat_schedule = {\n"
        "    'celery-rule': {'task': 't.a', 'schedule': crontab(hour=2, minute=30)},\n"
        "    'awa-rule': {'task': 't.b', 'schedule': crontab(hour=2, minute=30),\n"
        "                 'options': {'awa_beat': {'dst': 'awa'}}},\n"
        "}\n")
    monkeypatch.chdir(tmp_path)
    imported(db_url, "-A", "awa_import_dst_app")
    expected = {"celery-rule": "@crontab 30 2 * * * dst=celery", "awa-rule": "30 2 * * *"}
    assert {n: r["cron_expr"] for n, r in stored(db_url).items()} == expected
    path = tmp_path / "celerybeat-schedule"
    write_schedule_file(path, {"from-file": ({"task": "t.c",
                                              "schedule": crontab(hour=2, minute=30)}, LAST)},
                        zone="America/New_York")
    imported(db_url, "--from-file", str(path), "-A", "awa_import_dst_app")
    assert stored(db_url)["from-file"]["cron_expr"] == "@crontab 30 2 * * * dst=celery"


# -- the cursor rule ---------------------------------------------------------------------------


def fire_times(store: Database, at: datetime) -> list[tuple[str, str]]:
    engine = Engine(store.evaluator, clock=lambda: at)
    result = engine.run_pass().fired
    return sorted((job.name, job.fire_time) for job in result.jobs)


def test_first_fire_after_cutover_is_the_next_one(tmp_path: Path, store: Database,
                                                  db_url: str) -> None:
    path = tmp_path / "celerybeat-schedule"
    catch_up = {"awa_beat": {"missed_fire_policy": "catch_up"}}
    write_schedule_file(path, {
        "hourly": ({"task": "t.h", "schedule": crontab(minute=0)}, LAST),
        "hourly-catch-up": ({"task": "t.c", "schedule": crontab(minute=0),
                             "options": catch_up}, LAST),
    })
    imported(db_url, "--from-file", str(path))
    noon = LAST.replace(microsecond=0)
    # Nothing at or before the last run fires again.
    assert fire_times(store, noon) == []
    assert fire_times(store, noon + timedelta(minutes=59, seconds=59)) == []
    # The 13:00 slot was missed during the cutover: it fires exactly once.
    at = noon + timedelta(hours=1, minutes=30)
    assert fire_times(store, at) == [("hourly", "2026-01-05 13:00:00+00"),
                                     ("hourly-catch-up", "2026-01-05 13:00:00+00")]
    assert fire_times(store, at) == []
    # Two missed slots: coalesce fires the latest once, catch_up each once, in order.
    at = noon + timedelta(hours=3, minutes=30)
    assert fire_times(store, at) == [("hourly", "2026-01-05 15:00:00+00"),
                                     ("hourly-catch-up", "2026-01-05 14:00:00+00"),
                                     ("hourly-catch-up", "2026-01-05 15:00:00+00")]


def test_cursor_never_moves_backwards_on_reimport(tmp_path: Path, store: Database,
                                                  db_url: str) -> None:
    path = tmp_path / "celerybeat-schedule"
    hourly = {"task": "t.h", "schedule": crontab(minute=0)}
    one = datetime(2026, 1, 5, 13, 0, 0, 300000, tzinfo=UTC)
    write_schedule_file(path, {"hourly": (hourly, one)})
    imported(db_url, "--from-file", str(path))
    assert fire_times(store, one + timedelta(minutes=30)) == []

    write_schedule_file(path, {"hourly": (hourly, LAST)})  # an older copy of the file
    dry = imported(db_url, "--from-file", str(path), "--dry-run")
    assert dry["cursor_kept"] == [{"name": "hourly", "stored": "2026-01-05T13:00:00+00:00",
                                   "imported": "2026-01-05T12:00:00+00:00"}]
    assert dry["unchanged"] == ["hourly"] and dry["cursor_moves"] == []
    out = imported(db_url, "--from-file", str(path))
    assert out["written"] == {"inserted": 0, "changed": 0, "cursors_moved": 0, "unchanged": 1}
    assert stored(db_url)["hourly"]["last_enqueued_at"] == one.replace(microsecond=0)
    assert fire_times(store, one + timedelta(minutes=30)) == []  # 13:00 does not fire twice

    two = datetime(2026, 1, 5, 14, 0, 1, tzinfo=UTC)
    write_schedule_file(path, {"hourly": ({**hourly, "options": {"queue": "q2"}}, two)})
    out = imported(db_url, "--from-file", str(path))
    assert out["cursor_moves"] == [{"name": "hourly", "stored": "2026-01-05T13:00:00+00:00",
                                    "imported": "2026-01-05T14:00:01+00:00"}]
    assert [c["name"] for c in out["changed"]] == ["hourly"]
    assert out["written"] == {"inserted": 0, "changed": 1, "cursors_moved": 1, "unchanged": 0}
    assert fire_times(store, two + timedelta(minutes=30)) == []  # 14:00 ran in the old beat
    assert fire_times(store, two + timedelta(hours=1)) == [("hourly", "2026-01-05 15:00:00+00")]


def test_existing_rows_keep_their_pause(tmp_path: Path, store: Database, db_url: str) -> None:
    path = tmp_path / "celerybeat-schedule"
    write_schedule_file(path, {"hourly": ({"task": "t.h", "schedule": crontab(minute=0)},
                                          LAST)})
    imported(db_url, "--from-file", str(path))
    store.schedules.pause("hourly", "oncall")
    out = imported(db_url, "--from-file", str(path))
    assert "left paused" in out["notes"][0]
    assert stored(db_url)["hourly"]["paused_by"] == "oncall"


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "message"), [
    (["--from-redbeat", "redis://:s3cret@127.0.0.1:1/0"],
     "error: cannot read RedBeat entries from Redis at redis://:***@127.0.0.1:1/0"),
    (["--from-redbeat", "http://u:s3cret@x"], "error: the Redis URL http://u:***@x"),
    (["--from-django", "postgresql://u:s3cret@127.0.0.1:1/x"], "error: cannot connect to"),
    (["--from-django", "not a url"], "error: the django-celery-beat database URL is malformed"),
    (["--from-file", "/nonexistent/celerybeat-schedule"],
     "error: no celerybeat-schedule file at /nonexistent/celerybeat-schedule"),
    (["-A", "no_such_module_anywhere"], "error: cannot load the Celery app"),
])
def test_bad_input_is_a_one_line_error(args: list[str], message: str) -> None:
    result = run(*args, "--database-url", "postgresql://u:s3cret@127.0.0.1:1/x")
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(message), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "s3cret" not in result.output and "Traceback" not in result.output


def test_one_source_at_a_time(tmp_path: Path) -> None:
    result = run("--from-file", str(tmp_path), "--from-redbeat", REDIS_URL)
    assert result.exit_code == 2 and "give one source" in result.output
    assert run().exit_code == 2
