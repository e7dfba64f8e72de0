"""The package's layers, as CONTRIBUTING.md draws them: a module imports only from its own
layer or the ones below, so data flows one way (pure schedule code, the database, the
evaluator, one replica's runtime, the operations layer, then the surfaces).

Every import counts, those inside functions and under ``TYPE_CHECKING`` too: a lazy import
still ties a lower layer to a higher one. ``awa_beat/__init__.py`` is the exception: it is the
public facade and names classes from every layer, loading each on first use.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "awa_beat"

#: Each layer, lowest first, and the modules or packages in it (dotted, under awa_beat).
#: Within the surfaces, a package may use one of a lower surface layer (the CLI runs the
#: Celery adapter's configuration reading), never one beside it (the Django admin does not
#: import the dashboard, nor the dashboard the CLI).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("errors", "_logs", "_config", "_bulk")),
    ("schedules", ("_schedules",)),
    ("database", ("_db",)),
    ("evaluator", ("_engine",)),
    ("runtime", ("_beat",)),
    ("operations", ("_ops",)),
    ("dispatch bridge", ("_bridge",)),
    ("shared surfaces", ("_importers", "_exporting", "outcomes")),
    ("surfaces", ("_celery", "web", "contrib")),
    ("command line", ("_cli",)),
    ("entry points", ("_celery.command", "__main__", "_testing")),
]

#: Modules of the base layer may import each other; elsewhere one layer holds one package,
#: except the surfaces, whose packages must not import each other.
SHARED_LAYERS = {"base"}

#: psycopg stops at the database layer: no module above it imports the driver. The one
#: module listed here is the test helper, which creates and drops whole databases on the
#: server (CREATE DATABASE ... TEMPLATE, DROP DATABASE) and opens connections of its own to
#: do it; that is a test rig's work, not the library's, so it stays out of ``_db``.
PSYCOPG_OUTSIDE_DB: set[str] = {"_testing"}


def _unit(module: str) -> tuple[int, str]:
    """The layer index and the unit (package or module of that layer) of ``module``."""
    best: tuple[int, str] | None = None
    for index, (_name, members) in enumerate(LAYERS):
        for member in members:
            inside = module == member or module.startswith(member + ".")
            if inside and (best is None or len(member) > len(best[1])):
                best = (index, member)
    if best is None:
        raise AssertionError(f"awa_beat.{module} is in no layer: add it to LAYERS in {__file__}")
    return best


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not parts or (parts[:2] == ["contrib", "django"] and "migrations" in parts):
            continue  # the facade; Django's migrations import nothing of ours
        found[".".join(parts)] = path
    return found


def _imports(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, imported module under awa_beat) for every import of ours in ``path``."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == "awa_beat":
                target = node.module[len("awa_beat."):] if node.module != "awa_beat" else ""
            else:
                continue
            for alias in node.names:
                # "from . import x" names a module; "from .x import y" a name in x.
                full = f"{target}.{alias.name}".strip(".")
                sub = PACKAGE.joinpath(*full.split("."))
                found.append((node.lineno, full if sub.with_suffix(".py").exists()
                              or sub.is_dir() else target))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("awa_beat."):
                    found.append((node.lineno, alias.name[len("awa_beat."):]))
    return [(line, target) for line, target in found if target]


def _psycopg(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                 [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        if any(n == "psycopg" or n.startswith("psycopg.") or n.startswith("psycopg_")
               for n in names):
            return True
    return False


MODULES = _modules()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_from_its_layer_or_below(module: str) -> None:
    index, unit = _unit(module)
    wrong = []
    for line, target in _imports(module, MODULES[module]):
        if target == "" or target == "__version__":
            continue  # the package's own version string
        target_index, target_unit = _unit(target)
        upward = target_index > index
        beside = (target_index == index and target_unit != unit
                  and LAYERS[index][0] not in SHARED_LAYERS)
        if upward or beside:
            wrong.append(f"line {line}: awa_beat.{target} ({LAYERS[target_index][0]}"
                         f"{', beside it' if beside else ''})")
    assert not wrong, (f"awa_beat.{module} ({LAYERS[index][0]} layer) imports from a layer "
                       "above its own or a surface beside it:\n  " + "\n  ".join(wrong))


def test_psycopg_stops_at_the_database_layer() -> None:
    outside = {m for m, path in MODULES.items()
               if _psycopg(path) and _unit(m)[1] != "_db"}
    assert outside <= PSYCOPG_OUTSIDE_DB, (
        "modules above the database layer that import psycopg: "
        f"{sorted(outside - PSYCOPG_OUTSIDE_DB)}")
    assert not PSYCOPG_OUTSIDE_DB - outside, (
        f"no longer import psycopg (remove them from PSYCOPG_OUTSIDE_DB): "
        f"{sorted(PSYCOPG_OUTSIDE_DB - outside)}")


def test_every_internal_module_is_private() -> None:
    """Only the documented modules are public: the errors, the worker's outcome hooks, the
    dashboard's embedding API and the Django app (docs/policy.md); every other module lives
    in a package or file whose name starts with an underscore."""
    public = {"errors", "outcomes", "__main__", "web", "web.server", "web.seams",
              "contrib", "contrib.django", "contrib.django.admin", "contrib.django.apps",
              "contrib.django.models"}
    exposed = sorted(m for m in MODULES
                     if m not in public and not any(p.startswith("_") for p in m.split(".")))
    assert not exposed, f"internal modules without a private name: {exposed}"
