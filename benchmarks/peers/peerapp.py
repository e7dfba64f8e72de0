"""The Celery apps benchmarks/peers/run.py runs `celery beat` with, one per peer and size.

run.py writes a module per run, ``from peerapp import build, prepare; CFG = {...};
app = build(CFG)``, and runs ``celery -A <module> beat -S <scheduler>``. Nothing is
measured here: this file defines the workload each peer gets and stores it beforehand
(:func:`prepare`), so that the beat process starts with its N entries already stored.

The workload, for every peer:

* ``n`` burst entries ``b000000...`` (task ``peers.tick``, args ``[i]``), each due once, at
  the instant ``due`` (a UTC timestamp), published to the queue ``queue``;
* one ``probe`` entry (task ``peers.probe``, queue ``probe_queue``), overdue when beat
  starts, so its message marks the end of start-up;
* with ``steady`` set, instead: ``n`` entries ``s000000...`` each firing once a minute, at
  second ``i % 60`` (so spread evenly over the minute), first from the instant ``due``;
* with ``failover`` set, instead: one entry firing every second, to ``queue``.

How each peer stores it:

* ``awa``: awa-beat (``awa_beat.Scheduler``, ``awa_beat_dispatch="celery"``), entries in
  ``beat_schedule`` (its only source), a burst entry being the 6-field cron string
  ``"<s> <m> <h> * * *"`` of the due instant (steady: ``"<s> * * * * *"``); synced to
  PostgreSQL beforehand, the probe's cursor set two days back (it fires once, coalesced);
* ``persistent``: Celery's PersistentScheduler, entries in ``beat_schedule`` as one-day
  intervals whose ``last_run_at`` in the shelve file is ``due - 1 day``;
* ``redbeat``: RedBeat, entries stored in Redis (dynamic entries), one-day intervals
  with ``last_run_at = due - 1 day``;
* ``django``: django-celery-beat's DatabaseScheduler, ``PeriodicTask`` rows with a one-day
  ``IntervalSchedule`` and ``last_run_at = due - 1 day``, in a database migrated by
  django-celery-beat's own migrations.

For the Celery peers a steady entry is a 60 s interval whose ``last_run_at`` is 60 s
before its first due second at or after ``due``.
"""

from __future__ import annotations

import json
import socket
from datetime import datetime, timedelta, timezone
from typing import Any

from celery import Celery
from celery.schedules import schedule

#: py-amqp gives up on a connection whose unacknowledged writes wait 1 s
#: (TCP_USER_TIMEOUT), and RabbitMQ's flow control holds a fast publisher's writes for
#: longer once a queue holds about a million messages: every client here, the peers,
#: awa-beat's bridge and the limit loops, gets 60 s instead.
BROKER_OPTIONS = {"socket_settings": {socket.TCP_USER_TIMEOUT: 60_000}}

DAY = timedelta(days=1)
MINUTE = timedelta(minutes=1)
UTC = timezone.utc


def _due(cfg: dict[str, Any]) -> datetime:
    return datetime.fromtimestamp(cfg["due"], UTC)


def setup_django(db_url: str) -> None:
    import django
    from django.conf import settings
    from psycopg.conninfo import conninfo_to_dict

    if settings.configured:
        return
    params = conninfo_to_dict(db_url)
    settings.configure(
        DATABASES={"default": {
            "ENGINE": "django.db.backends.postgresql", "NAME": params["dbname"],
            "USER": params.get("user", "postgres"), "HOST": params.get("host", "127.0.0.1"),
            "PORT": str(params.get("port", 5432)), "PASSWORD": params.get("password", "")}},
        INSTALLED_APPS=["django_celery_beat"], USE_TZ=True, TIME_ZONE="UTC",
        DEFAULT_AUTO_FIELD="django.db.models.AutoField")
    django.setup()


def steady_entries(cfg: dict[str, Any]) -> list[tuple[str, int, datetime]]:
    """(name, second of the minute, first due instant at or after ``due``) per entry."""
    first = cfg["due"]
    out = []
    for i in range(cfg["n"]):
        sec = i % 60
        at = first + (sec - first) % 60
        out.append((f"s{i:06d}", sec, datetime.fromtimestamp(at, UTC)))
    return out


