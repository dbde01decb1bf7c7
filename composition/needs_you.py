""" "Needs you": the sessions waiting for a person (a permission request, a question), counted at
the top of every page, with a link to the one waiting longest.

Who sees what, as on the pages they answer from: engineers answer any session on its page, so they
see every waiting session; product owners answer from a card's run box (runners/page_selectors.py),
so they see the waiting sessions a card shows: a task's own session, or a run's. Anybody else sees
none. The link goes to the card when there is one (the task's page: its panel as a page, readable
on a phone without crossing the board's columns), else to the session's page.

Two queries (the count, the oldest), whatever the number of sessions; on the partial index of open
sessions by status (``session_open``).
"""

from dataclasses import dataclass

from django.db.models import BigIntegerField, Exists, F, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.urls import reverse

from board.models import Task
from config.pages import BOARD, ENGINEERING, user_may
from runners.models import Run
from sessions_app.models import AgentSession, StreamEvent


@dataclass(frozen=True)
class NeedsYou:
    count: int
    oldest_url: str = ""  # "" when nothing waits
    oldest_label: str = ""  # what waits longest, for the link's title


def _card_of_session() -> Coalesce:
    """The task whose card shows the session: the task naming it as its session, else its run's task."""
    own = Task.objects.filter(session_id=OuterRef("pk")).order_by("pk").values("pk")[:1]
    run = Run.objects.filter(session_id=OuterRef("pk")).order_by("-created_at", "-pk").values("task_id")[:1]
    return Coalesce(Subquery(own), Subquery(run), output_field=BigIntegerField())


def _waiting_since() -> Coalesce:
    """When the session began to wait: its newest input_request (the question it waits on), else
    its last change."""
    asked = StreamEvent.objects.filter(session_id=OuterRef("pk"), type=StreamEvent.Type.INPUT_REQUEST)
    return Coalesce(Subquery(asked.order_by("-seq").values("created_at")[:1]), F("updated_at"))


def waiting_sessions_for(user) -> QuerySet[AgentSession]:
    """The waiting sessions ``user`` may answer, oldest wait first (none for anybody else)."""
    waiting = AgentSession.objects.filter(status=AgentSession.Status.WAITING_FOR_INPUT, ended_at__isnull=True)
    if user_may(user, ENGINEERING):
        pass
    elif user_may(user, BOARD):
        on_card = Exists(Task.objects.filter(session_id=OuterRef("pk"))) | Exists(
            Run.objects.filter(session_id=OuterRef("pk"))
        )
        waiting = waiting.filter(on_card)
    else:
        return AgentSession.objects.none()
    return waiting.annotate(card=_card_of_session(), waiting_since=_waiting_since()).order_by("waiting_since", "pk")


def needs_you(*, user) -> NeedsYou:
    sessions = waiting_sessions_for(user)
    count = sessions.count()
    if not count:
        return NeedsYou(count=0)
    oldest = sessions.values("pk", "card", "intent").first()
    if oldest is None:  # answered between the two reads
        return NeedsYou(count=0)
    if oldest["card"] is not None:
        # Straight to the card's run box, where the question is answered.
        url = reverse("board:task", args=[oldest["card"]]) + f"#task-run-{oldest['card']}"
    else:
        url = reverse("sessions:detail", args=[oldest["pk"]])
    return NeedsYou(count=count, oldest_url=url, oldest_label=(oldest["intent"] or oldest["pk"])[:200])
