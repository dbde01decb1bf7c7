"""Admin for tasks, claims, campaigns and leads.

New tasks and campaigns are made by the board services (ranks, events, a campaign's tasks);
a task's claim state (status, assignee, session) changes only through them too, so it is
read-only on the change form and the "Release claim" action is the repair.
"""

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce

from board.live import board_push_tasks
from board.models import Campaign, Lead, SyncedFile, SyncIssue, Task, TaskClaim
from board.services import campaign_create, task_create, task_release
from board.sync import state_sync, state_sync_queue
from config.actors import Actor
from config.api.errors import DomainError
from sessions_app.admin import ReadOnlyAdmin, report_counts

NEW_TASK_STATUSES = (Task.Status.BACKLOG, Task.Status.READY, Task.Status.BLOCKED)


def _count_of(model, fk: str) -> Coalesce:
    """COUNT of ``model`` rows pointing at the outer row, as a subquery (no join fan-out)."""
    counts = model.objects.filter(**{fk: OuterRef("pk")}).order_by().values(fk).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counts, output_field=IntegerField()), 0)


def _load_created(obj, created) -> None:
    """The admin goes on with ``obj`` (log entry, inlines, redirect): make it the row a service made."""
    obj.pk = created.pk
    obj.refresh_from_db()


# --- Tasks ---------------------------------------------------------------------------------


class TaskCreateForm(forms.ModelForm):
    status = forms.ChoiceField(choices=[(s.value, s.label) for s in NEW_TASK_STATUSES], initial=Task.Status.READY)

    class Meta:
        model = Task
        fields = ("title", "description", "status", "priority", "labels", "campaign", "suggested_agent")


class TaskClaimInline(admin.TabularInline):
    model = TaskClaim
    fields = ("agent", "session", "outcome", "claimed_at", "released_at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("agent", "session")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "title",
        "status",
        "priority",
        "rank",
        "assignee",
        "session_ref",
        "campaign",
        "retries",
        "updated_at",
    )
    list_select_related = ("assignee", "campaign")
    list_filter = ("status", "priority", "campaign", "assignee")
    search_fields = ("title", "external_id", "source_key", "source_file")
    ordering = ("priority", "rank", "id")
    date_hierarchy = "created_at"
    raw_id_fields = ("campaign",)
    add_fields = TaskCreateForm.Meta.fields
    change_fieldsets = (
        (None, {"fields": ("title", "description", "priority", "rank", "labels", "campaign", "suggested_agent")}),
        ("Claim (change with the actions)", {"fields": ("status", "assignee", "session", "started_at", "finished_at")}),
        ("Failures", {"fields": ("retries", "error")}),
        ("Source", {"fields": ("source_file", "source_key", "external_id", "created_at", "updated_at")}),
    )
    change_readonly_fields = (
        "status",
        "assignee",
        "session",
        "started_at",
        "finished_at",
        "retries",
        "source_file",
        "source_key",
        "external_id",
        "created_at",
        "updated_at",
    )
    inlines = (TaskClaimInline,)
    actions = ("release_claims",)

    def get_fieldsets(self, request, obj=None):
        return ((None, {"fields": self.add_fields}),) if obj is None else self.change_fieldsets

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.change_readonly_fields

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = TaskCreateForm
        return super().get_form(request, obj, **kwargs)

    def get_inlines(self, request, obj):
        return self.inlines if obj is not None else ()

    @admin.display(description="session", ordering="session")
    def session_ref(self, obj):
        return obj.session_id or "—"  # the id is the session's name: no join needed

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            board_push_tasks(task_ids=[obj.pk])
            return
        fields = {name: form.cleaned_data[name] for name in self.add_fields}
        fields["labels"] = fields["labels"] or []
        _load_created(obj, task_create(actor=Actor(user=request.user), **fields))

    def delete_model(self, request, obj):
        pk = obj.pk  # Django clears it on delete
        super().delete_model(request, obj)
        board_push_tasks(task_ids=[pk])  # the boards find it gone and drop the card

    def delete_queryset(self, request, queryset):
        pks = list(queryset.values_list("pk", flat=True))
        super().delete_queryset(request, queryset)
        board_push_tasks(task_ids=pks)

    @admin.action(description="Release claim (back to ready)")
    def release_claims(self, request, queryset):
        actor = Actor(user=request.user)
        released = not_claimed = failed = 0
        for task in queryset:
            if task.status != Task.Status.IN_PROGRESS:
                not_claimed += 1
                continue
            try:
                _, changed = task_release(actor=actor, task=task)
            except DomainError as error:
                failed += 1
                self.message_user(request, f"Task {task.pk}: {error.message}", messages.ERROR)
                continue
            if changed:
                released += 1
            else:
                not_claimed += 1
        report_counts(request, f"{released} task(s) released", not_in_progress=not_claimed, failed=failed)


@admin.register(TaskClaim)
class TaskClaimAdmin(ReadOnlyAdmin):
    """The claim history. Read-only: closing a claim must move its task too (use the task action)."""

    list_display = ("id", "task", "agent", "session_id", "outcome", "claimed_at", "released_at")
    list_select_related = ("task", "agent")
    list_filter = ("outcome",)
    search_fields = ("task__title", "agent__slug", "=session__id")
    ordering = ("-claimed_at", "-id")
    date_hierarchy = "claimed_at"


# --- Campaigns and leads ---------------------------------------------------------------------


