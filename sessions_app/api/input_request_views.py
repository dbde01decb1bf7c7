"""Reading the answer to a question an agent waits on (sessions_app/permission_requests.py)."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api.views import actor_from_request
from sessions_app import selectors
from sessions_app.api.views import int_param
from sessions_app.permission_requests import WAIT_MAX_SECONDS, input_request_get, input_request_wait


class InputRequestOutput(serializers.Serializer):
    id = serializers.CharField(help_text="The client id the agent gave the question's event.")
    seq = serializers.IntegerField(help_text="The question's seq in the session's stream.")
    question = serializers.JSONField(help_text="The question's payload, as stored (redacted).")
    answered = serializers.BooleanField()
    decision = serializers.CharField(
        allow_null=True,
        help_text="allow or deny for a permission; accept, decline or cancel for an MCP elicitation; else null.",
    )
    content = serializers.JSONField(allow_null=True, help_text="An accepted elicitation's values, typed; else null.")
    suggestion = serializers.IntegerField(
        allow_null=True,
        help_text="With an allow: the index in the question's permission_suggestions the person chose to apply "
        '("Always allow ..."), which the hook returns to Claude Code as updatedPermissions; else null.',
    )
    answer = serializers.CharField(allow_null=True, help_text="The person's text (a decision's message), or null.")
    answered_by = serializers.CharField(allow_null=True)
    answer_seq = serializers.IntegerField(allow_null=True)


class InputRequestView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "wait",
                {"type": "integer", "minimum": 0, "maximum": WAIT_MAX_SECONDS},
                description=f"Hold the request up to this many seconds (0-{WAIT_MAX_SECONDS}, default 0) "
                "until a person answers; it answers at once when they do.",
            ),
        ],
        responses=InputRequestOutput,
        summary="The answer to a question the session asked: a long poll for the agent waiting on it",
    )
    def get(self, request, session_id: str, request_id: str):
        session = selectors.session_get_for_actor(actor=actor_from_request(request), session_id=session_id)
        wait = int_param(request, "wait", default=0, minimum=0, maximum=WAIT_MAX_SECONDS)
        question = input_request_get(session=session, request_id=request_id)
        state = input_request_wait(question=question, wait=wait)
        answer = state.answer.payload if state.answer is not None else {}
        body = {
            "id": question.client_id,
            "seq": question.seq,
            "question": question.payload,
            "answered": state.answer is not None,
            "decision": answer.get("decision"),
            "content": answer.get("content"),
            "suggestion": answer.get("suggestion"),
            "answer": answer.get("answer") if state.answer is not None else None,
            "answered_by": answer.get("answered_by"),
            "answer_seq": state.answer.seq if state.answer is not None else None,
        }
        return Response(InputRequestOutput(body).data)
