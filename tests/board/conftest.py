import pytest

from board import services
from board.models import Task
from config.actors import Actor
from tests.factories import TaskFactory


@pytest.fixture
def ready_task(db):
    return TaskFactory(title="Write the release notes", status=Task.Status.READY, priority=Task.Priority.P1)


@pytest.fixture
def held_task(agent):
    """A task claimed by ``agent`` (the owner of ``agent_client``) through the service."""
    task = TaskFactory(title="Fix the flaky test", status=Task.Status.READY)
    task, _ = services.task_claim(actor=Actor(agent=agent), agent=agent, task=task)
    return task