class CampaignForm(forms.ModelForm):
    priority = forms.ChoiceField(choices=Task.Priority.choices, initial=Task.Priority.P2)


class CampaignCreateForm(CampaignForm):
    class Meta:
        model = Campaign
        fields = (
            "name",
            "type",
            "priority",
            "deliverables",
            "target_audience",
            "goal",
            "starts_on",
            "ends_on",
            "source_file",
        )
        help_texts = {"deliverables": 'A JSON list of strings; each becomes a ready task, e.g. ["blog post"].'}

    def clean_deliverables(self):
        deliverables = self.cleaned_data["deliverables"] or []
        if not isinstance(deliverables, list) or not all(isinstance(d, str) and d.strip() for d in deliverables):
            raise forms.ValidationError("A JSON list of non-empty strings.")
        return deliverables

    def clean(self):
        cleaned = super().clean()
        starts_on, ends_on = cleaned.get("starts_on"), cleaned.get("ends_on")
        if starts_on and ends_on and ends_on < starts_on:
            self.add_error("ends_on", "Ends before it starts.")
        return cleaned


class LeadInline(admin.TabularInline):
    model = Lead
    fields = ("name", "company", "email", "status", "score")
    extra = 0
    show_change_link = True


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ("name", "type", "priority", "status", "task_count", "lead_count", "starts_on", "ends_on")
    list_filter = ("status", "priority", "type")
    search_fields = ("name", "type", "source_file")
    ordering = ("-created_at",)
    date_hierarchy = "created_at"
    form = CampaignForm
    add_fields = CampaignCreateForm.Meta.fields
    change_readonly_fields = ("deliverables", "source_file", "created_at", "updated_at")
    inlines = (LeadInline,)

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(task_total=_count_of(Task, "campaign"), lead_total=_count_of(Lead, "campaign"))
        )

    def get_fields(self, request, obj=None):
        if obj is None:
            return self.add_fields
        return (*self.add_fields, "status", "created_at", "updated_at")

    def get_readonly_fields(self, request, obj=None):
        # Deliverables became tasks when the campaign was made; editing them here would change nothing.
        return () if obj is None else self.change_readonly_fields

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = CampaignCreateForm
        return super().get_form(request, obj, **kwargs)

    @admin.display(description="tasks", ordering="task_total")
    def task_count(self, obj):
        return obj.task_total

    @admin.display(description="leads", ordering="lead_total")
    def lead_count(self, obj):
        return obj.lead_total

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        # Leads typed in the inline are saved after this, onto the campaign made here.
        fields = {name: form.cleaned_data[name] for name in self.add_fields}
        _load_created(obj, campaign_create(actor=Actor(user=request.user), **fields))


@admin.register(Lead)
class LeadAdmin(admin.ModelAdmin):
    list_display = ("name", "company", "email", "campaign", "status", "score", "updated_at")
    list_select_related = ("campaign",)
    list_filter = ("status", "campaign")
    search_fields = ("name", "company", "email", "campaign__name")
    ordering = ("campaign", "-score", "name")
    raw_id_fields = ("campaign",)


# --- Sync-to-db --------------------------------------------------------------------------------


class OpenIssueFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return (("open", "Open"), ("resolved", "Resolved"))

    def queryset(self, request, queryset):
        if self.value() == "open":
            return queryset.filter(resolved_at__isnull=True)
        if self.value() == "resolved":
            return queryset.filter(resolved_at__isnull=False)
        return queryset


@admin.register(SyncIssue)
class SyncIssueAdmin(ReadOnlyAdmin):
    """Files sync-to-db could not apply. Read-only: an issue resolves itself when its file is
    fixed; "Retry sync" runs the sync again for the selected issues' sessions."""

    list_display = (
        "path",
        "session_key",
        "error_preview",
        "occurrences",
        "first_seen_at",
        "last_seen_at",
        "resolved_at",
    )
    list_filter = (OpenIssueFilter, "source")
    search_fields = ("path", "error", "=session_key")
    ordering = ("-last_seen_at", "-id")
    date_hierarchy = "last_seen_at"
    actions = ("retry_sync",)

    @admin.display(description="error")
    def error_preview(self, obj):
        return obj.error[:120]

    @admin.action(description="Retry sync")
    def retry_sync(self, request, queryset):
        sessions = sorted({key for key in queryset.values_list("session_key", flat=True) if key})
        unscoped = queryset.filter(session_key="").exists()
        runs = resolved = issues = 0
        for session_key in sessions:
            # One session is small: run it now, so the page shows the outcome.
            report = state_sync(session_key=session_key)
            runs += 1
            resolved += report.issues_resolved
            issues += report.issues_opened + report.issues_seen_again
        queued = 0
        if unscoped:
            # Job logs and folder names belong to no one session: a full run, in the background.
            state_sync_queue()
            queued = 1
        report_counts(
            request,
            f"Synced {runs} session(s): {resolved} issue(s) resolved, {issues} still failing",
            full_sync_queued=queued,
        )


@admin.register(SyncedFile)
class SyncedFileAdmin(ReadOnlyAdmin):
    """What sync-to-db last applied from each file (its size, mtime and sha256 then)."""

    list_display = ("path", "source", "session_key", "size", "sha256", "last_synced_at")
    list_filter = ("source",)
    search_fields = ("path", "=session_key", "=sha256")
    ordering = ("path",)
    date_hierarchy = "last_synced_at"
