"""awa-beat: a PostgreSQL-backed, highly available Celery beat scheduler compatible with Awa.

The names in ``__all__`` are the public Python API. The errors (a module with no imports)
are loaded at once; the rest on first use, so that ``import awa_beat`` loads neither Celery
nor psycopg (``celery beat -S awa_beat.Scheduler`` and the CLI pay only for what they use).
Type checkers see the real classes through the imports under ``TYPE_CHECKING``.
"""

from __future__ import annotations

from importlib import import_module

from .errors import (
    AwaBeatError,
    BackfillRefused,
    BrokerError,
    ConfigError,
    DatabaseUnavailable,
    DataRefused,
    DispatchUnserved,
    EndpointError,
    InvalidCronExpression,
    InvalidTimezone,
    NoDatabase,
    NotFound,
    ScheduleConflict,
    ScheduleError,
    ScheduleExists,
    ScheduleOwned,
    SchemaError,
    SessionLockUnsupported,
    SourceError,
    StoreError,
    UnknownSchema,
    ValidationError,
    WriteNotApplied,
)

__version__ = "0.1.0"

# typing.TYPE_CHECKING without importing typing (which costs a bare import of the package
# more than the rest of it); type checkers take any constant of this name as true.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from ._celery.scheduler import Scheduler
    from ._ops.api import Schedules
    from ._ops.records import BackfillResult, ScheduleView
    from ._schedules.calendars import at
    from ._schedules.explain import Explanation
    from ._schedules.preview import Preview
    from ._schedules.spec import ScheduleSpec
    from .outcomes import fire_time

# Each name loaded on first use, and the module that defines it.
_LAZY = {
    "Scheduler": "_celery.scheduler",
    "Schedules": "_ops.api",
    "ScheduleSpec": "_schedules.spec",
    "ScheduleView": "_ops.records",
    "BackfillResult": "_ops.records",
    "Preview": "_schedules.preview",
    "Explanation": "_schedules.explain",
    "at": "_schedules.calendars",
    "fire_time": "outcomes",
}

__all__ = [
    "AwaBeatError",
    "BackfillRefused",
    "BackfillResult",
    "BrokerError",
    "ConfigError",
    "DataRefused",
    "DatabaseUnavailable",
    "DispatchUnserved",
    "EndpointError",
    "Explanation",
    "InvalidCronExpression",
    "InvalidTimezone",
    "NoDatabase",
    "NotFound",
    "Preview",
    "ScheduleConflict",
    "ScheduleError",
    "ScheduleExists",
    "ScheduleOwned",
    "ScheduleSpec",
    "ScheduleView",
    "Scheduler",
    "Schedules",
    "SchemaError",
    "SessionLockUnsupported",
    "SourceError",
    "StoreError",
    "UnknownSchema",
    "ValidationError",
    "WriteNotApplied",
    "__version__",
    "at",
    "fire_time",
]

if not TYPE_CHECKING:  # a type checker sees the names above, and a typo as an error

    def __getattr__(name: str) -> object:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'awa_beat' has no attribute {name!r}")
        value = getattr(import_module(f".{module}", __name__), name)
        globals()[name] = value  # the next access skips this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(__all__))
