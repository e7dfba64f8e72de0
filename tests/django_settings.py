"""A minimal Django project for the admin tests: awa-beat's app and Django's admin, on
the throw-away database named by $AWA_BEAT_DJANGO_TEST_URL."""

from __future__ import annotations

import os

from psycopg.conninfo import conninfo_to_dict

_db = conninfo_to_dict(os.environ.get("AWA_BEAT_DJANGO_TEST_URL", "dbname=unset"))

SECRET_KEY = "awa-beat tests only"
DEBUG = False
ALLOWED_HOSTS = ["testserver"]
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
    "django.contrib.sessions", "django.contrib.messages", "awa_beat.contrib.django",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "tests.django_urls"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages"]},
}]
DATABASES = {"default": {
    "ENGINE": "django.db.backends.postgresql", "NAME": _db.get("dbname"),
    "USER": _db.get("user", ""), "PASSWORD": _db.get("password", ""),
    "HOST": _db.get("host", ""), "PORT": _db.get("port", ""),
}}
