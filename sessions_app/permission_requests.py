"""Questions an agent waits on, read back by the agent: permission requests answered Allow / Deny.

`switchyard hook` records a Claude Code ``PermissionRequest`` as an ``input_request`` event (client
id chosen by the hook) with ``tool_name``, ``tool_input`` (redacted like every event payload),
``question`` and ``choices: ["allow", "deny"]``, and moves the session to ``waiting_for_input``. A
person answers on the session page or the card's run box (input_requests.py stores the answer, with
``decision``); the hook long-polls ``GET /api/v1/sessions/{id}/input-requests/{event id}/?wait=N``
and prints the decision for Claude Code.

The long poll looks at the database every POLL_SECONDS, or at once when an answer is stored by a
request served in the same process (the wake below, after commit, as runners/queue_wake.py does for
queued runs). Polls in other processes find it at their next look.
"""

import threading
import time
from dataclasses import dataclass

from config.api.errors import DomainError
from config.process_stop import process_stopping
from sessions_app.elicitations import is_elicitation_question
from sessions_app.models import AgentSession, StreamEvent
from sessions_app.selectors import session_question

POLL_SECONDS = 0.5
WAIT_MAX_SECONDS = 25  # below the usual 30 s of proxies in front of the app
PERMISSION_CHOICES = ("allow", "deny")
QUESTION_SUMMARY_CHARS = 500

_answered = threading.Condition()
_generation = 0


def answers_wake() -> None:
    """Wake the long polls of this process: an answer was committed."""
    global _generation
    with _answered:
        _generation += 1
        _answered.notify_all()


def _answers_wait(seen: int, timeout: float) -> None:
    with _answered:
        _answered.wait_for(lambda: _generation != seen, timeout)


def is_permission_question(question: StreamEvent | None) -> bool:
    """A question answered with a decision (Allow / Deny), not with text."""
    payload = question.payload if question is not None else None
    return isinstance(payload, dict) and list(payload.get("choices") or []) == list(PERMISSION_CHOICES)


@dataclass
class InputRequestState:
    question: StreamEvent
    answer: StreamEvent | None  # the person's answer, None while nobody answered


def input_request_get(*, session: AgentSession, request_id: str) -> StreamEvent:
    """The question the agent recorded under its client id ``request_id`` (404 otherwise). The
    caller has checked that its actor may touch ``session``."""
    question = (
        StreamEvent.objects.filter(session=session, client_id=request_id, type=StreamEvent.Type.INPUT_REQUEST)
        .exclude(payload__has_key="answer")
        .first()
    )
    if question is None:
        raise DomainError(f"No question {request_id!r} in session {session.pk!r}.", code="not_found")
    return question


def input_request_answer(*, question: StreamEvent) -> StreamEvent | None:
    return (
        StreamEvent.objects.filter(
            session_id=question.session_id,
            type=StreamEvent.Type.INPUT_REQUEST,
            seq__gt=question.seq,
            payload__in_reply_to=question.seq,
        )
        .order_by("seq")
        .first()
    )


def input_request_wait(*, question: StreamEvent, wait: float) -> InputRequestState:
    """The question and its answer: at once when answered, else after looking again every
    POLL_SECONDS (or when woken) for up to ``wait`` seconds (capped at WAIT_MAX_SECONDS; less when
    the process is stopping: config/process_stop.py). Runs
    outside any transaction, so each look sees what committed meanwhile."""
    deadline = time.monotonic() + max(0.0, min(wait, WAIT_MAX_SECONDS))
    while True:
        seen = _generation  # read before the look: an answer committed after it wakes the wait
        answer = input_request_answer(question=question)
        left = deadline - time.monotonic()
        if answer is not None or left <= 0 or process_stopping():
            return InputRequestState(question=question, answer=answer)
        _answers_wait(seen, min(POLL_SECONDS, left))


def waiting_question_summary(*, session: AgentSession) -> dict:
    """What a ``session.status_changed`` event to waiting_for_input tells webhooks about the
    question: its text, and for a permission the tool and the request's id."""
    question = session_question(session=session)
    if question is None or not isinstance(question.payload, dict):
        return {}
    payload = question.payload
    summary = {"question": str(payload.get("question") or payload.get("message") or "")[:QUESTION_SUMMARY_CHARS]}
    summary["question_seq"] = question.seq
    if payload.get("tool_name"):
        summary["tool_name"] = str(payload["tool_name"])[:200]
    if is_permission_question(question):
        summary["choices"] = list(PERMISSION_CHOICES)
        summary["request_id"] = question.client_id
    elif is_elicitation_question(question):
        summary["choices"] = list(payload["choices"])
        summary["request_id"] = question.client_id
        if payload.get("mcp_server_name"):
            summary["mcp_server_name"] = str(payload["mcp_server_name"])[:200]
        schema = payload.get("requested_schema")
        properties = schema.get("properties") if isinstance(schema, dict) else None
        summary["fields"] = list(properties)[:50] if isinstance(properties, dict) else []
    return summary
