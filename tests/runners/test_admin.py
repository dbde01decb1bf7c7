"""The runners admin: a list a person can work in, runs view-only, one action that calls the service."""

import pytest

from ledger.models import Event
from runners.models import Run, Runner
from runners.services import run_transition
from tests.admin.factories import admin_url

pytestmark = pytest.mark.django_db
S = Run.Status


def test_the_runner_list_shows_how_many_runs_each_holds_now(admin_client, runner, make_run):
    # given build-1 holding two active runs and one that ended
    make_run(S.RUNNING)
    make_run(S.ASSIGNED)
    make_run(S.SUCCEEDED)

    # when a person opens the runners list
    response = admin_client.get(admin_url(Runner, "changelist"))

    # then it shows build-1 with 2 runs now, its capacity and status
    assert response.status_code == 200
    [row] = response.context["cl"].result_list
    assert (row.name, row.runs_now, row.capacity, row.status) == ("build-1", 2, 2, "offline")
    page = response.content.decode()
    for column in ("runs now", "last seen at", "capacity", "version"):
        assert column in page.lower()


def test_the_run_list_filters_by_status(admin_client, make_run):
    running, queued = make_run(S.RUNNING), make_run(S.QUEUED)

    response = admin_client.get(admin_url(Run, "changelist"), {"status__exact": "queued"})

    assert [r.pk for r in response.context["cl"].result_list] == [queued.pk]
    assert running.pk not in [r.pk for r in response.context["cl"].result_list]


def test_runs_are_view_only_and_a_post_changes_nothing(admin_client, make_run):
    run = make_run(S.RUNNING)
    before = list(Run.objects.values())

    assert admin_client.get(admin_url(Run, "add")).status_code == 403
    assert admin_client.post(admin_url(Run, "change", run.pk), {"status": "succeeded"}).status_code == 403
    assert admin_client.post(admin_url(Run, "delete", run.pk), {"post": "yes"}).status_code == 403
    assert list(Run.objects.values()) == before
    actions = [
        name
        for name, _ in admin_client.get(admin_url(Run, "changelist")).context["action_form"].fields["action"].choices
    ]
    assert actions == ["", "cancel_runs"]


def test_cancel_selected_runs_cancels_queued_asks_running_and_skips_ended(admin_client, make_run):
    # given a queued, a running and a finished run
    queued, running, done = make_run(S.QUEUED), make_run(S.RUNNING), make_run(S.SUCCEEDED)
    done_before = Run.objects.filter(pk=done.pk).values().get()

    # when a person cancels all three from the list
    response = admin_client.post(
        admin_url(Run, "changelist"),
        {"action": "cancel_runs", "_selected_action": [queued.pk, running.pk, done.pk]},
        follow=True,
    )

    # then the queued one ended, the running one was asked to stop, the finished one is untouched
    assert response.status_code == 200
    statuses = dict(Run.objects.values_list("pk", "status"))
    assert (statuses[queued.pk], statuses[running.pk], statuses[done.pk]) == ("cancelled", "running", "succeeded")
    assert Run.objects.get(pk=running.pk).cancel_requested_at is not None
    assert Run.objects.filter(pk=done.pk).values().get() == done_before
    assert list(Event.objects.filter(name="run.cancelled").values_list("subject_id", "actor")) == [
        (str(queued.pk), "user:admin")
    ]
    messages = [str(m) for m in response.context["messages"]]
    assert messages == [
        f"Run {done.pk}: Run {done.pk} has already ended (succeeded).",
        "2 run(s) cancelled or asked to stop; 1 already ended.",
    ]


def test_a_runner_finishing_after_the_request_ends_it_cancelled(admin_client, make_run, runner_actor):
    running = make_run(S.RUNNING)
    admin_client.post(admin_url(Run, "changelist"), {"action": "cancel_runs", "_selected_action": [running.pk]})

    run_transition(actor=runner_actor, run=running, to=S.CANCELLED, attempt=1, exit_code=-15)

    assert Run.objects.filter(pk=running.pk).values_list("status", "exit_code").get() == ("cancelled", -15)


def test_a_runner_holding_runs_cannot_be_deleted_and_stays(admin_client, runner, make_run):
    make_run(S.RUNNING)

    response = admin_client.post(admin_url(Runner, "delete", runner.pk), {"post": "yes"})

    assert response.status_code == 403
    assert Runner.objects.filter(pk=runner.pk).exists()


def test_a_runner_whose_runs_ended_can_be_deleted_and_its_runs_keep_their_history(admin_client, runner, make_run):
    done = make_run(S.SUCCEEDED)

    response = admin_client.post(admin_url(Runner, "delete", runner.pk), {"post": "yes"})

    assert response.status_code == 302
    assert not Runner.objects.filter(pk=runner.pk).exists()
    assert Run.objects.values_list("status", "runner_id").get(pk=done.pk) == ("succeeded", None)
