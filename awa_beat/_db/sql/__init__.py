"""The SQL awa-beat runs, loaded by name from ``queries.sql`` and the migration files."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

if TYPE_CHECKING:
    from typing_extensions import LiteralString

LayoutName = Literal["standalone", "awa"]
"""The two table layouts: awa-beat's own tables, or the tables of a database Awa migrated."""

LAYOUTS: tuple[LayoutName, ...] = ("standalone", "awa")

_HEADER = re.compile(r"^-- ([a-z0-9_]+) --$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, LiteralString]:
    """Split a file of ``-- name --`` sections into ``{name: sql}``.

    Comment lines right under a header describe the query and are dropped, as are
    comment lines at the end of a section (they head the next group of queries); text
    before the first header is the file's preamble and is ignored.
    """
    parts = _HEADER.split(text)
    queries: dict[str, LiteralString] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = body.strip().splitlines()
        while lines and lines[0].startswith("--"):
            lines.pop(0)
        while lines and (lines[-1].startswith("--") or not lines[-1].strip()):
            lines.pop()
        sql = "\n".join(lines).strip()
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        if not sql:
            raise ValueError(f"query {name!r} is empty")
        # Whether mypy calls this cast redundant depends on whether it knows
        # LiteralString on the Python it checks for; either way it is right.
        queries[name] = cast("LiteralString", sql)  # type: ignore[redundant-cast, unused-ignore]
    return queries


#: The package's own folder: the SQL ships as plain files beside this module (a plain
#: path, since importlib.resources would add its own imports to beat's start-up).
_HERE = Path(__file__).parent


def _read(name: str) -> str:
    return (_HERE / name).read_text(encoding="utf-8")


queries = parse_queries(_read("queries.sql"))


def _for_layout(layout: LayoutName) -> dict[str, LiteralString]:
    found: dict[str, LiteralString] = {}
    for name, sql in queries.items():
        base, _, suffix = name.rpartition("_")
        if suffix in LAYOUTS and all(f"{base}_{other}" in queries for other in LAYOUTS):
            if suffix == layout:
                found[base] = sql
        else:
            found[name] = sql
    return found


_statements = {layout: _for_layout(layout) for layout in LAYOUTS}


def statements(layout: LayoutName) -> Mapping[str, LiteralString]:
    """Every statement by name as it runs on the layout: ``fire_batch`` and ``trigger``
    differ between the layouts, the others are the same in both."""
    return _statements[layout]


def migration_files() -> list[tuple[int, str, LiteralString]]:
    """The migration scripts as ``(version, description, sql)``, in version order."""
    found = []
    for entry in (_HERE / "migrations").iterdir():
        match = re.fullmatch(r"(\d{4})_([a-z0-9_]+)\.sql", entry.name)
        if match:
            text = entry.read_text(encoding="utf-8")
            sql = cast("LiteralString", text)  # type: ignore[redundant-cast, unused-ignore]
            found.append((int(match[1]), match[2].replace("_", " "), sql))
    return sorted(found)
