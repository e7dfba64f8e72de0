"""The recipe of docs/django.md: a tenant and its schedule, committed or rolled back
together."""

from __future__ import annotations

from celery.schedules import crontab
from django.db import connection, transaction
from proj.celery import app

from awa_beat import Schedules

from .models import Tenant

_schedules: Schedules | None = None


def schedules() -> Schedules:
    """One Schedules per process (it holds a small connection pool of its own)."""
    global _schedules
    if _schedules is None:
        _schedules = Schedules.from_app(app)
    return _schedules


def create_tenant(name: str, *, fail: bool = False) -> Tenant:
    with transaction.atomic():
        tenant = Tenant.objects.create(name=name)
        schedules().add(f"tenant-{name}-report", task="reports.build",
                        schedule=crontab(minute=30, hour=7), kwargs={"tenant": tenant.pk},
                        conn=connection)
        if fail:
            raise RuntimeError("something after the schedule failed")
    return tenant


def delete_tenant(name: str) -> None:
    with transaction.atomic():
        Tenant.objects.filter(name=name).delete()
        schedules().remove(f"tenant-{name}-report", conn=connection)
