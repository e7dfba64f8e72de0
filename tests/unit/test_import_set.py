"""The modules ``celery beat -S awa_beat.Scheduler`` loads before its first fire, pinned.

Every module a beat imports is paid for at every start, before the first fire, on top of
what Celery's own beat costs. A fresh interpreter loads what ``celery beat`` has loaded by
the time it imports a scheduler (Celery's command line and its beat modules) and the
database driver (psycopg and psycopg_pool: the first fire needs them, so their cost is the
floor), then imports the scheduler module and the dispatch bridge (which a beat that sends
jobs to Celery loads at start-up). What came with those two must be exactly the awa_beat
modules listed below, plus at most the few others listed.

A change that fails here adds (or drops) a module on every beat's start-up path. If that
is on purpose, measure the cost (``python -X importtime -c "import celery.bin.celery,
psycopg, psycopg_pool; import awa_beat._celery.scheduler"``) and update the sets below in
the same commit, saying why the module cannot load later, where it is used. Otherwise
import it where it is used (metrics, the dashboard, outcomes, dateutil, ephem, Jinja and
the like load only when a beat uses them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The awa_beat modules loaded by the time of the first fire.
AWA_BEAT_MODULES = {
    "awa_beat",
    "awa_beat.errors",
    "awa_beat._beat",
    "awa_beat._beat.node",
    # Parts of node.py moved into modules of their own (the configuration's encoding, the
    # deadlines): the node needs both when it is built, so they load with it.
    "awa_beat._beat.configuration",
    "awa_beat._beat.timers",
    "awa_beat._beat.opening",
    "awa_beat._bridge",
    "awa_beat._bridge.amqp",
    "awa_beat._bridge.dispatcher",
    "awa_beat._bridge.messages",
    "awa_beat._bridge.outbox",
    "awa_beat._bridge.publisher",
    "awa_beat._bulk",
    "awa_beat._celery",
    "awa_beat._celery.scheduler",
    "awa_beat._config",
    "awa_beat._db",
    # The store's own code, split by aggregate: the database (pool, session, errors), the
    # table layout and the configuration's sync batches, which the node holds at start.
    "awa_beat._db.batches",
    "awa_beat._db.database",
    "awa_beat._db.layout",
    # The settings' DSN check and redaction, which _config held before psycopg stopped at
    # the database layer: the scheduler checks the URL when it reads its settings.
    "awa_beat._db.conninfo",
    "awa_beat._db.lock",
    "awa_beat._db.records",
    "awa_beat._db.schema",
    "awa_beat._db.sql",
    "awa_beat._engine",
    "awa_beat._engine.due_queue",
    "awa_beat._engine.engine",
    "awa_beat._engine.firing",
    "awa_beat._engine.problems",
    "awa_beat._engine.table",
    "awa_beat._engine.view",
    "awa_beat._logs",
    "awa_beat._schedules",
    "awa_beat._schedules.calendars",
    "awa_beat._schedules.cron",
    "awa_beat._schedules.fire_times",
    "awa_beat._schedules.markers",
    "awa_beat._schedules.spec",
}

#: Modules other than awa_beat's that may come with it (beyond Celery's and the driver's):
#: the garbage collector's interface (built in), and the time zone database's package,
#: whose zone list the cron parser reads to validate a zone.
OTHER_MODULES = {"gc", "tzdata"}

#: ``celery.commands``' entry point: every ``celery`` command loads it (a worker too), so it
#: is Celery's start-up, not the scheduler's; its own promise (click and Celery's signals
#: only) is its docstring's.
ENTRY_POINT = "awa_beat._celery.command"

PROBE = """
import json, sys
import celery.bin.celery, celery.apps.beat, celery.beat  # what `celery beat` has loaded
import psycopg, psycopg_pool  # the driver: the first fire needs it
before = set(sys.modules)
import awa_beat._celery.scheduler
import awa_beat._bridge
json.dump({"awa_beat": sorted(m for m in sys.modules if m.split(".")[0] == "awa_beat"),
           "others": sorted(m for m in set(sys.modules) - before
                            if m.split(".")[0] != "awa_beat")}, sys.stdout)
"""


def test_the_scheduler_loads_only_the_pinned_modules() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=ROOT,
                         capture_output=True, text=True, check=True, timeout=120).stdout
    loaded = json.loads(out)
    awa = set(loaded["awa_beat"]) - {ENTRY_POINT}
    others = set(loaded["others"])
    how = ("\nIf this is on purpose, measure what it costs every beat's start-up and update "
           f"the sets in {Path(__file__).relative_to(ROOT)} (its docstring says how); "
           "otherwise import the module where it is used.")
    assert awa <= AWA_BEAT_MODULES, (
        f"importing the scheduler now loads {sorted(awa - AWA_BEAT_MODULES)} too.{how}")
    assert others <= OTHER_MODULES, (
        f"importing the scheduler now loads {sorted(others - OTHER_MODULES)} too (beyond "
        f"Celery's beat and psycopg).{how}")
    assert awa >= AWA_BEAT_MODULES, (
        f"the scheduler no longer loads {sorted(AWA_BEAT_MODULES - awa)}: remove them from "
        f"AWA_BEAT_MODULES in {Path(__file__).relative_to(ROOT)}, so that the pin stays "
        "tight.")
