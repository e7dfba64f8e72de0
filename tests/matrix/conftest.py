"""Fixtures of the matrix suite: databases holding the whole catalogue, in both layouts.

The catalogue is stored once per layout and run, in a template database; each test's
database is a clone of it (one ``CREATE DATABASE``), so a test may change what it likes.

* ``matrix_db`` (per test, parametrised over ``layout``): a fresh clone, a
  :class:`~tests.matrix.catalogue.MatrixDB`.
* ``shared_matrix_db`` (per module and layout): one clone shared by a module's tests,
  for cells that only read, or that each change a schedule of their own. Prefer it: a
  clone costs a ``CREATE DATABASE``, and its drop at the end of the run a checkpoint.
* ``matrix_templates``: the templates themselves, for tests that clone their own
  (``matrix_templates.clone(layout)``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from awa_beat._testing import TempDatabases
from tests.conftest import LAYOUTS
from tests.matrix.catalogue import MatrixDB, store_catalogue


class CatalogueTemplates:
    """A template database per layout holding the whole catalogue, built on first use."""

    def __init__(self, databases: TempDatabases) -> None:
        self.databases = databases
        self._templates: dict[str, tuple[str, tuple[str, ...]]] = {}

    def template(self, layout: str) -> tuple[str, tuple[str, ...]]:
        """The template's database name, and the names stored in it."""
        if layout not in self._templates:
            dbs = self.databases
            name = dbs.create(template=dbs.template(layout), suffix=f"_matrix_{layout}")
            names = tuple(store_catalogue(dbs.url(name)))
            self._templates[layout] = (name, names)
        return self._templates[layout]

    def clone(self, layout: str) -> MatrixDB:
        """A new database holding the catalogue, in ``layout``."""
        template, names = self.template(layout)
        url = self.databases.url(self.databases.create(template=template))
        return MatrixDB(url, layout, names)


@pytest.fixture(scope="session")
def matrix_templates(databases: TempDatabases) -> CatalogueTemplates:
    return CatalogueTemplates(databases)


@pytest.fixture
def matrix_db(matrix_templates: CatalogueTemplates, layout: str) -> MatrixDB:
    """A fresh database of the layout under test, holding every schedule of the
    catalogue, each owned, paused or retired as the catalogue says."""
    return matrix_templates.clone(layout)


@pytest.fixture(scope="module", params=LAYOUTS)
def shared_matrix_db(request: pytest.FixtureRequest,
                     matrix_templates: CatalogueTemplates) -> Iterator[MatrixDB]:
    """One such database per module and layout, for tests that only read it."""
    yield matrix_templates.clone(str(request.param))
