# ruff: noqa: F811 (the fixtures imported from test_task_review_api are parameters here)
"""SPEC §10 "Ship": POST /tasks/{id}/pull-request/ pushes the task branch to a real bare repository
and, with a GitHub token, opens a pull request on a local GitHub stand-in that checks every request
and answer against GitHub's OpenAPI description; beat's ship watch follows its state, and moves a
task whose branch was merged outside Switchyard to Done."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from board.models import Task
from ledger.models import Event
from runners.models import PullRequest, RepositoryShipping, Run
from runners.ship_secrets import token_decrypt, token_encrypt
from runners.ship_watch import pull_requests_refresh, tasks_done_when_merged
from tests.runners.github_standin import GitHubStandIn
from tests.runners.test_task_review_api import (  # noqa: F401 (fixtures)
    branch,
    clone,
    commit,
    git,
    owner_client,
    run,
    run_key_client,
    task,
)

pytestmark = pytest.mark.django_db
S = Run.Status


@pytest.fixture
def origin(tmp_path, clone, branch) -> str:
    """A bare repository as the clone's origin, holding main (not the task branch)."""
    bare = tmp_path / "remote" / "app.git"
    bare.mkdir(parents=True)
    git(bare, "init", "-q", "--bare", "-b", "main")
    git(clone, "remote", "add", "origin", str(bare))
    git(clone, "push", "-q", "origin", "main")
    return bare


@pytest.fixture
def github(settings, task):
    with GitHubStandIn() as standin:
        settings.GITHUB_API_URL = standin.url
        RepositoryShipping.objects.create(
            repository=task.repository, github_repo="octo/app", github_token_encrypted=token_encrypt(standin.token)
        )
        yield standin
        assert standin.problems == []


def _pr(client, task):
    return client.post(f"/api/v1/tasks/{task.pk}/pull-request/", format="json")


def _remote_branches(bare) -> str:
    return git(bare, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/")


def test_without_a_token_the_branch_is_pushed_and_no_pull_request_opened(
    owner_client, clone, origin, task, branch, run
):
    head = git(clone, "rev-parse", branch).strip()

    response = _pr(owner_client, task)

    assert response.status_code == 200, response.json()
    assert f"{head} refs/heads/{branch}" in _remote_branches(origin)
    body = response.json()
    assert body["message"] == (
        f"Pushed {branch} to origin ({head[:12]}); {'origin'} is not a GitHub repository, so no pull request was opened."
    )
    assert body["pull_request"]["state"] == "pushed" and body["pull_request"]["url"] == ""
    assert Task.objects.get(pk=task.pk).status == Task.Status.REVIEW


def test_a_push_the_remote_refuses_is_409_kept_for_the_card_and_nothing_else_changes(
    owner_client, clone, origin, task, branch, run
):
    hook = origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'branch protected by policy' >&2\nexit 1\n")
    hook.chmod(0o755)
    before = _remote_branches(origin), git(clone, "rev-parse", branch)

    response = _pr(owner_client, task)

    assert response.status_code == 409
    assert response.json()["message"].startswith(f"origin refused the push of {branch}:")
    assert "branch protected by policy" in response.json()["message"]
    assert (_remote_branches(origin), git(clone, "rev-parse", branch)) == before
    row = PullRequest.objects.get(task=task)
    assert row.error == response.json()["message"] and row.state == ""
    assert Task.objects.get(pk=task.pk).status == Task.Status.REVIEW


def test_no_such_remote_is_409(owner_client, clone, task, branch, run):
    response = _pr(owner_client, task)

    assert response.status_code == 409
    assert response.json()["message"].startswith("app has no 'origin' remote to push")


def test_with_a_token_a_pull_request_is_opened_on_github(owner_client, clone, origin, task, branch, run, github):
    response = _pr(owner_client, task)

    assert response.status_code == 200, response.json()
    pull = response.json()["pull_request"]
    assert pull["state"] == "open" and pull["number"] == 1347
    assert pull["url"] == "https://github.com/octo/app/pull/1347"
    assert response.json()["message"].endswith("pull request #1347 opened: https://github.com/octo/app/pull/1347")
    sent = github.requests[0]
    assert (sent["method"], sent["path"]) == ("POST", "/repos/octo/app/pulls")
    assert Event.objects.get(name="task.pull_request").payload["url"] == pull["url"]


def test_a_second_request_links_the_pull_request_github_already_has(owner_client, origin, task, branch, run, github):
    assert _pr(owner_client, task).status_code == 200

    again = _pr(owner_client, task)

    assert again.status_code == 200
    assert "pull request #1347 already open on GitHub, linked" in again.json()["message"]
    assert [r["method"] for r in github.requests] == ["POST", "POST", "GET"]
    assert PullRequest.objects.count() == 1


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("bad_token", "GitHub refused the repository's token while opening a pull request"),
        ("rate_limited", "GitHub's rate limit was reached while opening a pull request"),
    ],
)
def test_github_refusing_is_409_kept_for_the_card(owner_client, origin, task, branch, run, github, mode, said):
    github.mode = mode

    response = _pr(owner_client, task)

    assert response.status_code == 409
    assert response.json()["message"].startswith(said)
    assert PullRequest.objects.get(task=task).error == response.json()["message"]
    assert Task.objects.get(pk=task.pk).status == Task.Status.REVIEW


