from rest_framework import serializers

from board.models import Campaign, Lead, Task
from board.services import PRIORITY_WORDS
from config.api.fields import StrictSerializer, datetime_output
from config.api.redacted_fields import RedactedCharField


class TaskOutput(serializers.ModelSerializer):
    assignee = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    session = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    campaign = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    repository = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True, help_text="Where a run of it works (its name)."
    )

    class Meta:
        model = Task
        fields = [
            "id",
            "title",
            "description",
            "status",
            "priority",
            "rank",
            "assignee",
            "suggested_agent",
            "session",
            "campaign",
            "labels",
            "repository",
            "source_file",
            "external_id",
            "started_at",
            "finished_at",
            "retries",
            "error",
            "created_at",
            "updated_at",
        ]


def task_render(task: Task) -> dict:
    """What ``TaskOutput(task).data`` gives, built by hand for the claim endpoints, where the
    serializer's field machinery was a sixth of a claim. tests/board/test_task_render.py holds
    the two to the same output."""
    return {
        "id": task.pk,
        "title": task.title,
        "description": task.description,
        "status": task.status,
        "priority": task.priority,
        "rank": task.rank,
        "assignee": task.assignee.slug if task.assignee_id is not None else None,
        "suggested_agent": task.suggested_agent,
        "session": task.session_id,
        "campaign": task.campaign_id,
        "labels": task.labels,
        "repository": task.repository.name if task.repository_id is not None else None,
        "source_file": task.source_file,
        "external_id": task.external_id,
        "started_at": datetime_output(task.started_at),
        "finished_at": datetime_output(task.finished_at),
        "retries": task.retries,
        "error": task.error,
        "created_at": datetime_output(task.created_at),
        "updated_at": datetime_output(task.updated_at),
    }


class TaskCreateInput(StrictSerializer):
    title = RedactedCharField(max_length=500)
    description = RedactedCharField(required=False, allow_blank=True, max_length=100_000, default="")
    status = serializers.ChoiceField(choices=["backlog", "ready", "blocked"], required=False, default="ready")
    priority = serializers.ChoiceField(choices=Task.Priority.choices, required=False, default="P2")
    labels = serializers.ListField(
        child=serializers.CharField(max_length=100), required=False, max_length=50, default=list
    )
    campaign = serializers.IntegerField(required=False, min_value=1, max_value=2**63 - 1)
    suggested_agent = serializers.SlugField(required=False, allow_blank=True, max_length=64, default="")
    external_id = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")
    repository = serializers.SlugField(
        required=False,
        allow_null=True,
        max_length=100,
        help_text="The name of a registered repository its runs work in (GET /repositories/ lists them).",
    )


class ClaimNextInput(StrictSerializer):
    session = serializers.CharField(required=False, max_length=128, help_text="The session that will work on it.")
    campaign = serializers.IntegerField(required=False, min_value=1, max_value=2**63 - 1)


class ClaimInput(StrictSerializer):
    session = serializers.CharField(required=False, max_length=128)


class CompleteInput(StrictSerializer):
    review = serializers.BooleanField(required=False, default=False, help_text="Send to review instead of done.")


class FailInput(StrictSerializer):
    error = RedactedCharField(max_length=100_000)
    retry = serializers.BooleanField(required=False, default=False, help_text="Put it back in ready for another try.")


class LeadOutput(serializers.ModelSerializer):
    class Meta:
        model = Lead
        fields = ["id", "name", "company", "email", "status", "score"]


class CampaignOutput(serializers.ModelSerializer):
    tasks_total = serializers.IntegerField(read_only=True)
    tasks_done = serializers.IntegerField(read_only=True)
    leads_total = serializers.IntegerField(read_only=True)

    class Meta:
        model = Campaign
        fields = [
            "id",
            "name",
            "type",
            "priority",
            "deliverables",
            "target_audience",
            "goal",
            "starts_on",
            "ends_on",
            "status",
            "source_file",
            "tasks_total",
            "tasks_done",
            "leads_total",
            "created_at",
        ]


class LeadInput(StrictSerializer):
    name = serializers.CharField(max_length=200)
    company = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")
    email = serializers.EmailField(required=False, allow_blank=True, default="")
    status = serializers.ChoiceField(choices=Lead.Status.choices, required=False, default="new")
    score = serializers.IntegerField(required=False, min_value=-1_000_000, max_value=1_000_000, default=0)


def _any_case(word: str) -> str:
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in word)


# What board.services.priority_normalise takes: a P-code or a word, any case, spaces around.
PRIORITY_PATTERN = (
    r"^[\s\x1c-\x1f]*(?:"
    + "|".join([_any_case("p") + "[0-3]", *(_any_case(w) for w in sorted(PRIORITY_WORDS))])
    + r")[\s\x1c-\x1f]*$"
)


class CampaignCreateInput(StrictSerializer):
    """The campaign definition format of SPEC §5; only ``type`` is required."""

    openapi_properties = {"priority": {"pattern": PRIORITY_PATTERN}}

    type = serializers.CharField(max_length=100)
    name = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")
    # Not trimmed here: priority_normalise trims, and max_length then counts what was sent, as the schema does.
    priority = serializers.CharField(
        required=False, max_length=20, trim_whitespace=False, help_text="P0-P3, or critical/high/medium/low."
    )
    deliverables = serializers.ListField(
        child=RedactedCharField(max_length=200), required=False, max_length=500, default=list
    )
    target_audience = RedactedCharField(required=False, allow_blank=True, max_length=500, default="")
    goal = RedactedCharField(required=False, allow_blank=True, max_length=10_000, default="")
    starts_on = serializers.DateField(required=False)
    ends_on = serializers.DateField(required=False)
    leads = LeadInput(many=True, required=False)
    repository = serializers.SlugField(
        required=False,
        allow_null=True,
        max_length=100,
        help_text="The name of a registered repository the deliverables' runs work in (400 when unknown).",
    )
