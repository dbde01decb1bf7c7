import pytest

from config.actors import SYSTEM, Actor
from runners.models import Run
from runners.services import run_queue, run_transition, runner_key_create
from tests.factories import TaskFactory, UserFactory


@pytest.fixture
def person(db):
    """A staff person: may queue and cancel runs."""
    return Actor(user=UserFactory(username="po", is_staff=True))


@pytest.fixture
def runner_and_key(db):
    runner, issued, _ = runner_key_create(name="build-1", labels=["linux"], capacity=2)
    return runner, issued


@pytest.fixture
def runner(runner_and_key):
    return runner_and_key[0]


@pytest.fixture
def runner_actor(runner_and_key):
    """The runner as the API will see it: its agent and its key of scope 'run'."""
    runner, issued = runner_and_key
    return Actor(agent=runner.agent, api_key=issued.api_key)


@pytest.fixture
def task(db):
    return TaskFactory(title="Fix the login bug", description="Users are logged out after 5 minutes.")


@pytest.fixture
def make_run(person, runner):
    """A run of a fresh task, driven by the system to ``status`` through the real moves."""
    path = {
        Run.Status.QUEUED: [],
        Run.Status.ASSIGNED: [Run.Status.ASSIGNED],
        Run.Status.STARTING: [Run.Status.ASSIGNED, Run.Status.STARTING],
        Run.Status.RUNNING: [Run.Status.ASSIGNED, Run.Status.STARTING, Run.Status.RUNNING],
        Run.Status.WAITING: [Run.Status.ASSIGNED, Run.Status.STARTING, Run.Status.RUNNING, Run.Status.WAITING],
        Run.Status.SUCCEEDED: [Run.Status.ASSIGNED, Run.Status.STARTING, Run.Status.RUNNING, Run.Status.SUCCEEDED],
        Run.Status.FAILED: [Run.Status.ASSIGNED, Run.Status.FAILED],
        Run.Status.CANCELLED: [Run.Status.CANCELLED],
        Run.Status.LOST: [Run.Status.ASSIGNED, Run.Status.LOST],
    }

    def make(status: str = Run.Status.QUEUED) -> Run:
        run = run_queue(actor=person, task=TaskFactory(), provider="claude")
        for to in path[status]:
            extra = {"runner": runner} if to == Run.Status.ASSIGNED else {}
            run = run_transition(actor=SYSTEM, run=run, to=to, **extra)
        return run

    return make


@pytest.fixture
def runner_client(runner_and_key):
    """build-1 (labels linux, capacity 2), online and offering demo and claude, as a client with its key."""
    from runners.models import Runner
    from tests.runners.runner_clients import client_with_key

    runner, issued = runner_and_key
    Runner.objects.filter(pk=runner.pk).update(providers=["demo", "claude"], status=Runner.Status.ONLINE)
    runner.refresh_from_db()
    client = client_with_key(issued.key)
    client.runner = runner
    return client


@pytest.fixture
def other_runner_client(db):
    """Another runner, build-2, offering the same providers."""
    from runners.models import Runner
    from tests.runners.runner_clients import client_with_key

    runner, issued, _ = runner_key_create(name="build-2", labels=["linux"], capacity=2)
    Runner.objects.filter(pk=runner.pk).update(providers=["demo", "claude"], status=Runner.Status.ONLINE)
    runner.refresh_from_db()
    client = client_with_key(issued.key)
    client.runner = runner
    return client


@pytest.fixture
def queue_run(person):
    """Queue a run of a fresh ready task: ``queue_run(provider="demo", labels=[...])``."""

    def queue(provider: str = "demo", **task_fields) -> Run:
        return run_queue(actor=person, task=TaskFactory(**task_fields), provider=provider)

    return queue
