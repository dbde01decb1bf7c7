"""Admin for runners and runs.

A run's status moves only through runners/services.py, so runs are view-only here and the
"Cancel selected runs" action (which calls ``run_stop``) is the one thing a person does to them.
"""

from django.contrib import admin, messages

from config.actors import Actor
from config.api.errors import DomainError
from runners.models import ReviewComment, Run, Runner, TaskReview
from runners.run_waiting import run_stop
from runners.selectors import runner_list
from sessions_app.admin import ReadOnlyAdmin, report_counts


@admin.register(Runner)
class RunnerAdmin(admin.ModelAdmin):
    list_display = ("name", "status", "host", "last_seen_at", "runs_now", "capacity", "version", "labels", "providers")
    list_filter = ("status",)
    search_fields = ("name", "host", "agent__slug")
    ordering = ("name",)
    raw_id_fields = ("agent",)
    # Reported by the runner itself (heartbeat); a person sets name, agent, labels and capacity.
    readonly_fields = ("host", "providers", "version", "status", "last_seen_at", "created_at", "updated_at")

    def get_queryset(self, request):
        return runner_list()  # runs_now for every row in the page's one query

    def get_actions(self, request):
        # No bulk delete: each runner is checked for the runs it holds (below).
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def has_delete_permission(self, request, obj=None):
        # A runner holding runs is not deleted from under them (run_active_has_runner would refuse
        # it anyway): drain it, let its runs end, then delete it; ended runs keep their history.
        if obj is not None and obj.runs.filter(status__in=Run.ACTIVE).exists():
            return False
        return super().has_delete_permission(request, obj)

    @admin.display(description="runs now", ordering="runs_now")
    def runs_now(self, obj):
        return obj.runs_now


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "status",
        "task",
        "runner",
        "provider",
        "attempt",
        "created_at",
        "started_at",
        "ended_at",
        "cancel_requested_at",
    )
    list_select_related = ("task", "runner")
    list_filter = ("status", "provider", "runner")
    search_fields = ("task__title", "provider", "runner__name", "session__id")
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    actions = ("cancel_runs",)

    @admin.action(description="Cancel selected runs")
    def cancel_runs(self, request, queryset):
        actor = Actor(user=request.user)
        done = ended = 0
        for run in queryset.order_by("pk"):
            try:
                run_stop(actor=actor, run=run)
            except DomainError as error:
                ended += 1
                self.message_user(request, f"Run {run.pk}: {error.message}", messages.WARNING)
                continue
            done += 1
        report_counts(request, f"{done} run(s) cancelled or asked to stop", already_ended=ended)


@admin.register(TaskReview)
class TaskReviewAdmin(ReadOnlyAdmin):
    """Review decisions (POST /tasks/{id}/review/): a record of who decided what, written by the service."""

    list_display = ("id", "task", "decision", "reviewer", "head_commit", "run", "created_at")
    list_select_related = ("task", "run")
    list_filter = ("decision",)
    search_fields = ("task__title", "reviewer", "message", "head_commit")
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"


@admin.register(ReviewComment)
class ReviewCommentAdmin(ReadOnlyAdmin):
    """Line comments on a task's change, by a person or a review run. An engineer may delete one (an
    agent's that should not reach the next request for changes); nothing else changes them here."""

    list_display = ("id", "task", "path", "line", "author", "created_at")
    list_select_related = ("task",)
    search_fields = ("task__title", "path", "body", "author")
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"

    def has_delete_permission(self, request, obj=None):
        return admin.ModelAdmin.has_delete_permission(self, request, obj)  # Django's own permission check


# Shipping settings and pull requests (SPEC §10) have their own module.
from runners import ship_admin  # noqa: E402, F401