def beat_schedule(cfg: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The entries of the peers that read them from ``beat_schedule`` (awa, persistent)."""
    peer = cfg["peer"]
    if peer not in ("awa", "persistent"):
        return {}
    if cfg.get("failover"):
        return {"every-second": {"task": "peers.tick", "schedule": 1.0}}
    if cfg.get("steady"):
        return {name: {"task": "peers.tick", "args": [name],
                       "schedule": f"{sec} * * * * *" if peer == "awa" else schedule(MINUTE)}
                for name, sec, _ in steady_entries(cfg)}
    due = _due(cfg)
    when: Any = f"{due.second} {due.minute} {due.hour} * * *" if peer == "awa" else schedule(DAY)
    entries = {f"b{i:06d}": {"task": "peers.tick", "schedule": when, "args": [i]}
               for i in range(cfg["n"])}
    entries["probe"] = {"task": "peers.probe", "schedule": schedule(DAY),
                        "options": {"queue": cfg["probe_queue"]}}
    return entries


def build(cfg: dict[str, Any]) -> Celery:
    peer = cfg["peer"]
    if peer == "django":
        setup_django(cfg["db_url"])
    app = Celery(f"peers_{peer}", set_as_current=True)
    app.conf.update(
        broker_url=cfg["broker"], result_expires=None, timezone="UTC", enable_utc=True,
        task_default_queue=cfg["queue"], beat_schedule=beat_schedule(cfg),
        awa_beat_dispatch="celery", awa_beat_deployment="peers",
        broker_transport_options=BROKER_OPTIONS,
        redbeat_redis_url=cfg.get("redis"), redbeat_key_prefix=cfg.get("redis_prefix"),
        **cfg.get("conf", {}))
    return app


def prepare(app: Celery, cfg: dict[str, Any]) -> None:
    """Store the workload where the peer keeps its schedule, before beat starts."""
    globals()[f"_prepare_{cfg['peer']}"](app, cfg)


def _prepare_awa(app: Celery, cfg: dict[str, Any]) -> None:
    from awa_beat._beat.configuration import config_digest, encode_batches
    from awa_beat._db.database import Database, connect
    from awa_beat._schedules.spec import specs_from_beat_schedule

    specs = specs_from_beat_schedule(app.conf.beat_schedule, default_timezone="UTC",
                                     default_dispatch="celery")
    # As a beat of this configuration that ran before leaves it: synced and recorded, as
    # the other peers find their stores filled.
    with Database(cfg["db_url"]) as store:
        batches = encode_batches(specs, "peers")
        store.schedules.record_config("peers", config_digest(batches),
                                      store.schedules.sync_all(batches))
    if not cfg.get("failover") and not cfg.get("steady"):
        conn = connect(cfg["db_url"])
        conn.execute("UPDATE awa.cron_jobs SET last_enqueued_at = now() - interval '2 days'"
                     " WHERE name = 'probe'")
        conn.close()


def _prepare_persistent(app: Celery, cfg: dict[str, Any]) -> None:
    from celery.beat import PersistentScheduler

    sched = PersistentScheduler(app, schedule_filename=cfg["schedule_file"], lazy=False)
    if cfg.get("steady"):
        firsts = {name: at for name, _, at in steady_entries(cfg)}
        for name, entry in sched.schedule.items():
            entry.last_run_at = firsts[name] - MINUTE
    elif not cfg.get("failover"):
        due, now = _due(cfg), app.now()
        for name, entry in sched.schedule.items():
            entry.last_run_at = now - 2 * DAY if name == "probe" else due - DAY
    sched.sync()
    sched.close()


def _prepare_redbeat(app: Celery, cfg: dict[str, Any]) -> None:
    from redbeat import RedBeatSchedulerEntry

    if cfg.get("failover"):
        entries = [("every-second", schedule(1.0), {}, None)]
    elif cfg.get("steady"):
        entries = [(name, schedule(MINUTE), {"args": [name]}, at - MINUTE)
                   for name, _, at in steady_entries(cfg)]
    else:
        due, now = _due(cfg), app.now()
        entries = [(f"b{i:06d}", schedule(DAY), {"args": [i]}, due - DAY)
                   for i in range(cfg["n"])]
        entries.append(("probe", schedule(DAY), {"options": {"queue": cfg["probe_queue"]}},
                        now - 2 * DAY))
    for name, sched, extra, last in entries:
        task = "peers.probe" if name == "probe" else "peers.tick"
        entry = RedBeatSchedulerEntry(name, task, sched, app=app, **extra)
        entry.last_run_at = last
        entry.save()


def _prepare_django(app: Celery, cfg: dict[str, Any]) -> None:
    from django.core.management import call_command
    from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks

    call_command("migrate", "django_celery_beat", verbosity=0)
    if cfg.get("steady"):
        minute, _ = IntervalSchedule.objects.get_or_create(
            every=60, period=IntervalSchedule.SECONDS)
        PeriodicTask.objects.bulk_create(
            [PeriodicTask(name=name, task="peers.tick", interval=minute, args=json.dumps([name]),
                          last_run_at=at - MINUTE) for name, _, at in steady_entries(cfg)],
            batch_size=5000)
        PeriodicTasks.update_changed()
        return
    day, _ = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.DAYS)
    due, now = _due(cfg), app.now()
    tasks = [PeriodicTask(name=f"b{i:06d}", task="peers.tick", interval=day, args=f"[{i}]",
                          last_run_at=due - DAY) for i in range(cfg["n"])]
    tasks.append(PeriodicTask(name="probe", task="peers.probe", interval=day,
                              queue=cfg["probe_queue"], last_run_at=now - 2 * DAY))
    PeriodicTask.objects.bulk_create(tasks, batch_size=5000)
    PeriodicTasks.update_changed()
