from decimal import Decimal

from rest_framework import serializers

from config.api.fields import Int64Field, StrictSerializer
from config.api.parsers import INT64_MAX
from usage.models import Budget
from usage.selectors import GROUPS


class UsageQueryInput(serializers.Serializer):
    group_by = serializers.ChoiceField(choices=GROUPS, help_text="What each row sums over.")
    since = serializers.DateTimeField(required=False, help_text="Usage at or after this time.")
    until = serializers.DateTimeField(required=False, help_text="Usage before this time.")
    agent = serializers.CharField(required=False, max_length=64, help_text="Only this agent's (slug).")
    task = serializers.IntegerField(required=False, min_value=1, max_value=INT64_MAX, help_text="Only this task's.")
    campaign = serializers.IntegerField(
        required=False, min_value=1, max_value=INT64_MAX, help_text="Only the usage of this campaign's tasks."
    )
    session = serializers.CharField(required=False, max_length=128, help_text="Only this session's.")


class UsageGroupOutput(serializers.Serializer):
    key = serializers.CharField(
        allow_null=True,
        help_text="The agent's slug, the task's or campaign's id, or the day (YYYY-MM-DD, UTC); null for "
        "the usage with no task (or no campaign).",
    )
    label = serializers.CharField(allow_null=True, help_text="The agent's slug, the task's title, the campaign's name.")
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cache_read_tokens = serializers.IntegerField()
    cache_creation_tokens = serializers.IntegerField()
    cost_usd = serializers.DecimalField(max_digits=24, decimal_places=8, help_text="US dollars, as a string.")
    requests = serializers.IntegerField(help_text="Model requests (api_request records, model-call spans).")
    tool_calls = serializers.IntegerField(
        help_text="Tool calls: those the hook recorded (Claude Code's) and execute_tool spans, each once."
    )


class UsageRollupOutput(serializers.Serializer):
    group_by = serializers.ChoiceField(choices=GROUPS)
    results = UsageGroupOutput(many=True)


# A dollar amount above zero, as the DecimalField below takes it (the schema's own pattern admits 0 and -1).
_POSITIVE_USD = {"pattern": r"^(?:[1-9]\d{0,9}(?:\.\d{1,4})?|0?\.(?:[1-9]\d{0,3}|0[1-9]\d{0,2}|00[1-9]\d?|000[1-9]))$"}


def _only(scope: str, target: str | None) -> dict:
    others = [
        name for name in ("task", "campaign", "agent") if name != target and not (scope == "day" and name == "agent")
    ]
    rule: dict = {"properties": {"scope": {"enum": [scope]}}, "not": {"anyOf": [{"required": [n]} for n in others]}}
    if target:
        rule["required"] = [target]
    return rule


class BudgetCreateInput(StrictSerializer):
    scope = serializers.ChoiceField(choices=Budget.Scope.choices, help_text="What the budget limits.")
    task = Int64Field(required=False, min_value=1, help_text="The task (scope task).")
    campaign = Int64Field(required=False, min_value=1, help_text="The campaign (scope campaign).")
    agent = serializers.CharField(
        required=False, max_length=64, help_text="The agent's slug (scope agent; scope day: that agent's day only)."
    )
    limit_tokens = Int64Field(required=False, min_value=1, help_text="Input plus output tokens; at least one limit.")
    limit_usd = serializers.DecimalField(
        required=False,
        max_digits=14,
        decimal_places=4,
        min_value=Decimal("0.0001"),
        help_text="US dollars (a string or a number); at least one limit.",
    )

    # validate() below, for the schema (config/api/schema_constraints.py): a limit, and the target its scope names.
    openapi_rules = {
        "allOf": [
            {"anyOf": [{"required": ["limit_tokens"]}, {"required": ["limit_usd"]}]},
            {
                "anyOf": [
                    _only("task", "task"),
                    _only("campaign", "campaign"),
                    _only("agent", "agent"),
                    _only("day", None),
                ]
            },
        ]
    }
    openapi_properties = {"limit_usd": _POSITIVE_USD}

    def validate(self, attrs):
        scope = attrs["scope"]
        needs = {"task": "task", "campaign": "campaign", "agent": "agent"}.get(scope)
        given = {name for name in ("task", "campaign", "agent") if attrs.get(name) is not None}
        allowed = {needs} if needs else {"agent"}
        if needs and needs not in given:
            raise serializers.ValidationError({needs: [f"A {scope} budget names its {needs}."]})
        if given - allowed:
            extra = sorted(given - allowed)[0]
            raise serializers.ValidationError({extra: [f"A {scope} budget has no {extra}."]})
        if attrs.get("limit_tokens") is None and attrs.get("limit_usd") is None:
            raise serializers.ValidationError({"limit_tokens": ["Give limit_tokens, limit_usd or both."]})
        return attrs


class BudgetUpdateInput(StrictSerializer):
    limit_tokens = Int64Field(required=False, allow_null=True, min_value=1, help_text="null: no token limit.")
    limit_usd = serializers.DecimalField(
        required=False,
        allow_null=True,
        max_digits=14,
        decimal_places=4,
        min_value=Decimal("0.0001"),
        help_text="null: no dollar limit.",
    )

    openapi_rules = {"minProperties": 1}
    openapi_properties = {"limit_usd": _POSITIVE_USD}

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError({"limit_tokens": ["Give limit_tokens, limit_usd or both to change."]})
        return attrs


class BudgetOutput(serializers.Serializer):
    id = serializers.IntegerField(source="budget.pk")
    scope = serializers.CharField(source="budget.scope")
    task = serializers.IntegerField(source="budget.task_id", allow_null=True)
    campaign = serializers.IntegerField(source="budget.campaign_id", allow_null=True)
    agent = serializers.CharField(source="budget.agent.slug", allow_null=True, default=None)
    limit_tokens = serializers.IntegerField(source="budget.limit_tokens", allow_null=True)
    limit_usd = serializers.DecimalField(
        source="budget.limit_usd", max_digits=14, decimal_places=4, allow_null=True, help_text="US dollars."
    )
    spent_tokens = serializers.IntegerField(help_text="Input plus output tokens counted against it.")
    spent_usd = serializers.DecimalField(max_digits=24, decimal_places=8, help_text="US dollars, as a string.")
    percent = serializers.FloatField(help_text="The larger share of its limits spent.")
    state = serializers.ChoiceField(
        choices=["ok", "warning", "exceeded"], help_text="warning from 80 %, exceeded from 100 %."
    )
    warned_at = serializers.DateTimeField(allow_null=True)
    exceeded_at = serializers.DateTimeField(allow_null=True, help_text="Set while the budget stops spending.")
    created_at = serializers.DateTimeField(source="budget.created_at")
    updated_at = serializers.DateTimeField(source="budget.updated_at")
