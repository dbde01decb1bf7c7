"""Config sync: files of the sync folder linked into each worktree with relative symlinks."""

import os
from datetime import timedelta

import pytest
from django.utils import timezone

from ledger.models import Event
from workspaces.models import Worktree
from workspaces.worktrees.claims import worktree_claim
from workspaces.worktrees.services import worktree_changes, worktree_create
from workspaces.worktrees.sync import worktree_config_sync

pytestmark = pytest.mark.django_db


@pytest.fixture
def sync_dir(repository, code_dir):
    folder = code_dir / "sync" / "app"
    (folder / "config").mkdir(parents=True)
    (folder / ".env").write_text("SECRET=1\n")
    (folder / "config" / "local.yml").write_text("debug: true\n")
    return folder


@pytest.fixture
def worktree(repository, actor, sync_dir):
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="api")
    return worktree


def _url(worktree) -> str:
    return f"/api/v1/worktrees/{worktree.pk}/config-sync/"


def _links(folder) -> dict[str, str]:
    found = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                found[os.path.relpath(full, folder)] = os.readlink(full)
    return found


def test_create_links_every_sync_file_with_a_relative_link(worktree, code_dir):
    folder = code_dir / "feat-api"
    assert _links(folder) == {".env": "../sync/app/.env", "config/local.yml": "../../sync/app/config/local.yml"}
    assert (folder / ".env").read_text() == "SECRET=1\n"
    assert (folder / "config" / "local.yml").read_text() == "debug: true\n"


def test_a_check_reports_missing_wrong_and_blocked_without_changing_anything(worktree, code_dir, sync_dir):
    # given one link gone, one pointing elsewhere, and a regular file where a new one should go
    folder = code_dir / "feat-api"
    (folder / ".env").unlink()
    (folder / "config" / "local.yml").unlink()
    os.symlink("/etc/hostname", folder / "config" / "local.yml")
    (sync_dir / "settings.ini").write_text("[x]\n")
    (folder / "settings.ini").write_text("the worktree's own file\n")

    # when
    report = worktree_config_sync(worktree=worktree, repair=False)

    # then
    assert report.linked == []
    assert report.missing == [".env"]
    assert report.wrong == [{"path": "config/local.yml", "points_to": "/etc/hostname"}]
    assert report.blocked == [{"path": "settings.ini", "reason": "a regular file is in the way; it is left as it is"}]
    assert (report.repaired, report.in_sync) == ([], False)
    assert not (folder / ".env").exists()
    assert os.readlink(folder / "config" / "local.yml") == "/etc/hostname"


def test_repair_fixes_missing_and_wrong_links_and_never_overwrites_a_file(worktree, code_dir, sync_dir):
    folder = code_dir / "feat-api"
    (folder / ".env").unlink()
    (folder / "config" / "local.yml").unlink()
    os.symlink("/etc/hostname", folder / "config" / "local.yml")
    (sync_dir / "settings.ini").write_text("[x]\n")
    (folder / "settings.ini").write_text("the worktree's own file\n")

    report = worktree_config_sync(worktree=worktree, repair=True)

    assert sorted(report.repaired) == [".env", "config/local.yml"]
    assert report.in_sync is False  # settings.ini is still blocked
    assert _links(folder) == {".env": "../sync/app/.env", "config/local.yml": "../../sync/app/config/local.yml"}
    assert (folder / "settings.ini").read_text() == "the worktree's own file\n"
    # and running it again changes nothing
    again = worktree_config_sync(worktree=worktree, repair=True)
    assert (sorted(again.linked), again.repaired) == ([".env", "config/local.yml"], [])


def test_a_new_sync_file_in_a_new_folder_is_missing_then_linked(worktree, code_dir, sync_dir):
    (sync_dir / "deep" / "er").mkdir(parents=True)
    (sync_dir / "deep" / "er" / "key.pem").write_text("k")
    assert worktree_config_sync(worktree=worktree, repair=False).missing == ["deep/er/key.pem"]
    assert not (code_dir / "feat-api" / "deep").exists()
    report = worktree_config_sync(worktree=worktree, repair=True)
    assert report.repaired == ["deep/er/key.pem"]
    assert os.readlink(code_dir / "feat-api" / "deep" / "er" / "key.pem") == "../../../sync/app/deep/er/key.pem"


