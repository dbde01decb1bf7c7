"""A session may name the task it works on only when its agent holds that task, or nobody does."""

import pytest

from board.models import Task
from board.services import task_claim
from config.actors import Actor
from ledger.models import Event
from sessions_app.models import AgentSession
from tests.factories import TaskFactory
from workspaces.models import Workspace

pytestmark = pytest.mark.django_db
URL = "/api/v1/sessions/"


def test_a_session_on_a_task_another_agent_holds_is_refused_and_nothing_is_written(agent_client, other_agent):
    # given a task another agent holds
    task, _ = task_claim(actor=Actor(agent=other_agent), agent=other_agent, task=TaskFactory(title="theirs"))
    counts = (AgentSession.objects.count(), Workspace.objects.count(), Event.objects.count())

    # when this agent opens a session naming it
    response = agent_client.post(URL, {"id": "sneaky", "intent": "take over", "task": task.pk}, format="json")

    # then 409, and no session, workspace or event was made; the task is as it was
    assert response.status_code == 409
    assert response.json() == {
        "message": f"Task {task.pk} is held by another agent; a session may name a task its own agent holds "
        "or one nobody holds."
    }
    assert (AgentSession.objects.count(), Workspace.objects.count(), Event.objects.count()) == counts
    task.refresh_from_db()
    assert (task.status, task.assignee_id, task.session_id) == (Task.Status.IN_PROGRESS, other_agent.pk, None)


def test_staff_cannot_attach_an_agents_session_to_a_task_another_holds_either(staff_client, agent, other_agent):
    task, _ = task_claim(actor=Actor(agent=other_agent), agent=other_agent, task=TaskFactory(title="theirs"))

    response = staff_client.post(URL, {"agent": agent.slug, "intent": "x", "task": task.pk}, format="json")

    assert response.status_code == 409
    assert AgentSession.objects.count() == 0


def test_a_session_on_its_own_task_or_an_unheld_one_is_opened(agent_client, agent):
    mine, _ = task_claim(actor=Actor(agent=agent), agent=agent, task=TaskFactory(title="mine"))
    free = TaskFactory(title="free")

    own = agent_client.post(URL, {"id": "on-mine", "intent": "x", "task": mine.pk}, format="json")
    unheld = agent_client.post(URL, {"id": "on-free", "intent": "x", "task": free.pk}, format="json")

    assert (own.status_code, unheld.status_code) == (201, 201)
    assert dict(AgentSession.objects.values_list("id", "task_id")) == {"on-mine": mine.pk, "on-free": free.pk}
