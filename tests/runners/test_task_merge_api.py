# ruff: noqa: F811 (the fixtures imported from test_task_review_api are parameters here)
"""SPEC §10 "Ship" by API: POST /tasks/{id}/merge/ and /merge/resolve/, against a real git clone whose
default branch is checked out (the user's checkout), with real conflicting commits."""

import pytest
from rest_framework.test import APIClient

from board.models import Task
from config.actors import Actor
from ledger.models import Event
from runners.models import Run
from runners.services import runner_key_create
from sessions_app.models import Agent
from tests.factories import AgentFactory, TaskFactory
from tests.runners.test_task_review_api import (  # noqa: F401 (fixtures)
    APP,
    branch,
    clone,
    commit,
    git,
    owner_client,
    run,
    run_key_client,
    task,
)
from workspaces.models import Repository, Worktree
from workspaces.worktrees.claims import worktree_claim
from workspaces.worktrees.services import worktree_create

pytestmark = pytest.mark.django_db
S = Run.Status


def _approve(client: APIClient, task: Task) -> None:
    assert client.post(f"/api/v1/tasks/{task.pk}/review/", {"decision": "approve"}, format="json").status_code == 201


def _merge(client: APIClient, task: Task, **body):
    return client.post(f"/api/v1/tasks/{task.pk}/merge/", body, format="json")


def _git_state(clone):
    return (
        git(clone, "for-each-ref", "--format=%(objectname) %(refname)"),
        git(clone, "status", "--porcelain"),
        (clone / "src/app.py").read_text(),
    )


def _db_state():
    return (
        list(Task.objects.order_by("pk").values()),
        list(Run.objects.order_by("pk").values()),
        Event.objects.filter(name="task.merged").count(),
    )


def test_an_approved_change_merges_into_the_checked_out_default_branch_and_the_task_is_done(
    owner_client, clone, task, branch, run
):
    _approve(owner_client, task)
    main_before = git(clone, "rev-parse", "main").strip()
    head = git(clone, "rev-parse", branch).strip()

    response = _merge(owner_client, task, strategy="merge")

    assert response.status_code == 200, response.json()
    body = response.json()
    main_after = git(clone, "rev-parse", "main").strip()
    assert body["commit"] == main_after
    assert body["previous"] == main_before and body["head"] == head
    assert body["status"] == "done" and body["forced"] is False
    assert (
        body["message"] == f"Merged {branch} into main as {main_after[:12]} (a merge commit); task {task.pk} is Done."
    )
    assert git(clone, "rev-list", "--parents", "-n1", "main").split() == [main_after, main_before, head]
    # The user's checkout moved with the branch: files, index, nothing left half-merged.
    assert (clone / "src/app.py").read_text() == APP.replace("line 5\n", "line five\n")
    assert (clone / "later.txt").exists() and not (clone / "old.txt").exists()
    assert git(clone, "status", "--porcelain") == ""
    assert (
        git(clone, "log", "-1", "--format=%an|%s", "main")
        == f"owner|Merge branch '{branch}': Fix the app (task {task.pk})\n"
    )
    task.refresh_from_db()
    assert task.status == Task.Status.DONE
    event = Event.objects.get(name="task.merged")
    assert event.payload["commit"] == main_after and event.actor == "user:owner"


def test_squash_makes_one_commit_with_the_same_tree(staff_client, clone, task, branch, run):
    _approve(staff_client, task)
    main_before = git(clone, "rev-parse", "main").strip()
    expected_tree = git(clone, "merge-tree", "--write-tree", "main", branch).strip()

    response = _merge(staff_client, task, strategy="squash")

    assert response.status_code == 200
    assert git(clone, "rev-list", "--parents", "-n1", "main").split()[1:] == [main_before]
    assert git(clone, "rev-parse", "main^{tree}").strip() == expected_tree
    assert "one squashed commit" in response.json()["message"]


def test_a_default_branch_checked_out_nowhere_moves_by_compare_and_swap(staff_client, clone, task, branch, run):
    git(clone, "checkout", "-q", "--detach")
    _approve(staff_client, task)

    response = _merge(staff_client, task)

    assert response.status_code == 200
    assert git(clone, "rev-parse", "main").strip() == response.json()["commit"]
    assert git(clone, "rev-parse", "HEAD").strip() == response.json()["previous"]  # the detached checkout stays


