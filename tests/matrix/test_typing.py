"""The public Python API, as a user's type checker and a user's ``import`` see it.

``awa_beat``'s public names are loaded on first use (so that ``import awa_beat`` stays
cheap), which a type checker must still see through: a user's program is checked with
``mypy --strict`` against this checkout, and a misuse must be reported (were the names typed
``Any``, nothing would be).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import awa_beat
import awa_beat.errors
from awa_beat.errors import AwaBeatError

ROOT = Path(awa_beat.__file__).resolve().parent.parent

USER_PROGRAM = """\
from datetime import datetime, timedelta, timezone

import awa_beat
from awa_beat import (
    AwaBeatError,
    NotFound,
    Preview,
    Scheduler,
    ScheduleExists,
    ScheduleSpec,
    ScheduleView,
    Schedules,
    ValidationError,
    at,
    fire_time,
)


def plan(schedules: Schedules) -> list[str]:
    spec: ScheduleSpec = schedules.add(
        "new-year", task="greet",
        schedule=at(datetime(2027, 1, 1, tzinfo=timezone.utc)))
    try:
        view: ScheduleView = schedules.get(spec.name)
    except NotFound as exc:
        return [str(exc)]
    except (ValidationError, ScheduleExists) as exc:
        return [str(exc)]
    except AwaBeatError:
        raise
    return [each.name for each in schedules.list()] + [view.row.cron_expr, spec.kind]


def scheduler_class() -> type[Scheduler]:
    return awa_beat.Scheduler


def preview_warnings(schedules: Schedules) -> list[str]:
    found: Preview = schedules.preview("new-year", count=3)
    until = schedules.preview("new-year", until=datetime(2027, 6, 1, tzinfo=timezone.utc))
    return [*found.warnings, *(f.note for f in until.fires if f.mark == "gap")]


def window(task: object) -> tuple[datetime, datetime] | None:
    end = fire_time(task)
    if end is None:
        return None
    return end - timedelta(hours=1), end


reveal_type(Schedules)
reveal_type(awa_beat.Scheduler)
reveal_type(at)
reveal_type(awa_beat.ValidationError)
reveal_type(fire_time)
"""


def mypy(tmp_path: Path, program: str) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` on ``program`` as a user's module, finding awa_beat in this
    checkout; awa_beat's own modules are checked but, like an installed package's, not
    reported on."""
    source = tmp_path / "user_program.py"
    source.write_text(textwrap.dedent(program))
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--no-incremental", "--config-file=", "--python-version=3.10", str(source)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_a_users_program_type_checks_against_the_real_types(tmp_path: Path) -> None:
    result = mypy(tmp_path, USER_PROGRAM)
    assert result.returncode == 0, result.stdout + result.stderr
    revealed = [line.split("Revealed type is ", 1)[1] for line in result.stdout.splitlines()
                if "Revealed type is" in line]
    assert len(revealed) == 5, result.stdout
    schedules, scheduler, at, error, fire_time = revealed
    assert schedules.endswith("-> awa_beat._ops.api.Schedules\"")
    assert scheduler.endswith("-> awa_beat._celery.scheduler.Scheduler\"")
    assert at.endswith("-> awa_beat._schedules.calendars.at\"")
    assert error.endswith("-> awa_beat.errors.ValidationError\"")
    assert fire_time.endswith("(task_or_request: object) -> "
                              "datetime.datetime | None\"")


@pytest.mark.parametrize("misuse, message", [
    ("awa_beat.Schedules().add(1)", 'Missing named argument "task"'),
    ("awa_beat.Schedules().add('x', task=2, schedule=60)", 'Argument "task"'),
    ("awa_beat.at('2027-01-01')", 'incompatible type "str"'),
    ("n: int = awa_beat.Schedules().get('x')", '"ScheduleView"'),
    ("awa_beat.NotAName", 'has no attribute "NotAName"'),
    ("n: str = awa_beat.fire_time(object())", '"datetime | None"'),
    ("awa_beat.Schedules().preview('x', count='3')", 'Argument "count"'),
    ("awa_beat.Schedules.from_app(object(), pool_sise=3)", 'argument "pool_sise"'),
])
def test_a_misuse_of_the_public_api_is_reported(tmp_path: Path, misuse: str,
                                                 message: str) -> None:
    result = mypy(tmp_path, f"import awa_beat\n\n{misuse}\n")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "user_program.py:3: error:" in result.stdout
    assert message in result.stdout


def test_every_public_name_is_in_all_and_resolves() -> None:
    # Each in a fresh interpreter's view: a name in __all__ that does not load fails here.
    code = ("import awa_beat\n"
            "print(sorted(name for name in awa_beat.__all__"
            " if getattr(awa_beat, name, None) is None))\n"
            "from awa_beat import *\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    assert {"Scheduler", "Schedules", "at", "ScheduleSpec", "ScheduleView"} <= set(
        awa_beat.__all__)


def test_every_error_a_user_can_catch_is_public() -> None:
    errors = {name for name, value in vars(awa_beat.errors).items()
              if isinstance(value, type) and issubclass(value, AwaBeatError)}
    assert "ValidationError" in errors
    assert errors <= set(awa_beat.__all__)


def test_importing_awa_beat_loads_neither_celery_nor_psycopg() -> None:
    code = ("import sys\n"
            "import awa_beat\n"
            "print(' '.join(sorted(name for name in sys.modules"
            " if name.split('.')[0] in {'celery', 'kombu', 'psycopg', 'psycopg_pool'})))\n"
            "awa_beat.ValidationError\n"
            "awa_beat.at\n"
            "print(' '.join(sorted(name for name in sys.modules"
            " if name.split('.')[0] in {'celery', 'kombu', 'psycopg', 'psycopg_pool'})))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert result.returncode == 0, result.stderr
    after_import, after_errors_and_at = result.stdout.split("\n")[:2]
    assert after_import == ""
    assert after_errors_and_at == ""
