from django.db import models
from django.db.models import Q

TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")


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
