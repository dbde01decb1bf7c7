"""The run state machine: every legal move is taken, every illegal one refused with nothing changed."""

import itertools

import pytest

from config.actors import SYSTEM, Actor
from config.api.errors import LEASE_LOST, DomainError
from ledger.models import Event
from runners.models import Run
from runners.services import RUN_TRANSITIONS, run_transition
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db
S = Run.Status
LEGAL = sorted((a, b) for a, targets in RUN_TRANSITIONS.items() for b in targets)
ILLEGAL = sorted(pair for pair in itertools.product(S.values, S.values) if pair not in LEGAL)
EVENT_OF = {
    S.RUNNING: "run.started",
    S.SUCCEEDED: "run.finished",
    S.FAILED: "run.finished",
    S.CANCELLED: "run.cancelled",
    S.LOST: "run.lost",
    S.WAITING: "run.waiting",
}


def _snapshot(run):
    return dict(Run.objects.filter(pk=run.pk).values().get()), Event.objects.count()


def test_the_machine_is_the_one_the_spec_describes():
    machine = RUN_TRANSITIONS
    assert machine == {
        S.QUEUED: {S.ASSIGNED, S.CANCELLED},
        # -> waiting: an answered waiting run its runner never acknowledged waits for it again
        S.ASSIGNED: {S.QUEUED, S.STARTING, S.FAILED, S.CANCELLED, S.LOST, S.WAITING},
        # -> starting again: the holder restarted after a crash (attempt + 1, run.resumed)
        S.STARTING: {S.STARTING, S.RUNNING, S.FAILED, S.CANCELLED, S.LOST},
        # -> waiting: its agent deferred a tool call to a person and exited (issue 26 §2)
        S.RUNNING: {S.STARTING, S.SUCCEEDED, S.FAILED, S.CANCELLED, S.LOST, S.WAITING},
        # answered: back to its runner (attempt + 1); re-queued for any runner; cancelled
        S.WAITING: {S.ASSIGNED, S.QUEUED, S.CANCELLED},
        S.SUCCEEDED: set(),
        S.FAILED: set(),
        S.CANCELLED: set(),
        S.LOST: set(),
    }
    assert len(LEGAL) == 22
    assert len(ILLEGAL) == 81 - 22


@pytest.mark.parametrize(("start", "to"), LEGAL, ids=lambda s: str(s))
def test_a_legal_move_is_taken_and_records_its_event(make_run, runner, runner_actor, start, to):
    # given a run in ``start``
    run = make_run(start)
    events_before = set(Event.objects.values_list("pk", flat=True))
    extra = {"runner": runner} if to == S.ASSIGNED else {}

    # when its runner (or, for a queued run not yet held, the system) moves it
    actor = SYSTEM if start == S.QUEUED else runner_actor
    moved = run_transition(actor=actor, run=run, to=to, attempt=run.attempt, **extra)

    # then the row is in ``to``, with the times and lease that go with it
    stored = Run.objects.get(pk=run.pk)
    assert moved.status == stored.status == to
    assert (stored.ended_at is not None) == (to in Run.TERMINAL)
    assert (stored.started_at is not None) == (to == S.RUNNING or start in (S.RUNNING, S.WAITING))
    restart = start in (S.STARTING, S.RUNNING) and to == S.STARTING
    answered = start == S.WAITING and to == S.ASSIGNED  # handed back to its runner: a new attempt
    if to == S.QUEUED:
        assert (stored.attempt, stored.runner_id, stored.lease_expires_at) == (run.attempt + 1, None, None)
    elif restart or answered:
        assert (stored.attempt, stored.runner_id) == (run.attempt + 1, runner.pk)
    else:
        held = not (start == S.QUEUED and to == S.CANCELLED)  # cancelled before any runner had it
        assert (stored.attempt, stored.runner_id) == (run.attempt, runner.pk if held else None)
    # and exactly the event of the move, if it has one, was recorded
    new = list(Event.objects.exclude(pk__in=events_before).values("name", "subject_type", "subject_id", "actor"))
    if restart:
        assert new == [{"name": "run.resumed", "subject_type": "run", "subject_id": str(run.pk), "actor": actor.label}]
    elif to in EVENT_OF:
        assert new == [{"name": EVENT_OF[to], "subject_type": "run", "subject_id": str(run.pk), "actor": actor.label}]
    else:
        assert new == []


@pytest.mark.parametrize(("start", "to"), ILLEGAL, ids=lambda s: str(s))
def test_an_illegal_move_is_a_conflict_and_changes_nothing(make_run, runner, start, to):
    # given a run in ``start``
    run = make_run(start)
    before = _snapshot(run)
    extra = {"runner": runner} if to == S.ASSIGNED else {}

    # when something tries to move it to ``to``
    with pytest.raises(DomainError) as refused:
        run_transition(actor=SYSTEM, run=run, to=to, **extra)

    # then it is refused as a conflict and nothing was written
    assert (refused.value.code, refused.value.status_code) == ("conflict", 409)
    assert refused.value.message == f"Run {run.pk} cannot go from {start} to {to}."
    assert refused.value.extra == {"status": start}
    assert _snapshot(run) == before


