"""What the database itself holds, whatever the services do."""

import pytest
from django.db import IntegrityError, transaction

from runners.models import Run, Runner
from tests.factories import AgentFactory, TaskFactory

pytestmark = pytest.mark.django_db


def _refused(**fields) -> str:
    with pytest.raises(IntegrityError) as refused, transaction.atomic():
        Run.objects.create(**fields)
    return str(refused.value)


@pytest.mark.parametrize("active", ["queued", "assigned", "starting", "running"])
def test_a_task_has_at_most_one_active_run(runner, active):
    task = TaskFactory()
    Run.objects.create(task=task, provider="claude", status=active, runner=runner)

    _refused(task=task, provider="codex")

    assert Run.objects.filter(task=task).count() == 1


def test_ended_runs_do_not_count_as_active(runner):
    task = TaskFactory()
    for end in ("succeeded", "failed", "cancelled", "lost"):
        Run.objects.create(task=task, provider="claude", status=end, runner=runner)

    Run.objects.create(task=task, provider="claude")

    assert Run.objects.filter(task=task).count() == 5


@pytest.mark.parametrize("status", ["assigned", "starting", "running"])
def test_a_handed_out_run_names_its_runner(status):
    _refused(task=TaskFactory(), provider="claude", status=status)

    assert Run.objects.count() == 0


@pytest.mark.parametrize(
    "fields",
    [
        {"status": "paused"},
        {"attempt": 0},
        {"status": "running", "ended_at": "2026-01-01T00:00:00Z"},
    ],
    ids=["unknown status", "attempt 0", "ended while running"],
)
def test_bad_rows_are_refused(runner, fields):
    _refused(task=TaskFactory(), provider="claude", runner=runner, **fields)

    assert Run.objects.count() == 0


@pytest.mark.parametrize("fields", [{"capacity": 0}, {"status": "busy"}], ids=["capacity 0", "unknown status"])
def test_bad_runners_are_refused(fields):
    with pytest.raises(IntegrityError), transaction.atomic():
        Runner.objects.create(name="bad", agent=AgentFactory(), **fields)

    assert Runner.objects.count() == 0


def test_the_queue_index_is_partial_on_queued():
    index = next(i for i in Run._meta.indexes if i.name == "run_queue")

    assert (index.fields, str(index.condition)) == (["created_at", "id"], "(AND: ('status', 'queued'))")
