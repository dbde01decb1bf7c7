"""The session's log from a byte offset (SPEC §6): what ``sessions_app/logs.py`` reads, as JSON."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api.views import actor_from_request
from sessions_app import selectors
from sessions_app.api.views import int_param
from sessions_app.logs import DEFAULT_CHUNK, MAX_CHUNK, MAX_OFFSET, session_log_read


class LogChunkOutput(serializers.Serializer):
    offset = serializers.IntegerField(help_text="The byte offset this chunk starts at.")
    next_offset = serializers.IntegerField(help_text="Ask for this offset next; equals offset when nothing new.")
    size = serializers.IntegerField(help_text="The log's size in bytes when read (0 when there is no log yet).")
    data = serializers.CharField(help_text="The bytes read, decoded as UTF-8 (undecodable bytes replaced).")
    exists = serializers.BooleanField(help_text="False until the agent has written its log file.")


class SessionLogView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "offset",
                {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
                description="Byte offset to read from (default 0).",
            ),
            OpenApiParameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": MAX_CHUNK},
                description=f"At most this many bytes (1-{MAX_CHUNK}, default {DEFAULT_CHUNK}).",
            ),
        ],
        responses=LogChunkOutput,
        summary="Read the session's log from a byte offset",
        description=(
            "Reads `LOGS_ROOT/orchestrator-sessions/session-<id>/<agent>.log` from `offset`, at most `limit` "
            "bytes, and answers the offset to ask for next. A log not written yet answers 200 with empty "
            "`data` and `exists: false`. An offset past the end (the log was truncated) answers empty `data` "
            "with `next_offset` at the current end. A chunk never ends inside a UTF-8 character."
        ),
    )
    def get(self, request, session_id: str):
        session = selectors.session_get_for_reader(actor=actor_from_request(request), session_id=session_id)
        offset = int_param(request, "offset", default=0, minimum=0, maximum=MAX_OFFSET)
        limit = int_param(request, "limit", default=DEFAULT_CHUNK, minimum=1, maximum=MAX_CHUNK)
        chunk = session_log_read(session=session, offset=offset, limit=limit)
        return Response(LogChunkOutput(chunk).data)
