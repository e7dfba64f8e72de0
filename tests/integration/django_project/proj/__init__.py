"""A minimal Django project using awa_beat.Schedules, as docs/django.md describes."""

from .celery import app

__all__ = ["app"]
