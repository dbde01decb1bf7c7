from rest_framework import serializers

from board.models import Campaign, Lead, Task
from config.api.fields import StrictSerializer


class _StringOnly:
    """DRF's CharField turns 42 into "42"; a number or a boolean where text belongs is a client bug."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class TextField(_StringOnly, serializers.CharField):
    pass


class SlugTextField(_StringOnly, serializers.SlugField):
    pass


class EmailTextField(_StringOnly, serializers.EmailField):
    pass


class TaskOutput(serializers.ModelSerializer):
    assignee = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    session = serializers.PrimaryKeyRelatedField(read_only=True)
    campaign = serializers.PrimaryKeyRelatedField(read_only=True)

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
            "source_file",
            "external_id",
            "started_at",
            "finished_at",
            "retries",
            "error",
            "created_at",
            "updated_at",
        ]


class TaskCreateInput(StrictSerializer):
    title = TextField(max_length=500)
    description = TextField(required=False, allow_blank=True, max_length=100_000, default="")
    status = serializers.ChoiceField(choices=["backlog", "ready", "blocked"], required=False, default="ready")
    priority = serializers.ChoiceField(choices=Task.Priority.choices, required=False, default="P2")
    labels = serializers.ListField(
        child=TextField(max_length=100), required=False, max_length=50, default=list
    )
    campaign = serializers.IntegerField(required=False, min_value=1, max_value=2**63 - 1)
    suggested_agent = SlugTextField(required=False, allow_blank=True, max_length=64, default="")
    external_id = TextField(required=False, allow_blank=True, max_length=200, default="")


class ClaimNextInput(StrictSerializer):
    session = TextField(required=False, max_length=128, help_text="The session that will work on it.")
    campaign = serializers.IntegerField(required=False, min_value=1, max_value=2**63 - 1)


class ClaimInput(StrictSerializer):
    session = TextField(required=False, max_length=128)


class CompleteInput(StrictSerializer):
    review = serializers.BooleanField(required=False, default=False, help_text="Send to review instead of done.")


class FailInput(StrictSerializer):
    error = TextField(max_length=100_000)
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
    name = TextField(max_length=200)
    company = TextField(required=False, allow_blank=True, max_length=200, default="")
    email = EmailTextField(required=False, allow_blank=True, default="")
    status = serializers.ChoiceField(choices=Lead.Status.choices, required=False, default="new")
    score = serializers.IntegerField(required=False, min_value=-1_000_000, max_value=1_000_000, default=0)


class CampaignCreateInput(StrictSerializer):
    """The campaign definition format of SPEC §5; only ``type`` is required."""

    type = TextField(max_length=100)
    name = TextField(required=False, allow_blank=True, max_length=200, default="")
    priority = TextField(required=False, max_length=20, help_text="P0-P3, or critical/high/medium/low.")
    deliverables = serializers.ListField(
        child=TextField(max_length=200), required=False, max_length=500, default=list
    )
    target_audience = TextField(required=False, allow_blank=True, max_length=500, default="")
    goal = TextField(required=False, allow_blank=True, max_length=10_000, default="")
    starts_on = serializers.DateField(required=False)
    ends_on = serializers.DateField(required=False)
    leads = LeadInput(many=True, required=False)
