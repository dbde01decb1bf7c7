"""Repositories and git worktrees: create, read with status, claim, release, config sync, remove."""

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api.errors import DomainError
from config.api.fields import StrictSerializer
from config.api.schema import lease_lost_response
from config.api.views import actor_from_request, validate_input
from workspaces.api import worktree_serializers as s
from workspaces.worktrees import claims, selectors, services
from workspaces.worktrees import status as monitor

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no", ""}


def _flag(request, name: str) -> bool:
    raw = request.query_params.get(name, "").lower()
    if raw not in _TRUE | _FALSE:
        raise DomainError(f"{name} must be true or false.", extra={"errors": {name: ["Must be true or false."]}})
    return raw in _TRUE


class RepositoryListView(ListAPIView):
    serializer_class = s.RepositoryOutput

    def get_queryset(self):
        return selectors.repository_list()

    @extend_schema(summary="List registered repositories (registering one is for staff: admin or command)")
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class RepositoryWorktreesView(APIView):
    @extend_schema(
        request=s.WorktreeCreateInput,
        responses={
            201: s.WorktreeOutput,
            200: OpenApiResponse(s.WorktreeOutput, description="It existed already."),
            409: OpenApiResponse(description="git refused (message says why)."),
        },
        summary="Create the worktree <type>-<name> beside the clone (idempotent)",
    )
    def post(self, request, repository_id: int):
        actor = actor_from_request(request)
        data = validate_input(s.WorktreeCreateInput, request.data)
        repository = selectors.repository_get(repository_id=repository_id)
        worktree, created = services.worktree_create(actor=actor, repository=repository, **data)
        worktree = selectors.worktree_get(worktree_id=worktree.pk)
        return Response(s.WorktreeOutput(worktree).data, status=201 if created else 200)


class WorktreeDetailView(APIView):
    @extend_schema(responses=s.WorktreeDetailOutput, summary="Read a worktree with its git status and holder")
    def get(self, request, worktree_id: int):
        worktree = selectors.worktree_get_for_actor(actor=actor_from_request(request), worktree_id=worktree_id)
        status = monitor.worktree_status(worktree=worktree)
        return Response(s.WorktreeDetailOutput(worktree, context={"status": status}).data)

    @extend_schema(
        parameters=[OpenApiParameter("force", bool, description="Remove even with uncommitted changes.")],
        responses={200: s.WorktreeOutput, 409: OpenApiResponse(description="Uncommitted changes, or git refused.")},
        summary="Remove the worktree (git worktree remove), ending its claim and queue",
    )
    def delete(self, request, worktree_id: int):
        actor = actor_from_request(request)
        force = _flag(request, "force")
        worktree = selectors.worktree_get(worktree_id=worktree_id)
        worktree, _ = services.worktree_remove(actor=actor, worktree=worktree, force=force)
        return Response(s.WorktreeOutput(selectors.worktree_get(worktree_id=worktree.pk)).data)


class WorktreeClaimView(APIView):
    @extend_schema(
        request=s.WorktreeClaimInput,
        responses={
            200: s.WorktreeClaimOutput,
            202: OpenApiResponse(s.WorktreeClaimOutput, description="Queued: wait for the grant."),
            409: OpenApiResponse(description="Held by another agent (named, with its lease expiry)."),
        },
        summary="Claim the worktree on a lease (the holder claiming again renews it)",
    )
    def post(self, request, worktree_id: int):
        actor = actor_from_request(request)
        if actor.agent is None:
            raise DomainError("Only agents claim worktrees.", code="forbidden")
        data = validate_input(s.WorktreeClaimInput, request.data)
        # The service looks the worktree up (404) and returns it as the claim left it.
        result = claims.worktree_claim(actor=actor, agent=actor.agent, worktree=worktree_id, wait=data["wait"])
        body = {
            "outcome": result.outcome,
            "position": result.position,
            "worktree": s.worktree_render(result.worktree),
        }
        return Response(body, status=202 if result.outcome == "queued" else 200)


class WorktreeReleaseView(APIView):
    @extend_schema(
        request=None,
        responses={
            200: s.WorktreeOutput,
            409: lease_lost_response("Not claimed, or your lease was lost (code lease_lost: claim it again)."),
        },
        summary="Release the worktree (the next agent in its queue gets it)",
    )
    def post(self, request, worktree_id: int):
        actor = actor_from_request(request)
        validate_input(StrictSerializer, request.data)
        worktree = claims.worktree_release(actor=actor, worktree=worktree_id)
        return Response(s.worktree_render(worktree))


class WorktreeConfigSyncView(APIView):
    @extend_schema(
        request=s.WorktreeConfigSyncInput,
        responses=s.WorktreeConfigSyncOutput,
        summary="Check (and repair) the links from the worktree to the repository's sync folder",
    )
    def post(self, request, worktree_id: int):
        actor = actor_from_request(request)
        data = validate_input(s.WorktreeConfigSyncInput, request.data)
        worktree = selectors.worktree_get(worktree_id=worktree_id)
        report = services.worktree_config_sync_for_actor(actor=actor, worktree=worktree, repair=data["repair"])
        return Response(s.WorktreeConfigSyncOutput(report).data)
