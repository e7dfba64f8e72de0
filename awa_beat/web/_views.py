"""The pages and the actions. Each view reads its input, calls the operations layer,
and renders a template (autoescaped) or redirects. Every action is recorded in the
audit log, whether it succeeded or not."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .._ops.forms import (
    BOUND_FIELDS,
    FIELD_LIMIT,
    FORM_FIELDS,
    KINDS,
    OVERLAP_CHOICES,
    entry_from_form,
    form_values,
)
from .._ops.records import COUNT_LIMIT, ScheduleFilter, ScheduleView
from .._schedules.cron import load_timezone
from .._schedules.describe import describe
from .._schedules.explain import Explanation, parse_instant
from .._schedules.fire_times import POLICIES, parse_iso
from .._schedules.preview import Preview
from .._schedules.spec import DISPATCHES
from ..errors import (
    AwaBeatError,
    BackfillRefused,
    ScheduleConflict,
    ScheduleError,
    ScheduleOwned,
)
from ._app import HTTPError, Request, Response

if TYPE_CHECKING:
    from ._app import Dashboard, View

ROUTES: dict[tuple[str, str], View] = {}
#: The paths that change something. Read-only mode refuses them.
ACTIONS = {"/schedule/pause", "/schedule/resume", "/schedule/trigger", "/schedule/remove",
           "/schedule/add", "/schedule/edit", "/schedule/backfill"}
NOTE_LIMIT = 500
#: How many fires the schedule's page lists when it is not asked for a count: enough
#: monthly fires to cross both DST changes of a year.
PAGE_FIRES = 20
SEARCH_LIMIT = 200
#: What a redirect after an action may say. It never carries text from the request.
DONE = {"paused": "Paused.", "resumed": "Resumed.", "triggered": "Triggered: job {job}.",
        "removed": "Removed {name}; the jobs it fired stay.", "added": "Added.",
        "edited": "Saved."}


def route(method: str, path: str) -> Callable[[View], View]:
    def register(view: View) -> View:
        ROUTES[(method, path)] = view
        return view
    return register


def required(values: Mapping[str, str], field: str, limit: int = 1000) -> str:
    value = values.get(field, "").strip()
    if not value:
        raise HTTPError(400, f"{field}: required")
    if len(value) > limit:
        raise HTTPError(400, f"{field}: at most {limit} characters")
    return value


# -- formatting (template filters) -----------------------------------------------------------


def utc(value: datetime | None) -> str:
    if value is None:
        return "-"
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def local(value: datetime | None, zone: str) -> str:
    if value is None:
        return "-"
    try:
        return value.astimezone(load_timezone(zone)).strftime("%Y-%m-%d %H:%M:%S %Z")
    except AwaBeatError:
        return "-"


def iso(value: datetime | None) -> str:
    return value.astimezone(timezone.utc).isoformat() if value else ""


FILTERS: dict[str, Callable[..., Any]] = {"utc": utc, "local": local, "iso": iso,
                                           "describe": describe}


# -- pages -----------------------------------------------------------------------------------


@route("GET", "/")
def index(app: Dashboard, req: Request) -> Response:
    return Response.redirect(req.url("/schedules"))


@route("GET", "/favicon.ico")
def favicon(app: Dashboard, req: Request) -> Response:
    return Response("", 204)


def _filter(app: Dashboard, query: Mapping[str, str]) -> tuple[ScheduleFilter, dict[str, str]]:
    search = query.get("q", "").strip()
    if len(search) > SEARCH_LIMIT:
        raise HTTPError(400, f"q: at most {SEARCH_LIMIT} characters")
    paused = query.get("paused", "")
    if paused not in ("", "yes", "no"):
        raise HTTPError(400, "paused: yes, no or empty")
    owner = query.get("owner", "")
    state = query.get("state", "")
    names = None
    if state:
        if app.outcomes is None or state not in ("overdue", "failing"):
            raise HTTPError(400, "state: overdue or failing, once run outcomes are known")
        names = frozenset(getattr(app.outcomes, state)())
    shown = {"q": search, "paused": paused, "owner": owner, "state": state}
    # '~runtime' and '~none' cannot clash with a deployment's name in the select. A
    # deployment's rows include the runtime ones written through it (shown as "runtime
    # via"), because narrowing them to owner 'config' as well slowed the deep owner pages
    # in benchmarks/web/bench_web.py.
    if owner == "~runtime":
        deployment, owned_by = None, "runtime"
    elif owner == "~none":
        deployment, owned_by = "", None
    else:
        deployment, owned_by = owner or None, None
    return ScheduleFilter(search=search or None,
                          paused={"yes": True, "no": False}.get(paused),
                          owner=deployment, owned_by=owned_by, names=names), shown


@route("GET", "/schedules")
def schedules(app: Dashboard, req: Request) -> Response:
    query = req.query
    where, shown = _filter(app, query)
    after, before = query.get("after") or None, query.get("before") or None
    if len(after or "") > 1000 or len(before or "") > 1000:
        raise HTTPError(400, "after, before: a schedule name (at most 1000 characters)")
    page = app.ops.page(where, after=after, before=before, limit=app.config.page_size)
    queues = app.ops.cluster.queue_pauses({v.row.queue for v in page.views})
    return app.render(
        req, "schedules.html", page=page, rows=[_row(v, page.notes, queues)
                                                for v in page.views],
        shown=shown, deployments=app.ops.deployments(), outcomes=app.outcomes is not None,
        count_limit=COUNT_LIMIT, editor=app.editor is not None,
        next_url=req.url("/schedules", **shown, after=page.views[-1].name)
        if page.has_next and page.views else None,
        prev_url=req.url("/schedules", **shown, before=page.views[0].name)
        if page.has_previous and page.views else None)


def _row(view: ScheduleView, notes: Mapping[str, str], queues: Mapping[str, Any]
         ) -> dict[str, Any]:
    return {"view": view, "row": view.row, "note": notes.get(view.name),
            "queue_pause": queues.get(view.row.queue), "description": describe(
                view.row.cron_expr)}


def _preview(app: Dashboard, name: str, query: Mapping[str, str]
             ) -> tuple[Preview | None, str | None]:
    """The schedule's preview for the page's ``count`` or ``until``, or why there is
    none (the field at fault, or the calendar's error)."""
    count_text, until_text = query.get("count", "").strip(), query.get("until", "").strip()
    count = until = None
    if count_text:
        if not _digits(count_text) or len(count_text) > 4:
            return None, "count: a whole number from 1 to 1000"
        count = int(count_text)
    if until_text:
        try:
            until = parse_iso(until_text[:64])
        except ValueError:
            return None, "until: an instant in ISO 8601, e.g. 2027-01-01T00:00:00Z"
        if until.tzinfo is None:
            until = until.replace(tzinfo=timezone.utc)
    if count is None and until is None:
        count = PAGE_FIRES
    try:
        return app.ops.preview(name, count=count, until=until), None
    except ScheduleError as exc:
        return None, str(exc)


def _explain(app: Dashboard, name: str, query: Mapping[str, str]
             ) -> tuple[Explanation | None, str | None]:
    """What happened or will happen at the page's ``at``, or why it cannot be read."""
    text = query.get("at", "").strip()[:64]
    if not text:
        return None, None
    try:
        at = parse_instant(text, app.ops.clock())
    except ValueError as exc:
        return None, f"at: {exc}"
    return app.ops.explain(name, at), None


@route("GET", "/schedule")
def schedule(app: Dashboard, req: Request) -> Response:
    return _schedule_page(app, req, required(req.query, "name"))


def _schedule_page(app: Dashboard, req: Request, name: str, status: int = 200,
                   **extra: Any) -> Response:
    """The schedule page; ``extra`` fills the backfill form and its result."""
    query = req.query
    view = app.ops.get(name)
    # When outcomes are known, the history shows the occurrences (fires with their
    # outcome, skips, coalesces); otherwise it shows the jobs alone.
    occurrences = app.ops.occurrences(name, 25) if app.outcomes is not None else None
    jobs = app.ops.history(name, 25) if occurrences is None else []
    done = query.get("done", "")
    job = query.get("job", "")
    message = DONE[done].format(job=int(job) if _digits(job) else "?", name=name) \
        if done in DONE else None
    preview, preview_error = _preview(app, name, query)
    explained, explain_error = _explain(app, name, query)
    return app.render(
        req, "schedule.html", item=_row(view, {name: app.ops.pause_note(name) or ""},
                                        app.ops.cluster.queue_pauses([view.row.queue])),
        runs_left=app.ops.runs_left(view.row),
        jobs=jobs, occurrences=occurrences,
        editable=app.editor is not None and view.owner == "runtime",
        audit=app.ops.audit_log(limit=20, schedule=name), message=message,
        preview=preview, preview_error=preview_error,
        preview_count=query.get("count", "")[:4], preview_until=query.get("until", "")[:64],
        explained=explained, explain_error=explain_error, explain_at=query.get("at", "")[:64],
        status=status, **{"backfill": None, "backfill_error": None, "backfill_form": {},
                          **extra})


@route("GET", "/schedule/remove")
def confirm_remove(app: Dashboard, req: Request) -> Response:
    name = required(req.query, "name")
    view = app.ops.get(name)
    return app.render(req, "remove.html", view=view)


@route("GET", "/cluster")
def cluster(app: Dashboard, req: Request) -> Response:
    return app.render(req, "cluster.html", cluster=app.ops.cluster.status(),
                      overdue=app.ops.overdue() if app.outcomes is not None else None)


@route("GET", "/audit")
def audit(app: Dashboard, req: Request) -> Response:
    before = req.query.get("before", "")
    if before and not _digits(before):
        raise HTTPError(400, "before: an entry id")
    entries = app.ops.audit_log(limit=app.config.page_size + 1,
                                before_id=int(before) if before else None)
    more = len(entries) > app.config.page_size
    entries = entries[:app.config.page_size]
    return app.render(req, "audit.html", entries=entries,
                      older_url=req.url("/audit", before=entries[-1].id) if more else None)


def _digits(text: str) -> bool:
    """Return whether the text is ASCII digits only. ``str.isdigit`` also takes ``²``,
    which ``int`` refuses."""
    return text.isascii() and text.isdigit()


# -- actions ---------------------------------------------------------------------------------


def _act(app: Dashboard, req: Request, action: str, name: str, run: Callable[[], Any],
         detail: dict[str, Any] | None = None) -> Any:
    """Run an action and record it: who did what, from where, and how it ended."""
    try:
        result = run()
    except AwaBeatError as exc:
        app.record(req, action, f"error: {exc}", schedule=name, detail=detail)
        raise
    app.record(req, action, "ok", schedule=name, detail=detail)
    return result


def _paused_by(req: Request) -> str:
    return f"{req.user or 'anonymous'} (awa-beat web)"


@route("POST", "/schedule/pause")
def pause(app: Dashboard, req: Request) -> Response:
    name = required(req.form, "name")
    note = req.form.get("note", "").strip()
    if len(note) > NOTE_LIMIT:
        raise HTTPError(400, f"note: at most {NOTE_LIMIT} characters")
    _act(app, req, "pause", name, lambda: app.ops.pause(name, _paused_by(req), note or None),
         {"note": note} if note else None)
    return Response.redirect(req.url("/schedule", name=name, done="paused"))


@route("POST", "/schedule/resume")
def resume(app: Dashboard, req: Request) -> Response:
    name = required(req.form, "name")
    _act(app, req, "resume", name, lambda: app.ops.resume(name))
    return Response.redirect(req.url("/schedule", name=name, done="resumed"))


@route("POST", "/schedule/trigger")
def trigger(app: Dashboard, req: Request) -> Response:
    name = required(req.form, "name")
    job = _act(app, req, "trigger", name, lambda: app.ops.trigger(name))
    return Response.redirect(req.url("/schedule", name=name, done="triggered", job=job))


def _form_instant(form: Mapping[str, str], field: str) -> datetime:
    """An instant of the backfill form: ISO 8601 with an offset or Z."""
    text = required(form, field, 64)
    try:
        t = parse_iso(text)
    except ValueError:
        raise BackfillRefused(f"{field}: {text!r} is not an instant: give ISO 8601 with an "
                              "offset or Z, e.g. 2026-11-01T00:00:00Z") from None
    if t.tzinfo is None:
        raise BackfillRefused(f"{field}: {text!r} has no offset: add one or Z")
    return t


@route("POST", "/schedule/backfill")
def backfill(app: Dashboard, req: Request) -> Response:
    """A backfill, or with ``dry_run`` its preview; the result is shown on the schedule
    page. The operations layer records the backfill in the audit log itself (with what
    it inserted), so this view marks the request audited once it has called it."""
    form = req.form
    name = required(form, "name")
    shown = {k: form.get(k, "")[:64] for k in ("from", "to", "overlap")}
    dry_run = form.get("dry_run") == "1"
    try:
        start, end = _form_instant(form, "from"), _form_instant(form, "to")
        try:
            found = app.ops.backfill(name, start, end, overlap=form.get("overlap") or "allow",
                                     dry_run=dry_run, actor=req.user or "anonymous",
                                     source=app.config.source,
                                     remote_addr=req.client(app.config))
        finally:
            req.audited = True
    except BackfillRefused as exc:
        return _schedule_page(app, req, name, 400, backfill_error=str(exc),
                              backfill_form=shown)
    return _schedule_page(app, req, name, backfill=found, backfill_form=shown)


@route("POST", "/schedule/remove")
def remove(app: Dashboard, req: Request) -> Response:
    name = required(req.form, "name")
    if req.form.get("confirm") != name:
        raise HTTPError(400, "confirm: must repeat the schedule's name")
    _act(app, req, "remove", name, lambda: app.ops.remove(name))
    return Response.redirect(req.url("/schedules"))


# -- adding and editing runtime schedules -----------------------------------------------------

def _read_form(form: Mapping[str, str]) -> dict[str, str]:
    values = {}
    for field in FORM_FIELDS:
        if field in BOUND_FIELDS and field not in form:
            continue  # A field that was not posted is left as it is (entry_from_form).
        value = form.get(field, "").strip()
        if len(value) > FIELD_LIMIT:
            raise HTTPError(400, f"{field}: at most {FIELD_LIMIT} characters")
        values[field] = value
    if values["kind"] not in KINDS:
        raise HTTPError(400, f"kind: one of {', '.join(KINDS)}")
    return values


def _problems(exc: AwaBeatError) -> list[tuple[str, str]]:
    from ..errors import ValidationError

    if isinstance(exc, ValidationError):
        return [(field, message) for _, field, message in exc.problems]
    return [("", str(exc))]


def _editor(app: Dashboard) -> Any:
    if app.editor is None:
        raise HTTPError(404, "this dashboard does not add or edit schedules")
    return app.editor


def _render_form(app: Dashboard, req: Request, *, name: str, values: Mapping[str, str],
                 editing: bool, status: int = 200,
                 problems: list[tuple[str, str]] | None = None) -> Response:
    return app.render(req, "edit.html", status, name=name,
                      values={**dict.fromkeys(BOUND_FIELDS, ""), **values}, editing=editing,
                      kinds=KINDS, policies=sorted(POLICIES), dispatches=DISPATCHES,
                      overlaps=OVERLAP_CHOICES,
                      problems=problems or [])


@route("GET", "/schedule/new")
def new_form(app: Dashboard, req: Request) -> Response:
    _editor(app)
    return _render_form(app, req, name="", editing=False, values={
        "task": "", "kind": "cron", "schedule": "", "args": "[]", "kwargs": "{}", "queue": "",
        "timezone": "", "policy": "", "dispatch": "", **dict.fromkeys(BOUND_FIELDS, "")})


@route("POST", "/schedule/add")
def add(app: Dashboard, req: Request) -> Response:
    editor = _editor(app)
    name = required(req.form, "name")
    values = _read_form(req.form)
    try:
        # The form is read inside the action, so that a refused form is recorded as a
        # refused add.
        _act(app, req, "add", name,
             lambda: editor.add(name, entry_from_form(values, name=name),
                                by=_paused_by(req)),
             {"entry": {k: v for k, v in values.items() if v}})
    except (ScheduleError, ScheduleConflict) as exc:
        return _render_form(app, req, name=name, values=values, editing=False, status=400,
                            problems=_problems(exc))
    return Response.redirect(req.url("/schedule", name=name, done="added"))


@route("GET", "/schedule/edit")
def edit_form(app: Dashboard, req: Request) -> Response:
    _editor(app)
    view = app.ops.get(required(req.query, "name"))
    if view.owner != "runtime":
        raise HTTPError(403, _owned_text(view))
    return _render_form(app, req, name=view.name, values=form_values(view.row), editing=True)


def _owned_text(view: ScheduleView) -> str:
    return (f"{view.name} is not a runtime schedule: its owner is {view.owner_text}; "
            "change it where it is configured")


@route("POST", "/schedule/edit")
def edit(app: Dashboard, req: Request) -> Response:
    editor = _editor(app)
    name = required(req.form, "name")
    values = _read_form(req.form)
    view = app.ops.get(name)
    shown = form_values(view.row)
    try:
        detail = {"changes": {k: v for k, v in values.items() if v != shown.get(k, "")}}
        _act(app, req, "edit", name,
             lambda: editor.edit(name, entry_from_form(values, shown), by=_paused_by(req)),
             detail)
    except ScheduleOwned as exc:
        raise HTTPError(403, str(exc)) from None
    except (ScheduleError, ScheduleConflict) as exc:
        return _render_form(app, req, name=name, values=values, editing=True, status=400,
                            problems=_problems(exc))
    return Response.redirect(req.url("/schedule", name=name, done="edited"))


# -- logging in ------------------------------------------------------------------------------


@route("GET", "/login")
def login_form(app: Dashboard, req: Request) -> Response:
    return app.render(req, "login.html", next=app.local_target(req.query.get("next", "")),
                      error=None, username="", database=None)


@route("POST", "/login")
def login(app: Dashboard, req: Request) -> Response:
    form = req.form
    target = app.local_target(form.get("next", ""))
    username = form.get("username", "").strip()
    error = None
    if not app.config.password:
        error = "password: this dashboard has no password login"
    elif not username or len(username) > 100:
        error = "username: required (at most 100 characters), recorded with your actions"
    elif not app.password_ok(req, username, form.get("password", "")):
        error = "password: wrong password"
    if error:
        response = app.render(req, "login.html", 401, next=target, error=error,
                              username=username[:100], database=None)
        return response
    app.log_in(req, username)
    return Response.redirect(req.root + target)


@route("POST", "/logout")
def logout(app: Dashboard, req: Request) -> Response:
    app.log_out(req)
    return Response.redirect(req.url("/login"))
