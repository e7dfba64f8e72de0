"""Run by tests/integration/test_django.py in a process of its own (Django is configured
once per process): creates the tables, then runs the recipe's commit and rollback."""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj.settings")

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from tenants.models import Tenant  # noqa: E402
from tenants.services import create_tenant, delete_tenant, schedules  # noqa: E402

from awa_beat.errors import ScheduleExists  # noqa: E402

call_command("migrate", run_syncdb=True, verbosity=0)
out: dict[str, object] = {"backend": connection.vendor,
                          "driver": type(connection.connection).__module__
                          if connection.connection else None}
create_tenant("acme")
try:
    create_tenant("globex", fail=True)
except RuntimeError:
    out["rolled_back"] = True
try:
    create_tenant("acme2")
    create_tenant("acme2")  # the tenant's unique name fails first: nothing of it stays
except django.db.IntegrityError:
    out["integrity_error"] = True
try:
    with django.db.transaction.atomic():
        Tenant.objects.create(name="dup")
        schedules().add("tenant-acme-report", task="t", schedule=60, conn=connection)
except ScheduleExists:
    out["exists_refused"] = True
try:
    with django.db.transaction.atomic():  # the schedule is the block's first statement
        schedules().add("first-statement", task="t", schedule=60, conn=connection)
        raise RuntimeError("rolled back")
except RuntimeError:
    pass
with django.db.transaction.atomic():
    schedules().add("committed-alone", task="t", schedule=60, conn=connection)
create_tenant("initech")
delete_tenant("initech")
out["tenants"] = sorted(Tenant.objects.values_list("name", flat=True))
out["driver"] = type(connection.connection).__module__
json.dump(out, sys.stdout)
