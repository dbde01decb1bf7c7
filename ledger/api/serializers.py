from rest_framework import serializers

from config.api.fields import AwareDateTimeField, ClientIdField, StrictSerializer
from ledger.models import Event, ToolInvocation


class ToolCallOutput(serializers.ModelSerializer):
    session = serializers.PrimaryKeyRelatedField(read_only=True)
    agent = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = ToolInvocation
        fields = [
            "id",
            "client_id",
            "session",
            "agent",
            "tool_name",
            "input_summary",
            "input_sha256",
            "output_summary",
            "status",
            "error",
            "started_at",
            "finished_at",
            "duration_ms",
            "created_at",
        ]


class ToolPolicyVerdictOutput(serializers.Serializer):
    decision = serializers.ChoiceField(
        choices=["ask", "deny"], help_text="ask: a person decides (read the answer at request_id); deny: refused."
    )
    pattern = serializers.CharField(help_text="The rule that matched (sessions_app/tool_policy.py).")
    reason = serializers.CharField()
    request_id = serializers.CharField(
        required=False, help_text="With ask: GET sessions/{id}/input-requests/{request_id}/?wait=N for the answer."
    )


class ToolUseBudgetVerdictOutput(serializers.Serializer):
    """The ``budget`` gate's verdict (ledger/tool_use_gates.py; usage/budgets.py: budget_tool_use_verdict
    answers it; tests/usage/test_budget_schema.py holds the two to the same keys). Described here, where
    the answer is rendered: the ledger may not import usage."""

    exceeded = serializers.BooleanField(help_text="Always true: the key is absent when no budget stops the call.")
    request_id = serializers.CharField(
        allow_blank=True,
        help_text="The session now waits for input: GET sessions/{id}/input-requests/{request_id}/?wait=N for "
        "the answer (allow: the budget was raised, go on; deny or none in time: don't use the tool). Empty when "
        "the session cannot wait (it ended): deny.",
    )
    question = serializers.CharField(help_text='"budget exceeded: raise it or stop"')
    reason = serializers.CharField(help_text="For the agent: which budget, its limits, what to do.")
    budget = serializers.IntegerField(help_text="The budget's id (GET /api/v1/budgets/{id}/).")
    scope = serializers.CharField(help_text="task, agent, campaign or day (as the budget's own scope).")
    task = serializers.IntegerField(allow_null=True)
    agent = serializers.CharField(allow_null=True, help_text="The agent's slug (agent and agent-day budgets).")
    campaign = serializers.IntegerField(allow_null=True)
    limit_tokens = serializers.IntegerField(allow_null=True)
    limit_usd = serializers.CharField(allow_null=True, help_text="US dollars, as a decimal string.")


class ToolCallStartedOutput(ToolCallOutput):
    """A call just recorded (one, not a batch): with ``policy`` when the server's tool policy marks it,
    else with ``budget`` when an exceeded budget stops it. At most one of the two; a client reads either
    the same way (ask a person, or deny)."""

    policy = ToolPolicyVerdictOutput(required=False, help_text="Absent when no rule marks the call.")
    budget = ToolUseBudgetVerdictOutput(
        required=False,
        help_text="Absent when no exceeded budget (of the task, its campaign, the agent or the day) stops the "
        "call, and when `policy` is present.",
    )

    class Meta(ToolCallOutput.Meta):
        fields = [*ToolCallOutput.Meta.fields, "policy", "budget"]


class ToolCallInput(StrictSerializer):
    id = ClientIdField(help_text="Client id, e.g. the tool_use_id; retries with it never duplicate.")
    tool_name = serializers.CharField(max_length=200)
    input = serializers.JSONField(required=False, help_text="Full input: hashed, then redacted and capped for storage.")
    output = serializers.JSONField(required=False, allow_null=True, help_text="Output, when already finished.")
    status = serializers.ChoiceField(choices=ToolInvocation.Status.choices, required=False, default="running")
    error = serializers.CharField(required=False, allow_blank=True, max_length=100_000, default="")
    started_at = AwareDateTimeField(required=False)
    finished_at = AwareDateTimeField(required=False)
    cwd = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=4096,
        help_text="The folder the tool runs in (a hook's cwd): a relative file path is resolved against it "
        "before the tool policy matches it (else against the session's recorded cwd). Not stored.",
    )

    # validate() below, for the schema (config/api/schema_constraints.py): a finish time needs a
    # status other than running (the default).
    openapi_rules = {
        "anyOf": [
            {"not": {"required": ["finished_at"]}},
            {"required": ["status"], "properties": {"status": {"not": {"enum": ["running"]}}}},
        ]
    }

    def validate(self, attrs):
        if attrs.get("status", "running") == "running" and attrs.get("finished_at"):
            raise serializers.ValidationError({"finished_at": ["A running call has no finish time."]})
        return attrs


class ToolCallFinishInput(StrictSerializer):
    status = serializers.ChoiceField(choices=["success", "failure", "cancelled"])
    output = serializers.JSONField(required=False, allow_null=True)
    error = serializers.CharField(required=False, allow_blank=True, max_length=100_000, default="")
    finished_at = AwareDateTimeField(required=False)


class EventOutput(serializers.ModelSerializer):
    class Meta:
        model = Event
        fields = ["id", "name", "subject_type", "subject_id", "actor", "payload", "created_at"]
