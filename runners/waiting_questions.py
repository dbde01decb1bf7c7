"""What a waiting run waits for, read from its session (issue 26 §2): the question its hook recorded
before it deferred the tool call (a Claude Code permission, the tool policy's "ask", an exceeded
budget: each an Allow / Deny ``input_request`` event), and the person's answer to it once given.

Reads only: runners/run_lifecycle.py (the runner reports ``waiting``) and runners/run_waiting.py (the
answer) write what these find onto the run.
"""

from sessions_app.models import AgentSession, StreamEvent
from sessions_app.permission_requests import is_permission_question

QUESTION_SHOWN_CHARS = 300
MESSAGE_MAX_CHARS = 2000


def _kind(payload: dict) -> str:
    if payload.get("budget") is not None:
        return "budget"
    if payload.get("policy"):
        return "policy"
    return "permission"


def waiting_question(*, session: AgentSession) -> StreamEvent | None:
    """The session's newest Allow / Deny question, answered or not (a person may answer it before the
    runner has reported the run waiting)."""
    asked = StreamEvent.objects.filter(session=session, type=StreamEvent.Type.INPUT_REQUEST).exclude(
        payload__has_key="answer"
    )
    question = asked.order_by("-seq").first()
    return question if is_permission_question(question) else None


def waiting_for_describe(*, question: StreamEvent, runner: str, tool_use_id: str, tool_name: str) -> dict:
    """The run's ``waiting_for``: what the card says it waits for, and where its session is."""
    payload = question.payload
    return {
        "kind": _kind(payload),
        "question": str(payload.get("question") or "")[:QUESTION_SHOWN_CHARS],
        "question_seq": question.seq,
        "tool_name": str(payload.get("tool_name") or tool_name)[:200],
        "tool_use_id": tool_use_id,
        "runner": runner,
    }


def waiting_answer(*, session: AgentSession, question_seq: int) -> dict | None:
    """The person's Allow / Deny to the question at ``question_seq``, or None while nobody gave one."""
    reply = (
        StreamEvent.objects.filter(
            session=session, type=StreamEvent.Type.INPUT_REQUEST, payload__in_reply_to=question_seq
        )
        .order_by("seq")
        .first()
    )
    if reply is None or reply.payload.get("decision") not in ("allow", "deny"):
        return None
    return {
        "decision": reply.payload["decision"],
        "message": str(reply.payload.get("answer") or "")[:MESSAGE_MAX_CHARS],
        "answered_by": str(reply.payload.get("answered_by") or ""),
    }
