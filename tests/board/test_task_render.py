"""The claim endpoints' hand-written task output is exactly what TaskOutput gives."""

from datetime import timedelta

import pytest
from django.utils import timezone

from board import services
from board.api.serializers import TaskOutput, task_render
from board.models import Task
from config.actors import Actor
from ledger.models import Event
from tests.factories import CampaignFactory, SessionFactory, TaskFactory

pytestmark = pytest.mark.django_db


def test_a_task_with_every_field_set_renders_as_the_serializer_does(agent):
    # given a task with every field that can be set, finished, with unicode and a campaign
    now = timezone.now()
    task = TaskFactory(
        title="Übersetzen ✓",
        description="**body**",
        priority="P0",
        labels=["a", "b"],
        campaign=CampaignFactory(),
        suggested_agent=agent.slug,
        source_file="tasks.md",
        external_id="ext-1",
        status=Task.Status.FAILED,
        assignee=agent,
        session=SessionFactory(agent=agent),
        started_at=now - timedelta(minutes=3, microseconds=7),
        finished_at=now,
        retries=2,
        error="boom",
    )
    task = Task.objects.get(pk=task.pk)

    # when both render it, then they agree exactly
    assert task_render(task) == TaskOutput(task).data


def test_a_task_with_nothing_optional_renders_as_the_serializer_does(db):
    task = Task.objects.get(pk=TaskFactory().pk)

    assert task_render(task) == TaskOutput(task).data


def test_a_task_claimed_next_renders_as_the_serializer_does_and_records_the_same_event_as_a_claim_by_id(agent):
    # given two ready tasks with long multi-byte titles, one for each way of claiming
    session = SessionFactory(agent=agent)
    first = TaskFactory(title="é" * 300, rank=1)
    second = TaskFactory(title="ß" * 300, rank=2)
    actor = Actor(agent=agent)

    # when the agent claims the next one, and then the other by id
    claimed = services.task_claim_next(actor=actor, agent=agent, session=session)
    by_id, _ = services.task_claim(actor=actor, agent=agent, task=second, session=session)

    # then claim-next's output is the serializer's, and both ledger events have the same shape
    assert claimed.pk == first.pk
    assert task_render(claimed) == TaskOutput(Task.objects.get(pk=first.pk)).data
    assert task_render(claimed) == TaskOutput(claimed).data
    payloads = {event.subject_id: event.payload for event in Event.objects.filter(name="task.claimed")}
    assert payloads == {
        str(first.pk): {"title": "é" * 200, "status": "in_progress", "agent": agent.slug, "session": session.pk},
        str(second.pk): {"title": "ß" * 200, "status": "in_progress", "agent": agent.slug, "session": session.pk},
    }
    assert by_id.assignee_id == agent.pk
