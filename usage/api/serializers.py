from rest_framework import serializers

from config.api.parsers import INT64_MAX
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
    tool_calls = serializers.IntegerField(help_text="Tool calls (execute_tool spans).")


class UsageRollupOutput(serializers.Serializer):
    group_by = serializers.ChoiceField(choices=GROUPS)
    results = UsageGroupOutput(many=True)
