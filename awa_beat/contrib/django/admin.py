"""The admin of awa-beat's schedules: the dashboard's columns, pause, resume and trigger
as actions, a backfill of one schedule, and forms that add and edit runtime-managed
schedules, all through awa-beat's operations layer and its audit log. Config rows stay
read-only."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from functools import partial
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone as dj_timezone
from django.utils.html import format_html, format_html_join

from ..._db.records import ScheduleRow
from ..._ops.forms import (
    FIELD_LIMIT,
    KINDS,
    OVERLAP_CHOICES,
    entry_from_form,
    form_values,
)
from ..._ops.records import ScheduleBounds, ScheduleView
from ..._ops.rows import last_fire, next_fire
from ..._schedules.backfill import OVERLAPS
from ..._schedules.describe import describe
from ..._schedules.explain import INSTANT_HELP, Explanation, parse_instant
from ..._schedules.fire_times import POLICIES, parse_iso
from ..._schedules.spec import DISPATCHES
from ...errors import (
    AwaBeatError,
    BackfillRefused,
    NotFound,
    ScheduleConflict,
    ScheduleError,
    ValidationError,
)
from ._operations import operations
from .models import PauseNote, Registration, Schedule


def _row(obj: Schedule) -> ScheduleRow:
    return ScheduleRow(obj.name, obj.cron_expr, obj.timezone, obj.kind, obj.queue, obj.args,
                       obj.priority, obj.max_attempts, [], obj.metadata,
                       obj.missed_fire_policy, obj.last_enqueued_at, obj.created_at,
                       obj.updated_at, obj.paused_at, obj.paused_by)


def _bounds(obj: Schedule) -> ScheduleBounds:
    """The schedule's bounds and settings, read from its marker and metadata once per
    object: the change page shows a field for each of them."""
    bounds: ScheduleBounds | None = getattr(obj, "_awa_beat_bounds", None)
    if bounds is None:
        bounds = ScheduleBounds.of(_row(obj))
        obj._awa_beat_bounds = bounds
    return bounds


def _instant(value: datetime | None) -> str:
    return "-" if value is None else value.astimezone(timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC")


def _actor(request: HttpRequest) -> str:
    return str(request.user.get_username())


def _client(request: HttpRequest) -> str | None:
    return request.META.get("REMOTE_ADDR")


def _owned_text(view: ScheduleView) -> str:
    return (f"{view.name} is not a runtime schedule (owner: {view.owner_text}): change it "
            "where it is configured")


def _run(request: HttpRequest, queryset: QuerySet[Schedule], action: str,
         run: Callable[[str], Any], done: str) -> None:
    ops = operations()
    ok = 0
    for name in queryset.values_list("name", flat=True):
        record = {"actor": _actor(request), "source": "django", "action": action,
                  "schedule": name, "remote_addr": _client(request)}
        try:
            run(name)
        except AwaBeatError as exc:
            ops.record_action(**record, outcome=f"error: {exc}")
            messages.error(request, f"{name}: {exc}")
            continue
        ops.record_action(**record, outcome="ok")
        ok += 1
    if ok:
        messages.success(request, f"{done} {ok} schedule(s).")


def _text(required: bool = False, label: str | None = None) -> forms.CharField:
    return forms.CharField(max_length=FIELD_LIMIT, required=required, strip=True,
                           label=label, widget=forms.TextInput(attrs={"size": 48}))


#: The form field of each ``options.awa_beat`` setting a problem may name.
_SETTING_FIELDS = {"start_time": "start_time", "end_time": "end_time",
                   "max_runs": "max_runs", "one_off": "one_off", "overlap": "overlap",
                   "deadline": "deadline", "catch_up_window": "catch_up_window",
                   "jitter": "jitter", "pause_after_failures": "pause_after_failures",
                   "timezone": "timezone",
                   "missed_fire_policy": "policy", "queue": "queue", "dispatch": "dispatch"}


class RuntimeScheduleForm(forms.Form):
    """A runtime schedule's fields, as the dashboard's form has them."""

    name = forms.CharField(max_length=1000)
    task = _text()
    kind = forms.ChoiceField(choices=list(KINDS.items()), label="Schedule")
    schedule = _text()
    args = _text()
    kwargs = _text()
    queue = _text()
    timezone = _text()
    policy = forms.ChoiceField(required=False, label="Missed fires", choices=[
        ("", "default"), *((p, p) for p in sorted(POLICIES))])
    dispatch = forms.ChoiceField(required=False, choices=[
        ("", "default"), *((d, d) for d in DISPATCHES)])
    start_time = _text(label="No fire before (ISO 8601)")
    end_time = _text(label="No fire after (ISO 8601)")
    max_runs = _text(label="Runs in all")
    one_off = forms.BooleanField(required=False, label="One-off: run once, then retire")
    overlap = forms.ChoiceField(required=False, choices=OVERLAP_CHOICES)
    deadline = _text(label="Deadline (seconds after the fire)")
    catch_up_window = _text(label="Catch-up window (seconds: older missed fires are skipped)")
    jitter = _text(label="Jitter (seconds: each job runs up to this late)")
    pause_after_failures = _text(label="Pause after N failed runs in a row")

    def values(self) -> dict[str, str]:
        values = {k: str(v or "") for k, v in self.cleaned_data.items() if k != "name"}
        values["one_off"] = "yes" if self.cleaned_data.get("one_off") else ""  # as shown
        return values

    def show(self, exc: AwaBeatError) -> None:
        """Put the write's problems next to the fields they are about."""
        problems = ([(f, m) for _, f, m in exc.problems] if isinstance(exc, ValidationError)
                    else [("", str(exc))])
        for field, message in problems:
            top = field.split(".")[0]
            if field.startswith("options.awa_beat."):
                top = _SETTING_FIELDS.get(field.split(".")[2], top)
            if top in self.fields:
                self.add_error(top, message)
            else:
                self.add_error(None, f"{field}: {message}" if field else message)


