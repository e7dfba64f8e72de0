"""awa-beat: a PostgreSQL-backed, highly available Celery beat scheduler compatible with Awa."""

__version__ = "0.1.0"



def __getattr__(name: str) -> object:
    # `celery beat -S awa_beat.Scheduler` without importing Celery for the pure parts.
    if name == "Scheduler":
        from .celery_scheduler import Scheduler

        return Scheduler
    if name == "Schedules":
        from .api import Schedules

        return Schedules
    raise AttributeError(f"module 'awa_beat' has no attribute {name!r}")
