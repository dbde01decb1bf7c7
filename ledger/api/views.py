from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api.errors import DomainError
from config.api.schema import one_or_batch, one_or_batch_output
from config.api.views import actor_from_request, incoming_items, validate_input, write_response
from ledger import selectors, services
from ledger.api.serializers import ToolCallFinishInput, ToolCallInput, ToolCallOutput
from ledger.models import ToolInvocation
from sessions_app.api.views import BATCH_DOC, BatchOutput
from sessions_app.selectors import session_get_for_actor


class SessionToolCallsView(ListAPIView):
    serializer_class = ToolCallOutput

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no session
            return ToolInvocation.objects.none()
        session = session_get_for_actor(actor=actor_from_request(self.request), session_id=self.kwargs["session_id"])
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
            201: one_or_batch_output(ToolCallOutput, BatchOutput, "ToolCallWritten"),
            200: one_or_batch_output(ToolCallOutput, BatchOutput, "ToolCallWritten"),
            207: BatchOutput,
        },
        summary="Record one tool call or a batch",
        description=BATCH_DOC,
    )
    def post(self, request, session_id: str):
        session = session_get_for_actor(actor=actor_from_request(request), session_id=session_id)
        valid, invalid, is_batch = incoming_items(request.data, ToolCallInput, max_items=settings.API_MAX_BATCH_ITEMS)
        results = invalid + (services.tool_calls_record(session=session, items=valid) if valid else [])
        return write_response(results=results, is_batch=is_batch, render=lambda obj: ToolCallOutput(obj).data)


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
