"""The reference pages the documentation site generates (docs_hooks.py): every setting,
command and metric of the code is on them, and the hand-written observability guide
names the same series as the code defines."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from types import ModuleType

import click
import pytest

from awa_beat._cli import main
from awa_beat._config import Settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    pytest.importorskip("mkdocs", reason="the docs extra: pip install 'awa-beat[docs]'")
    import docs_hooks

    return docs_hooks


def table_rows(page: str) -> dict[str, list[str]]:
    """The rows of a page's tables by their first cell's code span."""
    rows = {}
    for line in page.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if cells and cells[0].startswith("`"):
            rows[cells[0].split("`")[1]] = cells
    return rows


def test_every_setting_has_a_row_with_its_meaning(hooks: ModuleType) -> None:
    rows = table_rows(hooks.settings_page())
    for field in dataclasses.fields(Settings):
        row = rows[f"awa_beat_{field.name}"]
        assert row[1] == f"`AWA_BEAT_{field.name.upper()}`"
        assert row[4], f"awa_beat_{field.name} has no docstring in awa_beat._config.Settings"
    assert rows["awa_beat_ping_interval"][3] == "float from 0.1 to 3600"
    assert rows["awa_beat_log_format"][3] == "`text` or `json`"


def test_every_command_and_option_is_on_the_cli_page(hooks: ModuleType) -> None:
    page = hooks.cli_page()
    assert "Sentinel" not in page
    for name, command in main.commands.items():
        assert f"## `{name}`" in page
        for option in command.params:
            if isinstance(option, click.Option):
                for flag in option.opts:
                    assert f"`{flag}`" in page


def test_the_metrics_page_and_the_observability_guide_name_the_same_series(
        hooks: ModuleType) -> None:
    generated = set(table_rows(hooks.metrics_page()))
    assert {"awa_beat_fires_total", "awa_beat_fire_lag_seconds", "awa_beat_schedules",
            "awa_beat_outbox_backlog"} <= generated
    guide = (ROOT / "docs" / "observability.md").read_text(encoding="utf-8")
    series_part = guide[guide.index("## Series"):guide.index("## Pluggable sources")]
    # The first cell of each row of its tables: `awa_beat_leader{lock_key}`.
    described = set(re.findall(r"^\| `(awa_beat_\w+)", series_part, re.MULTILINE))
    assert described == generated
