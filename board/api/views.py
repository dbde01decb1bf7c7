from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from board import selectors, services
from board.api import serializers as s
from board.api.filters import TaskFilter
from config.actors import Actor
from config.api.errors import DomainError
from config.api.schema import lease_lost_response
from config.api.views import actor_from_request, validate_input
from sessions_app.selectors import session_get_for_actor
from workspaces.worktrees.selectors import repository_get_by_name


def _claiming_agent(actor: Actor):
    if actor.agent is None:
        raise DomainError("Only agents claim tasks; people move cards on the board.", code="forbidden")
    return actor.agent


def _optional_session(actor: Actor, session_id: str | None):
    return session_get_for_actor(actor=actor, session_id=session_id) if session_id else None


# A write on a task the agent no longer holds; lease_lost says the reaper took it back (sessions_app/liveness.py).
CLAIM_CONFLICT = lease_lost_response(
    "Not claimed (or claimed by another); code lease_lost when the reaper took your claim back."
)


class TaskListCreateView(ListAPIView):
    serializer_class = s.TaskOutput
    filterset_class = TaskFilter

    def get_queryset(self):
        return selectors.task_list_for_actor(actor=actor_from_request(self.request))

    @extend_schema(
        request=s.TaskCreateInput,
        responses={201: s.TaskOutput},
        summary="Create a task (staff or an orchestrating agent)",
        description="`repository` must name a registered repository (GET /repositories/); another name is a 400 "
        "listing the known ones.",
    )
    def post(self, request):
        actor = actor_from_request(request)
        services.require_orchestrator(actor=actor, what="Creating tasks")
        data = validate_input(s.TaskCreateInput, request.data)
        campaign = selectors.campaign_get(campaign_id=data.pop("campaign")) if "campaign" in data else None
        name = data.pop("repository", None)
        repository = repository_get_by_name(name=name) if name else None
        task = services.task_create(actor=actor, campaign=campaign, repository=repository, **data)
        return Response(s.TaskOutput(task).data, status=201)


class TaskDetailView(APIView):
    @extend_schema(
        responses=s.TaskOutput,
        summary="Read a task",
        description="A run's own key reads its run's task only (403 for any other).",
    )
    def get(self, request, task_id: int):
        task = selectors.task_get_for_actor(actor=actor_from_request(request), task_id=task_id)
        return Response(s.TaskOutput(task).data)


class TaskClaimNextView(APIView):
    @extend_schema(
        request=s.ClaimNextInput,
        responses={
            200: s.TaskOutput,
            204: OpenApiResponse(description="No ready task (tasks with an active run are left to their runs)."),
        },
        summary="Claim the best ready task",
        description="A run's own key (bound to its session) claims nothing: 403. Its run's task was claimed for it "
        "when the run started.",
    )
    def post(self, request):
        actor = actor_from_request(request)
        agent = _claiming_agent(actor)
        # No `request.data or {}`: an empty body already parses to {}, and `or` would let [] or null through.
        # An empty object (the usual call) has no field to check, so it skips building the serializer.
        body = request.data
        data = {} if isinstance(body, dict) and not body else validate_input(s.ClaimNextInput, body)
        campaign = selectors.campaign_get(campaign_id=data["campaign"]) if "campaign" in data else None
        session = _optional_session(actor, data.get("session"))
        task = services.task_claim_next(actor=actor, agent=agent, session=session, campaign=campaign)
        if task is None:
            return Response(status=204)
        return Response(s.task_render(task))


class TaskClaimView(APIView):
    @extend_schema(
        request=s.ClaimInput,
        responses={
            200: s.TaskOutput,
            409: OpenApiResponse(
                description="Taken, or not ready, or what claim-next would leave alone: an exceeded budget of the "
                "task, its campaign, the agent or the day, or an active run of the task, which only that run claims "
                "(the message names it; nothing is claimed)."
            ),
        },
        summary="Claim this task",
        description="A run's own key (bound to its session) claims nothing: 403. Its run's task was claimed for it "
        "when the run started.",
    )
    def post(self, request, task_id: int):
        actor = actor_from_request(request)
        agent = _claiming_agent(actor)
        data = validate_input(s.ClaimInput, request.data)
        task = selectors.task_get(task_id=task_id)
        session = _optional_session(actor, data.get("session"))
        task, _ = services.task_claim(actor=actor, agent=agent, task=task, session=session)
        return Response(s.TaskOutput(task).data)


class TaskReleaseView(APIView):
    @extend_schema(
        request=None,
        responses={200: s.TaskOutput, 409: CLAIM_CONFLICT},
        summary="Give a claimed task back to ready",
    )
    def post(self, request, task_id: int):
        actor = actor_from_request(request)
        validate_input(s.StrictSerializer, request.data)
        task, _ = services.task_release(actor=actor, task=selectors.task_get(task_id=task_id))
        return Response(s.TaskOutput(task).data)


class TaskCompleteView(APIView):
    @extend_schema(
        request=s.CompleteInput,
        responses={200: s.TaskOutput, 409: CLAIM_CONFLICT},
        summary="Finish a claimed task",
    )
    def post(self, request, task_id: int):
        actor = actor_from_request(request)
        data = validate_input(s.CompleteInput, request.data)
        task, _ = services.task_complete(actor=actor, task=selectors.task_get(task_id=task_id), review=data["review"])
        return Response(s.TaskOutput(task).data)


class TaskFailView(APIView):
    @extend_schema(
        request=s.FailInput,
        responses={200: s.TaskOutput, 409: CLAIM_CONFLICT},
        summary="Report a claimed task as failed",
    )
    def post(self, request, task_id: int):
        actor = actor_from_request(request)
        data = validate_input(s.FailInput, request.data)
        task, _ = services.task_fail(
            actor=actor, task=selectors.task_get(task_id=task_id), error=data["error"], retry=data["retry"]
        )
        return Response(s.TaskOutput(task).data)


class CampaignListCreateView(ListAPIView):
    serializer_class = s.CampaignOutput

    def get_queryset(self):
        return selectors.campaign_list()

    @extend_schema(
        request=s.CampaignCreateInput,
        responses={201: s.CampaignOutput},
        summary="Create a campaign from a definition",
        description="`ends_on` may not be before `starts_on` (400). `repository` must name a registered repository "
        "(GET /repositories/); another name is a 400 listing the known ones.",
    )
    def post(self, request):
        actor = actor_from_request(request)
        services.require_orchestrator(actor=actor, what="Creating campaigns")
        data = validate_input(s.CampaignCreateInput, request.data)
        name = data.pop("repository", None)
        repository = repository_get_by_name(name=name) if name else None
        campaign = services.campaign_create(actor=actor, repository=repository, **data)
        return Response(s.CampaignOutput(selectors.campaign_get(campaign_id=campaign.pk)).data, status=201)


class CampaignDetailView(APIView):
    @extend_schema(responses=s.CampaignOutput, summary="Read a campaign")
    def get(self, request, campaign_id: int):
        return Response(s.CampaignOutput(selectors.campaign_get(campaign_id=campaign_id)).data)