class BackfillForm(forms.Form):
    """A backfill's range (and overlap), as the dashboard's form has it."""

    start = forms.CharField(max_length=64, strip=True, label="From (ISO 8601, with an offset)",
                            widget=forms.TextInput(attrs={"size": 28,
                                                          "placeholder": "2026-11-01T00:00:00Z"}))
    end = forms.CharField(max_length=64, strip=True, label="To (ISO 8601, with an offset)",
                          widget=forms.TextInput(attrs={"size": 28,
                                                        "placeholder": "2026-11-30T23:59:59Z"}))
    overlap = forms.ChoiceField(choices=[(o, o) for o in OVERLAPS], initial="allow",
                                label="Overlap")

    def instant(self, field: str) -> datetime | None:
        """The instant of ``field``, or None after adding the error to the field."""
        text = self.cleaned_data[field]
        try:
            t = parse_iso(text)
        except ValueError:
            self.add_error(field, "not an instant: give ISO 8601 with an offset or Z, e.g. "
                                  "2026-11-01T00:00:00Z")
            return None
        if t.tzinfo is None:
            self.add_error(field, "has no offset: add one or Z")
            return None
        return t


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    list_display = ("name", "calendar", "timezone", "next_fire", "last_fire",
                    "paused", "owner", "edit")
    change_list_template = "awa_beat/change_list.html"
    list_filter = (("paused_at", admin.EmptyFieldListFilter),)
    search_fields = ("name", "kind")
    list_per_page = 50
    show_full_result_count = True
    actions = ("pause", "resume", "trigger", "backfill")
    readonly_fields = (*(f.name for f in Schedule._meta.fields), "start_time", "end_time",
                       "max_runs", "one_off", "overlap", "deadline", "catch_up_window",
                       "jitter", "pause_after_failures", "preview", "explain")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Schedule]:
        registration = Registration.objects.filter(name=OuterRef("name"))
        note = PauseNote.objects.filter(name=OuterRef("name"),
                                        paused_at=OuterRef("paused_at")).values("note")[:1]
        return super().get_queryset(request).annotate(
            owner_name=Subquery(registration.values("deployment")[:1]),
            owner_kind=Subquery(registration.values("owner")[:1]),
            pause_note=Subquery(note))

    # Django's ORM never writes a definition: config rows are their deployment's, and
    # runtime rows change through the forms below (Operations.add/update) only.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff
                    and request.user.has_perm("awa_beat.view_schedule"))

    @admin.display(description="calendar")
    def calendar(self, obj: Schedule) -> str:
        words = describe(obj.cron_expr)
        if words is None:
            return format_html('<strong style="color:#b3261e">invalid</strong> <code>{}</code>',
                               obj.cron_expr)
        return format_html("{}<br><code>{}</code>", words, obj.cron_expr)

    @admin.display(description="next fire")
    def next_fire(self, obj: Schedule) -> str:
        row = _row(obj)
        at, problem = next_fire(row, dj_timezone.now())
        if problem:
            return format_html('<span style="color:#b3261e">{}</span>', problem)
        if row.retired:
            return "retired: no run left"
        if row.paused_at is not None:  # nothing fires on its own: no time to count to
            return format_html("paused{}", format_html(
                '<br><small>if resumed: {}</small>', _instant(at)) if at else "")
        return _instant(at)

    @admin.display(description="last fire")
    def last_fire(self, obj: Schedule) -> str:
        row = _row(obj)
        at = last_fire(row)
        if at is not None:
            return _instant(at)
        since = ScheduleView(row, None).quiet_since
        return f"none since {_instant(since)}" if since is not None else "never"

    # The bounds and outcome settings, as fields of the change page (stored in the
    # marker and the metadata; edited on the runtime form).
    @admin.display(description="no fire before")
    def start_time(self, obj: Schedule) -> str:
        return _instant(_bounds(obj).start_time)

    @admin.display(description="no fire after")
    def end_time(self, obj: Schedule) -> str:
        return _instant(_bounds(obj).end_time)

    @admin.display(description="runs in all")
    def max_runs(self, obj: Schedule) -> str:
        runs = _bounds(obj).max_runs
        return "no limit" if runs is None else str(runs)

    @admin.display(description="one-off")
    def one_off(self, obj: Schedule) -> str:
        return "yes" if _bounds(obj).one_off else "no"

    @admin.display(description="overlap")
    def overlap(self, obj: Schedule) -> str:
        return _bounds(obj).overlap

    @admin.display(description="deadline")
    def deadline(self, obj: Schedule) -> str:
        seconds = _bounds(obj).deadline
        return "none" if seconds is None else f"{seconds:g} s after the fire"

    @admin.display(description="catch-up window")
    def catch_up_window(self, obj: Schedule) -> str:
        seconds = _bounds(obj).catch_up_window
        return "none" if seconds is None else f"{seconds:g} s: older missed fires are skipped"

    @admin.display(description="jitter")
    def jitter(self, obj: Schedule) -> str:
        seconds = _bounds(obj).jitter
        return "none" if seconds is None else f"up to {seconds:g} s after each fire time"

    @admin.display(description="pause after failures")
    def pause_after_failures(self, obj: Schedule) -> str:
        count = _bounds(obj).pause_after_failures
        return "never" if count is None else f"{count} failed runs in a row"

    @admin.display(description="preview")
    def preview(self, obj: Schedule) -> str:
        """The next fires (awa-beat preview), DST changes marked, with the warnings about
        the calendar and what the schedule's state does to its fires."""
        try:
            found = operations().preview(obj.name)
        except AwaBeatError as exc:
            return format_html('<span style="color:#b3261e">{}</span>', str(exc))
        lines = format_html_join(
            "", '<li data-mark="{}">{} <small>({})</small>{}{}</li>',
            ((f.mark, _instant(f.at), f.local.strftime("%Y-%m-%d %H:%M:%S %Z"),
              format_html(" <strong>{}</strong>", f.note) if f.note else "",
              format_html(" <small data-run-at>runs at {} (jitter)</small>",
                          f.run_at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3])
              if f.run_at is not None else "")
             for f in found.fires))
        return format_html(
            '<div id="awa-beat-preview">{}{}<ol>{}</ol>{}</div>',
            format_html_join("", "<p>{}</p>", ((n,) for n in found.notices)),
            format_html_join("", '<p class="warning" style="color:#b3261e">warning: {}</p>',
                             ((w,) for w in found.warnings)),
            lines or format_html("<li>{}</li>", "none"),
            format_html("<p>{}</p>", "more fires follow") if found.more else "")

    @admin.display(description="paused")
    def paused(self, obj: Schedule) -> str:
        if obj.paused_at is None:
            return "no"
        note = getattr(obj, "pause_note", None)
        return format_html("since {} by {}{}", obj.paused_at.strftime("%Y-%m-%d %H:%M UTC"),
                           obj.paused_by or "?",
                           format_html(": “{}”", note) if note else "")

    def has_edit_schedules_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff
                    and request.user.has_perm("awa_beat.change_schedule"))

    @admin.display(description="owner")
    def owner(self, obj: Schedule) -> str:
        deployment = getattr(obj, "owner_name", None)
        if getattr(obj, "owner_kind", None) == "runtime":
            return f"runtime (via {deployment})" if deployment else "runtime"
        return deployment or "not awa-beat"

    @admin.display(description="")
    def edit(self, obj: Schedule) -> str:
        if getattr(obj, "owner_kind", None) != "runtime":
            return ""
        return format_html('<a href="{}">edit</a>', reverse(
            f"{self.admin_site.name}:awa_beat_schedule_runtime_edit", args=[obj.name]))

    # -- adding and editing runtime schedules ----------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        # Before the model's own URLs, whose "<path:object_id>/" would take these.
        return [path("runtime/add/", self.admin_site.admin_view(self.runtime_add_view),
                     name="awa_beat_schedule_runtime_add"),
                path("runtime/<path:name>/edit/",
                     self.admin_site.admin_view(self.runtime_edit_view),
                     name="awa_beat_schedule_runtime_edit"),
                path("backfill/<path:name>/", self.admin_site.admin_view(self.backfill_view),
                     name="awa_beat_schedule_backfill"),
                path("explain/<path:name>/", self.admin_site.admin_view(self.explain_view),
                     name="awa_beat_schedule_explain"),
                *super().get_urls()]

    def changelist_view(self, request: HttpRequest, extra_context: Any = None
                        ) -> HttpResponse:
        extra = {"runtime_add": self.has_edit_schedules_permission(request),
                 **(extra_context or {})}
        return super().changelist_view(request, extra)

    def _form_page(self, request: HttpRequest, form: RuntimeScheduleForm, title: str,
                   status: int = 200) -> HttpResponse:
        context = {**self.admin_site.each_context(request), "opts": self.model._meta,
                   "title": title, "form": form}
        return TemplateResponse(request, "awa_beat/runtime_form.html", context, status=status)

    def _write(self, request: HttpRequest, action: str, name: str, run: Callable[[], Any],
               detail: dict[str, Any]) -> None:
        record = partial(operations().record_action, actor=_actor(request), source="django",
                         action=action, schedule=name, remote_addr=_client(request),
                         detail=detail)
        try:
            run()
        except AwaBeatError as exc:
            record(outcome=f"error: {exc}")
            raise
        record(outcome="ok")

    def runtime_add_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_edit_schedules_permission(request):
            raise PermissionDenied
        title = "Add a runtime schedule"
        if request.method != "POST":
            return self._form_page(request, RuntimeScheduleForm(initial={
                "kind": "cron", "args": "[]", "kwargs": "{}"}), title)
        form = RuntimeScheduleForm(request.POST)
        if not form.is_valid():
            return self._form_page(request, form, title, 400)
        name, values = form.cleaned_data["name"], form.values()
        try:
            entry = entry_from_form(values, name=name)
            self._write(request, "add", name, lambda: operations().add({name: entry}),
                        {"entry": {k: v for k, v in values.items() if v}})
        except (ScheduleError, ScheduleConflict) as exc:
            form.show(exc)
            return self._form_page(request, form, title, 400)
        messages.success(request, f"Added {name}.")
        return HttpResponseRedirect(reverse(f"{self.admin_site.name}:awa_beat_schedule_changelist"))

    def runtime_edit_view(self, request: HttpRequest, name: str) -> HttpResponse:
        if not self.has_edit_schedules_permission(request):
            raise PermissionDenied
        try:
            view = operations().get(name)
        except NotFound:
            raise Http404(f"no schedule named {name!r}") from None
        if view.owner != "runtime":
            raise PermissionDenied(_owned_text(view))
        title = f"Edit {name}"
        shown = form_values(view.row)
        if request.method != "POST":
            form = RuntimeScheduleForm(initial={"name": name, **shown})
            form.fields["name"].disabled = True  # the URL says which schedule
            return self._form_page(request, form, title)
        form = RuntimeScheduleForm(request.POST, initial={"name": name})
        form.fields["name"].disabled = True
        if not form.is_valid():
            return self._form_page(request, form, title, 400)
        values = form.values()
        try:
            changes = entry_from_form(values, shown, name=name)
            # No force: a row its deployment's beat_schedule took back is refused.
            self._write(request, "edit", name, lambda: operations().update(name, changes),
                        {"changes": {k: v for k, v in values.items() if v != shown.get(k, "")}})
        except (ScheduleError, ScheduleConflict) as exc:
            form.show(exc)
            return self._form_page(request, form, title, 400)
        messages.success(request, f"Saved {name}.")
        return HttpResponseRedirect(reverse(f"{self.admin_site.name}:awa_beat_schedule_changelist"))

    def backfill_view(self, request: HttpRequest, name: str) -> HttpResponse:
        """A backfill of one schedule (docs/operating-time.md): the form, its dry run and
        the result. The operations layer records each backfill in the audit log (with
        what it inserted), as for every other surface."""
        if not self.has_operate_permission(request):
            raise PermissionDenied
        try:
            operations().get(name)
        except NotFound:
            raise Http404(f"no schedule named {name!r}") from None
        context = {**self.admin_site.each_context(request), "opts": self.model._meta,
                   "title": f"Backfill {name}", "name": name, "result": None}
        if request.method != "POST":
            context["form"] = BackfillForm()
            return TemplateResponse(request, "awa_beat/backfill_form.html", context)
        form = context["form"] = BackfillForm(request.POST)
        status = 400
        if form.is_valid():
            start, end = form.instant("start"), form.instant("end")
            if start is not None and end is not None:
                try:
                    context["result"] = operations().backfill(
                        name, start, end, overlap=form.cleaned_data["overlap"],
                        dry_run=request.POST.get("dry_run") == "1", actor=_actor(request),
                        source="django", remote_addr=_client(request))
                    status = 200
                except BackfillRefused as exc:
                    form.add_error(None, str(exc))
        return TemplateResponse(request, "awa_beat/backfill_form.html", context, status=status)

    def explain_view(self, request: HttpRequest, name: str) -> HttpResponse:
        """What happened or will happen at an instant of one schedule, and why
        (docs/operating-time.md), as `awa-beat explain` and the dashboard say it. It only
        reads, so viewing the schedules is enough."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            operations().get(name)
        except NotFound:
            raise Http404(f"no schedule named {name!r}") from None
        text = request.GET.get("at", "").strip()[:64]
        explained: Explanation | None = None
        error = None
        if text:
            try:
                at = parse_instant(text, operations().clock())
            except ValueError as exc:
                error = f"at: {exc}"
            else:
                explained = operations().explain(name, at)
        context = {**self.admin_site.each_context(request), "opts": self.model._meta,
                   "title": f"Explain an instant of {name}", "name": name, "at": text,
                   "help": INSTANT_HELP, "explained": explained, "error": error}
        return TemplateResponse(request, "awa_beat/explain.html", context,
                                status=400 if error else 200)

    @admin.display(description="explain")
    def explain(self, obj: Schedule) -> str:
        return format_html('<a href="{}" id="awa-beat-explain">Explain an instant</a>', reverse(
            f"{self.admin_site.name}:awa_beat_schedule_explain", args=[obj.name]))

    @admin.action(description="Backfill the selected schedule (a range of past fire times)",
                  permissions=["operate"])
    def backfill(self, request: HttpRequest, queryset: QuerySet[Schedule]
                 ) -> HttpResponse | None:
        names = list(queryset.values_list("name", flat=True)[:2])
        if len(names) != 1:
            messages.error(request, "Select one schedule to backfill.")
            return None
        return HttpResponseRedirect(reverse(
            f"{self.admin_site.name}:awa_beat_schedule_backfill", args=[names[0]]))

    @admin.action(description="Pause the selected schedules", permissions=["operate"])
    def pause(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        by = f"{_actor(request)} (Django admin)"
        _run(request, queryset, "pause", lambda name: operations().pause(name, by), "Paused")

    @admin.action(description="Resume the selected schedules", permissions=["operate"])
    def resume(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        _run(request, queryset, "resume", operations().resume, "Resumed")

    @admin.action(description="Trigger the selected schedules now", permissions=["operate"])
    def trigger(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        _run(request, queryset, "trigger", operations().trigger, "Triggered")
