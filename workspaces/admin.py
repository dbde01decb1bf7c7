"""Admin for workspaces, artifacts, repositories and worktrees.

Every change goes through the services: repositories are registered with
``repository_register``, worktree claims are released with ``worktree_release`` (which
hands the worktree to the next agent in its queue), worktrees are removed with
``worktree_remove`` and their config links checked with ``worktree_config_sync``.
"""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Count

from config.actors import Actor
from config.api.errors import DomainError
from sessions_app.admin import report_counts
from workspaces.archive.restore import workspace_restore_request
from workspaces.archive.services import workspace_archive_request
from workspaces.models import Artifact, ArtifactVersion, Repository, Workspace, Worktree, WorktreeClaimRequest
from workspaces.worktrees import git
from workspaces.worktrees.claims import worktree_release
from workspaces.worktrees.services import (
    host_label,
    refuse_on_runner,
    repository_default_name,
    repository_path_check,
    repository_register,
    worktree_config_sync_for_actor,
    worktree_remove,
)
from workspaces.worktrees.sync import worktree_config_sync

# How many refusal reasons one action shows; the rest are counted.
SHOWN_PROBLEMS = 5


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ("root_path", "kind", "status", "session_count", "ephemeral", "archive_size", "created_at")
    list_filter = ("kind", "status", "ephemeral")
    search_fields = ("root_path", "=sessions__id", "archive_location")
    ordering = ("-created_at",)
    date_hierarchy = "created_at"
    # Both queue a worker task; the services refuse what may not be archived or restored.
    actions = ("archive_now", "restore_archives")

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(session_total=Count("sessions"))

    def get_readonly_fields(self, request, obj=None):
        archive = (
            "archive_location",
            "archive_size",
            "archive_sha256",
            "archive_manifest_sha256",
            "archive_verified_at",
            "created_at",
            "updated_at",
        )
        # The server chose the folder; moving it is a job for the workspace services, not a form.
        return archive if obj is None else ("root_path", *archive)

    @admin.display(description="sessions", ordering="session_total")
    def session_count(self, obj):
        return obj.session_total

    @admin.action(description="Archive now (a worker archives, verifies, then deletes the folder)")
    def archive_now(self, request, queryset):
        actor = Actor(user=request.user)
        queued = 0
        problems = []
        for workspace in queryset:
            try:
                workspace_archive_request(actor=actor, workspace=workspace)
            except DomainError as exc:
                problems.append(f"{workspace}: {exc.message}")
            else:
                queued += 1
        report_counts(request, f"{queued} workspace(s) queued for archival", failed=len(problems))
        _show_problems(request, problems)

    @admin.action(description="Restore (a worker extracts and verifies the archive)")
    def restore_archives(self, request, queryset):
        actor = Actor(user=request.user)
        queued = already = 0
        problems = []
        for workspace in queryset:
            try:
                _, was_queued = workspace_restore_request(actor=actor, workspace_id=workspace.pk)
            except DomainError as exc:
                problems.append(f"{workspace}: {exc.message}")
                continue
            queued += was_queued
            already += not was_queued
        report_counts(
            request, f"{queued} workspace(s) queued for restore", already_active=already, failed=len(problems)
        )
        _show_problems(request, problems)


class ArtifactVersionInline(admin.TabularInline):
    model = ArtifactVersion
    fields = ("number", "size", "sha256", "backup_location", "source", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Artifact)
class ArtifactAdmin(admin.ModelAdmin):
    list_display = ("path", "workspace", "kind", "size", "mime_type", "source", "updated_at")
    list_select_related = ("workspace",)
    list_filter = ("kind", "source")
    search_fields = ("path", "=sha256", "workspace__root_path")
    ordering = ("-updated_at", "-id")
    date_hierarchy = "created_at"
    raw_id_fields = ("workspace", "tool_invocation")
    readonly_fields = ("size", "sha256", "created_at", "updated_at")
    inlines = (ArtifactVersionInline,)


class RepositoryForm(forms.ModelForm):
    """Adding needs only the path; the rest is found from the clone when left blank."""

    path = forms.CharField(max_length=4096, help_text="The top folder of a local git clone (stored as its real path).")
    name = forms.SlugField(max_length=100, required=False, help_text="Default: the clone's folder name.")
    default_branch = forms.CharField(
        max_length=255, required=False, help_text="Default: origin's HEAD, else the branch checked out."
    )
    sync_dir = forms.CharField(
        max_length=4096, required=False, help_text="Default: <parent of the clone>/sync/<name>/ (made if missing)."
    )

    class Meta:
        model = Repository
        fields = ["path", "name", "default_branch", "sync_dir"]

    def clean_path(self):
        if self.instance.pk is not None:
            return self.instance.path
        try:
            return repository_path_check(path=self.cleaned_data["path"])
        except DomainError as exc:
            raise ValidationError(exc.message) from None

    def clean_default_branch(self):
        value = self.cleaned_data["default_branch"]
        if value:
            try:
                git.ref_check(value)
            except DomainError as exc:
                raise ValidationError(exc.message) from None
        return value

    def clean_sync_dir(self):
        value = self.cleaned_data["sync_dir"]
        if value and not value.startswith("/"):
            raise ValidationError("Give an absolute path.")
        return value

    def clean(self):
        cleaned = super().clean()
        # Filled in here so the model's uniqueness check sees the name that will be used.
        if self.instance.pk is None and cleaned.get("path") and not cleaned.get("name"):
            cleaned["name"] = repository_default_name(real_path=cleaned["path"])
        return cleaned


