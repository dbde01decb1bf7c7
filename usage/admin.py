"""Usage rows are what the agents' exporters reported: read-only here."""

from django.contrib import admin

from sessions_app.admin import ReadOnlyAdmin
from usage.models import UsageRecord


@admin.register(UsageRecord)
class UsageRecordAdmin(ReadOnlyAdmin):
    list_display = (
        "occurred_at",
        "agent",
        "session",
        "task",
        "model",
        "tool_name",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cost_usd",
        "source",
    )
    list_filter = ("source", "occurred_at")
    search_fields = ("agent__slug", "session__id", "external_session_id", "model", "tool_name")
    list_select_related = ("agent", "session", "task")
    date_hierarchy = "occurred_at"
