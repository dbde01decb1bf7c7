"""Runners and runs (SPEC §8): Switchyard starts the agents itself, on any machine."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from config.models import TimeStampedModel


class Runner(TimeStampedModel):
    """A ``switchyard runner`` process on some machine. It authenticates with a key of scope
    ``run`` that belongs to its own Agent row (one per runner), so it is seen like any agent."""

    class Status(models.TextChoices):
        ONLINE = "online", "Online"  # heartbeating; takes runs up to its capacity
        OFFLINE = "offline", "Offline"  # not heard from within the lease TTL, or never connected
        DRAINING = "draining", "Draining"  # finishes the runs it holds, takes no new ones

    name = models.SlugField(max_length=48, unique=True)
    agent = models.OneToOneField(
        "sessions_app.Agent",
        on_delete=models.PROTECT,
        related_name="runner",
        help_text="The agent whose key (scope 'run') this runner authenticates with.",
    )
    host = models.CharField(max_length=255, blank=True)
    labels = models.JSONField(default=list, blank=True, help_text='Strings, e.g. ["linux", "gpu", "repo:shop"].')
    providers = models.JSONField(default=list, blank=True, help_text='Provider names it offers, e.g. ["claude"].')
    capacity = models.PositiveIntegerField(default=1, help_text="How many runs it may hold at once.")
    version = models.CharField(max_length=64, blank=True)
    # The runner process that spoke last (a new one each start): a long poll of a process since
    # restarted, still open on the server, hands out nothing (runners/dispatch.py).
    instance = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OFFLINE)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    # What its machine has room for (runners/room.py), as its last heartbeat or ask for work said.
    room = models.JSONField(
        null=True,
        blank=True,
        help_text='Provider -> how many more runs of it its memory takes now, e.g. {"claude": 0, "demo": 40}; '
        "empty: not reported (capacity alone counts).",
    )
    memory = models.JSONField(
        null=True,
        blank=True,
        help_text="Its machine's memory in MB: available_mb, total_mb, min_free_mb, reserved_mb, needs_mb.",
    )
    load = models.FloatField(null=True, blank=True, help_text="Its machine's 1-minute load average.")

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(capacity__gte=1), name="runner_capacity_positive"),
            models.CheckConstraint(condition=Q(load__isnull=True) | Q(load__gte=0), name="runner_load_not_negative"),
            models.CheckConstraint(
                condition=Q(status__in=["online", "offline", "draining"]), name="runner_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Run(TimeStampedModel):
    """One execution of one provider on one task. Its status moves only in runners/services.py."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"  # waiting for a runner with matching labels and providers
        ASSIGNED = "assigned", "Assigned"  # handed to one runner under a lease; not started yet
        STARTING = "starting", "Starting"  # the runner prepares the workdir and spawns the agent
        RUNNING = "running", "Running"  # the agent process is alive
        # The agent stopped at a tool call a person must answer (its hook deferred it) and exited: no
        # process, no capacity taken; ``runner`` keeps its worktree and session until the answer resumes it.
        WAITING = "waiting", "Waiting"
        SUCCEEDED = "succeeded", "Succeeded"  # final: the agent exited 0
        FAILED = "failed", "Failed"  # final: non-zero exit, timeout, or could not start
        CANCELLED = "cancelled", "Cancelled"  # final: a person asked it to stop
        LOST = "lost", "Lost"  # final: its runner's lease expired without a word

    class Kind(models.TextChoices):
        WORK = "work", "Work"  # the task's work, in a fresh agent session (a lost run's resume is one too)
        # Changes requested (SPEC §10): continues the agent session of ``resumes`` (its provider's resume,
        # Claude's --resume, Codex's exec resume) on the same branch, the request as its prompt.
        CONTINUE = "continue", "Continue"
        # Asked to review the task's change: reads it and comments through the API; never commits.
        REVIEW = "review", "Review"

    ACTIVE = frozenset({Status.QUEUED, Status.ASSIGNED, Status.STARTING, Status.RUNNING, Status.WAITING})
    TERMINAL = frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.LOST})

    task = models.ForeignKey("board.Task", on_delete=models.CASCADE, related_name="runs")
    session = models.ForeignKey(
        "sessions_app.AgentSession", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    runner = models.ForeignKey(Runner, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    provider = models.CharField(max_length=64)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.WORK)
    agent_session = models.CharField(
        max_length=200,
        blank=True,
        help_text="The provider's own session id (Claude Code's session, Codex's thread), as the runner saw it: "
        "what a run continuing this one resumes.",
    )
    # The agent that works the run: one per runner and provider (``claude@build-1``); it holds the
    # task's claim and owns the run's session, like any agent.
    agent = models.ForeignKey(
        "sessions_app.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    prompt = models.TextField(blank=True)
    workdir = models.CharField(max_length=1000, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    # Fencing token: bumped each time the run is handed out again, so a runner that lost its
    # lease cannot write with the attempt it was given.
    attempt = models.PositiveIntegerField(default=1)
    pid = models.IntegerField(null=True, blank=True)
    # Whether its agent runs in the runner's sandbox (bubblewrap); null until the runner says.
    sandboxed = models.BooleanField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    log_path = models.CharField(max_length=1000, blank=True)
    error = models.TextField(blank=True, help_text="Why it failed: exit code, timeout, last lines of the log.")
    summary = models.JSONField(
        default=dict, blank=True, help_text="What the run produced: commits ahead, files changed, patch, artifacts."
    )
    # A run that waits (or waited) for a person (runners/run_waiting.py): what it waits for, the answer.
    waiting_for = models.JSONField(
        default=dict,
        blank=True,
        help_text="What a waiting run waits for: kind (permission, policy, budget), question, question_seq, "
        "tool_use_id, tool_name, runner (the one holding its worktree).",
    )
    answer = models.JSONField(
        default=dict, blank=True, help_text="The person's answer to it: decision (allow, deny), message, answered_by."
    )
    answered_at = models.DateTimeField(null=True, blank=True, help_text="When it was answered; it resumes then.")
    resumes = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="resumed_by",
        help_text="The run it resumes.",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # The runners' long poll reads the queue oldest first.
            models.Index(fields=["created_at", "id"], name="run_queue", condition=Q(status="queued")),
            models.Index(fields=["runner", "status"], name="run_runner_status"),
            # The long poll hands a runner its answered waiting runs first.
            models.Index(
                fields=["runner", "answered_at"],
                name="run_answered_waiting",
                condition=Q(status="waiting", answered_at__isnull=False),
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["task"],
                condition=Q(status__in=["queued", "assigned", "starting", "running", "waiting"]),
                name="run_one_active_per_task",
            ),
            models.CheckConstraint(
                condition=Q(
                    status__in=[
                        "queued",
                        "assigned",
                        "starting",
                        "running",
                        "waiting",
                        "succeeded",
                        "failed",
                        "cancelled",
                        "lost",
                    ]
                ),
                name="run_status_valid",
            ),
            models.CheckConstraint(condition=Q(attempt__gte=1), name="run_attempt_positive"),
            models.CheckConstraint(condition=Q(kind__in=["work", "continue", "review"]), name="run_kind_valid"),
            models.CheckConstraint(
                condition=Q(status__in=["succeeded", "failed", "cancelled", "lost"]) | Q(ended_at__isnull=True),
                name="run_ended_only_when_terminal",
            ),
            # Handed out means held by someone: a run between assigned and running names its runner; a
            # waiting one names the runner that holds its worktree.
            models.CheckConstraint(
                condition=~Q(status__in=["assigned", "starting", "running", "waiting"]) | Q(runner__isnull=False),
                name="run_active_has_runner",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of task {self.task_id} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE


class TaskReview(TimeStampedModel):
    """A decision on a task's change (SPEC §10): approved, or changes requested (with the run that
    was queued to make them). The newest row is the task's review state."""

    class Decision(models.TextChoices):
        APPROVE = "approve", "Approved"
        REQUEST_CHANGES = "request_changes", "Changes requested"
        # Another agent was asked to review (a run of kind review); not a verdict: review_latest skips it.
        ASK_REVIEW = "ask_review", "Review asked of an agent"

    task = models.ForeignKey("board.Task", on_delete=models.CASCADE, related_name="reviews")
    decision = models.CharField(max_length=16, choices=Decision.choices)
    reviewer = models.CharField(max_length=200, help_text="Who decided: user:<name> or agent:<slug>.")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="task_reviews"
    )
    message = models.TextField(blank=True)
    head_commit = models.CharField(max_length=64, blank=True, help_text="The branch's head the decision was on.")
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="requested_by", help_text="The run queued."
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(decision__in=["approve", "request_changes", "ask_review"]),
                name="task_review_decision_valid",
            ),
            models.CheckConstraint(condition=~Q(reviewer=""), name="task_review_has_reviewer"),
        ]

    def __str__(self) -> str:
        return f"{self.decision} on task {self.task_id} by {self.reviewer}"


class ReviewComment(TimeStampedModel):
    """A comment on a line (or a whole file) of a task's change, by a person or an agent's key (a
    review run's): the same comments either way, shown beside the diff."""

    BODY_MAX = 20_000

    task = models.ForeignKey("board.Task", on_delete=models.CASCADE, related_name="review_comments")
    path = models.CharField(max_length=4096)
    line = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: on the whole file.")
    body = models.TextField()
    author = models.CharField(max_length=200, help_text="user:<name> or agent:<slug>.")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="review_comments"
    )
    agent = models.ForeignKey(
        "sessions_app.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="review_comments"
    )
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="review_comments", help_text="Its run."
    )
    review = models.ForeignKey(
        TaskReview,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="comments",
        help_text="The request for changes that carried it to the agent.",
    )

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["task", "created_at"], name="review_comment_task_time")]
        constraints = [
            models.CheckConstraint(
                condition=Q(line__isnull=True) | Q(line__gte=1), name="review_comment_line_positive"
            ),
            models.CheckConstraint(condition=~Q(path=""), name="review_comment_has_path"),
            models.CheckConstraint(condition=~Q(body=""), name="review_comment_has_body"),
            models.CheckConstraint(condition=~Q(author=""), name="review_comment_has_author"),
        ]

    def __str__(self) -> str:
        return f"comment on {self.path}:{self.line or ''} of task {self.task_id}"


# Shipping (SPEC §10): kept in a module of its own, registered with the app from here.
from runners.ship_models import PullRequest, RepositoryShipping  # noqa: E402, F401
