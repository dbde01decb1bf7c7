"""A person answers a session that waits for input.

How the agent asks: it posts an ``input_request`` event (``{"question": "..."}``) and moves
its session to ``waiting_for_input``. How it reads the answer: it polls
``GET /api/v1/sessions/{id}/events/?after_seq=<seq of its question>`` for an ``input_request``
event whose payload has ``answer``; ``in_reply_to`` is the seq of the question answered and
``answered_by`` the person. The session is back in ``running`` when the answer is stored.
"""

from django.db import transaction

from config.api.errors import DomainError
from ledger.redaction import redact_text
from sessions_app.actors import Actor
from sessions_app.live import session_push
from sessions_app.models import AgentSession, StreamEvent
from sessions_app.services import _append_system_event, session_transition

ANSWER_MAX_CHARS = 20_000
Status = AgentSession.Status


def session_question(*, session: AgentSession) -> StreamEvent | None:
    """The newest ``input_request`` event that asks rather than answers, if any."""
    return (
        StreamEvent.objects.filter(session=session, type=StreamEvent.Type.INPUT_REQUEST)
        .exclude(payload__has_key="answer")
        .order_by("-seq")
        .first()
    )


@transaction.atomic
def session_answer_input(*, actor: Actor, session: AgentSession, answer: str) -> StreamEvent:
    """Store a person's answer as an ``input_request`` event and move the session back to running.

    Locks the session row, so two people answering at once store one answer: the second finds
    the session running and gets a 409.
    """
    answer = (answer or "").strip()
    if not answer:
        raise DomainError("Write an answer first: an empty answer is not sent.")
    if len(answer) > ANSWER_MAX_CHARS:
        raise DomainError(f"The answer is {len(answer)} characters; the limit is {ANSWER_MAX_CHARS}.")
    # Stored and shown like any event: a secret pasted into an answer is redacted like an agent's.
    answer = redact_text(answer)
    session = AgentSession.objects.select_for_update().select_related("agent").get(pk=session.pk)
    if session.status != Status.WAITING_FOR_INPUT:
        raise DomainError(
            f"Session {session.pk!r} is {session.get_status_display().lower()}, not waiting for input; "
            "there is no question to answer.",
            code="conflict",
        )
    question = session_question(session=session)
    event = _append_system_event(
        session=session,
        type=StreamEvent.Type.INPUT_REQUEST,
        payload={
            "answer": answer,
            "in_reply_to": question.seq if question else None,
            "answered_by": actor.user.get_username() if actor.user is not None else actor.label,
        },
    )
    session_push(session_id=session.pk, seqs=(event.seq, event.seq))
    session_transition(actor=actor, session=session, status=Status.RUNNING, reason="answered by " + actor.label)
    return event
