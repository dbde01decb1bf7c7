"""Removing worktrees: refused with uncommitted changes unless forced, never the main clone."""

import shutil
from datetime import timedelta

import pytest
from django.utils import timezone

from ledger.models import Event
from tests.factories import AgentFactory
from tests.workspaces.conftest import commit_file, git, tree_snapshot
from workspaces.models import Workspace, Worktree, WorktreeClaimRequest
from workspaces.worktrees.claims import worktree_claim
from workspaces.worktrees.services import worktree_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def worktree(repository, actor):
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="login")
    return worktree


@pytest.fixture
def held(worktree, actor, agent):
    worktree_claim(actor=actor, agent=agent, worktree=worktree)
    return worktree


def _url(worktree, query: str = "") -> str:
    return f"/api/v1/worktrees/{worktree.pk}/" + (f"?{query}" if query else "")


def _state(worktree) -> tuple:
    row = Worktree.objects.get(pk=worktree.pk)
    return row.status, row.holder_id, row.lease_expires_at, Event.objects.count()


def test_the_holder_removes_a_clean_worktree(agent_client, held, clone, code_dir):
    # when
    response = agent_client.delete(_url(held))

    # then
    assert response.status_code == 200, response.data
    assert (response.data["status"], response.data["holder"]) == ("removed", None)
    assert not (code_dir / "feat-login").exists()
    assert str(code_dir / "feat-login") not in git(clone, "worktree", "list")
    assert git(clone, "branch", "--list", "feat-login").strip() == "feat-login"  # kept, for a revive
    row = Worktree.objects.get(pk=held.pk)
    assert (row.status, row.holder_id, row.lease_expires_at) == (Worktree.Status.REMOVED, None, None)
    assert row.workspace.status == Workspace.Status.REMOVED
    names = list(Event.objects.order_by("id").values_list("name", flat=True))
    assert names[-2:] == ["worktree.released", "worktree.removed"]


def test_uncommitted_changes_refuse_removal_and_nothing_changes(agent_client, held, code_dir):
    # given an edited file and a new one
    folder = code_dir / "feat-login"
    (folder / "README.md").write_text("changed\n")
    (folder / "notes.txt").write_text("draft\n")
    # and the agent heard from just now: any request of an agent is a heartbeat that renews its
    # leases (at most once per few seconds), which is liveness, not the refused removal
    assert agent_client.post("/api/v1/agents/me/heartbeat/").status_code == 200
    before = _state(held)

    # when
    response = agent_client.delete(_url(held))

    # then
    assert response.status_code == 409
    assert response.data == {
        "message": f"Worktree {held.pk} has 2 uncommitted change(s) (README.md, notes.txt); "
        "commit them, or remove with force=true to lose them.",
        "uncommitted": 2,
    }
    assert (folder / "notes.txt").read_text() == "draft\n"
    assert _state(held) == before


def test_force_removes_a_worktree_with_changes_and_leaves_the_main_clone_alone(agent_client, held, clone, code_dir):
    # given changes in the worktree, and the main clone with its own uncommitted file
    (code_dir / "feat-login" / "README.md").write_text("changed\n")
    (clone / "local.txt").write_text("the clone's own work\n")
    snapshot = tree_snapshot(clone)
    status = git(clone, "status", "--porcelain")
    head = git(clone, "rev-parse", "HEAD")

    # when
    response = agent_client.delete(_url(held, "force=true"))

    # then
    assert response.status_code == 200
    assert not (code_dir / "feat-login").exists()
    assert tree_snapshot(clone) == snapshot
    assert git(clone, "status", "--porcelain") == status
    assert git(clone, "rev-parse", "HEAD") == head
    assert Event.objects.filter(name="worktree.removed").get().payload["force"] is True


def test_removal_ends_the_queue(agent_client, held, make_agent_client):
    waiter = AgentFactory(slug="waiter")
    make_agent_client(waiter).post(f"/api/v1/worktrees/{held.pk}/claim/", {"wait": True}, format="json")

    response = agent_client.delete(_url(held))

    assert response.status_code == 200
    assert list(WorktreeClaimRequest.objects.values_list("agent__slug", "status")) == [("waiter", "cancelled")]
    assert Event.objects.filter(name="worktree.removed").get().payload["cancelled_requests"] == 1


def test_another_agent_cannot_remove(other_client, held, code_dir):
    before = _state(held)
    response = other_client.delete(_url(held, "force=true"))
    assert response.status_code == 403
    assert (code_dir / "feat-login").is_dir()
    assert _state(held) == before


def test_an_agent_must_hold_the_worktree_to_remove_it(agent_client, worktree, code_dir):
    before = _state(worktree)
    response = agent_client.delete(_url(worktree))
    assert response.status_code == 403
    assert response.data["message"] == f"Worktree {worktree.pk} is not claimed; claim it before you remove it."
    assert (code_dir / "feat-login").is_dir()
    assert _state(worktree) == before


def test_an_expired_lease_cannot_remove(agent_client, held, code_dir):
    Worktree.objects.filter(pk=held.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    before = _state(held)
    response = agent_client.delete(_url(held))
    assert response.status_code == 409
    assert (code_dir / "feat-login").is_dir()
    assert _state(held) == before


def test_staff_may_remove_any_worktree_and_removing_twice_is_fine(staff_client, held, code_dir):
    first = staff_client.delete(_url(held))
    second = staff_client.delete(_url(held))
    assert (first.status_code, second.status_code) == (200, 200)
    assert second.data["status"] == "removed"
    assert not (code_dir / "feat-login").exists()
    assert Event.objects.filter(name="worktree.removed").count() == 1


def test_a_bad_force_value_is_400(staff_client, worktree, code_dir):
    response = staff_client.delete(_url(worktree, "force=maybe"))
    assert response.status_code == 400
    assert (code_dir / "feat-login").is_dir()


def test_a_folder_already_gone_is_pruned_and_marked_removed(staff_client, worktree, clone, code_dir):
    shutil.rmtree(code_dir / "feat-login")
    response = staff_client.delete(_url(worktree))
    assert (response.status_code, response.data["status"]) == (200, "removed")
    assert str(code_dir / "feat-login") not in git(clone, "worktree", "list")


def test_committed_work_is_not_uncommitted(agent_client, held, code_dir):
    commit_file(code_dir / "feat-login", "feature.py", "x = 1\n", "Feature")
    response = agent_client.delete(_url(held))
    assert response.status_code == 200


def test_a_row_pointing_at_the_main_clone_is_never_removed(staff_client, repository, clone):
    # given a row that (by hand or bug) names the clone itself
    row = Worktree.objects.create(
        repository=repository, type="trunk", name="main", branch="main", real_path=repository.path
    )
    snapshot = tree_snapshot(clone)

    response = staff_client.delete(_url(row, "force=true"))

    assert response.status_code == 409
    assert "never removed" in response.data["message"]
    assert tree_snapshot(clone) == snapshot
    assert Worktree.objects.get(pk=row.pk).status == Worktree.Status.ACTIVE


def test_a_folder_git_does_not_know_is_left_alone(staff_client, repository, code_dir):
    stray = code_dir / "feat-stray"
    stray.mkdir()
    (stray / "keep.txt").write_text("keep")
    row = Worktree.objects.create(
        repository=repository, type="feat", name="stray", branch="feat-stray", real_path=str(stray)
    )

    response = staff_client.delete(_url(row, "force=true"))

    assert response.status_code == 409
    assert (stray / "keep.txt").read_text() == "keep"
