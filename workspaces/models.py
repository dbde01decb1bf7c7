"""Workspaces, artifacts, repositories and worktrees.

The tables exist from the foundation on; the file API, the observer and the git
operations that fill them come with the workspaces issue.
"""

from django.db import models
from django.db.models import Q

from config.models import TimeStampedModel


class Workspace(TimeStampedModel):
    """A folder agents write into. A session workspace belongs to one session; the shared
    flat workspace is used by every session opened with ``"workspace": "shared"``."""

    class Kind(models.TextChoices):
        SESSION = "session", "Session folder"  # WORKSPACE_ROOT/session_<ts>_<uuid8>/
        SHARED = "shared", "Shared flat folder"  # WORKSPACE_ROOT/default/, files at its root only
        WORKTREE = "worktree", "Git worktree"

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        ARCHIVED = "archived", "Archived"  # folder deleted after its archive was verified
        REMOVED = "removed", "Removed"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    root_path = models.CharField(max_length=4096, unique=True, help_text="Chosen by the server, never by a client.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    ephemeral = models.BooleanField(default=False)
    retention_days = models.PositiveIntegerField(null=True, blank=True, help_text="Overrides the default retention.")
    archive_location = models.CharField(max_length=1024, blank=True)
    archive_size = models.BigIntegerField(null=True, blank=True)
    archive_sha256 = models.CharField(max_length=64, blank=True)
    # sha256 of the manifest stored beside the archive: restore trusts the manifest only if it matches.
    archive_manifest_sha256 = models.CharField(max_length=64, blank=True)
    # Set once the archive at archive_location was re-read and matched the folder. From then on
    # the folder may be deleted; status turns archived only when it is gone, so a run that finds
    # this set on an active workspace finishes the deletion (workspaces/archive/services.py).
    archive_verified_at = models.DateTimeField(null=True, blank=True)
    # Archival and restore claim the row with a conditional update; the lease outlives the longest
    # task, so a killed worker's claim lapses and the next run takes over.
    archive_claimed_by = models.CharField(max_length=32, blank=True, editable=False)
    archive_claimed_until = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.root_path


class Artifact(TimeStampedModel):
    class Kind(models.TextChoices):
        CODE = "code", "Code"
        NOTE = "note", "Note"
        LOG = "log", "Log"
        ATTACHMENT = "attachment", "Attachment"
        MEDIA = "media", "Media"
        SEARCH_RESULT = "search_result", "Search result"
        WORK_PRODUCT = "work_product", "Work product"
        OTHER = "other", "Other"

    class Source(models.TextChoices):
        API = "api", "API upload"
        OBSERVER = "observer", "File observer"
        SYNC = "sync", "Sync or import"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="artifacts")
    path = models.CharField(max_length=4096, help_text="Normalised, relative to the workspace root.")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.OTHER)
    size = models.BigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True)
    mime_type = models.CharField(max_length=200, blank=True)
    tool_invocation = models.ForeignKey(
        "ledger.ToolInvocation", null=True, blank=True, on_delete=models.SET_NULL, related_name="artifacts"
    )
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.API)

    class Meta:
        ordering = ["workspace", "path"]
        constraints = [models.UniqueConstraint(fields=["workspace", "path"], name="artifact_path_unique")]

    def __str__(self) -> str:
        return self.path


class ArtifactVersion(models.Model):
    artifact = models.ForeignKey(Artifact, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    backup_location = models.CharField(max_length=4096, blank=True)
    source = models.CharField(max_length=16, choices=Artifact.Source.choices, default=Artifact.Source.API)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["artifact", "-number"]
        constraints = [models.UniqueConstraint(fields=["artifact", "number"], name="artifact_version_unique")]

    def __str__(self) -> str:
        return f"{self.artifact.path} v{self.number}"


class Repository(TimeStampedModel):
    """A git clone on one host: the server's machine, or a runner's (SPEC §8), whose worktrees that
    runner creates and whose status it reports; the server runs no git on a runner's clone."""

    name = models.SlugField(max_length=100, unique=True)
    path = models.CharField(max_length=4096, help_text="Canonical real path of the clone on its host.")
    default_branch = models.CharField(max_length=255, default="main")
    sync_dir = models.CharField(
        max_length=4096, blank=True, help_text="Shared configuration linked into every worktree."
    )
    runner = models.ForeignKey(
        "runners.Runner",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="repositories",
        help_text="The runner whose machine holds the clone; empty when it is on the server's.",
    )

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "repositories"
        constraints = [
            # One folder, one row, per host: two machines may hold clones at the same path.
            models.UniqueConstraint(
                fields=["path"], condition=models.Q(runner__isnull=True), name="repository_server_path_unique"
            ),
            models.UniqueConstraint(fields=["runner", "path"], name="repository_runner_path_unique"),
        ]

    @property
    def on_runner(self) -> bool:
        return self.runner_id is not None

    def __str__(self) -> str:
        return self.name


class Worktree(TimeStampedModel):
    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        REMOVED = "removed", "Removed"

    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="worktrees")
    type = models.SlugField(max_length=32)
    name = models.SlugField(max_length=200)
    branch = models.CharField(max_length=255)
    real_path = models.CharField(
        max_length=4096, help_text="Canonical real path on its host: one folder, one row (per host)."
    )
    # The host of the folder: its repository's runner (null: the server's machine), copied so that the
    # database holds "one folder, one row" per host. A runner's paths are in that runner's namespace:
    # a runner naming a path the server (or another runner) uses takes nothing from them.
    runner = models.ForeignKey(
        "runners.Runner",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="worktrees",
        help_text="Its repository's runner (the host of the folder); empty when it is on the server's.",
    )
    pr_number = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    holder = models.ForeignKey(
        "sessions_app.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="held_worktrees"
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    workspace = models.OneToOneField(
        Workspace, null=True, blank=True, on_delete=models.SET_NULL, related_name="worktree"
    )
    # A runner-hosted repository's worktree: what its runner last said about the folder
    # (commits ahead, changes, recent files), and when. The server cannot look itself.
    reported = models.JSONField(null=True, blank=True)
    reported_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["repository", "type", "name"]
        constraints = [
            models.UniqueConstraint(fields=["repository", "type", "name"], name="worktree_name_unique"),
            # Two clones beside each other share a parent folder, so worktree folders are unique per
            # host rather than per repository.
            models.UniqueConstraint(
                fields=["real_path"], condition=Q(runner__isnull=True), name="worktree_server_path_unique"
            ),
            models.UniqueConstraint(fields=["runner", "real_path"], name="worktree_runner_path_unique"),
            models.CheckConstraint(
                condition=Q(holder__isnull=True) | Q(lease_expires_at__isnull=False), name="worktree_claim_has_lease"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.repository.name}/{self.type}-{self.name}"


class WorktreeClaimRequest(models.Model):
    """A place in a worktree's FIFO queue of waiting claimants."""

    class Status(models.TextChoices):
        WAITING = "waiting", "Waiting"
        GRANTED = "granted", "Granted"
        CANCELLED = "cancelled", "Cancelled"

    worktree = models.ForeignKey(Worktree, on_delete=models.CASCADE, related_name="queue")
    agent = models.ForeignKey("sessions_app.Agent", on_delete=models.CASCADE, related_name="worktree_requests")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.WAITING)
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["worktree", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["worktree", "agent"], condition=Q(status="waiting"), name="one_waiting_request_per_agent"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id} waits for {self.worktree_id}"
