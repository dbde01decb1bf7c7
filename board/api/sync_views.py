"""Sync-to-db over the API: start a run, read open issues, read the drift report."""

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.generics import ListAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from board.api import sync_serializers as s
from board.services import require_orchestrator
from board.sync import selectors, state_sync, state_sync_queue
from config.api.errors import DomainError
from config.api.views import actor_from_request, validate_input

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no", ""}


def _flag(request, name: str) -> bool:
    raw = request.query_params.get(name, "").lower()
    if raw not in _TRUE | _FALSE:
        raise DomainError(f"{name} must be true or false.", extra={"errors": {name: ["Must be true or false."]}})
    return raw in _TRUE


def _session_param(request) -> str | None:
    raw = request.query_params.get("session")
    if not raw:
        return None
    field = s.SessionKeyField()
    try:
        return field.run_validation(raw)
    except ValidationError:
        raise DomainError("session must be a session folder name, e.g. session-1770537842.") from None


SESSION_PARAM = OpenApiParameter(
    "session",
    str,
    description="Only this session folder, e.g. session-1770537842.",
    pattern=s.SESSION_KEY_PATTERN.removesuffix(r"\Z") + "$",
)


class SyncView(APIView):
    @extend_schema(
        request=s.SyncRequestInput,
        parameters=[
            OpenApiParameter(
                "wait",
                bool,
                description="Run now and answer with the report (200) instead of queueing (202). "
                "Only with a session: a full sync always runs in the background.",
            )
        ],
        responses={
            202: s.SyncQueuedOutput,
            200: OpenApiResponse(s.SyncReportOutput, description="wait=true: the run's report."),
        },
        summary="Sync state snapshots into the database (staff or an orchestrating agent)",
    )
    def post(self, request):
        actor = actor_from_request(request)
        require_orchestrator(actor=actor, what="Starting a sync")
        wait = _flag(request, "wait")
        data = validate_input(s.SyncRequestInput, request.data)
        session_key = data["session"]
        if wait:
            if session_key is None:
                raise DomainError("wait=true needs a session; a sync of every session runs in the background.")
            return Response(s.SyncReportOutput(state_sync(session_key=session_key).as_dict()).data)
        task_id = state_sync_queue(session_key=session_key)
        return Response({"task_id": task_id, "session": session_key, "status": "queued"}, status=202)


class SyncIssueListView(ListAPIView):
    serializer_class = s.SyncIssueOutput

    def get_queryset(self):
        return selectors.sync_issue_list(
            resolved=_flag(self.request, "resolved"), session_key=_session_param(self.request)
        )

    @extend_schema(
        parameters=[
            SESSION_PARAM,
            OpenApiParameter("resolved", bool, description="List resolved issues instead of open ones."),
        ],
        summary="Sync issues: files that could not be synced (staff or an orchestrating agent)",
    )
    def get(self, request, *args, **kwargs):
        require_orchestrator(actor=actor_from_request(request), what="Reading sync issues")
        return super().get(request, *args, **kwargs)


class SyncDriftView(APIView):
    @extend_schema(
        parameters=[SESSION_PARAM],
        responses=s.SyncDriftOutput,
        summary="Where state files and database disagree (staff)",
    )
    def get(self, request):
        if not actor_from_request(request).is_staff:
            raise DomainError("The drift report is for staff.", code="forbidden")
        drift = selectors.sync_drift(session_key=_session_param(request))
        return Response(s.SyncDriftOutput(drift.as_dict()).data)