def test_a_conflict_is_409_naming_the_files_and_nothing_changes(owner_client, clone, task, branch, run):
    commit(clone, {"src/app.py": APP.replace("line 5\n", "line FIVE on main\n")}, "Main edits line 5 too")
    _approve(owner_client, task)
    before_git, before_db = _git_state(clone), _db_state()

    response = _merge(owner_client, task, strategy="merge")

    assert response.status_code == 409
    body = response.json()
    assert body["files"] == ["src/app.py"]
    assert body["resolve"] == "merge_conflict"
    assert body["message"].startswith(f"{branch} conflicts with main in 1 file(s): src/app.py. Nothing was changed.")
    assert _git_state(clone) == before_git
    assert _db_state() == before_db


def test_ask_the_agent_to_resolve_it_queues_a_run_naming_the_conflicting_files(owner_client, clone, task, branch, run):
    commit(clone, {"src/app.py": APP.replace("line 5\n", "line FIVE on main\n")}, "Main edits line 5 too")

    response = owner_client.post(f"/api/v1/tasks/{task.pk}/merge/resolve/", format="json")

    assert response.status_code == 201, response.json()
    queued = Run.objects.get(pk=response.json()["id"])
    assert queued.resumes_id == run.pk and queued.provider == run.provider
    assert "conflicts in these files:\n- src/app.py\n" in queued.prompt
    assert "git merge main" in queued.prompt


def test_resolve_without_a_conflict_is_409(owner_client, task, branch, run):
    response = owner_client.post(f"/api/v1/tasks/{task.pk}/merge/resolve/", format="json")

    assert response.status_code == 409
    assert "without a conflict now" in response.json()["message"]
    assert Run.objects.count() == 1


def test_a_change_not_approved_is_409_unless_staff_forces_it(staff_client, clone, task, branch, run):
    main_before = git(clone, "rev-parse", "main").strip()

    refused = _merge(staff_client, task)

    assert refused.status_code == 409
    assert refused.json()["message"] == (
        f"Task {task.pk}'s change can't be merged: it is not approved. Approve it first, or confirm the merge "
        'anyway ("force": true, people only).'
    )
    assert git(clone, "rev-parse", "main").strip() == main_before
    forced = _merge(staff_client, task, force=True)
    assert forced.status_code == 200 and forced.json()["forced"] is True
    assert Event.objects.get(name="task.merged").payload["forced"] is True


def test_an_approval_of_an_older_head_does_not_count(staff_client, clone, task, branch, run):
    _approve(staff_client, task)
    git(clone, "checkout", "-q", branch)
    commit(clone, {"docs/new.md": "# newer\n"}, "After the approval")
    git(clone, "checkout", "-q", "main")

    response = _merge(staff_client, task)

    assert response.status_code == 409
    assert "the approval was of" in response.json()["message"]


def test_force_is_for_staff_only_by_api(owner_client, orchestrator_client, clone, task, branch, run):
    before_git, before_db = _git_state(clone), _db_state()

    answers = [_merge(owner_client, task, force=True), _merge(orchestrator_client, task, force=True)]

    assert [a.status_code for a in answers] == [403, 403]
    assert "force (merging a change that is not approved) is for staff" in answers[0].json()["message"]
    assert _git_state(clone) == before_git and _db_state() == before_db


def test_an_orchestrate_key_merges_an_approved_change(orchestrator_client, clone, task, branch, run):
    _approve(orchestrator_client, task)

    response = _merge(orchestrator_client, task, strategy="squash")

    assert response.status_code == 200
    assert Event.objects.get(name="task.merged").actor == "agent:orchestrator"


def test_agent_and_run_keys_may_not_merge_and_nothing_changes(
    agent_client, run_key_client, staff_client, clone, task, branch, run
):
    _approve(staff_client, task)
    before_git, before_db = _git_state(clone), _db_state()

    answers = [
        _merge(agent_client, task),
        _merge(run_key_client, task, force=True),
        agent_client.post(f"/api/v1/tasks/{task.pk}/merge/resolve/"),
        run_key_client.post(f"/api/v1/tasks/{task.pk}/merge/resolve/"),
    ]

    assert [a.status_code for a in answers] == [403] * 4
    assert "may not merge" in answers[1].json()["message"]
    assert _git_state(clone) == before_git and _db_state() == before_db


def test_another_tasks_run_key_is_refused(run_key_client, clone, branch):
    other = TaskFactory(repository=Repository.objects.get())

    assert _merge(run_key_client, other).status_code == 403


