"""django-celery-beat's tables read with plain SQL, for ``awa-beat import --from-django``.

The rows are read with the named ``django_*`` queries, in one read-only snapshot, so that
neither Django nor django-celery-beat is needed. The importer turns the rows into
schedules; this module only reads them, and reports a database that cannot be read as a
:class:`~awa_beat.errors.SourceError` whose message never shows the password.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from ..errors import SourceError, first_line
from .conninfo import redact, well_formed
from .database import connect
from .sql import queries

#: Each of django-celery-beat's tables, by the name the importer gives its rows, with the
#: named query of ``queries.sql`` that reads the table.
DJANGO_SOURCES = {
    "tasks": ("django_celery_beat_periodictask", "django_tasks"),
    "intervals": ("django_celery_beat_intervalschedule", "django_intervals"),
    "crontabs": ("django_celery_beat_crontabschedule", "django_crontabs"),
    "solars": ("django_celery_beat_solarschedule", "django_solars"),
    "clocked": ("django_celery_beat_clockedschedule", "django_clocked"),
}
DJANGO_TABLES = {key: table for key, (table, _) in DJANGO_SOURCES.items()}


def read_django_rows(url: str) -> dict[str, list[dict[str, Any]]]:
    """The rows of each of django-celery-beat's tables at ``url``, by the keys of
    :data:`DJANGO_SOURCES`.

    ``SELECT *`` keeps older django-celery-beat schemas readable, because a column that a
    schema lacks reads as missing. A schedule table that does not exist reads as empty.
    """
    if not well_formed(url):
        raise SourceError("the django-celery-beat database URL is malformed; expected e.g. "
                          "postgresql://user:password@host:5432/dbname")
    conn = connect(url, connect_timeout=10)  # StoreError, password redacted
    try:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        with conn.transaction():
            cur = conn.cursor(row_factory=dict_row)
            present = {r["table_name"] for r in cur.execute(
                queries["django_tables_present"], {"tables": list(DJANGO_TABLES.values())})
                if r["present"]}
            if DJANGO_TABLES["tasks"] not in present:
                raise SourceError(
                    f"no django-celery-beat tables in {redact(url)} "
                    f"({DJANGO_TABLES['tasks']} not found; wrong database or search_path?)")
            return {key: cur.execute(queries[query]).fetchall() if table in present else []
                    for key, (table, query) in DJANGO_SOURCES.items()}
    except psycopg.Error as exc:
        raise SourceError(f"reading django-celery-beat's tables in {redact(url)} failed: "
                          f"{first_line(exc)}") from None
    finally:
        conn.close()
