from django.db import models
from django.db.models import Q


class ToolInvocation(models.Model):
    """One tool call. Append-only: a running call may be finished once, never rewritten."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"  # started, no result yet
        SUCCESS = "success", "Success"
        FAILURE = "failure", "Failure"  # the tool ran and reported an error
        CANCELLED = "cancelled", "Cancelled"  # never finished: interrupted or abandoned

    session = models.ForeignKey("sessions_app.AgentSession", on_delete=models.CASCADE, related_name="tool_calls")
    agent = models.ForeignKey("sessions_app.Agent", on_delete=models.PROTECT, related_name="tool_calls")
    tool_name = models.CharField(max_length=200)
    input_summary = models.TextField(blank=True, help_text="Redacted and length-capped.")
    input_sha256 = models.CharField(max_length=64, blank=True, help_text="sha256 of the full input, before redaction.")
    output_summary = models.TextField(blank=True, help_text="Redacted and length-capped.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # NULL, not "", when absent: the partial unique constraint skips rows without one.
    client_id = models.CharField(max_length=128, null=True, blank=True)  # noqa: DJ001
    body_sha256 = models.CharField(max_length=64, blank=True, editable=False)

    class Meta:
        ordering = ["session", "started_at", "id"]
        indexes = [
            models.Index(fields=["session"], name="toolcall_open", condition=Q(status="running")),
            models.Index(fields=["agent", "started_at"], name="toolcall_agent_time"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "client_id"], condition=Q(client_id__isnull=False), name="toolcall_client_id_unique"
            ),
            models.CheckConstraint(
                condition=Q(status__in=["running", "success", "failure", "cancelled"]), name="toolcall_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(status="running", finished_at__isnull=True)
                | (~Q(status="running") & Q(finished_at__isnull=False)),
                name="toolcall_finished_iff_not_running",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"


class Event(models.Model):
    """The domain event log: audit trail, and the outbox for live pages and webhooks."""

    name = models.CharField(max_length=64, db_index=True)
    subject_type = models.CharField(max_length=32)
    subject_id = models.CharField(max_length=128)
    actor = models.CharField(max_length=200, blank=True, help_text="agent:<slug>, user:<username> or system.")
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["subject_type", "subject_id"], name="event_subject")]

    def __str__(self) -> str:
        return f"{self.name} {self.subject_type}:{self.subject_id}"