@pytest.mark.parametrize("status", [S.QUEUED, S.RUNNING])
def test_a_run_still_going_is_409(staff_client, clone, task, branch, run, status):
    runner, _, _ = runner_key_create(name="build-1")
    going = Run.objects.create(task=task, provider="claude", status=status, runner=runner)
    before_git = _git_state(clone)

    response = _merge(staff_client, task, force=True)

    assert response.status_code == 409
    assert response.json()["message"] == f"Task {task.pk}'s run {going.pk} is still {status}; merge once it has ended."
    assert _git_state(clone) == before_git


def test_no_run_or_no_branch_is_409_saying_why(staff_client, clone, task):
    no_run = _merge(staff_client, task, force=True)
    Run.objects.create(task=task, provider="claude", status=S.FAILED)
    no_branch = _merge(staff_client, task, force=True)

    assert [no_run.status_code, no_branch.status_code] == [409, 409]
    assert no_run.json()["message"] == f"Task {task.pk} has no run yet, so there is nothing to merge."
    assert no_branch.json()["message"].startswith(f"Task {task.pk} has no branch yet")


def test_a_branch_already_in_main_is_409(staff_client, clone, task, branch, run):
    git(clone, "merge", "-q", "--no-edit", branch)

    response = _merge(staff_client, task, force=True)

    assert response.status_code == 409
    assert response.json()["message"].startswith(f"{branch} is already in main")


def test_a_local_change_in_the_checkout_the_merge_would_overwrite_is_409_and_kept(
    staff_client, clone, task, branch, run
):
    (clone / "src/app.py").write_text("my unsaved edit\n")
    main_before = git(clone, "rev-parse", "main").strip()

    response = _merge(staff_client, task, force=True)

    assert response.status_code == 409
    assert f"main is checked out in {clone}" in response.json()["message"]
    assert (clone / "src/app.py").read_text() == "my unsaved edit\n"
    assert git(clone, "rev-parse", "main").strip() == main_before
    assert Task.objects.get(pk=task.pk).status == Task.Status.REVIEW


def test_a_runner_hosted_repository_is_409_not_built_yet(staff_client):
    runner, _, _ = runner_key_create(name="build-1")
    task = TaskFactory(repository=Repository.objects.create(name="shop", path="/srv/shop", runner=runner))
    Run.objects.create(task=task, provider="claude", status=S.SUCCEEDED)

    response = _merge(staff_client, task, force=True)

    assert response.status_code == 409
    assert "merging on runner-hosted repositories is not built yet" in response.json()["message"]


@pytest.mark.parametrize(("body", "field"), [({"strategy": "rebase"}, "strategy"), ({"force": "yes"}, "force")])
def test_bad_bodies_are_400(staff_client, task, branch, run, body, field):
    response = _merge(staff_client, task, **body)

    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_the_merged_tasks_worktree_claim_ends_so_it_can_be_archived(staff_client, clone, task, run):
    holder = AgentFactory(slug="worker-1")
    tree, _ = worktree_create(actor=Actor(agent=holder), repository=task.repository, type="task", name=str(task.pk))
    worktree_claim(actor=Actor(agent=holder), agent=holder, worktree=tree)
    commit(clone.parent / f"task-{task.pk}", {"src/app.py": APP.replace("line 5\n", "line five\n")}, "Run 1")
    _approve(staff_client, task)

    response = _merge(staff_client, task)

    assert response.status_code == 200, response.json()
    tree.refresh_from_db()
    assert tree.holder_id is None and tree.released_at is not None
    assert Agent.objects.filter(pk=holder.pk).exists()
    assert Worktree.objects.get(pk=tree.pk).status == Worktree.Status.ACTIVE


def test_a_default_branch_checked_out_in_a_linked_worktree_moves_there_with_its_files(
    staff_client, clone, task, branch, run
):
    git(clone, "checkout", "-q", "--detach")
    trunk = clone.parent / "trunk-main"
    git(clone, "worktree", "add", "-q", str(trunk), "main")
    _approve(staff_client, task)

    response = _merge(staff_client, task)

    assert response.status_code == 200, response.json()
    assert git(trunk, "rev-parse", "HEAD").strip() == response.json()["commit"]
    assert "line five" in (trunk / "src/app.py").read_text() and git(trunk, "status", "--porcelain") == ""
