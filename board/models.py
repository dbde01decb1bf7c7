from django.db import models
from django.db.models import Q

from config.models import TimeStampedModel


class Campaign(TimeStampedModel):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"  # imported, not started
        ACTIVE = "active", "Active"  # its tasks are on the board
        COMPLETED = "completed", "Completed"  # every deliverable done
        CANCELLED = "cancelled", "Cancelled"

    name = models.CharField(max_length=200)
    type = models.CharField(max_length=100)
    priority = models.CharField(max_length=2, default="P2")
    deliverables = models.JSONField(default=list, blank=True)
    target_audience = models.CharField(max_length=500, blank=True)
    goal = models.TextField(blank=True)
    starts_on = models.DateField(null=True, blank=True)
    ends_on = models.DateField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    source_file = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["source_file"], condition=~Q(source_file=""), name="campaign_source_unique"
            ),
            models.CheckConstraint(condition=Q(priority__in=["P0", "P1", "P2", "P3"]), name="campaign_priority_valid"),
        ]

    def __str__(self) -> str:
        return self.name


class Lead(TimeStampedModel):
    class Status(models.TextChoices):
        NEW = "new", "New"
        CONTACTED = "contacted", "Contacted"
        QUALIFIED = "qualified", "Qualified"
        WON = "won", "Won"
        LOST = "lost", "Lost"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="leads")
    name = models.CharField(max_length=200)
    company = models.CharField(max_length=200, blank=True)
    email = models.EmailField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.NEW)
    score = models.IntegerField(default=0)

    class Meta:
        ordering = ["campaign", "-score", "name"]

    def __str__(self) -> str:
        return self.name


class Task(TimeStampedModel):
    class Status(models.TextChoices):
        BACKLOG = "backlog", "Backlog"  # known, not yet ready to be picked up
        READY = "ready", "Ready"  # claimable by an agent
        IN_PROGRESS = "in_progress", "In progress"  # claimed; an agent works on it
        REVIEW = "review", "Review"  # work done, a person checks it
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        BLOCKED = "blocked", "Blocked"  # waits on something outside the board

    class Priority(models.TextChoices):
        P0 = "P0", "P0 critical"
        P1 = "P1", "P1 high"
        P2 = "P2", "P2 medium"
        P3 = "P3", "P3 low"

    title = models.CharField(max_length=500)
    description = models.TextField(blank=True, help_text="Markdown.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.BACKLOG)
    priority = models.CharField(max_length=2, choices=Priority.choices, default=Priority.P2)
    # Spaced-out integers: a move between two cards takes the midpoint, so one row changes.
    rank = models.BigIntegerField(default=0)
    assignee = models.ForeignKey(
        "sessions_app.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="tasks"
    )
    suggested_agent = models.CharField(max_length=64, blank=True)
    session = models.ForeignKey(
        "sessions_app.AgentSession", null=True, blank=True, on_delete=models.SET_NULL, related_name="claimed_tasks"
    )
    campaign = models.ForeignKey(Campaign, null=True, blank=True, on_delete=models.SET_NULL, related_name="tasks")
    labels = models.JSONField(default=list, blank=True)
    # Where a run of this task works (SPEC §8): a worktree of this repository, or, when none,
    # the run's session workspace.
    repository = models.ForeignKey(
        "workspaces.Repository", null=True, blank=True, on_delete=models.SET_NULL, related_name="tasks"
    )
    source_file = models.CharField(max_length=500, blank=True)
    source_key = models.CharField(max_length=64, blank=True, help_text="Identity of an imported item.")
    external_id = models.CharField(max_length=200, blank=True, help_text="Identity of a task synced from state files.")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    retries = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["priority", "rank", "id"]
        indexes = [
            models.Index(fields=["priority", "rank", "id"], name="task_ready_queue", condition=Q(status="ready")),
            models.Index(fields=["status", "rank"], name="task_column"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["source_key"], condition=~Q(source_key=""), name="task_source_key_unique"),
            models.UniqueConstraint(
                fields=["external_id"], condition=~Q(external_id=""), name="task_external_id_unique"
            ),
            models.CheckConstraint(
                condition=Q(status__in=["backlog", "ready", "in_progress", "review", "done", "failed", "blocked"]),
                name="task_status_valid",
            ),
            models.CheckConstraint(condition=Q(priority__in=["P0", "P1", "P2", "P3"]), name="task_priority_valid"),
        ]

    def __str__(self) -> str:
        return self.title


class TaskClaim(models.Model):
    """Who held a task, from when to when. The database allows one open claim per task."""

    class Outcome(models.TextChoices):
        OPEN = "open", "Open"  # still held
        RELEASED = "released", "Released"  # given back to the ready column
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"
        EXPIRED = "expired", "Expired"  # the holder went stale and the reaper took it back

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="claims")
    agent = models.ForeignKey("sessions_app.Agent", on_delete=models.CASCADE, related_name="task_claims")
    session = models.ForeignKey(
        "sessions_app.AgentSession", null=True, blank=True, on_delete=models.SET_NULL, related_name="task_claims"
    )
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.OPEN)
    claimed_at = models.DateTimeField(auto_now_add=True)
    released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-claimed_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["task"], condition=Q(released_at__isnull=True), name="one_open_claim_per_task"
            ),
            models.CheckConstraint(
                condition=Q(outcome="open", released_at__isnull=True)
                | (~Q(outcome="open") & Q(released_at__isnull=False)),
                name="claim_released_iff_closed",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_id} by {self.agent_id} ({self.outcome})"


class SyncedFile(models.Model):
    """A file sync-to-db has applied, with the signature it had then.

    The next run skips a file whose size and mtime are the same, and one whose sha256 is the
    same (only its mtime moved). A file with a problem gets no row (or keeps its old one), so
    it is read again on every run until it is fixed.
    """

    class Source(models.TextChoices):
        STATE = "state", "State snapshot"  # STATE_DIR/session-*/<name>.json
        JOB_LOG = "job_log", "Job log"  # LOGS_ROOT/running-jobs/job-*.log

    # Relative to its root: "session-1770537842/backend.json" or "running-jobs/job-1.log".
    # The two shapes cannot collide, so the path alone identifies the file.
    path = models.CharField(max_length=500, unique=True)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.STATE)
    session_key = models.CharField(max_length=128, blank=True, db_index=True, help_text="The session folder's name.")
    size = models.BigIntegerField()
    mtime_ns = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    last_synced_at = models.DateTimeField()

    class Meta:
        ordering = ["path"]

    def __str__(self) -> str:
        return self.path


class SyncIssue(models.Model):
    """A file sync-to-db could not (fully) apply: not JSON, wrong types, an unknown status word.

    At most one open issue per file; it is seen again on every run until the file is fixed
    (then ``resolved_at`` is set) or removed.
    """

    path = models.CharField(max_length=500, help_text="Relative to STATE_DIR or LOGS_ROOT, like SyncedFile.path.")
    source = models.CharField(max_length=16, choices=SyncedFile.Source.choices, default=SyncedFile.Source.STATE)
    session_key = models.CharField(max_length=128, blank=True)
    error = models.TextField()
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    occurrences = models.PositiveIntegerField(default=1, help_text="How many sync runs saw it.")
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_seen_at", "-id"]
        indexes = [
            models.Index(fields=["session_key"], name="sync_issue_open", condition=Q(resolved_at__isnull=True)),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["path"], condition=Q(resolved_at__isnull=True), name="sync_issue_one_open_per_file"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.path}: {self.error[:80]}"

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None
