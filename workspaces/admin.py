"""Admin for workspaces, artifacts, repositories and worktrees.

The services that fill these tables (file API, observer, git worktrees) come with the
workspaces issue; until then the admin shows them and offers one repair: releasing a
worktree claim.
"""

from django.contrib import admin
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from ledger.events import event_record
from sessions_app.actors import Actor
from sessions_app.admin import report_counts
from workspaces.models import Artifact, ArtifactVersion, Repository, Workspace, Worktree, WorktreeClaimRequest


# No workspaces service exists yet (it comes with the workspaces issue): move this into
# workspaces/services.py then, where it should also grant the next waiting claimant.
@transaction.atomic
def worktree_release_claim(*, actor: Actor, worktree: Worktree) -> bool:
    """Release the claim as it was when ``worktree`` was read; True if this call released it.

    The conditional UPDATE is the lock: a claim released, or taken again, since the row was
    read is left alone.
    """
    if worktree.holder_id is None:
        return False
    now = timezone.now()
    changed = Worktree.objects.filter(
        pk=worktree.pk, holder_id=worktree.holder_id, claimed_at=worktree.claimed_at
    ).update(holder=None, lease_expires_at=None, released_at=now, updated_at=now)
    if changed != 1:
        return False
    event_record(
        name="worktree.released",
        subject_type="worktree",
        subject_id=worktree.pk,
        actor=actor.label,
        payload={"holder": worktree.holder_id, "reason": "released from the admin"},
    )
    return True


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ("root_path", "kind", "status", "session_count", "ephemeral", "archive_size", "created_at")
    list_filter = ("kind", "status", "ephemeral")
    search_fields = ("root_path", "=sessions__id", "archive_location")
    ordering = ("-created_at",)
    date_hierarchy = "created_at"

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(session_total=Count("sessions"))

    def get_readonly_fields(self, request, obj=None):
        archive = ("archive_location", "archive_size", "archive_sha256", "created_at", "updated_at")
        # The server chose the folder; moving it is a job for the workspace services, not a form.
        return archive if obj is None else ("root_path", *archive)

    @admin.display(description="sessions", ordering="session_total")
    def session_count(self, obj):
        return obj.session_total


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


@admin.register(Repository)
class RepositoryAdmin(admin.ModelAdmin):
    list_display = ("name", "path", "default_branch", "worktree_count", "created_at")
    search_fields = ("name", "path")
    ordering = ("name",)
    readonly_fields = ("created_at", "updated_at")

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(worktree_total=Count("worktrees"))

    @admin.display(description="worktrees", ordering="worktree_total")
    def worktree_count(self, obj):
        return obj.worktree_total


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
    actions = ("release_claims",)

    @admin.action(description="Release claim")
    def release_claims(self, request, queryset):
        actor = Actor(user=request.user)
        released = sum(worktree_release_claim(actor=actor, worktree=worktree) for worktree in queryset)
        report_counts(request, f"{released} worktree claim(s) released", not_held=queryset.count() - released)


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
