"""Every statement as it runs on each table layout, pinned byte for byte.

The files under ``golden/sql/<layout>/`` hold what ``statements(layout)`` gives, one file
a statement. A change to queries.sql (or to the way it is rendered) that changes what a
statement sends to the server fails here. When the change is meant, write the files
again and review their diff:

    PYTHONPATH=. python tests/unit/test_sql_golden.py --write
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from awa_beat._db.sql import LAYOUTS, LayoutName, statements

GOLDEN = Path(__file__).resolve().parent / "golden" / "sql"


def _golden(layout: LayoutName, name: str) -> Path:
    return GOLDEN / layout / f"{name}.sql"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_statement_has_a_golden_file_and_no_file_is_left_over(layout: LayoutName) -> None:
    files = sorted(p.stem for p in (GOLDEN / layout).glob("*.sql"))
    assert files == sorted(statements(layout))


@pytest.mark.parametrize(("layout", "name"), [
    (layout, name) for layout in LAYOUTS for name in sorted(statements(layout))])
def test_statement_renders_as_pinned(layout: LayoutName, name: str) -> None:
    pinned = _golden(layout, name).read_bytes().decode("utf-8")
    assert statements(layout)[name] + "\n" == pinned


def write() -> None:
    """Write every golden file from the statements as they are rendered now."""
    for layout in LAYOUTS:
        folder = GOLDEN / layout
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.sql"):
            old.unlink()
        for name, sql in statements(layout).items():
            _golden(layout, name).write_bytes((sql + "\n").encode("utf-8"))


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/unit/test_sql_golden.py --write")
    write()
