"""The SQL awa-beat runs, loaded by name from ``queries.sql`` and the migration files.

``queries.sql`` is a file of sections, each under a header line:

- ``-- name --`` is a statement, the same on both table layouts.
- ``-- name [standalone] --`` and ``-- name [awa] --`` are one statement written for
  each layout (a statement with variants has one for every layout).
- ``-- fragment name --`` is a piece of SQL that several statements share, and
  ``-- fragment name [layout] --`` a piece written for each layout.

A line of a statement or a fragment that ends with ``{{name}}`` takes the fragment
there: its first line goes where the placeholder stood, and its other lines move right
by as much as its first line did, so that the fragment keeps its own alignment. The
statements are rendered for both layouts once, when this module is loaded; callers
pick them by name from :func:`statements` (or, when they are the same on both
layouts, from :data:`queries`). Nothing is assembled while beat runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

if TYPE_CHECKING:
    from typing_extensions import LiteralString

LayoutName = Literal["standalone", "awa"]
"""The two table layouts: awa-beat's own tables, or the tables of a database Awa migrated."""

LAYOUTS: tuple[LayoutName, ...] = ("standalone", "awa")

_HEADER = re.compile(r"^-- (fragment )?([a-z0-9_]+)(?: \[([a-z]+)\])? --$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"(?P<head>.*)\{\{(?P<name>[a-z0-9_]+)\}\}")


@dataclass(frozen=True, slots=True)
class _Section:
    """One section of the file: a statement or a fragment, for every layout or one."""

    name: str
    fragment: bool
    layout: LayoutName | None
    text: str


def _trimmed(body: str, *, fragment: bool) -> str:
    """The section's SQL: the comment lines right under its header describe it and are
    dropped, as are comment lines at its end (they head the next group of queries). A
    fragment keeps its first line's indentation, which places it (see the module)."""
    if not fragment:
        lines = body.strip().splitlines()
        while lines and lines[0].startswith("--"):
            lines.pop(0)
    else:
        lines = body.splitlines()
        while lines and (lines[0].startswith("--") or not lines[0].strip()):
            lines.pop(0)
    while lines and (lines[-1].startswith("--") or not lines[-1].strip()):
        lines.pop()
    sql = "\n".join(lines)
    return sql.rstrip() if fragment else sql.strip()


def _sections(text: str) -> list[_Section]:
    """Split the file at its headers; text before the first header is its preamble."""
    parts = _HEADER.split(text)
    found = []
    for fragment, name, layout, body in zip(parts[1::4], parts[2::4], parts[3::4],
                                            parts[4::4], strict=True):
        if layout is not None and layout not in LAYOUTS:
            raise ValueError(f"query {name!r} is written for an unknown layout {layout!r}")
        sql = _trimmed(body, fragment=bool(fragment))
        if not sql:
            raise ValueError(f"query {name!r} is empty")
        found.append(_Section(name, bool(fragment), cast("LayoutName | None", layout), sql))
    return found


def _by_layout(sections: list[_Section]) -> dict[str, dict[LayoutName, _Section]]:
    """Each name's text for every layout, with the checks that make it one text a layout."""
    named: dict[str, list[_Section]] = {}
    for section in sections:
        named.setdefault(section.name, []).append(section)
    found: dict[str, dict[LayoutName, _Section]] = {}
    for name, group in named.items():
        if len({s.fragment for s in group}) > 1:
            raise ValueError(f"query {name!r} is defined both as a statement and a fragment")
        if len(group) == 1 and group[0].layout is None:
            found[name] = dict.fromkeys(LAYOUTS, group[0])
            continue
        layouts = [s.layout for s in group]
        if None in layouts or len(set(layouts)) < len(layouts):
            raise ValueError(f"query {name!r} is defined twice")
        if set(layouts) != set(LAYOUTS):
            raise ValueError(f"query {name!r} is not written for every layout "
                             f"(only {', '.join(sorted(map(str, layouts)))})")
        found[name] = {s.layout: s for s in group if s.layout is not None}
    return found


def _expand(text: str, layout: LayoutName, fragments: dict[str, dict[LayoutName, _Section]],
            used: set[str], within: tuple[str, ...]) -> str:
    """``text`` with every placeholder replaced by the layout's fragment (see the module)."""
    if "{{" not in text:
        return text
    lines: list[str] = []
    for line in text.split("\n"):
        if "{{" not in line:
            lines.append(line)
            continue
        match = _PLACEHOLDER.fullmatch(line)
        if match is None:
            raise ValueError(f"{within[0]!r}: a placeholder ends its line: {line.strip()!r}")
        name, head = match["name"], match["head"]
        if name in within:
            raise ValueError(f"{within[0]!r}: fragment {name!r} includes itself")
        if name not in fragments:
            raise ValueError(f"{within[0]!r}: no fragment named {name!r}")
        used.add(name)
        body = _expand(fragments[name][layout].text, layout, fragments, used,
                       (*within, name)).split("\n")
        indent = len(body[0]) - len(body[0].lstrip(" "))
        shift = len(head) - indent
        lines.append(head + body[0][indent:])
        for rest in body[1:]:
            if not rest or shift == 0:
                lines.append(rest)
            elif shift > 0:
                lines.append(" " * shift + rest)
            elif rest[:-shift].strip():
                raise ValueError(f"{within[0]!r}: fragment {name!r} does not fit where "
                                 f"it is placed")
            else:
                lines.append(rest[-shift:])
    return "\n".join(lines)


def render_queries(text: str) -> dict[LayoutName, dict[str, LiteralString]]:
    """Every statement of a queries file by name, rendered for each layout."""
    named = _by_layout(_sections(text))
    fragments = {name: texts for name, texts in named.items()
                 if texts[LAYOUTS[0]].fragment}
    used: set[str] = set()
    rendered: dict[LayoutName, dict[str, LiteralString]] = {}
    for layout in LAYOUTS:
        rendered[layout] = {}
        for name, texts in named.items():
            if name in fragments:
                continue
            sql = _expand(texts[layout].text, layout, fragments, used, (name,))
            # Whether mypy calls this cast redundant depends on whether it knows
            # LiteralString on the Python it checks for; either way it is right.
            rendered[layout][name] = cast("LiteralString", sql)  # type: ignore[redundant-cast, unused-ignore]
    unused = sorted(set(fragments) - used)
    if unused:
        raise ValueError(f"fragments no statement uses: {', '.join(unused)}")
    return rendered


def _same_on_every_layout(rendered: dict[LayoutName, dict[str, LiteralString]]
                          ) -> dict[str, LiteralString]:
    first, *others = (rendered[layout] for layout in LAYOUTS)
    return {name: sql for name, sql in first.items()
            if all(other[name] == sql for other in others)}


def parse_queries(text: str) -> dict[str, LiteralString]:
    """The statements of a queries file that are the same on every layout, by name."""
    return _same_on_every_layout(render_queries(text))


#: The package's own folder: the SQL ships as plain files beside this module (a plain
#: path, since importlib.resources would add its own imports to beat's start-up).
_HERE = Path(__file__).parent


def _read(name: str) -> str:
    return (_HERE / name).read_text(encoding="utf-8")


_statements = render_queries(_read("queries.sql"))

queries: Mapping[str, LiteralString] = _same_on_every_layout(_statements)
"""The statements that are the same on both layouts, by name."""


def statements(layout: LayoutName) -> Mapping[str, LiteralString]:
    """Every statement by name as it runs on the layout (``fire_batch`` and ``trigger``
    differ between the layouts, the others are the same in both)."""
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
