"""Admin for the tool-call ledger and the domain event log. Both are append-only: view only."""

from django.contrib import admin
from django.utils.text import Truncator

from ledger.models import Event, ToolInvocation
from sessions_app.admin import ReadOnlyAdmin, json_preview, pretty_json


@admin.register(ToolInvocation)
class ToolInvocationAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "tool_name",
        "session",
        "agent",
        "status",
        "started_at",
        "duration_ms",
        "input_preview",
        "client_id",
    )
    list_select_related = ("session", "agent")
    list_filter = ("status", "agent")
    search_fields = ("tool_name", "=session__id", "=client_id", "=input_sha256")
    ordering = ("-started_at", "-id")
    date_hierarchy = "started_at"
    # a big table: no second COUNT(*) for the unfiltered total, no per-filter counts
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    fieldsets = (
        (None, {"fields": ("tool_name", "session", "agent", "status", "client_id")}),
        ("Input and output (redacted)", {"fields": ("input_summary", "input_sha256", "output_summary", "error")}),
        ("Times", {"fields": ("started_at", "finished_at", "duration_ms", "created_at", "body_sha256")}),
    )

    @admin.display(description="input")
    def input_preview(self, obj):
        return Truncator(obj.input_summary).chars(60)


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "subject_type", "subject_id", "actor", "payload_preview", "created_at")
    list_filter = ("name", "subject_type")
    search_fields = ("name", "=subject_id", "actor")
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    fields = ("name", "subject_type", "subject_id", "actor", "created_at", "payload_pretty")
    readonly_fields = ("payload_pretty",)

    @admin.display(description="payload")
    def payload_preview(self, obj):
        return json_preview(obj.payload)

    @admin.display(description="payload")
    def payload_pretty(self, obj):
        return pretty_json(obj.payload)
