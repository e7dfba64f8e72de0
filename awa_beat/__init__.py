"""awa-beat: a PostgreSQL-backed, highly available Celery beat scheduler compatible with Awa."""

__version__ = "0.1.0"

