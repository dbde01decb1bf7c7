"""Usage rows are what the agents' exporters reported: read-only here. Budgets are set here too."""

from django.contrib import admin

from config.actors import Actor
from sessions_app.admin import ReadOnlyAdmin
from usage.budgets import budget_create, budget_delete, budget_update, day_start
from usage.models import Budget, UsageRecord
from usage.pages.selectors import usage_filtered_summary


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
    list_filter = ("source", "occurred_at", "model", ("agent", admin.RelatedOnlyFieldListFilter))
    search_fields = ("agent__slug", "session__id", "external_session_id", "model", "tool_name")
    list_select_related = ("agent", "session", "task")
    date_hierarchy = "occurred_at"

    def changelist_view(self, request, extra_context=None):
        """The list with the totals of what its filters select (sum over the filtered rows, one
        query; the per-model split beside it, another)."""
        response = super().changelist_view(request, extra_context)
        changelist = getattr(response, "context_data", {}).get("cl")
        if changelist is not None:
            response.context_data["usage_summary"] = usage_filtered_summary(queryset=changelist.queryset)
        return response


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    """Budgets are set and raised here as on the card: through usage/budgets.py, so a raise lets the
    waiting sessions go on and every change is a ledger event."""

    list_display = ("__str__", "scope", "task", "agent", "campaign", "limit_tokens", "limit_usd", "state")
    list_filter = ("scope",)
    list_select_related = ("task", "agent", "campaign")
    search_fields = ("agent__slug", "task__title", "campaign__name")
    raw_id_fields = ("task", "agent", "campaign")
    readonly_fields = ("warned_at", "exceeded_at", "created_at", "updated_at")
    target_fields = ("scope", "task", "agent", "campaign")

    def get_readonly_fields(self, request, obj=None):
        # What a budget limits is fixed once made: change its limits, or delete it and make another.
        return self.readonly_fields + (self.target_fields if obj is not None else ())

    @admin.display(description="state")
    def state(self, obj: Budget) -> str:
        if obj.exceeded_at and (obj.scope != Budget.Scope.DAY or obj.exceeded_at >= day_start()):
            return "exceeded"
        if obj.warned_at and (obj.scope != Budget.Scope.DAY or obj.warned_at >= day_start()):
            return "warning"
        return "ok"

    def save_model(self, request, obj, form, change):
        actor = Actor(user=request.user)
        limits = {"limit_tokens": obj.limit_tokens, "limit_usd": obj.limit_usd}
        if change:
            budget_update(actor=actor, budget=obj, **limits)
        else:
            created = budget_create(
                actor=actor, scope=obj.scope, target=obj.task or obj.campaign, agent=obj.agent, **limits
            )
            obj.pk = created.pk
        obj.refresh_from_db()

    def delete_model(self, request, obj):
        budget_delete(actor=Actor(user=request.user), budget=obj)

    def delete_queryset(self, request, queryset):
        for budget in queryset:
            budget_delete(actor=Actor(user=request.user), budget=budget)
