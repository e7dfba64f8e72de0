"""Matrix, the Django admin: tests/matrix/django_cases.py in a pytest of its own per
layout (Django takes one configuration per process), both at once."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LAYOUTS

pytestmark = pytest.mark.integration
pytest.importorskip("django")
ROOT = Path(__file__).resolve().parents[2]


def test_every_type_through_the_django_admin_in_both_layouts(matrix_templates: Any) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    runs = {layout: subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE",
         str(ROOT / "tests" / "matrix" / "django_cases.py")],
        cwd=ROOT, env={**env, "AWA_BEAT_MATRIX_LAYOUT": layout,
                       "AWA_BEAT_DJANGO_TEST_URL": matrix_templates.clone(layout).url},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for layout in LAYOUTS}
    outputs = {layout: proc.communicate(timeout=300)[0] for layout, proc in runs.items()}
    for layout, proc in runs.items():
        summary = outputs[layout].strip().splitlines()[-1]
        assert proc.returncode == 0, f"{layout}:\n{outputs[layout][-6000:]}"
        assert re.search(r"\d+ passed", summary), (layout, summary)
        assert not re.search(r"\d+ (failed|errors?|xpassed)\b", summary), (layout, summary)
