from __future__ import annotations

from django.apps import AppConfig


class AwaBeatConfig(AppConfig):
    name = "awa_beat.contrib.django"
    label = "awa_beat"
    verbose_name = "awa-beat"
    default_auto_field = "django.db.models.BigAutoField"
