"""Django settings: PostgreSQL through the psycopg 3 backend at $DATABASE_URL, and
Celery (awa-beat included) configured under the ``CELERY_`` namespace."""

from __future__ import annotations

import os

from psycopg.conninfo import conninfo_to_dict

DATABASE_URL = os.environ["DATABASE_URL"]
_db = conninfo_to_dict(DATABASE_URL)

SECRET_KEY = "test-only"
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = ["tenants"]
DATABASES = {"default": {
    "ENGINE": "django.db.backends.postgresql",
    "NAME": _db["dbname"], "USER": _db.get("user", ""), "PASSWORD": _db.get("password", ""),
    "HOST": _db.get("host", ""), "PORT": _db.get("port", ""),
}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CELERY_BROKER_URL = "memory://"
CELERY_TIMEZONE = "Europe/Paris"
CELERY_AWA_BEAT_DATABASE_URL = DATABASE_URL
CELERY_AWA_BEAT_DEPLOYMENT = "proj"
CELERY_BEAT_SCHEDULE: dict[str, object] = {}
