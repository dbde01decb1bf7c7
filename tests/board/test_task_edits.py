"""task_edit (board/task_edits.py) and task_create for people of the board: who may, what is
written and recorded, and that a refusal writes nothing."""

import pytest

from board import services, task_edits
from board.models import Task
from config.actors import Actor
from config.api.errors import DomainError
from config.pages import ENGINEERS
from ledger.models import Event
from sessions_app.keys import api_key_create
from sessions_app.models import AgentApiKey
from tests.board.board_helpers import product_owner
from tests.factories import AgentFactory, CampaignFactory, TaskFactory
from tests.page_users import user_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def pushed(monkeypatch):
    ids: list[int] = []
    for module in (services, task_edits):
        monkeypatch.setattr(module, "board_push_tasks", lambda *, task_ids: ids.extend(task_ids))
    return ids


def _unchanged(task: Task, **fields) -> None:
    task.refresh_from_db()
    assert {name: getattr(task, name) for name in fields} == fields
    assert not Event.objects.filter(name="task.updated").exists()


def test_a_product_owner_and_an_engineer_create_tasks(pushed):
    for user in (product_owner(), user_in(ENGINEERS, username="erin")):
        task = services.task_create(actor=Actor(user=user), title=f"By {user.username}")
        assert task.status == Task.Status.READY
    assert sorted(Task.objects.values_list("title", flat=True)) == ["By erin", "By po"]
    assert len(pushed) == 2


def test_a_person_in_no_board_group_and_a_plain_agent_key_may_not_create_tasks(agent):
    key = api_key_create(agent=agent).api_key
    for actor in (Actor(user=user_in(username="nobody")), Actor(agent=agent, api_key=key)):
        with pytest.raises(DomainError) as refused:
            services.task_create(actor=actor, title="No")
        assert refused.value.code == "forbidden"
        assert refused.value.message == "Creating tasks needs staff or an agent key with the 'orchestrate' scope."
    assert Task.objects.count() == 0


def test_task_edit_writes_the_changed_fields_records_them_and_pushes(pushed):
    campaign = CampaignFactory()
    task = TaskFactory(title="Old", priority="P2", labels=["a"])

    task, changed = task_edits.task_edit(
        actor=Actor(user=product_owner()),
        task=task,
        changes={"title": "New", "priority": "P2", "labels": ["a", "b"], "campaign": campaign},
    )

    assert changed == ["title", "labels", "campaign"]
    task.refresh_from_db()
    assert (task.title, task.priority, task.labels, task.campaign_id) == ("New", "P2", ["a", "b"], campaign.pk)
    event = Event.objects.get(name="task.updated", subject_id=str(task.pk))
    assert event.payload == {"title": "New", "status": "ready", "fields": ["title", "labels", "campaign"]}
    assert pushed == [task.pk]


def test_task_edit_with_nothing_different_writes_nothing(pushed):
    task = TaskFactory(title="Same", campaign=None)

    _, changed = task_edits.task_edit(
        actor=Actor(user=product_owner()), task=task, changes={"title": "Same", "campaign": None}
    )

    assert changed == [] and pushed == []
    _unchanged(task, title="Same")


def test_task_edit_refuses_fields_it_does_not_edit(pushed):
    task = TaskFactory(title="Kept", status=Task.Status.READY)

    with pytest.raises(DomainError, match="These fields can't be edited here: assignee, status."):
        task_edits.task_edit(
            actor=Actor(user=product_owner()), task=task, changes={"title": "X", "status": "done", "assignee": None}
        )

    _unchanged(task, title="Kept", status=Task.Status.READY)
    assert pushed == []


def test_task_edit_refuses_people_outside_the_board_agents_and_other_runs_keys(agent, pushed):
    task = TaskFactory(title="Kept")
    plain = api_key_create(agent=agent).api_key
    orchestrator = AgentFactory(slug="orch")
    orchestrate = api_key_create(
        agent=orchestrator, scopes=[AgentApiKey.Scope.AGENT, AgentApiKey.Scope.ORCHESTRATE]
    ).api_key
    for actor in (Actor(user=user_in(username="nobody")), Actor(agent=agent, api_key=plain)):
        with pytest.raises(DomainError) as refused:
            task_edits.task_edit(actor=actor, task=task, changes={"title": "Taken"})
        assert refused.value.code == "forbidden"
    _unchanged(task, title="Kept")
    # An orchestrating key may (as it may create tasks by API).
    task_edits.task_edit(actor=Actor(agent=orchestrator, api_key=orchestrate), task=task, changes={"title": "By orch"})
    task.refresh_from_db()
    assert task.title == "By orch"
