from django.db import models
from django.db.models import Q

from config.actors import ORCHESTRATE_SCOPE, BoundWork
from config.models import TimeStampedModel


class Agent(TimeStampedModel):
    class Provider(models.TextChoices):
        CLAUDE = "claude", "Claude"
        CODEX = "codex", "Codex"
        GEMINI = "gemini", "Gemini"
        CUSTOM = "custom", "Custom"

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"  # heartbeating and free to take work
        PAUSED = "paused", "Paused"  # a person paused it; it keeps its key but takes no work
        COMPLETED = "completed", "Completed"  # finished its run; may come back later
        ERROR = "error", "Error"  # stale heartbeat or a failed run; needs a look

    slug = models.SlugField(max_length=64, unique=True)
    display_name = models.CharField(max_length=200, blank=True)
    emoji = models.CharField(max_length=16, blank=True, default="🤖")
    provider = models.CharField(max_length=16, choices=Provider.choices, default=Provider.CUSTOM)
    team = models.CharField(max_length=100, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["active", "paused", "completed", "error"]), name="agent_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.display_name or self.slug


class AgentApiKey(TimeStampedModel):
    """A bearer key. Only its sha256 is kept: the key itself is shown once, at creation."""

    class Scope(models.TextChoices):
        AGENT = "agent", "Agent"  # its own sessions, claims and workspaces
        ORCHESTRATE = ORCHESTRATE_SCOPE, "Orchestrate"  # may also create tasks for others
        RUN = "run", "Run"  # a runner (SPEC §8): asks for runs and reports on them

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, unique=True, help_text="Public part of the key, for lookup and display.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    scopes = models.JSONField(default=list, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # A per-run key (SPEC §8) is bound to the run's session: it acts on that session (and its
    # children) only, and is revoked when the run ends. Null for every other key.
    session = models.ForeignKey(
        "AgentSession", null=True, blank=True, on_delete=models.CASCADE, related_name="bound_keys"
    )

    class Meta:
        verbose_name = "agent API key"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.agent.slug})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def has_scope(self, scope: str) -> bool:
        return scope in (self.scopes or [])

    def bound_work(self) -> BoundWork:
        """The task of the session this key is bound to, and that task's repository (config/actors.py
        decides with them). Read once per request, and only by a bound key on a task or worktree
        endpoint: a session's task is fixed when it is opened."""
        cached = self.__dict__.get("_bound_work")
        if cached is None:
            found = (
                AgentSession.objects.filter(pk=self.session_id).values_list("task_id", "task__repository_id").first()
            )
            cached = BoundWork(*found) if found is not None else BoundWork()
            self.__dict__["_bound_work"] = cached
        return cached


class AgentSession(TimeStampedModel):
    class Status(models.TextChoices):
        PLANNING = "planning", "Planning"  # opened, not yet acting
        RUNNING = "running", "Running"  # working
        WAITING_FOR_INPUT = "waiting_for_input", "Waiting for input"  # a person must answer
        COMPLETED = "completed", "Completed"  # final: done
        FAILED = "failed", "Failed"  # final: gave up or crashed for good
        CANCELLED = "cancelled", "Cancelled"  # final: stopped by a person or the agent

    TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})

    id = models.CharField(max_length=128, primary_key=True)
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="sessions")
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.PLANNING)
    intent = models.TextField(blank=True)
    labels = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    repo = models.CharField(max_length=500, blank=True)
    branch = models.CharField(max_length=255, blank=True)
    pr_url = models.URLField(max_length=500, blank=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    task = models.ForeignKey("board.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="sessions")
    workspace = models.ForeignKey(
        "workspaces.Workspace", null=True, blank=True, on_delete=models.SET_NULL, related_name="sessions"
    )
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Counters from which per-session sequence numbers are allocated with an atomic UPDATE.
    last_event_seq = models.BigIntegerField(default=0, editable=False)
    last_checkpoint_seq = models.BigIntegerField(default=0, editable=False)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["agent", "-created_at"], name="session_agent_recent"),
            models.Index(fields=["status"], name="session_open", condition=Q(ended_at__isnull=True)),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    status__in=["planning", "running", "waiting_for_input", "completed", "failed", "cancelled"]
                ),
                name="session_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["completed", "failed", "cancelled"]) | Q(ended_at__isnull=True),
                name="session_ended_only_when_terminal",
            ),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL


