"""The SQL loader, and the rule that all of awa-beat's SQL is named in queries.sql."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from awa_beat._db.sql import migration_files, parse_queries, queries

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


def test_every_named_query_is_used() -> None:
    used = {text for path in _modules() for _, text in _strings(path)}
    assert sorted(set(queries) - used) == []
