from django.db import models
from django.db.models import Q

from config.models import TimeStampedModel

TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")
# The most one usage row may hold (README, "Tokens and cost"): far above any real model request (a
# million-token context costs well under $100), far below what a sum overflows at. A record over
# either is refused by the receiver (usage.extract) and by the database (the constraints below),
# so the sums on every page stay exact on SQLite, whose SUM of integers fails past 2**63 - 1: it
# would take 9 billion rows at the cap to get there.
TOKENS_MAX = 10**9  # per token field of one row
COST_MAX = 10**6  # US dollars of one row


class UsageRecord(models.Model):
    """One model request (or one tool call) an agent made, with the tokens and dollars it cost,
    as its OpenTelemetry exporter reported it. Append-only: written by usage.services only."""

    class Source(models.TextChoices):
        OTLP_LOG = "otlp-log", "OTLP log record"  # Claude Code's claude_code.api_request event
        OTLP_SPAN = "otlp-span", "OTLP span"  # a GenAI semantic-convention span (gen_ai.*)

    agent = models.ForeignKey("sessions_app.Agent", on_delete=models.PROTECT, related_name="usage_records")
    # Null when the telemetry named no session this key may write to (see usage.services).
    session = models.ForeignKey(
        "sessions_app.AgentSession", null=True, blank=True, on_delete=models.SET_NULL, related_name="usage_records"
    )
    # The session's task when the record arrived; the campaign is the task's.
    task = models.ForeignKey("board.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="usage")
    # The session id as the exporter sent it (Claude Code's session.id), kept when it matched nothing.
    external_session_id = models.CharField(max_length=128, blank=True)
    model = models.CharField(max_length=200, blank=True)
    # api_request for Claude Code; gen_ai.operation.name for spans (chat, execute_tool, ...).
    operation = models.CharField(max_length=64, blank=True)
    tool_name = models.CharField(max_length=200, blank=True)  # gen_ai.tool.name of an execute_tool span
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    cache_creation_tokens = models.BigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=18, decimal_places=8, default=0)
    duration_ms = models.BigIntegerField(null=True, blank=True)
    occurred_at = models.DateTimeField()
    received_at = models.DateTimeField(auto_now_add=True)
    source = models.CharField(max_length=16, choices=Source.choices)
    # sha256 of what identifies the record (a span's trace and span ids; a log record's own bytes):
    # an exporter retrying a batch it got no answer for adds nothing the second time.
    idempotency_key = models.CharField(max_length=64)

    class Meta:
        ordering = ["-occurred_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "idempotency_key"], name="usage_record_once_per_agent"),
            models.CheckConstraint(
                condition=Q(input_tokens__gte=0)
                & Q(output_tokens__gte=0)
                & Q(cache_read_tokens__gte=0)
                & Q(cache_creation_tokens__gte=0),
                name="usage_record_tokens_not_negative",
            ),
            models.CheckConstraint(condition=Q(cost_usd__gte=0), name="usage_record_cost_not_negative"),
            models.CheckConstraint(
                condition=Q(input_tokens__lte=TOKENS_MAX)
                & Q(output_tokens__lte=TOKENS_MAX)
                & Q(cache_read_tokens__lte=TOKENS_MAX)
                & Q(cache_creation_tokens__lte=TOKENS_MAX),
                name="usage_record_tokens_capped",
            ),
            models.CheckConstraint(condition=Q(cost_usd__lte=COST_MAX), name="usage_record_cost_capped"),
            models.CheckConstraint(
                condition=Q(duration_ms__isnull=True) | Q(duration_ms__gte=0), name="usage_record_duration_not_negative"
            ),
            models.CheckConstraint(condition=Q(source__in=["otlp-log", "otlp-span"]), name="usage_record_source_known"),
        ]
        indexes = [
            models.Index(fields=["agent", "occurred_at"], name="usage_agent_time"),
            models.Index(fields=["task", "occurred_at"], name="usage_task_time"),
            models.Index(fields=["session", "occurred_at"], name="usage_session_time"),
            models.Index(fields=["occurred_at"], name="usage_time"),
        ]

    def __str__(self) -> str:
        return f"{self.model or self.tool_name or self.operation} {self.input_tokens}+{self.output_tokens} tokens"


