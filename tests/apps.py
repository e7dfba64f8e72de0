"""Celery apps for the tests, built in one place."""

from __future__ import annotations

from typing import Any

from celery import Celery


def celery_app(name: str = "testproj", *, db_url: str | None = None,
               beat_schedule: dict[str, Any] | None = None, **conf: Any) -> Celery:
    """A Celery app that is not the current app, on the in-memory broker, in UTC, with
    no result backend cleanup entry; ``conf`` overrides any of that."""
    app = Celery(name, set_as_current=False)
    settings: dict[str, Any] = {"broker_url": "memory://", "result_expires": None,
                                "timezone": "UTC", "beat_schedule": beat_schedule or {}}
    if db_url is not None:
        settings["awa_beat_database_url"] = db_url
    app.conf.update({**settings, **conf})
    return app
