"""The repository list, worktree creation over the API, and the worktree page with its status."""

import os
import time

import pytest
from rest_framework.test import APIClient

from ledger.models import Event
from tests.factories import UserFactory
from tests.workspaces.conftest import commit_file, git
from workspaces.models import Repository, Worktree
from workspaces.worktrees.claims import worktree_claim
from workspaces.worktrees.services import repository_register, worktree_create
from workspaces.worktrees.status import worktree_status

pytestmark = pytest.mark.django_db


def _create_url(repository) -> str:
    return f"/api/v1/repositories/{repository.pk}/worktrees/"


# --- GET /repositories/ ---------------------------------------------------------------------


def test_list_repositories_with_their_active_worktree_count(
    agent_client, repository, actor, code_dir, django_assert_num_queries
):
    worktree_create(actor=actor, repository=repository, type="feat", name="a")
    worktree_create(actor=actor, repository=repository, type="feat", name="b")
    Worktree.objects.filter(name="b").update(status=Worktree.Status.REMOVED)
    other = code_dir / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    repository_register(path=str(other))

    # The agent's first request counts as its heartbeat (sessions_app/liveness.py): its time, its leases.
    with django_assert_num_queries(6):  # key lookup, key last-used, heartbeat, lease renewal, count, page
        response = agent_client.get("/api/v1/repositories/")

    assert response.status_code == 200
    rows = [(r["name"], r["active_worktrees"], r["default_branch"]) for r in response.data["results"]]
    assert rows == [("app", 1, "main"), ("other", 0, "main")]


def test_repositories_are_not_listed_without_a_key_or_to_a_plain_user(repository):
    plain = APIClient()
    plain.force_login(UserFactory())
    assert APIClient().get("/api/v1/repositories/").status_code == 401
    assert plain.get("/api/v1/repositories/").status_code == 403


# --- POST /repositories/{id}/worktrees/ -----------------------------------------------------


def test_create_over_the_api_is_201_then_200(agent_client, repository, code_dir):
    body = {"type": "feat", "name": "user-auth"}

    first = agent_client.post(_create_url(repository), body, format="json")
    second = agent_client.post(_create_url(repository), body, format="json")

    assert (first.status_code, second.status_code) == (201, 200)
    assert first.data == second.data
    assert first.data["path"] == str(code_dir / "feat-user-auth")
    assert (first.data["branch"], first.data["status"], first.data["holder"]) == ("feat-user-auth", "active", None)
    assert first.data["repository_name"] == "app"
    assert Worktree.objects.count() == 1


def test_create_a_review_worktree_from_a_pull_request_number(agent_client, repository, origin, code_dir):
    response = agent_client.post(_create_url(repository), {"type": "review", "pr_number": 7}, format="json")
    assert response.status_code == 201, response.data
    assert (response.data["name"], response.data["branch"], response.data["pr_number"]) == ("7", "review-7", 7)
    assert (code_dir / "review-7" / "src" / "login.py").exists()


def test_staff_may_create(staff_client, repository):
    response = staff_client.post(_create_url(repository), {"type": "fix", "name": "bug"}, format="json")
    assert response.status_code == 201
    assert Event.objects.get(name="worktree.created").actor == "user:engineer"


def test_another_agent_asking_for_a_held_worktree_gets_it_unchanged(
    agent_client, other_client, repository, actor, agent
):
    # given claude-1 made and holds feat-login
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="login")
    worktree_claim(actor=actor, agent=agent, worktree=worktree)
    row = Worktree.objects.get(pk=worktree.pk)
    events = Event.objects.count()

    # when codex-2 asks to create it
    response = other_client.post(_create_url(repository), {"type": "feat", "name": "login"}, format="json")

    # then it is told what exists; the claim is untouched
    assert (response.status_code, response.data["holder"]) == (200, "claude-1")
    after = Worktree.objects.get(pk=worktree.pk)
    assert (after.holder_id, after.lease_expires_at) == (row.holder_id, row.lease_expires_at)
    assert Event.objects.count() == events


def test_a_plain_user_or_no_key_cannot_create(repository, code_dir):
    plain = APIClient()
    plain.force_login(UserFactory())
    body = {"type": "feat", "name": "x"}
    assert APIClient().post(_create_url(repository), body, format="json").status_code == 401
    assert plain.post(_create_url(repository), body, format="json").status_code == 403
    assert Worktree.objects.count() == 0
    assert not (code_dir / "feat-x").exists()


