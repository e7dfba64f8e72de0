"""The SQL loader and its fragments, and the rule that all of awa-beat's SQL is named in
queries.sql."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from awa_beat._db.sql import (
    LAYOUTS,
    migration_files,
    parse_queries,
    queries,
    render_queries,
    statements,
)

PACKAGE = Path(__file__).resolve().parents[2] / "awa_beat"
#: SQL as this project writes it: a statement's first keyword in capitals.
SQL_TEXT = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|SET|ANALYZE|LISTEN|NOTIFY|CREATE|"
                      r"DROP|ALTER|TRUNCATE|LOCK|BEGIN|COMMIT)\s")


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "sql" not in p.relative_to(PACKAGE).parts)


def _strings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


def test_parse_queries_splits_named_sections_and_drops_their_comments() -> None:
    text = "preamble\n-- one --\n-- what it does\nSELECT 1;\n\n-- two_2 --\nSELECT\n  2;\n"
    assert parse_queries(text) == {"one": "SELECT 1;", "two_2": "SELECT\n  2;"}


@pytest.mark.parametrize(("text", "problem"), [
    ("-- a --\nSELECT 1;\n-- a --\nSELECT 2;", "defined twice"),
    ("-- a --\n-- only a comment\n", "empty"),
    ("-- a [standalone] --\nSELECT 1;\n-- a [standalone] --\nSELECT 2;", "defined twice"),
    ("-- a --\nSELECT 1;\n-- a [awa] --\nSELECT 2;", "defined twice"),
    ("-- a [standalone] --\nSELECT 1;", "not written for every layout"),
    ("-- a [elsewhere] --\nSELECT 1;", "unknown layout"),
    ("-- a --\nSELECT\n  {{b}}", "no fragment named 'b'"),
    ("-- a --\n{{b}}\n-- b --\nSELECT 1;", "no fragment named 'b'"),
    ("-- a --\nSELECT {{b}} AS one;\n-- fragment b --\n1", "ends its line"),
    ("-- a --\n{{b}}\n-- fragment b --\nSELECT\n{{b}}", "includes itself"),
    ("-- a --\nSELECT 1;\n-- fragment b --\n1", "no statement uses: b"),
    ("-- a --\nSELECT 1;\n-- fragment a --\n1", "both as a statement and a fragment"),
    ("-- a --\nSELECT\n{{b}}\n-- fragment b --\n      1\n  + 2", "does not fit"),
])
def test_parse_queries_refuses_a_duplicate_or_empty_query(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_queries(text)


def test_migrations_are_numbered_without_gaps() -> None:
    versions = [version for version, _, _ in migration_files()]
    expected = list(range(1, max(versions) + 1))
    assert versions == expected


def test_no_sql_is_written_outside_the_sql_folder() -> None:
    found = [f"{path.relative_to(PACKAGE)}:{line}: {text.strip()[:60]!r}"
             for path in _modules() for line, text in _strings(path) if SQL_TEXT.match(text)]
    assert found == []


def test_a_fragment_keeps_its_alignment_wherever_it_is_placed() -> None:
    text = ("-- a --\nSELECT 1\n WHERE {{filters}}\n LIMIT 1;\n"
            "-- b --\nSELECT 1 WHERE true\n   AND {{filters}}\n   AND {{filters}}\n"
            "-- fragment filters --\n-- what it does\n    x = 1\nAND y = 2\n")
    rendered = render_queries(text)
    assert rendered["standalone"] == rendered["awa"] == {
        "a": "SELECT 1\n WHERE x = 1\n   AND y = 2\n LIMIT 1;",
        "b": "SELECT 1 WHERE true\n   AND x = 1\n   AND y = 2\n   AND x = 1\n   AND y = 2",
    }


def test_a_statement_or_fragment_written_for_each_layout_renders_per_layout() -> None:
    text = ("-- a --\nSELECT\n  {{source}}\n LIMIT 1;\n"
            "-- fragment source [standalone] --\n1\n  FROM {{table}}\n"
            "-- fragment source [awa] --\n2\n-- fragment table --\nt\n"
            "-- b [standalone] --\nSELECT 3;\n-- b [awa] --\nSELECT 4;\n"
            "-- c --\nSELECT 5;\n")
    rendered = render_queries(text)
    assert rendered["standalone"] == {"a": "SELECT\n  1\n    FROM t\n LIMIT 1;",
                                      "b": "SELECT 3;",
                                      "c": "SELECT 5;"}
    assert rendered["awa"] == {"a": "SELECT\n  2\n LIMIT 1;", "b": "SELECT 4;", "c": "SELECT 5;"}
    assert parse_queries(text) == {"c": "SELECT 5;"}


def test_the_shared_queries_are_the_statements_the_same_on_both_layouts() -> None:
    for layout in LAYOUTS:
        assert {n: statements(layout)[n] for n in queries} == queries
    differ = sorted(n for n in statements("standalone") if n not in queries)
    assert differ == ["backfill", "fire_batch", "fire_buffered", "trigger"]
    assert all("{{" not in sql for layout in LAYOUTS for sql in statements(layout).values())


def test_every_named_query_is_used() -> None:
    used = {text for path in _modules() for _, text in _strings(path)}
    names = {name for layout in LAYOUTS for name in statements(layout)}
    assert sorted(names - used) == []
