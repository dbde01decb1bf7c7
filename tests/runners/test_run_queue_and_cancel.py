import pytest

from config.actors import SYSTEM, Actor
from config.api.errors import DomainError
from ledger.models import Event
from runners.models import Run
from runners.services import run_cancel, run_queue, run_transition
from sessions_app.keys import api_key_create
from sessions_app.models import AgentApiKey
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db
S = Run.Status


def _state():
    return list(Run.objects.order_by("pk").values()), list(Event.objects.order_by("pk").values("name", "subject_id"))


def test_a_person_queues_a_run_with_the_tasks_title_and_description_as_prompt(person, task):
    run = run_queue(actor=person, task=task, provider="claude")

    stored = Run.objects.get()
    assert stored == run
    assert (stored.task_id, stored.provider, stored.status, stored.attempt, stored.runner_id) == (
        task.pk,
        "claude",
        "queued",
        1,
        None,
    )
    assert stored.prompt == "Fix the login bug\n\nUsers are logged out after 5 minutes."
    assert list(Event.objects.values("name", "subject_type", "subject_id", "actor", "payload")) == [
        {
            "name": "run.queued",
            "subject_type": "run",
            "subject_id": str(run.pk),
            "actor": "user:po",
            "payload": {"task": task.pk, "status": "queued", "provider": "claude", "attempt": 1, "runner": None},
        }
    ]


def test_a_given_prompt_is_kept_as_given(person, task):
    assert run_queue(actor=person, task=task, provider="codex", prompt="Only the tests.").prompt == "Only the tests."


def test_an_orchestrate_key_may_queue(task):
    agent = AgentFactory(slug="conductor")
    key = api_key_create(agent=agent, scopes=[AgentApiKey.Scope.AGENT, AgentApiKey.Scope.ORCHESTRATE]).api_key

    run = run_queue(actor=Actor(agent=agent, api_key=key), task=task, provider="claude")

    assert Run.objects.get().pk == run.pk


@pytest.mark.parametrize("scopes", [[AgentApiKey.Scope.AGENT], [AgentApiKey.Scope.RUN]])
def test_a_plain_agent_or_runner_key_may_not_queue_and_nothing_is_written(task, scopes):
    agent = AgentFactory(slug="claude-1")
    key = api_key_create(agent=agent, scopes=scopes).api_key
    before = _state()

    with pytest.raises(DomainError) as refused:
        run_queue(actor=Actor(agent=agent, api_key=key), task=task, provider="claude")

    assert (refused.value.code, refused.value.status_code) == ("forbidden", 403)
    assert _state() == before


def test_a_second_active_run_for_a_task_is_a_conflict_and_nothing_is_written(person, task):
    first = run_queue(actor=person, task=task, provider="claude")
    before = _state()

    with pytest.raises(DomainError) as refused:
        run_queue(actor=person, task=task, provider="codex")

    assert (refused.value.code, refused.value.status_code) == ("conflict", 409)
    assert refused.value.message == f"Task {task.pk} already has an active run ({first.pk}); cancel it first."
    assert refused.value.extra == {"run": first.pk}
    assert _state() == before


@pytest.mark.parametrize("end", [S.SUCCEEDED, S.FAILED, S.CANCELLED, S.LOST])
def test_a_task_whose_run_ended_may_be_run_again(make_run, person, end):
    ended = make_run(end)

    again = run_queue(actor=person, task=ended.task, provider="claude")

    assert list(Run.objects.filter(task=ended.task).order_by("pk").values_list("status", flat=True)) == [end, "queued"]
    assert again.pk != ended.pk


@pytest.mark.parametrize("provider", ["", "claude code", "x" * 65, "rm;-rf"])
def test_a_bad_provider_name_is_invalid_and_nothing_is_written(person, task, provider):
    before = _state()

    with pytest.raises(DomainError) as refused:
        run_queue(actor=person, task=task, provider=provider)

    assert refused.value.code == "invalid"
    assert _state() == before


def test_cancelling_a_queued_run_ends_it_at_once(make_run, person):
    run = make_run(S.QUEUED)

    cancelled = run_cancel(actor=person, run=run)

    stored = Run.objects.get(pk=run.pk)
    assert cancelled.status == stored.status == "cancelled"
    assert stored.ended_at is not None
    assert stored.cancel_requested_at is None
    assert list(Event.objects.filter(subject_id=str(run.pk)).order_by("pk").values_list("name", "actor")) == [
        ("run.queued", "user:po"),
        ("run.cancelled", "user:po"),
    ]


@pytest.mark.parametrize("status", [S.ASSIGNED, S.STARTING, S.RUNNING])
def test_cancelling_a_handed_out_run_asks_its_runner_to_stop(make_run, person, runner_actor, status):
    # given a run its runner holds
    run = make_run(status)
    events = Event.objects.count()

    # when a person cancels it, twice
    first = run_cancel(actor=person, run=run)
    second = run_cancel(actor=person, run=run)

    # then it keeps its status with the request noted once, and one run.cancel_requested event
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.ended_at) == (status, None)
    assert stored.cancel_requested_at is not None
    assert first.cancel_requested_at == second.cancel_requested_at == stored.cancel_requested_at
    assert list(Event.objects.order_by("pk").values_list("name", flat=True)[events:]) == ["run.cancel_requested"]
    # and when the runner has stopped the agent, it ends the run cancelled
    run_transition(actor=runner_actor, run=run, to=S.CANCELLED, attempt=1)
    assert Run.objects.get(pk=run.pk).status == "cancelled"
    assert Event.objects.filter(name="run.cancelled", subject_id=str(run.pk)).count() == 1


@pytest.mark.parametrize("end", [S.SUCCEEDED, S.FAILED, S.CANCELLED, S.LOST])
def test_cancelling_an_ended_run_is_a_conflict_and_changes_nothing(make_run, person, end):
    run = make_run(end)
    before = _state()

    with pytest.raises(DomainError) as refused:
        run_cancel(actor=person, run=run)

    assert (refused.value.code, refused.value.message) == ("conflict", f"Run {run.pk} has already ended ({end}).")
    assert _state() == before


def test_a_runner_may_not_cancel_by_itself_through_the_persons_action(make_run, runner_actor):
    run = make_run(S.RUNNING)
    before = _state()

    with pytest.raises(DomainError) as refused:
        run_cancel(actor=runner_actor, run=run)

    assert refused.value.code == "forbidden"
    assert _state() == before


def test_the_system_may_cancel(make_run):
    assert run_cancel(actor=SYSTEM, run=make_run(S.QUEUED)).status == "cancelled"
