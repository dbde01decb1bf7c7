from django.db import models
from django.db.models import Q

from config.models import TimeStampedModel


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


class WebhookSubscription(TimeStampedModel):
    """Where to POST events. Its secret signs every delivery; the admin never shows it again."""

    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=128, help_text="HMAC-SHA256 key the receiver verifies signatures with.")
    event_names = models.JSONField(
        default=list, blank=True, help_text='Event names ("task.claimed"), prefixes ("task.*"); empty or "*" for all.'
    )

    class Format(models.TextChoices):
        SWITCHYARD = "switchyard", "Switchyard (the event as signed JSON)"  # webhook_event_body
        SLACK = "slack", "Slack incoming webhook (text and blocks)"  # ledger/webhook_slack.py

    active = models.BooleanField(default=True)
    description = models.CharField(max_length=200, blank=True)
    format = models.CharField(
        max_length=16,
        choices=Format.choices,
        default=Format.SWITCHYARD,
        help_text="Slack: a message Slack's incoming webhooks accept (a waiting question with a link to its session).",
    )

    class Meta:
        ordering = ["url", "id"]

    def __str__(self) -> str:
        return self.description or self.url

    def wants(self, event_name: str) -> bool:
        names = self.event_names or ["*"]
        return any(
            pattern == "*" or pattern == event_name or (pattern.endswith(".*") and event_name.startswith(pattern[:-1]))
            for pattern in names
        )


class WebhookDelivery(TimeStampedModel):
    """One event sent to one subscription: the delivery log, and the retry state."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"  # not tried yet
        SUCCEEDED = "succeeded", "Succeeded"  # the receiver answered 2xx; final
        FAILED = "failed", "Failed"  # the last try failed; tried again at next_attempt_at
        GIVEN_UP = "given_up", "Given up"  # failed WEBHOOK_MAX_ATTEMPTS times; only "Retry now" sends it again

    subscription = models.ForeignKey(WebhookSubscription, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="webhook_deliveries")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0, help_text="Tries started, counted when a worker takes it.")
    next_attempt_at = models.DateTimeField(help_text="Not sent before this time.")
    # A worker's claim: while it lies in the future, no other worker sends this delivery.
    claimed_until = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    response_excerpt = models.TextField(blank=True)

    class Meta:
        verbose_name_plural = "webhook deliveries"
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(
                fields=["next_attempt_at"], name="webhook_delivery_due", condition=Q(status__in=["pending", "failed"])
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["subscription", "event"], name="one_delivery_per_subscription_event"),
            models.CheckConstraint(
                condition=Q(status__in=["pending", "succeeded", "failed", "given_up"]),
                name="webhook_delivery_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_id} → {self.subscription_id} ({self.status})"
