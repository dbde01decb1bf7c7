"""Thin views: parse and validate input, call one service or selector, render output."""

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api.errors import DomainError
from config.api.permissions import ANY_SCOPE
from config.api.schema import one_or_batch, one_or_batch_output
from config.api.views import actor_from_request, incoming_items, validate_input, write_response
from config.idempotency import IncomingItem, canonical_sha256
from sessions_app import selectors, services
from sessions_app.api import serializers as s
from sessions_app.api.fast import stream_event_fast_validate, stream_event_render

BATCH_DOC = (
    "Send one object, or a list of at most 1,000 (a batch). A batch answers 201 when all are stored, "
    "207 with one result per item when some fail (the good ones are stored). A repeated `id` returns "
    "the stored item with 200; the same `id` with another body is a 409."
)


class BatchResultOutput(serializers.Serializer):
    index = serializers.IntegerField()
    status = serializers.IntegerField()
    item = serializers.JSONField(required=False)
    message = serializers.CharField(required=False)
    errors = serializers.JSONField(required=False)


class BatchOutput(serializers.Serializer):
    message = serializers.CharField(required=False, help_text="Only when no item was stored (an error status).")
    results = BatchResultOutput(many=True)
    stored = serializers.IntegerField()
    failed = serializers.IntegerField()


class AgentMeView(APIView):
    allowed_scopes = ANY_SCOPE  # a runner's key may ask who it is, too

    @extend_schema(responses=s.AgentOutput, summary="Who am I (the agent behind the key)")
    def get(self, request):
        actor = actor_from_request(request)
        if actor.agent is None:
            raise DomainError("This endpoint is for agent keys.", code="forbidden")
        actor.agent.refresh_from_db()  # the key lookup may be up to 2 s old (sessions_app/keys.py)
        return Response(s.AgentOutput(actor.agent).data)


class AgentHeartbeatView(APIView):
    @extend_schema(request=None, responses=s.AgentOutput, summary="I'm alive")
    def post(self, request):
        actor = actor_from_request(request)
        if actor.agent is None:
            raise DomainError("This endpoint is for agent keys.", code="forbidden")
        return Response(s.AgentOutput(services.agent_heartbeat(agent=actor.agent)).data)


class SessionDetailView(APIView):
    @extend_schema(responses=s.SessionOutput, summary="Read a session")
    def get(self, request, session_id: str):
        session = selectors.session_get_for_reader(actor=actor_from_request(request), session_id=session_id)
        return Response(s.SessionOutput(session).data)


class SessionTransitionView(APIView):
    @extend_schema(
        request=s.TransitionInput,
        responses={200: s.TransitionOutput, 409: OpenApiResponse(description="Illegal move; lists the allowed ones.")},
        summary="Move a session along its status machine",
    )
    def post(self, request, session_id: str):
        actor = actor_from_request(request)
        data = validate_input(s.TransitionInput, request.data)
        session = selectors.session_get_for_actor(actor=actor, session_id=session_id)
        session, changed = services.session_transition(
            actor=actor, session=session, status=data["status"], reason=data["reason"]
        )
        return Response({"session": s.SessionOutput(session).data, "changed": changed})


class SessionHeartbeatView(APIView):
    @extend_schema(request=None, responses=s.SessionOutput, summary="The session (and its agent) is alive")
    def post(self, request, session_id: str):
        session = selectors.session_get_for_actor(actor=actor_from_request(request), session_id=session_id)
        return Response(s.SessionOutput(services.session_heartbeat(session=session)).data)


class SessionEventsView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "after_seq",
                {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
                description="Return events with seq greater than this (default 0).",
            ),
            OpenApiParameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": 1000},
                description="At most this many (1-1000, default 100).",
            ),
        ],
        responses=s.EventPageOutput,
        summary="Read events in order, from a cursor",
    )
    def get(self, request, session_id: str):
        session = selectors.session_get_for_reader(actor=actor_from_request(request), session_id=session_id)
        after_seq = int_param(request, "after_seq", default=0, minimum=0)
        limit = int_param(request, "limit", default=100, minimum=1, maximum=1000)
        rows, has_more = selectors.stream_events_after(session=session, after_seq=after_seq, limit=limit)
        next_after = rows[-1].seq if rows else after_seq
        return Response(
            {"results": s.StreamEventOutput(rows, many=True).data, "next_after_seq": next_after, "has_more": has_more}
        )

    @extend_schema(
        request=one_or_batch(s.StreamEventInput, "StreamEventWrite"),
        responses={
            201: one_or_batch_output(s.StreamEventOutput, BatchOutput, "StreamEventWritten"),
            200: one_or_batch_output(s.StreamEventOutput, BatchOutput, "StreamEventWritten"),
            207: BatchOutput,
        },
        summary="Append one event or a batch",
        description=BATCH_DOC,
    )
    def post(self, request, session_id: str):
        actor = actor_from_request(request)
        plain = plain_event_items(request.data)
        if plain is not None:
            results = services.stream_events_append(actor=actor, session_id=session_id, items=plain)
            return write_response(results=results, is_batch=isinstance(request.data, list), render=stream_event_render)
        # Anything else: the session is checked (404, 403) before the items (400).
        session = selectors.session_get_for_append(actor=actor, session_id=session_id)
        valid, invalid, is_batch = incoming_items(
            request.data,
            s.StreamEventInput,
            max_items=settings.API_MAX_BATCH_ITEMS,
            fast_path=stream_event_fast_validate,
        )
        results = invalid + (
            services.stream_events_append(actor=actor, session_id=session_id, items=valid, session=session)
            if valid
            else []
        )
        return write_response(results=results, is_batch=is_batch, render=stream_event_render)