@admin.register(Repository)
class RepositoryAdmin(admin.ModelAdmin):
    form = RepositoryForm
    list_display = ("name", "host", "path", "default_branch", "worktree_count", "created_at")
    list_filter = (("runner", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("name", "path", "runner__name")
    ordering = ("name",)

    def get_readonly_fields(self, request, obj=None):
        # A registered clone keeps its path and name: worktrees and sync links are made from them.
        # A runner's clone is registered by its runner, never here.
        if obj is None:
            return ("runner", "created_at", "updated_at")
        return ("path", "name", "runner", "created_at", "updated_at")

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("runner").annotate(worktree_total=Count("worktrees"))

    @admin.display(description="host", ordering="runner__name")
    def host(self, obj):
        return host_label(obj)

    @admin.display(description="worktrees", ordering="worktree_total")
    def worktree_count(self, obj):
        return obj.worktree_total

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        repository, _ = repository_register(
            path=obj.path if change else data["path"],
            name=None if change else data["name"],
            default_branch=data.get("default_branch") or None,
            sync_dir=data.get("sync_dir") or None,
        )
        # The admin goes on with `obj` (log entry, redirect): make it the row the service saved.
        for model_field in Repository._meta.concrete_fields:
            setattr(obj, model_field.attname, getattr(repository, model_field.attname))
        obj._state.adding = False


class ClaimQueueInline(admin.TabularInline):
    model = WorktreeClaimRequest
    fields = ("agent", "status", "created_at", "resolved_at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("agent")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Worktree)
class WorktreeAdmin(admin.ModelAdmin):
    list_display = (
        "__str__",
        "repository",
        "type",
        "branch",
        "status",
        "holder",
        "claimed_at",
        "lease_expires_at",
        "pr_number",
    )
    list_select_related = ("repository", "holder")
    list_filter = ("status", "type", "repository")
    search_fields = ("name", "branch", "real_path", "holder__slug")
    ordering = ("repository__name", "type", "name")
    raw_id_fields = ("workspace",)
    # The claim changes through the claim flow or the release action, never by hand.
    readonly_fields = ("holder", "claimed_at", "released_at", "lease_expires_at", "created_at", "updated_at")
    inlines = (ClaimQueueInline,)
    actions = ("release_claims", "remove_worktrees", "check_config_links", "repair_config_links")

    @admin.action(description="Release claim")
    def release_claims(self, request, queryset):
        actor = Actor(user=request.user)
        released = not_held = 0
        for worktree in queryset:
            try:
                worktree_release(actor=actor, worktree=worktree)
            except DomainError:
                not_held += 1
            else:
                released += 1
        report_counts(request, f"{released} worktree claim(s) released", not_held=not_held)

    @admin.action(description="Remove worktree (refused with uncommitted changes)")
    def remove_worktrees(self, request, queryset):
        actor = Actor(user=request.user)
        removed = already = 0
        problems = []
        for worktree in queryset.select_related("repository"):
            try:
                _, changed = worktree_remove(actor=actor, worktree=worktree)
            except DomainError as exc:
                problems.append(f"{worktree}: {exc.message}")
                continue
            removed += changed
            already += not changed
        report_counts(request, f"{removed} worktree(s) removed", already_removed=already, failed=len(problems))
        _show_problems(request, problems)

    @admin.action(description="Check config links")
    def check_config_links(self, request, queryset):
        self._config_links(request, queryset, repair=False)

    @admin.action(description="Repair config links (files in the way are left alone)")
    def repair_config_links(self, request, queryset):
        self._config_links(request, queryset, repair=True)

    def _config_links(self, request, queryset, *, repair: bool):
        actor = Actor(user=request.user)
        for worktree in queryset.select_related("repository__runner").filter(status=Worktree.Status.ACTIVE):
            try:
                if repair:
                    report = worktree_config_sync_for_actor(actor=actor, worktree=worktree, repair=True)
                else:
                    refuse_on_runner(worktree.repository, doing="check the config links")
                    report = worktree_config_sync(worktree=worktree, repair=False)
            except DomainError as exc:
                messages.warning(request, f"{worktree}: {exc.message}")
                continue
            text = (
                f"{worktree}: {len(report.linked)} linked, {len(report.missing)} missing, "
                f"{len(report.wrong)} pointing elsewhere, {len(report.blocked)} blocked, "
                f"{len(report.skipped)} skipped, {len(report.repaired)} repaired."
            )
            blocked = "; ".join(f"{item['path']} ({item['reason']})" for item in report.blocked[:SHOWN_PROBLEMS])
            level = messages.SUCCESS if report.in_sync and not report.skipped else messages.WARNING
            messages.add_message(request, level, text + (f" Blocked: {blocked}" if blocked else ""))


def _show_problems(request, problems: list[str]) -> None:
    for line in problems[:SHOWN_PROBLEMS]:
        messages.warning(request, line)
    if len(problems) > SHOWN_PROBLEMS:
        messages.warning(request, f"... and {len(problems) - SHOWN_PROBLEMS} more.")


@admin.register(WorktreeClaimRequest)
class WorktreeClaimRequestAdmin(admin.ModelAdmin):
    list_display = ("id", "worktree", "agent", "status", "created_at", "resolved_at")
    list_select_related = ("worktree__repository", "agent")
    list_filter = ("status",)
    search_fields = ("agent__slug", "worktree__name", "worktree__branch")
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    raw_id_fields = ("worktree",)
    readonly_fields = ("created_at",)
