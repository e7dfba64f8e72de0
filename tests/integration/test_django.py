"""docs/django.md's recipe in a real Django project (tests/integration/django_project):
the API inside transaction.atomic() on Django's own psycopg 3 connection."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from awa_beat._db.database import connect
from awa_beat._testing import TempDatabases

pytestmark = pytest.mark.integration
PROJECT = Path(__file__).parent / "django_project"
ROOT = Path(__file__).resolve().parents[2]


def test_a_schedule_commits_and_rolls_back_with_the_django_transaction(
        databases: TempDatabases) -> None:
    pytest.importorskip("django")
    url = databases.fresh("standalone")
    env = {**os.environ, "DATABASE_URL": url,
           "PYTHONPATH": os.pathsep.join([str(PROJECT), str(ROOT)])}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    result = subprocess.run([sys.executable, "scenario.py"], cwd=PROJECT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["driver"].startswith("psycopg")  # Django's psycopg 3 backend
    assert out["rolled_back"] and out["integrity_error"] and out["exists_refused"]
    assert out["tenants"] == ["acme", "acme2"]  # globex, dup and initech rolled back or gone
    with connect(url) as conn:
        rows = {r[0]: r[1:] for r in conn.execute(
            "SELECT c.name, c.timezone, c.args, s.owner, s.deployment FROM awa.cron_jobs c "
            "JOIN awa_beat.schedules s USING (name) ORDER BY name")}
        ids = dict(conn.execute("SELECT name, id FROM tenants_tenant").fetchall())
    assert sorted(rows) == ["committed-alone", "tenant-acme-report", "tenant-acme2-report"]
    zone, args, owner, deployment = rows["tenant-acme-report"]
    # The app's settings through the CELERY_ namespace: its time zone and deployment.
    assert (zone, owner, deployment) == ("Europe/Paris", "runtime", "proj")
    assert args == {"args": [], "kwargs": {"tenant": ids["acme"]}}