class SessionCheckpointsView(APIView):
    @extend_schema(
        request=s.CheckpointInput,
        responses={
            201: s.CheckpointOutput,
            200: s.CheckpointOutput,
            413: OpenApiResponse(description="State too large."),
        },
        summary="Save a checkpoint",
    )
    def post(self, request, session_id: str):
        session = selectors.session_get_for_actor(actor=actor_from_request(request), session_id=session_id)
        if isinstance(request.data, list):
            raise DomainError("Send one checkpoint object, not a list.")
        valid, _, _ = incoming_items(request.data, s.CheckpointInput, max_items=1)
        result = services.checkpoint_save(session=session, item=valid[0])
        return write_response(results=[result], is_batch=False, render=lambda obj: s.CheckpointOutput(obj).data)

    @extend_schema(responses=s.CheckpointOutput, summary="The latest checkpoint (404 when none)")
    def get(self, request, session_id: str):
        session = selectors.session_get_for_actor(actor=actor_from_request(request), session_id=session_id)
        checkpoint = session.checkpoints.order_by("-seq").first()
        if checkpoint is None:
            raise DomainError("This session has no checkpoint yet.", code="not_found")
        return Response(s.CheckpointOutput(checkpoint).data)


class SessionMilestonesView(APIView):
    @extend_schema(
        request=s.MilestoneInput,
        responses={201: s.MilestoneOutput, 200: s.MilestoneOutput},
        summary="Record a milestone",
    )
    def post(self, request, session_id: str):
        actor = actor_from_request(request)
        session = selectors.session_get_for_actor(actor=actor, session_id=session_id)
        if isinstance(request.data, list):
            raise DomainError("Send one milestone object, not a list.")
        valid, _, _ = incoming_items(request.data, s.MilestoneInput, max_items=1)
        result = services.milestone_record(actor=actor, session=session, item=valid[0])
        return write_response(results=[result], is_batch=False, render=lambda obj: s.MilestoneOutput(obj).data)

    @extend_schema(responses=s.MilestoneOutput(many=True), summary="The session's milestones, oldest first")
    def get(self, request, session_id: str):
        session = selectors.session_get_for_actor(actor=actor_from_request(request), session_id=session_id)
        return Response(s.MilestoneOutput(session.milestones.order_by("created_at", "id"), many=True).data)


def plain_event_items(data) -> list[IncomingItem] | None:
    """The items of a body that is plainly valid all through (stream_event_fast_validate): one
    event without a client id, or a batch of at most API_MAX_BATCH_ITEMS. None for anything else
    (an id on a single event, bad items, 207): the session is checked first, then the serializer."""
    if isinstance(data, dict):
        plain = stream_event_fast_validate(data)
        if plain is None or plain.get("id") is not None:
            return None
        return [IncomingItem(index=0, data=plain, body_sha256=canonical_sha256(data), client_id=None)]
    if not isinstance(data, list) or not 0 < len(data) <= settings.API_MAX_BATCH_ITEMS:
        return None
    items = []
    for index, raw in enumerate(data):
        plain = stream_event_fast_validate(raw) if isinstance(raw, dict) else None
        if plain is None:
            return None
        items.append(
            IncomingItem(index=index, data=plain, body_sha256=canonical_sha256(raw), client_id=plain.get("id"))
        )
    return items


def int_param(request, name: str, *, default: int, minimum: int, maximum: int = 2**63 - 1) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    # ASCII digits only, as the schema's integer says: int() also takes " 5", "+5" and "٣".
    if not (raw.isascii() and raw.removeprefix("-").isdigit() and len(raw) <= 20):
        raise DomainError(f"{name} must be an integer; got {raw[:40]!r}.")
    value = int(raw)
    if not minimum <= value <= maximum:
        raise DomainError(f"{name} must be between {minimum} and {maximum}.")
    return value
