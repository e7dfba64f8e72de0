"""Unmanaged models over the tables awa-beat and Awa own: Django reads them and never
migrates them."""

from __future__ import annotations

from django.db import models


class Schedule(models.Model):
    """A row of ``awa.cron_jobs``. Written only through awa-beat's operations (the
    admin's actions), never saved by Django."""

    name = models.TextField(primary_key=True)
    cron_expr = models.TextField("calendar")
    timezone = models.TextField("zone")
    kind = models.TextField("task")
    queue = models.TextField("Awa queue")
    args = models.JSONField()
    priority = models.SmallIntegerField()
    max_attempts = models.SmallIntegerField()
    metadata = models.JSONField()
    missed_fire_policy = models.TextField("missed fires")
    last_enqueued_at = models.DateTimeField("last fire", null=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    paused_at = models.DateTimeField("paused since", null=True)
    paused_by = models.TextField(null=True)

    class Meta:
        managed = False
        db_table = '"awa"."cron_jobs"'
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name


class Registration(models.Model):
    """``awa_beat.schedules``: which deployment registered a row, and who writes it
    (``config``: its beat_schedule; ``runtime``: awa_beat.Schedules, the CLI, the forms)."""

    name = models.TextField(primary_key=True)
    deployment = models.TextField()
    owner = models.TextField(null=True)

    class Meta:
        managed = False
        db_table = '"awa_beat"."schedules"'


class PauseNote(models.Model):
    """``awa_beat.pause_notes``: why a schedule was paused, with that pause's instant."""

    name = models.TextField(primary_key=True)
    paused_at = models.DateTimeField()
    note = models.TextField()

    class Meta:
        managed = False
        db_table = '"awa_beat"."pause_notes"'
