"""The Django admin with every schedule type of the catalogue, in a real Django project
(tests/django_settings.py) through Django's test client (issue 34, defects 1 and 5).

Run by tests/matrix/test_views.py in a pytest of its own, once per layout
($AWA_BEAT_MATRIX_LAYOUT): Django takes one configuration per process.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.matrix.catalogue import CATALOGUE, NAMES
from tests.matrix.conftest import CatalogueTemplates
from tests.matrix.test_views import WORDS

pytestmark = pytest.mark.integration
django = pytest.importorskip("django")

CHANGELIST = "/admin/awa_beat/schedule/"


@pytest.fixture(scope="module")
def project(matrix_templates: CatalogueTemplates) -> Iterator[str]:
    url = matrix_templates.clone(os.environ.get("AWA_BEAT_MATRIX_LAYOUT", "standalone")).url
    os.environ["AWA_BEAT_DJANGO_TEST_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.django_settings"
    django.setup()
    from django.core.management import call_command
    from django.db import connections

    call_command("migrate", verbosity=0)
    from django.contrib.auth.models import User

    User.objects.create_superuser("root", "root@example.invalid", "pw")
    yield url
    from awa_beat.contrib.django.operations import close

    close()
    connections.close_all()


@pytest.fixture
def client(project: str) -> Any:
    from django.test import Client

    c = Client()
    c.login(username="root", password="pw")
    return c


def text(page: Any) -> str:
    assert page.status_code == 200, page.content.decode()[-3000:]
    return html.unescape(page.content.decode())


def rows(page: str) -> dict[str, str]:
    """The changelist's rows by schedule name."""
    found = {}
    for row in re.findall(r"<tr>(.*?)</tr>", page, re.S):
        name = re.search(r'name="_selected_action" value="([^"]+)"', row)
        if name:
            found[name.group(1)] = row
    return found


def test_the_changelist_describes_every_type(client: Any) -> None:
    listed = rows(text(client.get(CHANGELIST)))
    assert set(listed) == set(NAMES)
    for name in NAMES:
        assert WORDS[name] in listed[name], listed[name]


def test_the_paused_filter_and_a_search_answer(client: Any) -> None:
    paused = rows(text(client.get(CHANGELIST, {"paused_at__isempty": "0"})))
    assert set(paused) == {n for n in NAMES if CATALOGUE[n].paused}
    active = rows(text(client.get(CHANGELIST, {"paused_at__isempty": "1"})))
    assert set(active) == {n for n in NAMES if not CATALOGUE[n].paused}
    for name in NAMES:
        assert name in rows(text(client.get(CHANGELIST, {"q": name})))


@pytest.mark.parametrize("name", NAMES)
def test_each_change_page_and_runtime_form_answers(client: Any, name: str) -> None:
    assert CATALOGUE[name].cron_expr in text(client.get(f"{CHANGELIST}{name}/change/"))
    if CATALOGUE[name].owner == "runtime":
        text(client.get(f"{CHANGELIST}runtime/{name}/edit/"))


def test_next_and_last_fire_columns_say_paused_and_never(client: Any) -> None:
    listed = rows(text(client.get(CHANGELIST)))
    for name in NAMES:
        entry, row = CATALOGUE[name], listed[name]
        next_cell = re.search(r'<td class="field-next_fire">(.*?)</td>', row, re.S)
        last_cell = re.search(r'<td class="field-last_fire[^"]*">(.*?)</td>', row, re.S)
        assert next_cell and last_cell, row
        if entry.state == "retired":
            assert next_cell.group(1) == "retired: no run left"
            assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", last_cell.group(1))
        else:
            assert last_cell.group(1) == "never", (name, last_cell.group(1))
            if entry.paused:
                assert next_cell.group(1).startswith("paused"), next_cell.group(1)
            else:
                assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", next_cell.group(1))
