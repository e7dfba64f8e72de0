"""The admin of awa-beat's schedules: the dashboard's columns, and pause, resume and
trigger as actions that go through awa-beat's operations layer and its audit log."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest
from django.utils import timezone as dj_timezone
from django.utils.html import format_html

from ...errors import AwaBeatError
from ...operations import next_fire
from ...records import ScheduleRow
from ...web.describe import describe
from .models import PauseNote, Registration, Schedule
from .operations import operations


def _row(obj: Schedule) -> ScheduleRow:
    return ScheduleRow(obj.name, obj.cron_expr, obj.timezone, obj.kind, obj.queue, obj.args,
                       obj.priority, obj.max_attempts, [], obj.metadata,
                       obj.missed_fire_policy, obj.last_enqueued_at, obj.created_at,
                       obj.updated_at, obj.paused_at, obj.paused_by)


def _actor(request: HttpRequest) -> str:
    return str(request.user.get_username())


def _client(request: HttpRequest) -> str | None:
    return request.META.get("REMOTE_ADDR")


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


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    list_display = ("name", "calendar", "timezone", "next_fire", "last_enqueued_at",
                    "paused", "owner")
    list_filter = (("paused_at", admin.EmptyFieldListFilter),)
    search_fields = ("name", "kind")
    list_per_page = 50
    show_full_result_count = True
    actions = ("pause", "resume", "trigger")
    readonly_fields = tuple(f.name for f in Schedule._meta.fields)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Schedule]:
        owner = Registration.objects.filter(name=OuterRef("name")).values("deployment")[:1]
        note = PauseNote.objects.filter(name=OuterRef("name"),
                                        paused_at=OuterRef("paused_at")).values("note")[:1]
        return super().get_queryset(request).annotate(owner_name=Subquery(owner),
                                                      pause_note=Subquery(note))

    # Definitions are the deployments' (or, later, awa_beat.Schedules'): never Django's.
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
        at, problem = next_fire(_row(obj), dj_timezone.now())
        if problem:
            return format_html('<span style="color:#b3261e">{}</span>', problem)
        return at.strftime("%Y-%m-%d %H:%M:%S UTC") if at else "-"

    @admin.display(description="paused")
    def paused(self, obj: Schedule) -> str:
        if obj.paused_at is None:
            return "no"
        note = getattr(obj, "pause_note", None)
        return format_html("since {} by {}{}", obj.paused_at.strftime("%Y-%m-%d %H:%M UTC"),
                           obj.paused_by or "?",
                           format_html(": “{}”", note) if note else "")

    @admin.display(description="owner")
    def owner(self, obj: Schedule) -> str:
        return getattr(obj, "owner_name", None) or "not awa-beat"

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
