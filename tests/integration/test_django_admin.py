"""The Django admin app in a real Django project (tests/django_settings.py).

Django takes one configuration per process and the import tests configure theirs, so
the admin's cases (tests/django_admin_cases.py) run in a pytest process of their own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
pytest.importorskip("django")
ROOT = Path(__file__).resolve().parents[2]


def test_the_admin_lists_pauses_and_refuses_in_a_real_project() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(ROOT / "tests" / "django_admin_cases.py")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "8 passed" in result.stdout
