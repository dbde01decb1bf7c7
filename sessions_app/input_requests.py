"""A person answers a session that waits for input.

How the agent asks: it posts an ``input_request`` event (``{"question": "..."}``) and moves
its session to ``waiting_for_input``. How it reads the answer: it polls
``GET /api/v1/sessions/{id}/events/?after_seq=<seq of its question>`` for an ``input_request``
event whose payload has ``answer``; ``in_reply_to`` is the seq of the question answered and
``answered_by`` the person. The session is back in ``running`` when the answer is stored.
"""

from django.db import transaction

from config.actors import Actor
from config.api.errors import DomainError
from config.redaction import redact_text
from sessions_app.elicitations import ELICITATION_CHOICES, elicitation_content, is_elicitation_question
from sessions_app.live import session_push
from sessions_app.models import AgentSession, StreamEvent
from sessions_app.permission_requests import PERMISSION_CHOICES, answers_wake, is_permission_question
from sessions_app.selectors import session_question
from sessions_app.services import append_system_event, session_transition

ANSWER_MAX_CHARS = 20_000


class QuestionChanged(DomainError):
    """The question open now is not the one the person answered (409): show the new one."""

    def __init__(self):
        super().__init__(
            "The agent asked another question meanwhile: read it, then send your answer again.", code="conflict"
        )


Status = AgentSession.Status


@transaction.atomic
def session_answer_input(
    *,
    actor: Actor,
    session: AgentSession,
    answer: str,
    decision: str = "",
    form: dict[str, str] | None = None,
    question_seq: str | None = None,
    suggestion: str | None = None,
) -> StreamEvent:
    """Store a person's answer as an ``input_request`` event and move the session back to running.

    A permission question (permission_requests.py) is answered with ``decision`` "allow" or "deny",
    ``answer`` being an optional message, and ``suggestion`` the index of one of the request's
    ``permission_suggestions`` to apply with an Allow (a button "Always allow ..."; the decision is
    then allow); an MCP elicitation (elicitations.py) with "accept" (and the
    ``form``'s ``field:*`` values), "decline" or "cancel"; any other question with text.
    Locks the session row, so two people answering at once store one answer: the second finds
    the session running and gets a 409.

    ``question_seq``: the seq of the question the person was shown ("" for none), as the answer forms
    send it. A different open question (the agent asked again meanwhile: an Allow for ``ls -la`` must
    not allow the ``curl ... | sh`` asked since) is a 409, checked under the lock.
    None: not checked (the system's own answers, budget_waiting_release's).
    """
    answer = (answer or "").strip()
    if suggestion not in (None, "") and not decision:
        decision = "allow"  # an "Always allow ..." button sends the suggestion alone
    if not answer and not decision:
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
    if question_seq is not None and question_seq != (str(question.seq) if question is not None else ""):
        raise QuestionChanged
    payload = {
        "answer": answer,
        "in_reply_to": question.seq if question else None,
        "answered_by": actor.user.get_username() if actor.user is not None else actor.label,
    }
    payload.update(_decision(question, decision, form or {}))
    if suggestion not in (None, ""):
        payload["suggestion"] = _suggestion(question, payload.get("decision", ""), suggestion)
    event = append_system_event(session=session, type=StreamEvent.Type.INPUT_REQUEST, payload=payload)
    session_push(session_id=session.pk, seqs=(event.seq, event.seq))
    verb = {"allow": "allowed", "deny": "denied", "accept": "accepted", "decline": "declined", "cancel": "cancelled"}
    verb = verb.get(payload.get("decision", ""), "answered")
    if "suggestion" in payload:
        verb = "always allowed"
    session_transition(actor=actor, session=session, status=Status.RUNNING, reason=f"{verb} by {actor.label}")
    # The agent's long poll (permission_requests.py) answers as soon as this is committed.
    transaction.on_commit(answers_wake)
    return event


def _decision(question: StreamEvent | None, decision: str, form: dict[str, str]) -> dict:
    """The ``decision`` field of an answer: required for a permission question or an elicitation
    (with its ``content`` when accepted), refused otherwise."""
    if is_elicitation_question(question):
        if decision not in ELICITATION_CHOICES:
            raise DomainError("Choose Accept, Decline or Cancel: an MCP server asks for input.")
        if decision != "accept":
            return {"decision": decision}
        schema = question.payload.get("requested_schema")
        order = question.payload.get("field_order")
        return {"decision": decision, "content": elicitation_content(schema=schema, form=form, order=order)}
    if not is_permission_question(question):
        if decision:
            raise DomainError("This question is answered with text, not with Allow or Deny.")
        return {}
    if decision not in PERMISSION_CHOICES:
        raise DomainError("Choose Allow or Deny: the agent asks for permission.")
    return {"decision": decision, "tool_name": question.payload.get("tool_name")}


def _suggestion(question: StreamEvent | None, decision: str, raw: str) -> int:
    """The index of the permission suggestion applied with an Allow: one the question offers."""
    if not is_permission_question(question):
        raise DomainError("Only a permission request offers suggestions to apply.")
    if decision != "allow":
        raise DomainError("A suggestion is applied with Allow, not with Deny: choose one or the other.")
    offered = question.payload.get("permission_suggestions")
    count = len(offered) if isinstance(offered, list) else 0
    index = int(raw) if isinstance(raw, str) and raw.isascii() and raw.isdigit() and len(raw) < 6 else -1
    if not 0 <= index < count or not isinstance(offered[index], dict):
        offers = f"it offers {count} (0 to {count - 1})" if count else "it offers none"
        raise DomainError(f"Suggestion {str(raw)[:20]!r} is not one this permission request offers: {offers}.")
    return index
