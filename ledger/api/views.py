from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api.errors import DomainError
from config.api.schema import one_or_batch, one_or_batch_output
from config.api.views import actor_from_request, incoming_items, validate_input, write_response
from ledger import selectors, services
from ledger.api.serializers import ToolCallFinishInput, ToolCallInput, ToolCallOutput, ToolCallStartedOutput
from ledger.models import ToolInvocation
from ledger.tool_use_gates import tool_use_verdicts
from sessions_app.api.views import BATCH_DOC, BatchOutput
from sessions_app.selectors import session_get_for_actor, session_get_for_reader
from sessions_app.tool_policy import tool_use_verdict


def tool_call_policy(*, actor, session, items, results) -> dict | None:
    """The tool policy's verdict (sessions_app/tool_policy.py) on the one call a request starts."""
    stored = results[0].obj if len(results) == 1 and results[0].status < 400 else None
    if stored is None or stored.status != ToolInvocation.Status.RUNNING or not items:
        return None
    verdict = tool_use_verdict(
        actor=actor,
        session=session,
        call_id=stored.pk,
        tool_name=stored.tool_name,
        tool_input=items[0].data.get("input"),
        input_shown=stored.input_summary,
        cwd=items[0].data.get("cwd") or "",
    )
    return verdict.as_dict() if verdict else None


def tool_call_gates(*, session, results) -> dict:
    """The gates' verdicts (ledger/tool_use_gates.py) on the one call a request starts, by gate name."""
    stored = results[0].obj if len(results) == 1 and results[0].status < 400 else None
    if stored is None or stored.status != ToolInvocation.Status.RUNNING:
        return {}
    return tool_use_verdicts(session=session, tool_name=stored.tool_name)


class SessionToolCallsView(ListAPIView):
    serializer_class = ToolCallOutput

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no session
            return ToolInvocation.objects.none()
        session = session_get_for_reader(actor=actor_from_request(self.request), session_id=self.kwargs["session_id"])
        queryset = ToolInvocation.objects.filter(session=session).select_related("session", "agent")
        status = self.request.query_params.get("status")
        if status:
            if status not in ToolInvocation.Status.values:
                raise DomainError(f"status must be one of {', '.join(ToolInvocation.Status.values)}.")
            queryset = queryset.filter(status=status)
        return queryset.order_by("started_at", "id")

    @extend_schema(
        parameters=[OpenApiParameter("status", str, enum=ToolInvocation.Status.values)],
        summary="The session's tool calls",
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request=one_or_batch(ToolCallInput, "ToolCallWrite"),
        responses={
            201: one_or_batch_output(ToolCallStartedOutput, BatchOutput, "ToolCallWritten"),
            200: one_or_batch_output(ToolCallStartedOutput, BatchOutput, "ToolCallWritten"),
            207: BatchOutput,
        },
        summary="Record one tool call or a batch",
        description=BATCH_DOC
        + "\n\nOne running call recorded (a tool use about to start) is answered with `policy` beside the call "
        'when the tool policy marks it (`{"decision": "ask"|"deny", "pattern", "reason", "request_id"}`), '
        "else with `budget` when an exceeded budget stops it (SPEC §9): "
        '`{"exceeded": true, "request_id", "question", "reason", "budget", "scope", ...}`; never both. The '
        "session then waits for input (ask; an exceeded budget); the client waits for the answer to the input "
        "request `request_id` (Allow: go on; Deny or none in time: don't use the tool).",
    )
    def post(self, request, session_id: str):
        actor = actor_from_request(request)
        session = session_get_for_actor(actor=actor, session_id=session_id)
        valid, invalid, is_batch = incoming_items(request.data, ToolCallInput, max_items=settings.API_MAX_BATCH_ITEMS)
        results = invalid + (services.tool_calls_record(session=session, items=valid) if valid else [])
        # One call starting (a hook's PreToolUse): its answer carries the tool policy's verdict, if any.
        policy = tool_call_policy(actor=actor, session=session, items=valid, results=results) if not is_batch else None
        # ... and the verdicts of the gates of apps above the ledger (usage's budgets: ledger/tool_use_gates.py).
        gates = tool_call_gates(session=session, results=results) if not is_batch and not policy else {}
        # One serializer for every item, as a list serializer keeps one child: a ModelSerializer builds
        # its fields anew for each instance (1-2 ms of CPU), 50 times what rendering a row costs.
        output = ToolCallOutput()
        return write_response(
            results=results,
            is_batch=is_batch,
            render=lambda obj: {**output.to_representation(obj), **({"policy": policy} if policy else {}), **gates},
        )


class ToolCallDetailView(APIView):
    @extend_schema(responses=ToolCallOutput, summary="Read a tool call")
    def get(self, request, tool_call_id: int):
        call = selectors.tool_call_get_for_actor(actor=actor_from_request(request), tool_call_id=tool_call_id)
        return Response(ToolCallOutput(call).data)

    @extend_schema(request=ToolCallFinishInput, responses=ToolCallOutput, summary="Finish a running tool call (once)")
    def patch(self, request, tool_call_id: int):
        call = selectors.tool_call_get_for_actor(actor=actor_from_request(request), tool_call_id=tool_call_id)
        data = validate_input(ToolCallFinishInput, request.data)
        call, _ = services.tool_call_finish(tool_call=call, data=data)
        return Response(ToolCallOutput(call).data)


class SessionToolCallByClientIdView(APIView):
    """A call addressed by the client id it was recorded with, so a client that only knows its own
    id (a hook process that never saw the server's answer, a replayed spool) can finish it."""

    @extend_schema(responses=ToolCallOutput, summary="Read a tool call by its client id")
    def get(self, request, session_id: str, client_id: str):
        session = session_get_for_actor(actor=actor_from_request(request), session_id=session_id)
        return Response(ToolCallOutput(selectors.tool_call_get_by_client_id(session=session, client_id=client_id)).data)

    @extend_schema(
        request=ToolCallFinishInput, responses=ToolCallOutput, summary="Finish a running tool call by its client id"
    )
    def patch(self, request, session_id: str, client_id: str):
        session = session_get_for_actor(actor=actor_from_request(request), session_id=session_id)
        data = validate_input(ToolCallFinishInput, request.data)
        call = selectors.tool_call_get_by_client_id(session=session, client_id=client_id)
        call, _ = services.tool_call_finish(tool_call=call, data=data)
        return Response(ToolCallOutput(call).data)
