import json

from django.conf import settings
from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api.fields import HTTP_URL_OR_EMPTY, AwareDateTimeField, ClientIdField, StrictSerializer
from config.api.redacted_fields import RedactedCharField, RedactedDictField, RedactedJSONField
from sessions_app.models import Agent, AgentSession, Checkpoint, Milestone, StreamEvent
from sessions_app.services import SESSION_ID_RE


# --- output -----------------------------------------------------------------------------
# A session's workspace as its output nests it: the same JSON and schema as workspaces' WorkspaceOutput.
# sessions_app sits below workspaces (the layers in pyproject) and may not import its model, so the
# model is the one the session's foreign key points at (resolved once the apps are loaded, before any
# serializer module is imported): its field choices give the schema its enums.
class SessionWorkspaceOutput(serializers.ModelSerializer):
    path = serializers.CharField(source="root_path", read_only=True)

    class Meta:
        model = AgentSession._meta.get_field("workspace").related_model
        fields = ["id", "kind", "path", "status"]
        read_only_fields = fields


class AgentOutput(serializers.ModelSerializer):
    class Meta:
        model = Agent
        fields = ["slug", "display_name", "emoji", "provider", "team", "status", "last_heartbeat_at", "created_at"]


class SessionOutput(serializers.ModelSerializer):
    # As stored: an http(s) link (SessionCreateInput), not every string the "uri" format would promise.
    pr_url = serializers.CharField(read_only=True)
    agent = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    parent = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    task = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    workspace = SessionWorkspaceOutput(read_only=True, allow_null=True)

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
    # sessions_app.services.SESSION_ID_RE as a validator (exactly as sent; \Z, not $, which also takes a
    # trailing newline), so the schema states it.
    id = serializers.CharField(
        max_length=128,
        required=False,
        trim_whitespace=False,
        validators=[
            RegexValidator(
                SESSION_ID_RE.pattern.removesuffix("$") + r"\Z",
                "Session id must be 1-128 characters of letters, digits, '.', '_', ':' or '-'.",
            )
        ],
        help_text="Client-chosen session id; generated if absent.",
    )
    agent = serializers.SlugField(required=False, help_text="Staff only: the agent to open it for.")
    intent = RedactedCharField(required=False, allow_blank=True, max_length=10_000, default="")
    labels = serializers.ListField(
        child=RedactedCharField(max_length=100), required=False, max_length=100, default=list
    )
    metadata = RedactedDictField(required=False, default=dict)
    repo = RedactedCharField(required=False, allow_blank=True, max_length=500, default="")
    branch = serializers.CharField(required=False, allow_blank=True, max_length=255, default="")
    pr_url = RedactedCharField(
        required=False,
        allow_blank=True,
        max_length=500,
        default="",
        trim_whitespace=False,
        validators=[HTTP_URL_OR_EMPTY],
        help_text="An http(s) link to the pull request.",
    )
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
    reason = RedactedCharField(required=False, allow_blank=True, max_length=2000, default="")


@extend_schema_field({"type": "object", "additionalProperties": {}})
class _SizeCappedJSONObject(RedactedJSONField):
    """A JSON object whose serialised size is capped by a setting (413 beyond it), redacted."""

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
    state = RedactedJSONField(help_text="Any JSON, up to CHECKPOINT_MAX_BYTES when serialised.")


class MilestoneInput(StrictSerializer):
    id = ClientIdField()
    text = RedactedCharField(max_length=10_000)