class StreamEvent(models.Model):
    class Type(models.TextChoices):
        LOG = "log", "Log line"
        PLAN_UPDATE = "plan_update", "Plan update"
        TOOL_STARTED = "tool_started", "Tool started"
        TOOL_FINISHED = "tool_finished", "Tool finished"
        DIFF = "diff", "Diff"
        STATUS_CHANGE = "status_change", "Status change"
        MILESTONE = "milestone", "Milestone"
        INPUT_REQUEST = "input_request", "Input request"

    # No index of its own: the unique (session, seq) index serves every lookup by session.
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="events", db_index=False)
    seq = models.BigIntegerField()
    type = models.CharField(max_length=20, choices=Type.choices)
    payload = models.JSONField(default=dict, blank=True)
    timestamp = models.DateTimeField(help_text="When it happened, as the client says; else when it was received.")
    created_at = models.DateTimeField(auto_now_add=True)
    # NULL, not "", when absent: the partial unique constraint skips rows without one.
    client_id = models.CharField(max_length=128, null=True, blank=True)  # noqa: DJ001
    body_sha256 = models.CharField(max_length=64, blank=True, editable=False)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="event_seq_unique"),
            models.UniqueConstraint(
                fields=["session", "client_id"], condition=Q(client_id__isnull=False), name="event_client_id_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq} {self.type}"


class Checkpoint(models.Model):
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="checkpoints")
    seq = models.BigIntegerField()
    state = models.JSONField()
    size_bytes = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    # NULL, not "", when absent: the partial unique constraint skips rows without one.
    client_id = models.CharField(max_length=128, null=True, blank=True)  # noqa: DJ001
    body_sha256 = models.CharField(max_length=64, blank=True, editable=False)

    class Meta:
        ordering = ["session", "-seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="checkpoint_seq_unique"),
            models.UniqueConstraint(
                fields=["session", "client_id"],
                condition=Q(client_id__isnull=False),
                name="checkpoint_client_id_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} checkpoint {self.seq}"


class Milestone(models.Model):
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="milestones")
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # NULL, not "", when absent: the partial unique constraint skips rows without one.
    client_id = models.CharField(max_length=128, null=True, blank=True)  # noqa: DJ001
    body_sha256 = models.CharField(max_length=64, blank=True, editable=False)

    class Meta:
        ordering = ["session", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "client_id"], condition=Q(client_id__isnull=False), name="milestone_client_id_unique"
            ),
        ]

    def __str__(self) -> str:
        return self.text[:80]


class ToolPolicy(TimeStampedModel):
    """A rule for the tool uses Claude Code announces with PreToolUse (sessions_app/tool_policy.py):
    ``pattern`` is ``Tool`` or ``Tool(argument)``, both shell-style globs (fnmatch); the first enabled
    rule that matches decides, an agent's own rules before the global ones (no agent)."""

    class Action(models.TextChoices):
        ASK = "ask", "Ask a person"  # the hook waits for Allow / Deny on the session page or the card
        DENY = "deny", "Deny"  # refused at once, with the rule as the reason
        ALLOW = "allow", "Allow"  # no question: exempts uses a broader "ask" rule below would catch

    agent = models.ForeignKey(
        Agent,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="tool_policies",
        help_text="Empty: a global rule, for every agent (after the agent's own).",
    )
    pattern = models.CharField(
        max_length=500, help_text="Tool or Tool(argument), shell-style globs: Bash(rm *), Write, mcp__*."
    )
    action = models.CharField(max_length=8, choices=Action.choices, default=Action.ASK)
    position = models.PositiveIntegerField(
        default=100, help_text="Lower first, within the agent's or the global rules."
    )
    enabled = models.BooleanField(default=True)
    note = models.CharField(max_length=200, blank=True, help_text="Why: shown to the person asked.")

    class Meta:
        ordering = ["agent_id", "position", "id"]
        verbose_name_plural = "tool policies"
        indexes = [models.Index(fields=["agent", "position"], name="toolpolicy_agent_pos", condition=Q(enabled=True))]
        constraints = [
            models.CheckConstraint(condition=Q(action__in=["ask", "deny", "allow"]), name="toolpolicy_action_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.pattern} → {self.action}"
