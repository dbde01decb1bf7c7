import json

from django.conf import settings
from rest_framework import serializers

from config.api.fields import AwareDateTimeField, ClientIdField, StrictSerializer
from sessions_app.models import Agent, AgentSession, Checkpoint, Milestone, StreamEvent
from workspaces.api.serializers import WorkspaceOutput


# --- output -----------------------------------------------------------------------------
class AgentOutput(serializers.ModelSerializer):
    class Meta:
        model = Agent
        fields = ["slug", "display_name", "emoji", "provider", "team", "status", "last_heartbeat_at", "created_at"]


class SessionOutput(serializers.ModelSerializer):
    agent = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    parent = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    task = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    workspace = WorkspaceOutput(read_only=True, allow_null=True)

    class Meta:
        model = AgentSession
        fields = [
            "id",
            "agent",
            "status",
            "intent",
            "workspace",
            "labels",
            "metadata",
            "repo",
            "branch",
            "pr_url",
            "parent",
            "task",
            "started_at",
            "ended_at",
            "last_heartbeat_at",
            "last_event_seq",
            "created_at",
            "updated_at",
        ]


class StreamEventOutput(serializers.ModelSerializer):
    class Meta:
        model = StreamEvent
        fields = ["seq", "client_id", "type", "payload", "timestamp", "created_at"]


class CheckpointOutput(serializers.ModelSerializer):
    class Meta:
        model = Checkpoint
        fields = ["seq", "client_id", "state", "size_bytes", "created_at"]


class MilestoneOutput(serializers.ModelSerializer):
    class Meta:
        model = Milestone
        fields = ["id", "client_id", "text", "created_at"]


class EventPageOutput(serializers.Serializer):
    results = StreamEventOutput(many=True)
    next_after_seq = serializers.IntegerField(help_text="Pass as after_seq to read on.")
    has_more = serializers.BooleanField()


class TransitionOutput(serializers.Serializer):
    session = SessionOutput()
    changed = serializers.BooleanField(help_text="False when the session already had this status.")


# --- input ------------------------------------------------------------------------------
class SessionCreateInput(StrictSerializer):
    id = serializers.CharField(
        max_length=128, required=False, help_text="Client-chosen session id; generated if absent."
    )
    agent = serializers.SlugField(required=False, help_text="Staff only: the agent to open it for.")
    intent = serializers.CharField(required=False, allow_blank=True, max_length=10_000, default="")
    labels = serializers.ListField(
        child=serializers.CharField(max_length=100), required=False, max_length=100, default=list
    )
    metadata = serializers.DictField(required=False, default=dict)
    repo = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")
    branch = serializers.CharField(required=False, allow_blank=True, max_length=255, default="")
    pr_url = serializers.URLField(required=False, allow_blank=True, max_length=500, default="")
    parent = serializers.CharField(required=False, max_length=128, help_text="Parent session id (orchestrator).")
    task = serializers.IntegerField(required=False, min_value=1, max_value=2**63 - 1)
    status = serializers.ChoiceField(choices=["planning", "running"], required=False, default="planning")
    workspace = serializers.ChoiceField(
        choices=["session", "shared"],
        required=False,
        default="session",
        help_text="session: a folder of its own; shared: the flat default workspace.",
    )


class TransitionInput(StrictSerializer):
    status = serializers.ChoiceField(choices=AgentSession.Status.choices)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


class _SizeCappedJSONObject(serializers.JSONField):
    """A JSON object whose serialised size is capped by a setting (413 beyond it)."""

    def __init__(self, *, limit_setting: str, **kwargs):
        self.limit_setting = limit_setting
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError("Must be a JSON object.")
        limit = getattr(settings, self.limit_setting)
        size = len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
        if size > limit:
            raise serializers.ValidationError(f"Is {size} bytes; the limit is {limit}.", code="too_large")
        return super().to_internal_value(data)


class StreamEventInput(StrictSerializer):
    id = ClientIdField()
    type = serializers.ChoiceField(choices=StreamEvent.Type.choices)
    payload = _SizeCappedJSONObject(limit_setting="EVENT_PAYLOAD_MAX_BYTES", required=False, default=dict)
    timestamp = AwareDateTimeField(required=False, help_text="When it happened; defaults to when it was received.")


class CheckpointInput(StrictSerializer):
    id = ClientIdField()
    state = serializers.JSONField(help_text="Any JSON, up to CHECKPOINT_MAX_BYTES when serialised.")


class MilestoneInput(StrictSerializer):
    id = ClientIdField()
    text = serializers.CharField(max_length=10_000)