@pytest.mark.parametrize(
    "body",
    [
        {"type": "feat"},
        {"name": "x"},
        {"type": "feat", "name": 5},
        {"type": "feat", "name": "x", "pr_number": "7"},
        {"type": "feat", "name": "x", "pr_number": 0},
        {"type": "feat", "name": "x", "path": "/etc"},
        {"type": "feat", "name": "../../etc"},
        {"type": "feat", "name": "x" * 65},
        {"type": "feat", "name": "x", "ref": "-x"},
    ],
)
def test_bad_create_bodies_are_400_and_make_nothing(agent_client, repository, code_dir, body):
    response = agent_client.post(_create_url(repository), body, format="json")
    assert response.status_code == 400, response.data
    assert Worktree.objects.count() == 0
    assert sorted(os.listdir(code_dir)) == ["app", "sync"]


def test_create_in_an_unknown_repository_is_404(agent_client):
    response = agent_client.post("/api/v1/repositories/4242/worktrees/", {"type": "feat", "name": "x"}, format="json")
    assert (response.status_code, response.data["message"]) == (404, "Repository 4242 not found.")


# --- GET /worktrees/{id}/ and the status ----------------------------------------------------


def test_status_counts_commits_ahead_changes_and_recent_files(repository, actor, agent, code_dir):
    # given two commits on the branch, an edit, a new file, and file times spread out
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="api")
    folder = code_dir / "feat-api"
    commit_file(folder, "src/api.py", "api\n", "API")
    commit_file(folder, "src/models.py", "models\n", "Models")
    (folder / "README.md").write_text("edited\n")
    (folder / "src" / "new.py").write_text("new\n")
    now = time.time()
    for age, name in enumerate(["src/new.py", "README.md", "src/models.py", "src/api.py", "src/app.py"]):
        os.utime(folder / name, (now - age * 100, now - age * 100))
    worktree_claim(actor=actor, agent=agent, worktree=worktree)
    worktree.refresh_from_db()

    # when
    status = worktree_status(worktree=worktree)

    # then
    assert (status.present, status.base, status.commits_ahead, status.uncommitted) == (True, "main", 2, 2)
    assert sorted((e.code, e.path) for e in status.changes) == [(" M", "README.md"), ("??", "src/new.py")]
    assert [f.path for f in status.recent_files] == [
        "src/new.py",
        "README.md",
        "src/models.py",
        "src/api.py",
        "src/app.py",
    ]
    assert [round(f.age_seconds, -2) for f in status.recent_files] == [0, 100, 200, 300, 400]
    assert (status.holder, status.lease_valid, status.waiting) == ("claude-1", True, 0)
    assert status.lease_expires_at == worktree.lease_expires_at


def test_recent_files_keep_ten_and_skip_git(repository, actor, code_dir):
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="many")
    folder = code_dir / "feat-many"
    for n in range(15):
        (folder / f"f{n:02d}.txt").write_text(str(n))
        os.utime(folder / f"f{n:02d}.txt", (time.time() + n, time.time() + n))
    status = worktree_status(worktree=worktree)
    assert [f.path for f in status.recent_files] == [f"f{n:02d}.txt" for n in range(14, 4, -1)]


def test_the_worktree_page_shows_the_monitor(agent_client, repository, actor):
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="page")
    response = agent_client.get(f"/api/v1/worktrees/{worktree.pk}/")
    assert response.status_code == 200
    monitor = response.data["monitor"]
    assert (monitor["present"], monitor["commits_ahead"], monitor["uncommitted"], monitor["holder"]) == (
        True,
        0,
        0,
        None,
    )
    assert {f["path"] for f in monitor["recent_files"]} == {"README.md", "src/app.py"}


def test_a_removed_worktree_page_says_it_is_not_present(staff_client, repository, actor):
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="gone")
    staff_client.delete(f"/api/v1/worktrees/{worktree.pk}/")
    response = staff_client.get(f"/api/v1/worktrees/{worktree.pk}/")
    assert (response.status_code, response.data["status"], response.data["monitor"]["present"]) == (
        200,
        "removed",
        False,
    )
    assert response.data["monitor"]["commits_ahead"] is None


def test_worktree_page_refuses_no_key_and_plain_users_and_404s_unknown(agent_client, repository, actor):
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="seen")
    plain = APIClient()
    plain.force_login(UserFactory())
    assert APIClient().get(f"/api/v1/worktrees/{worktree.pk}/").status_code == 401
    assert plain.get(f"/api/v1/worktrees/{worktree.pk}/").status_code == 403
    assert agent_client.get("/api/v1/worktrees/31337/").status_code == 404


def test_registering_is_not_an_api_endpoint(agent_client, staff_client, clone):
    assert agent_client.post("/api/v1/repositories/", {"path": str(clone)}, format="json").status_code == 405
    assert staff_client.post("/api/v1/repositories/", {"path": str(clone)}, format="json").status_code == 405
    assert Repository.objects.count() == 0
