from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from board import selectors as board_selectors
from board.services import require_orchestrator
from config.api.fields import StrictSerializer
from config.api.views import actor_from_request, validate_input
from runners import selectors, services
from runners.api import serializers as s
from runners.api.filters import RunFilter


class TaskRunQueueView(APIView):
    @extend_schema(
        request=s.RunQueueInput,
        responses={201: s.RunOutput, 409: OpenApiResponse(description="The task already has an active run.")},
        summary="Queue a run of a provider on this task (staff or an orchestrating agent)",
    )
    def post(self, request, task_id: int):
        actor = actor_from_request(request)
        require_orchestrator(actor=actor, what="Queueing runs")
        data = validate_input(s.RunQueueInput, request.data)
        task = board_selectors.task_get(task_id=task_id)
        run = services.run_queue(actor=actor, task=task, provider=data["provider"], prompt=data.get("prompt"))
        return Response(s.RunOutput(selectors.run_get(run_id=run.pk)).data, status=201)


class RunListView(ListAPIView):
    serializer_class = s.RunOutput
    filterset_class = RunFilter

    def get_queryset(self):
        return selectors.run_list()

    @extend_schema(summary="List runs, newest first")
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class RunDetailView(APIView):
    @extend_schema(responses=s.RunOutput, summary="Read a run")
    def get(self, request, run_id: int):
        return Response(s.RunOutput(selectors.run_get(run_id=run_id)).data)


class RunCancelView(APIView):
    @extend_schema(
        request=None,
        responses={200: s.RunOutput, 409: OpenApiResponse(description="The run has already ended.")},
        summary="Stop a run (staff or an orchestrating agent)",
        description="A queued run is cancelled at once; a run a runner holds gets `cancel_requested_at` "
        "and ends `cancelled` when its runner has stopped the agent. Asking again changes nothing.",
    )
    def post(self, request, run_id: int):
        actor = actor_from_request(request)
        require_orchestrator(actor=actor, what="Cancelling runs")
        validate_input(StrictSerializer, request.data)
        run = services.run_cancel(actor=actor, run=selectors.run_get(run_id=run_id))
        return Response(s.RunOutput(selectors.run_get(run_id=run.pk)).data)
