"""The bounds of every schedule type in a real Django project's admin: shown on the
change page, set, kept by an edit of the calendar and removed on the runtime form, on the
database of the layout $AWA_BEAT_MATRIX_LAYOUT that the runner made
($AWA_BEAT_DJANGO_TEST_URL: the catalogue, every type owned at run time). The project is
tests/matrix/django_cases.py's.

Run by tests/matrix/test_bounds_forms.py in a pytest of its own per layout: Django takes
one configuration per process.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from awa_beat._db.database import Database
from awa_beat._ops.records import ScheduleBounds
from tests.django_admin_cases import shown_fields
from tests.matrix import django_cases
from tests.matrix.catalogue import CATALOGUE, NAMES, MatrixDB, stored_rows

pytestmark = pytest.mark.integration
django = pytest.importorskip("django")
#: The project and the superuser's client of the matrix's own admin cases.
matrix = django_cases.matrix
client = django_cases.client
UTC = timezone.utc
BOUNDABLE = [n for n in NAMES if CATALOGUE[n].marker != "at"]
#: What the change page shows of each type's bounds, as the catalogue stores them.
CHANGE_PAGE = {
    "bound-start": "2030-06-01 00:00:00 UTC", "bound-end": "2035-01-01 00:00:00 UTC",
    "bound-max-runs": "3", "one-off": "yes", "at": "yes", "retired": "2",
}
OTHER = {"grid-interval": "0 */20 * * * *", "offgrid-interval": "11",
         "solar": "sunset:48.8566:2.3522",
         "rrule": "@rrule DTSTART=20260105T090000;FREQ=WEEKLY;BYDAY=MO"}


@pytest.fixture(scope="module")
def project(matrix: MatrixDB) -> str:
    """The database the runner made: every type owned at run time."""
    return matrix.url


def edit_url(name: str) -> str:
    return f"/admin/awa_beat/schedule/runtime/{name}/edit/"


def bounds_of(url: str, name: str) -> tuple[Any, ...]:
    with Database(url) as store:
        b = ScheduleBounds.of(store.schedules.get(name))
    return b.start_time, b.end_time, b.max_runs, b.one_off, b.overlap, b.deadline


def shown_form(client: Any, name: str) -> dict[str, str]:
    page = client.get(edit_url(name))
    assert page.status_code == 200
    return shown_fields(page.content.decode())


def save(client: Any, name: str, values: dict[str, str]) -> Any:
    return client.post(edit_url(name), {k: v for k, v in values.items() if v != ""
                                        or k != "one_off"})


@pytest.mark.parametrize("name", NAMES)
def test_the_change_page_shows_the_bounds_as_fields(client: Any, name: str) -> None:
    page = client.get(f"/admin/awa_beat/schedule/{name}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    for label in ("no fire before", "no fire after", "runs in all", "one-off", "overlap",
                  "deadline"):
        assert label in text.lower(), label
    if name in CHANGE_PAGE:
        assert CHANGE_PAGE[name] in text


@pytest.mark.parametrize("name", BOUNDABLE)
def test_the_runtime_form_sets_keeps_and_removes_each_bound(client: Any, project: str,
                                                            name: str) -> None:
    values = shown_form(client, name)
    values.update(start_time="2030-07-01T02:00:00+02:00", end_time="2034-01-01T00:00:00Z",
                  max_runs="40", overlap="skip", deadline="900")
    values.pop("one_off", None)
    assert save(client, name, values).status_code == 302
    set_ = (datetime(2030, 7, 1, tzinfo=UTC), datetime(2034, 1, 1, tzinfo=UTC), 40, False,
            "skip", 900.0)
    assert bounds_of(project, name) == set_
    values = shown_form(client, name)
    assert (values["max_runs"], values["overlap"], values["deadline"]) == ("40", "skip", "900")
    values["schedule"] = OTHER.get(name, "45 * * * *")  # the calendar alone
    assert save(client, name, values).status_code == 302
    assert bounds_of(project, name) == set_
    values = shown_form(client, name)
    values.update(start_time="", end_time="", max_runs="", overlap="", deadline="")
    assert save(client, name, values).status_code == 302
    assert bounds_of(project, name) == (None, None, None, False, "allow", None)
    values = shown_form(client, name)
    values["one_off"] = "on"
    assert save(client, name, values).status_code == 302
    assert bounds_of(project, name)[2:4] == (1, True)
    assert shown_form(client, name).get("one_off")  # checked


def test_at_refuses_a_run_limit_next_to_its_field(client: Any, project: str) -> None:
    before = stored_rows(project)["at"]
    values = shown_form(client, "at")
    assert values.get("one_off") and values["kind"] == "at"
    values["max_runs"] = "3"
    page = save(client, "at", values)
    assert page.status_code == 400
    text = page.content.decode()
    assert "Nothing was written" in text and "at() fires once" in text
    assert stored_rows(project)["at"] == before


def test_add_with_bounds(client: Any, project: str) -> None:
    page = client.post("/admin/awa_beat/schedule/runtime/add/", {
        "name": "admin-bounded", "task": "t.added", "kind": "every", "schedule": "300",
        "args": "[]", "kwargs": "{}", "start_time": "2030-07-01T00:00:00Z",
        "end_time": "2034-01-01T00:00:00Z", "max_runs": "3", "overlap": "skip",
        "deadline": "15m"})
    assert page.status_code == 302, page.content.decode()[-2000:]
    assert bounds_of(project, "admin-bounded") == (
        datetime(2030, 7, 1, tzinfo=UTC), datetime(2034, 1, 1, tzinfo=UTC), 3, False, "skip",
        900.0)
    bad = client.post("/admin/awa_beat/schedule/runtime/add/", {
        "name": "admin-bad", "task": "t", "kind": "cron", "schedule": "0 9 * * *",
        "max_runs": "three"})
    assert bad.status_code == 400 and "a whole number of runs" in bad.content.decode()
    assert "admin-bad" not in stored_rows(project)


@pytest.mark.parametrize("name", [n for n in NAMES if CATALOGUE[n].state != "retired"])
def test_the_window_and_the_jitter_are_set_shown_and_removed(client: Any, project: str,
                                                             name: str) -> None:
    values = shown_form(client, name)
    assert (values.get("catch_up_window", ""), values.get("jitter", "")) == ("", "")
    values.update(catch_up_window="5m", jitter="0.25")
    assert save(client, name, values).status_code == 302
    with Database(project) as store:
        b = ScheduleBounds.of(store.schedules.get(name))
    assert (b.catch_up_window, b.jitter) == (300.0, 0.25)
    page = client.get(f"/admin/awa_beat/schedule/{name}/change/").content.decode()
    assert "300 s: older missed fires are skipped" in page
    assert "up to 0.25 s after each fire time" in page
    if CATALOGUE[name].marker != "at" and not CATALOGUE[name].paused:
        assert "data-run-at" in page  # the preview lists each fire's run time
    values = shown_form(client, name)
    assert (values["catch_up_window"], values["jitter"]) == ("300", "0.25")
    values.update(catch_up_window="", jitter="")
    assert save(client, name, values).status_code == 302
    with Database(project) as store:
        b = ScheduleBounds.of(store.schedules.get(name))
    assert (b.catch_up_window, b.jitter) == (None, None)


def test_a_bad_jitter_is_named_next_to_its_field(client: Any, project: str) -> None:
    before = stored_rows(project)["bound-end"]
    values = shown_form(client, "bound-end")
    values["jitter"] = "0"
    page = save(client, "bound-end", values)
    assert page.status_code == 400
    text = page.content.decode()
    assert "Nothing was written" in text and "positive number of seconds" in text
    assert stored_rows(project)["bound-end"] == before


# -- overlap buffer_one and pause after failures (docs/operating-time.md) ---------------------


def failures_setting(url: str, name: str) -> int | None:
    with Database(url) as store:
        return ScheduleBounds.of(store.schedules.get(name)).pause_after_failures


@pytest.mark.parametrize("name", NAMES)
def test_buffer_one_on_the_runtime_form_of_each_type(client: Any, project: str,
                                                     name: str) -> None:
    values = shown_form(client, name)
    values["overlap"] = "buffer_one"
    assert save(client, name, values).status_code == 302
    assert bounds_of(project, name)[4] == "buffer_one"
    values = shown_form(client, name)
    assert values["overlap"] == "buffer_one"
    page = client.get(f"/admin/awa_beat/schedule/{name}/change/").content.decode()
    assert "pause after failures" in page.lower() and "buffer_one" in page
    values["overlap"] = ""
    assert save(client, name, values).status_code == 302
    assert bounds_of(project, name)[4] == "allow"


def test_pause_after_failures_on_the_runtime_form(client: Any, project: str) -> None:
    import os

    name = "grid-interval"
    values = shown_form(client, name)
    values["pause_after_failures"] = "3"
    values["dispatch"] = "awa"
    refused = save(client, name, values)
    assert refused.status_code == 400
    assert "cannot be paused on failure" in refused.content.decode()
    assert failures_setting(project, name) is None
    if os.environ.get("AWA_BEAT_MATRIX_LAYOUT") == "awa":
        return  # Celery dispatch is refused where Awa owns awa.jobs
    values["dispatch"] = "celery"
    assert save(client, name, values).status_code == 302
    assert failures_setting(project, name) == 3
    assert shown_form(client, name)["pause_after_failures"] == "3"
    # Paused by awa-beat after three failures: shown with its note, resumed here.
    from awa_beat._bridge.messages import fire_task_id
    from awa_beat.outcomes import Report, outcome_params

    with Database(project) as store:
        for minute in (1, 2, 3):
            text = f"2026-01-05 09:0{minute}:00+00"
            store.outcomes.record(outcome_params([Report(
                fire_task_id(name, text, 0), name, text, None, "failed",
                finished_at=datetime.now(UTC), runtime=0.1, error="ValueError: down")]))
    listed = client.get("/admin/awa_beat/schedule/").content.decode()
    assert ("by awa-beat: “paused after 3 consecutive failures; last error: "
            "ValueError: down”") in listed
    assert client.post("/admin/awa_beat/schedule/", {
        "action": "resume", "_selected_action": [name]}).status_code == 302
    assert stored_rows(project)[name]["paused_by"] is None
