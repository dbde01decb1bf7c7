from rest_framework import serializers

from config.api.fields import StrictSerializer
from config.api.redacted_fields import RedactedCharField
from runners.models import Run

PROVIDER_PATTERN = r"^[A-Za-z0-9._-]{1,64}\Z"


class RunOutput(serializers.ModelSerializer):
    task = serializers.PrimaryKeyRelatedField(read_only=True)
    session = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    runner = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    resumes = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)

    class Meta:
        model = Run
        fields = [
            "id",
            "task",
            "session",
            "runner",
            "provider",
            "prompt",
            "workdir",
            "status",
            "attempt",
            "pid",
            "exit_code",
            "started_at",
            "ended_at",
            "lease_expires_at",
            "cancel_requested_at",
            "log_path",
            "resumes",
            "created_at",
            "updated_at",
        ]


class RunQueueInput(StrictSerializer):
    provider = serializers.RegexField(
        PROVIDER_PATTERN,
        max_length=64,
        trim_whitespace=False,  # " claude" breaks the documented pattern, so it is refused, not trimmed
        help_text="The provider to start, as the runners name it (claude, codex, gemini, shell, demo...).",
    )
    prompt = RedactedCharField(
        required=False,
        allow_blank=True,
        max_length=100_000,
        help_text="What the agent is asked; default: the task's title and description.",
    )
