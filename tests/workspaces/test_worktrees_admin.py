"""Worktrees and repositories in the admin: every action goes through the services."""

import pytest

from config.actors import Actor
from ledger.models import Event
from tests.admin.factories import admin_url
from tests.factories import AgentFactory
from workspaces.models import Repository, Worktree, WorktreeClaimRequest
from workspaces.worktrees.claims import worktree_claim
from workspaces.worktrees.services import worktree_create

pytestmark = pytest.mark.django_db


def _messages(response) -> list[str]:
    return [m.message for m in response.context["messages"]]


def _act(admin_client, action: str, *worktrees):
    return admin_client.post(
        admin_url(Worktree, "changelist"),
        {"action": action, "_selected_action": [w.pk for w in worktrees]},
        follow=True,
    )


def test_release_hands_the_worktree_to_the_next_in_its_queue(admin_client, repository, actor, agent):
    # given claude-1 holds it and waiter queues
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="x")
    worktree_claim(actor=actor, agent=agent, worktree=worktree)
    waiter = AgentFactory(slug="waiter")
    worktree_claim(actor=Actor(agent=waiter), agent=waiter, worktree=worktree, wait=True)

    # when
    response = _act(admin_client, "release_claims", worktree)

    # then
    assert _messages(response) == ["1 worktree claim(s) released."]
    assert Worktree.objects.get(pk=worktree.pk).holder.slug == "waiter"
    assert WorktreeClaimRequest.objects.get().status == WorktreeClaimRequest.Status.GRANTED
    released = Event.objects.get(name="worktree.released")
    assert (released.actor, released.payload["holder"]) == ("user:admin", agent.pk)


def test_remove_action_removes_clean_worktrees_and_reports_refusals(admin_client, repository, actor, code_dir):
    clean, _ = worktree_create(actor=actor, repository=repository, type="feat", name="clean")
    dirty, _ = worktree_create(actor=actor, repository=repository, type="feat", name="dirty")
    (code_dir / "feat-dirty" / "wip.txt").write_text("wip")

    response = _act(admin_client, "remove_worktrees", clean, dirty)

    messages = _messages(response)
    assert messages[0] == "1 worktree(s) removed; 1 failed."
    assert messages[1].startswith("app/feat-dirty: Worktree")
    assert "1 uncommitted change(s) (wip.txt)" in messages[1]
    assert not (code_dir / "feat-clean").exists()
    assert (code_dir / "feat-dirty" / "wip.txt").exists()
    assert dict(Worktree.objects.values_list("name", "status")) == {"clean": "removed", "dirty": "active"}


def test_check_config_links_reports_and_changes_nothing(admin_client, repository, actor, code_dir):
    (code_dir / "sync" / "app" / ".env").write_text("A=1")
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="cfg")
    (code_dir / "feat-cfg" / ".env").unlink()

    response = _act(admin_client, "check_config_links", worktree)

    assert _messages(response) == [
        "app/feat-cfg: 0 linked, 1 missing, 0 pointing elsewhere, 0 blocked, 0 skipped, 0 repaired."
    ]
    assert not (code_dir / "feat-cfg" / ".env").exists()


def test_repair_config_links_fixes_them(admin_client, repository, actor, code_dir):
    (code_dir / "sync" / "app" / ".env").write_text("A=1")
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="cfg")
    (code_dir / "feat-cfg" / ".env").unlink()

    response = _act(admin_client, "repair_config_links", worktree)

    assert _messages(response) == [
        "app/feat-cfg: 0 linked, 1 missing, 0 pointing elsewhere, 0 blocked, 0 skipped, 1 repaired."
    ]
    assert (code_dir / "feat-cfg" / ".env").is_symlink()


def test_adding_a_repository_registers_it_through_the_service(admin_client, clone, code_dir):
    # when added with a trailing slash and nothing else
    response = admin_client.post(
        admin_url(Repository, "add"),
        {"path": f"{clone}/", "name": "", "default_branch": "", "sync_dir": ""},
        follow=True,
    )

    # then
    assert response.status_code == 200
    repository = Repository.objects.get()
    assert (repository.name, repository.path, repository.default_branch) == ("app", str(clone), "main")
    assert repository.sync_dir == str(code_dir / "sync" / "app")
    assert (code_dir / "sync" / "app").is_dir()


def test_adding_a_folder_that_is_not_a_clone_shows_the_reason(admin_client, tmp_path):
    response = admin_client.post(admin_url(Repository, "add"), {"path": str(tmp_path)})
    assert response.status_code == 200
    assert "is not inside a git clone" in str(response.context["adminform"].form.errors["path"])
    assert Repository.objects.count() == 0


def test_adding_the_same_clone_again_is_refused_by_the_form(admin_client, repository, clone):
    response = admin_client.post(admin_url(Repository, "add"), {"path": f"{clone}/."})
    assert response.status_code == 200
    assert response.context["adminform"].form.errors
    assert Repository.objects.count() == 1


def test_changing_a_repository_updates_branch_and_sync_folder(admin_client, repository, tmp_path):
    response = admin_client.post(
        admin_url(Repository, "change", repository.pk),
        {"default_branch": "develop", "sync_dir": str(tmp_path / "cfg")},
        follow=True,
    )
    assert response.status_code == 200
    repository.refresh_from_db()
    assert (repository.default_branch, repository.sync_dir) == ("develop", str(tmp_path / "cfg"))
    assert (tmp_path / "cfg").is_dir()