def test_a_stale_attempt_is_fenced_out_with_lease_lost(make_run, runner, runner_actor):
    # given a run that was handed out, handed back (attempt 2) and handed out again
    run = make_run(S.ASSIGNED)
    run = run_transition(actor=SYSTEM, run=run, to=S.QUEUED)
    run = run_transition(actor=SYSTEM, run=run, to=S.ASSIGNED, runner=runner)
    assert run.attempt == 2
    before = _snapshot(run)

    # when the runner that held attempt 1 reports it started
    with pytest.raises(DomainError) as refused:
        run_transition(actor=runner_actor, run=run, to=S.STARTING, attempt=1, pid=4242)

    # then it is told it lost the lease, and nothing changed
    assert (refused.value.code, refused.value.status_code) == ("conflict", 409)
    assert refused.value.extra == {"code": LEASE_LOST, "run": run.pk, "attempt": 2}
    assert _snapshot(run) == before
    # while the current attempt is let through
    assert run_transition(actor=runner_actor, run=run, to=S.STARTING, attempt=2, pid=4242).pid == 4242


def test_the_fence_applies_before_the_machine_even_on_a_finished_run(make_run, runner_actor):
    run = make_run(S.SUCCEEDED)
    before = _snapshot(run)

    with pytest.raises(DomainError) as refused:
        run_transition(actor=runner_actor, run=run, to=S.FAILED, attempt=7)

    assert refused.value.extra["code"] == LEASE_LOST
    assert _snapshot(run) == before


def test_the_runner_reports_its_fields_with_the_move(make_run, runner_actor):
    run = make_run(S.STARTING)

    run_transition(actor=runner_actor, run=run, to=S.RUNNING, attempt=1, pid=991, workdir="/srv/wt/feat-1")
    done = run_transition(
        actor=runner_actor, run=run, to=S.FAILED, attempt=1, exit_code=3, log_path="running-jobs/job-1.log"
    )

    stored = Run.objects.get(pk=run.pk)
    assert (stored.pid, stored.workdir, stored.exit_code, stored.log_path) == (
        991,
        "/srv/wt/feat-1",
        3,
        "running-jobs/job-1.log",
    )
    assert done.status == S.FAILED
    finished = Event.objects.get(name="run.finished")
    assert finished.payload == {
        "task": run.task_id,
        "status": "failed",
        "provider": "claude",
        "attempt": 1,
        "runner": "build-1",
        "exit_code": 3,
    }


def test_another_runner_may_not_move_a_run_and_nothing_changes(make_run):
    # given a running run of build-1, and another runner's agent
    run = make_run(S.RUNNING)
    before = _snapshot(run)
    stranger = Actor(agent=AgentFactory(slug="runner-build-2"))

    # when it tries to finish it
    with pytest.raises(DomainError) as refused:
        run_transition(actor=stranger, run=run, to=S.SUCCEEDED, attempt=1, exit_code=0)

    # then it is refused as not its run
    assert (refused.value.code, refused.value.status_code) == ("forbidden", 403)
    assert _snapshot(run) == before


def test_a_key_without_the_run_scope_may_not_move_its_runners_run(make_run, runner):
    from sessions_app.keys import api_key_create

    run = make_run(S.RUNNING)
    before = _snapshot(run)
    agent_key = api_key_create(agent=runner.agent).api_key  # scope 'agent' only

    with pytest.raises(DomainError) as refused:
        run_transition(actor=Actor(agent=runner.agent, api_key=agent_key), run=run, to=S.LOST)

    assert refused.value.code == "forbidden"
    assert _snapshot(run) == before


@pytest.mark.parametrize(
    ("to", "fields", "message"),
    [
        ("paused", {}, "Unknown run status 'paused'."),
        (S.STARTING, {"status": "running"}, "Unknown fields for a run: status."),
        (S.STARTING, {"attempt": 9}, None),  # attempt is the fence, not a field: handled as a stale one
        (S.ASSIGNED, {}, "Assigning a run needs a runner."),
    ],
)
def test_bad_requests_are_invalid_and_change_nothing(make_run, to, fields, message):
    run = make_run(S.QUEUED)
    before = _snapshot(run)

    with pytest.raises(DomainError) as refused:
        run_transition(actor=SYSTEM, run=run, to=to, **fields)

    if message is None:
        assert refused.value.extra["code"] == LEASE_LOST
    else:
        assert (refused.value.code, refused.value.message) == ("invalid", message)
    assert _snapshot(run) == before


def test_the_runner_is_set_only_when_assigning(make_run, runner):
    run = make_run(S.ASSIGNED)
    before = _snapshot(run)

    with pytest.raises(DomainError) as refused:
        run_transition(actor=SYSTEM, run=run, to=S.STARTING, runner=runner)

    assert refused.value.message == "A run's runner is set only when it is assigned."
    assert _snapshot(run) == before
