"""Tasks and campaigns in the admin: made and released through the board services."""

import pytest

from board.models import Campaign, Task, TaskClaim
from board.services import task_claim
from config.actors import Actor
from ledger.models import Event
from tests.admin.factories import admin_url
from tests.factories import AgentFactory, TaskFactory

pytestmark = pytest.mark.django_db


def test_release_claim_returns_in_progress_task_to_ready_and_closes_its_claim(admin_client, agent):
    # given
    claimed = TaskFactory(title="Claimed")
    task_claim(actor=Actor(agent=agent), agent=agent, task=claimed)
    ready = TaskFactory(title="Ready")
    other_agent = AgentFactory()
    not_selected = TaskFactory(title="Not selected")
    task_claim(actor=Actor(agent=other_agent), agent=other_agent, task=not_selected)

    # when
    response = admin_client.post(
        admin_url(Task, "changelist"),
        {"action": "release_claims", "_selected_action": [claimed.pk, ready.pk]},
        follow=True,
    )

    # then
    assert [m.message for m in response.context["messages"]] == ["1 task(s) released; 1 not in progress."]
    claimed.refresh_from_db()
    assert (claimed.status, claimed.assignee_id, claimed.session_id) == (Task.Status.READY, None, None)
    claim = TaskClaim.objects.get(task=claimed)
    assert claim.outcome == TaskClaim.Outcome.RELEASED
    assert claim.released_at is not None
    assert Task.objects.get(pk=ready.pk).status == Task.Status.READY
    assert Task.objects.get(pk=not_selected.pk).status == Task.Status.IN_PROGRESS
    assert TaskClaim.objects.get(task=not_selected).outcome == TaskClaim.Outcome.OPEN
    released = Event.objects.get(name="task.released")
    assert (released.subject_id, released.actor) == (str(claimed.pk), "user:admin")


def test_task_change_form_keeps_the_claim_state(admin_client, agent):
    # given
    task = TaskFactory(title="Old")
    task_claim(actor=Actor(agent=agent), agent=agent, task=task)

    # when
    response = admin_client.post(
        admin_url(Task, "change", task.pk),
        {
            "title": "New",
            "description": "",
            "priority": "P1",
            "rank": "1024",
            "labels": "[]",
            "suggested_agent": "",
            "error": "",
            "status": "done",
            "assignee": "",
            "retries": "7",
            "claims-TOTAL_FORMS": "1",
            "claims-INITIAL_FORMS": "1",
            "claims-MIN_NUM_FORMS": "0",
            "claims-MAX_NUM_FORMS": "1000",
        },
    )

    # then
    assert response.status_code == 302
    task.refresh_from_db()
    assert (task.title, task.priority) == ("New", "P1")
    assert (task.status, task.assignee_id, task.retries) == (Task.Status.IN_PROGRESS, agent.pk, 0)
    assert TaskClaim.objects.get(task=task).outcome == TaskClaim.Outcome.OPEN


def test_adding_a_task_goes_through_task_create(admin_client):
    TaskFactory(status=Task.Status.READY, rank=5000)

    response = admin_client.post(
        admin_url(Task, "add"),
        {"title": "From the admin", "description": "", "status": "ready", "priority": "P1", "labels": '["ops"]'},
    )

    assert response.status_code == 302
    task = Task.objects.get(title="From the admin")
    assert (task.status, task.priority, task.labels, task.rank) == ("ready", "P1", ["ops"], 5000 + 1024)
    created = Event.objects.get(name="task.created")
    assert (created.subject_id, created.actor) == (str(task.pk), "user:admin")


def test_a_new_task_cannot_start_in_progress(admin_client):
    response = admin_client.post(
        admin_url(Task, "add"), {"title": "Sneaky", "status": "in_progress", "priority": "P2", "labels": "[]"}
    )

    assert response.status_code == 200
    assert "status" in response.context["adminform"].form.errors
    assert Task.objects.count() == 0
    assert Event.objects.count() == 0


def test_adding_a_campaign_makes_its_tasks_and_leads(admin_client):
    response = admin_client.post(
        admin_url(Campaign, "add"),
        {
            "name": "Spring launch",
            "type": "marketing-campaign",
            "priority": "P1",
            "deliverables": '["blog post", "email"]',
            "target_audience": "",
            "goal": "",
            "source_file": "",
            "leads-TOTAL_FORMS": "1",
            "leads-INITIAL_FORMS": "0",
            "leads-MIN_NUM_FORMS": "0",
            "leads-MAX_NUM_FORMS": "1000",
            "leads-0-name": "Ada",
            "leads-0-company": "Analytical",
            "leads-0-email": "ada@example.com",
            "leads-0-status": "new",
            "leads-0-score": "9",
        },
    )

    assert response.status_code == 302
    campaign = Campaign.objects.get()
    assert sorted(campaign.tasks.values_list("title", "priority")) == [
        ("Spring launch: blog post", "P1"),
        ("Spring launch: email", "P1"),
    ]
    assert list(campaign.leads.values_list("name", "score")) == [("Ada", 9)]
    assert Event.objects.filter(name="campaign.created", actor="user:admin").count() == 1


def test_a_campaign_that_ends_before_it_starts_is_refused(admin_client):
    response = admin_client.post(
        admin_url(Campaign, "add"),
        {
            "name": "Backwards",
            "type": "t",
            "priority": "P2",
            "deliverables": '["x"]',
            "starts_on": "2026-05-02",
            "ends_on": "2026-05-01",
            "leads-TOTAL_FORMS": "0",
            "leads-INITIAL_FORMS": "0",
        },
    )

    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"ends_on": ["Ends before it starts."]}
    assert Campaign.objects.count() == 0
    assert Task.objects.count() == 0