def test_a_symlinked_folder_in_the_worktree_is_never_followed(worktree, code_dir, sync_dir, tmp_path):
    # given the worktree's config/ replaced by a link to a folder outside it
    folder = code_dir / "feat-api"
    outside = tmp_path / "outside"
    outside.mkdir()
    (folder / "config" / "local.yml").unlink()
    (folder / "config").rmdir()
    os.symlink(outside, folder / "config")

    report = worktree_config_sync(worktree=worktree, repair=True)

    assert report.blocked == [{"path": "config/local.yml", "reason": "'config' is a symbolic link or not a folder"}]
    assert os.listdir(outside) == []


def test_unsafe_or_special_sync_entries_are_skipped(worktree, code_dir, sync_dir, tmp_path):
    (sync_dir / "bad\\name").write_text("x")
    (sync_dir / ".git").mkdir()
    (sync_dir / ".git" / "config").write_text("x")
    os.symlink(tmp_path, sync_dir / "linked-folder")
    os.symlink("/etc/hostname", sync_dir / "linked-file")

    report = worktree_config_sync(worktree=worktree, repair=True)

    assert sorted(item["path"] for item in report.skipped) == [".git", "bad\\name", "linked-file", "linked-folder"]
    assert sorted(report.linked) == [".env", "config/local.yml"]
    assert (code_dir / "feat-api" / ".git").is_file()  # the worktree's own link to its repository


def test_links_are_not_uncommitted_changes(worktree):
    assert worktree_changes(worktree=worktree) == []


def test_no_sync_folder_means_nothing_to_link(repository, actor, code_dir):
    os.rmdir(code_dir / "sync" / "app")
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="plain")
    report = worktree_config_sync(worktree=worktree, repair=True)
    assert (report.linked, report.missing, report.in_sync) == ([], [], True)


# --- API ------------------------------------------------------------------------------------


def test_the_holder_repairs_through_the_api(agent_client, actor, agent, worktree, code_dir):
    worktree_claim(actor=actor, agent=agent, worktree=worktree)
    (code_dir / "feat-api" / ".env").unlink()

    response = agent_client.post(_url(worktree), {"repair": True}, format="json")

    assert response.status_code == 200, response.data
    assert (response.data["missing"], response.data["repaired"], response.data["in_sync"]) == ([".env"], [".env"], True)
    assert (code_dir / "feat-api" / ".env").is_symlink()
    event = Event.objects.get(name="worktree.config_synced")
    assert (event.actor, event.payload["repaired"]) == ("agent:claude-1", [".env"])


def test_staff_may_check_without_holding(staff_client, worktree, code_dir):
    (code_dir / "feat-api" / ".env").unlink()
    response = staff_client.post(_url(worktree), {}, format="json")
    assert (response.status_code, response.data["missing"], response.data["repaired"]) == (200, [".env"], [])
    assert not (code_dir / "feat-api" / ".env").exists()


def test_another_agent_is_refused_and_nothing_changes(other_client, actor, agent, worktree, code_dir):
    worktree_claim(actor=actor, agent=agent, worktree=worktree)
    (code_dir / "feat-api" / ".env").unlink()
    events = Event.objects.count()

    response = other_client.post(_url(worktree), {"repair": True}, format="json")

    assert response.status_code == 403
    assert not (code_dir / "feat-api" / ".env").exists()
    assert Event.objects.count() == events


def test_an_agent_without_the_claim_is_refused(agent_client, worktree, code_dir):
    (code_dir / "feat-api" / ".env").unlink()
    response = agent_client.post(_url(worktree), {"repair": True}, format="json")
    assert response.status_code == 403
    assert not (code_dir / "feat-api" / ".env").exists()


def test_a_bad_body_is_400(staff_client, worktree):
    assert staff_client.post(_url(worktree), {"repair": "yes"}, format="json").status_code == 400
    assert staff_client.post(_url(worktree), {"fix": True}, format="json").status_code == 400


def test_a_holder_whose_lease_expired_is_refused(agent_client, actor, agent, worktree, code_dir):
    worktree_claim(actor=actor, agent=agent, worktree=worktree)
    Worktree.objects.filter(pk=worktree.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    (code_dir / "feat-api" / ".env").unlink()

    response = agent_client.post(_url(worktree), {"repair": True}, format="json")

    assert response.status_code == 409
    assert not (code_dir / "feat-api" / ".env").exists()