class Budget(TimeStampedModel):
    """A spending limit (tokens, US dollars or both) on a task, an agent, a campaign or a day.

    At WARN_PERCENT of a limit a ``budget.warning`` event is recorded once; at 100 % ``budget.exceeded``:
    the agent's sessions under it are asked "budget exceeded: raise it or stop" before their next tool
    use, and claim-next hands the agent (or the campaign's tasks) no new work. usage/budgets.py says how.
    """

    class Scope(models.TextChoices):
        TASK = "task", "Task"  # the usage recorded against one task
        AGENT = "agent", "Agent"  # all of one agent's usage
        CAMPAIGN = "campaign", "Campaign"  # the usage of the campaign's tasks
        DAY = "day", "Day"  # each UTC day's usage: every agent's, or one agent's when agent is set

    scope = models.CharField(max_length=16, choices=Scope.choices)
    task = models.ForeignKey("board.Task", null=True, blank=True, on_delete=models.CASCADE, related_name="budgets")
    agent = models.ForeignKey(
        "sessions_app.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="budgets"
    )
    campaign = models.ForeignKey(
        "board.Campaign", null=True, blank=True, on_delete=models.CASCADE, related_name="budgets"
    )
    # Input plus output tokens (cache reads, cheap and large, count through limit_usd); either limit or both.
    limit_tokens = models.BigIntegerField(null=True, blank=True)
    limit_usd = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    # When the spend crossed WARN_PERCENT and 100 % (for a day budget: on the day of that date);
    # cleared when the limit is raised above the spend.
    warned_at = models.DateTimeField(null=True, blank=True)
    exceeded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["scope", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(limit_tokens__isnull=False) | Q(limit_usd__isnull=False), name="budget_has_a_limit"
            ),
            models.CheckConstraint(
                condition=(Q(limit_tokens__isnull=True) | Q(limit_tokens__gt=0))
                & (Q(limit_usd__isnull=True) | Q(limit_usd__gt=0)),
                name="budget_limits_positive",
            ),
            models.CheckConstraint(
                condition=Q(scope="task", task__isnull=False, agent__isnull=True, campaign__isnull=True)
                | Q(scope="agent", agent__isnull=False, task__isnull=True, campaign__isnull=True)
                | Q(scope="campaign", campaign__isnull=False, task__isnull=True, agent__isnull=True)
                | Q(scope="day", task__isnull=True, campaign__isnull=True),
                name="budget_scope_matches_target",
            ),
            models.UniqueConstraint(fields=["task"], condition=Q(scope="task"), name="budget_one_per_task"),
            models.UniqueConstraint(fields=["agent"], condition=Q(scope="agent"), name="budget_one_per_agent"),
            models.UniqueConstraint(fields=["campaign"], condition=Q(scope="campaign"), name="budget_one_per_campaign"),
            models.UniqueConstraint(
                fields=["agent"], condition=Q(scope="day", agent__isnull=False), name="budget_one_day_per_agent"
            ),
            models.UniqueConstraint(
                fields=["scope"], condition=Q(scope="day", agent__isnull=True), name="budget_one_day_for_all"
            ),
        ]
        indexes = [
            # claim-next and PreToolUse look only at exceeded budgets.
            models.Index(fields=["scope"], condition=Q(exceeded_at__isnull=False), name="budget_exceeded"),
        ]

    def __str__(self) -> str:
        target = self.task_id or self.campaign_id or (self.agent_id if self.agent_id else "all agents")
        return f"{self.get_scope_display()} budget ({target})"