def test_github_unreachable_is_409(owner_client, origin, task, branch, run, github, settings):
    settings.GITHUB_API_URL = "http://127.0.0.1:9"  # the discard port: nothing listens

    response = _pr(owner_client, task)

    assert response.status_code == 409
    assert response.json()["message"].startswith("GitHub could not be reached while opening a pull request")


def test_agent_and_run_keys_may_not_push_and_nothing_changes(agent_client, run_key_client, origin, task, branch, run):
    before = _remote_branches(origin)

    answers = [_pr(agent_client, task), _pr(run_key_client, task)]

    assert [a.status_code for a in answers] == [403, 403]
    assert _remote_branches(origin) == before and not PullRequest.objects.exists()


def test_beat_follows_the_pull_requests_state_and_a_merge_on_github_means_done(
    owner_client, origin, task, branch, run, github
):
    assert _pr(owner_client, task).status_code == 200
    PullRequest.objects.update(checked_at=None)
    github.set_state("octo/app", 1347, "merged")

    asked = pull_requests_refresh()

    assert asked == 1
    assert PullRequest.objects.get(task=task).state == "merged"
    assert Task.objects.get(pk=task.pk).status == Task.Status.DONE


def test_a_branch_merged_outside_switchyard_moves_its_task_to_done(tmp_path, clone, origin, task, branch, run):
    # Someone merges the task branch in their own clone and pushes main; the server's clone only fetches.
    elsewhere = tmp_path / "elsewhere"
    git(clone, "push", "-q", "origin", branch)
    git(tmp_path, "clone", "-q", str(origin), str(elsewhere))
    git(elsewhere, "-c", "user.name=x", "-c", "user.email=x@e", "merge", "-q", "--no-edit", f"origin/{branch}")
    git(elsewhere, "push", "-q", "origin", "main")
    other = Task.objects.create(title="Not merged", repository=task.repository, status=Task.Status.REVIEW)
    Run.objects.create(task=other, provider="claude", status=S.SUCCEEDED)
    git(clone, "branch", f"task-{other.pk}", "main")  # a branch with no commits of its own

    moved = tasks_done_when_merged()

    assert moved == [task.pk]
    assert Task.objects.get(pk=task.pk).status == Task.Status.DONE
    assert Task.objects.get(pk=other.pk).status == Task.Status.REVIEW
    assert Event.objects.get(name="task.merged").payload["seen"] == "reachable"
    assert tasks_done_when_merged() == []  # again: nothing left to move


def test_the_token_is_stored_encrypted_and_never_shown(task, github):
    shipping = RepositoryShipping.objects.get(repository=task.repository)
    assert github.token not in shipping.github_token_encrypted
    assert token_decrypt(shipping.github_token_encrypted) == github.token
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("root", "r@e", "pw"))
    for url in ("/admin/runners/repositoryshipping/", f"/admin/runners/repositoryshipping/{shipping.pk}/change/"):
        page = admin.get(url)
        assert page.status_code == 200
        assert github.token not in page.content.decode()
        assert shipping.github_token_encrypted not in page.content.decode()
