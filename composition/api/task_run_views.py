"""A task's runs (SPEC §10): every attempt with what it cost. Here, not in runners, because the cost
is usage's (usage sits above runners) and a run's is its session's."""

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from board import selectors as board_selectors
from config.api.views import actor_from_request
from config.pages import BOARD
from runners.api.serializers import RunOutput
from runners.api.views import TaskRunQueueView
from runners.review import require_change_reader
from runners.selectors import run_list
from usage.models import TOKEN_FIELDS
from usage.selectors import usage_by_session


class RunUsageOutput(serializers.Serializer):
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cache_read_tokens = serializers.IntegerField()
    cache_creation_tokens = serializers.IntegerField()
    cost_usd = serializers.DecimalField(max_digits=24, decimal_places=8, coerce_to_string=True)


class TaskRunOutput(RunOutput):
    duration_seconds = serializers.FloatField(
        read_only=True, allow_null=True, help_text="From started to ended (or to now while it runs); null unstarted."
    )
    usage = RunUsageOutput(read_only=True, allow_null=True, help_text="Its session's tokens and cost; null: none.")

    class Meta(RunOutput.Meta):
        fields = [*RunOutput.Meta.fields, "duration_seconds", "usage"]


def _duration(run) -> float | None:
    if run.started_at is None:
        return None
    return round(((run.ended_at or timezone.now()) - run.started_at).total_seconds(), 3)


class TaskRunsView(TaskRunQueueView):
    """GET: the task's runs, newest first; POST (runners' TaskRunQueueView): queue one."""

    allowed_groups = BOARD

    @extend_schema(
        responses=TaskRunOutput(many=True),
        summary="Every attempt at this task, newest first, with its duration, tokens and cost",
        description="Each run with its provider, runner, status, attempt, summary, started and ended times, "
        "`duration_seconds` and `usage` (its session's tokens and cost). For people, an `orchestrate` key and "
        "the task's own run keys.",
    )
    def get(self, request, task_id: int):
        actor = actor_from_request(request)
        task = board_selectors.task_get_for_actor(actor=actor, task_id=task_id)
        require_change_reader(actor=actor, task=task)
        runs = list(run_list(task_id=task.pk))
        usage = usage_by_session(session_ids=[run.session_id for run in runs if run.session_id])
        for run in runs:
            run.duration_seconds = _duration(run)
            found = usage.get(run.session_id)
            run.usage = None if found is None else {name: found[name] for name in (*TOKEN_FIELDS, "cost_usd")}
        return Response(TaskRunOutput(runs, many=True).data)
