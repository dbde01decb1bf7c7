"""Restore: the folder comes back exactly as archived, verified, or not at all."""

import os
from pathlib import Path

import pytest
from django.urls import reverse

from ledger.models import Event
from tests.admin.factories import admin_url
from tests.workspaces.archive_support import (
    Killed,
    archive_storage_fixture,  # noqa: F401 - autouse: storages["archives"] in ARCHIVE_ROOT
    ended_session_workspace,
    fill_tree,
    queued_tasks_fixture,  # noqa: F401 - the queued_tasks fixture
    tree_state,
    without_setuid,
)
from workspaces.archive import restore as restore_module
from workspaces.archive.format import ArchiveInvalid
from workspaces.archive.restore import workspace_restore
from workspaces.archive.services import workspace_archive
from workspaces.models import Workspace

pytestmark = pytest.mark.django_db


@pytest.fixture
def archived(tmp_path):
    """An archived workspace and what its folder held."""
    workspace = ended_session_workspace(days_ago=30)
    root = Path(workspace.root_path)
    fill_tree(root, outside=tmp_path / "outside")
    before = tree_state(root)
    assert workspace_archive(workspace_id=workspace.pk).outcome == "archived"
    workspace.refresh_from_db()
    return workspace, before


def _siblings(workspace: Workspace) -> list[str]:
    return sorted(os.listdir(Path(workspace.root_path).parent))


def test_restore_gives_back_the_folder_exactly(archived, tmp_path):
    # given
    workspace, before = archived

    # when
    outcome = workspace_restore(workspace_id=workspace.pk, actor_label="user:engineer")

    # then paths, bytes, modes (minus setuid) and symlinks are as they were
    root = Path(workspace.root_path)
    assert (outcome.outcome, outcome.files) == ("restored", sum(1 for v in before.values() if v[0] == "file"))
    assert tree_state(root) == without_setuid(before)
    assert os.readlink(root / "link-out-absolute") == str(tmp_path / "outside" / "outside.txt")
    assert (tmp_path / "outside" / "outside.txt").read_text() == "must never be archived or touched\n"
    # and the row is active again, with the archive still on record
    workspace.refresh_from_db()
    assert (workspace.status, workspace.archive_verified_at, workspace.archive_claimed_by) == ("active", None, "")
    assert workspace.archive_location.endswith(".tar.zst")
    event = Event.objects.get(name="workspace.restored")
    assert (event.subject_id, event.actor) == (str(workspace.pk), "user:engineer")
    assert event.payload["files"] == outcome.files
    # and no temporary folder is left beside it
    assert _siblings(workspace) == [root.name]


def test_restoring_twice_restores_once(archived):
    workspace, before = archived

    first = workspace_restore(workspace_id=workspace.pk)
    second = workspace_restore(workspace_id=workspace.pk)

    assert (first.outcome, second.outcome) == ("restored", "already_active")
    assert Event.objects.filter(name="workspace.restored").count() == 1
    assert tree_state(Path(workspace.root_path)) == without_setuid(before)


def test_gzip_archives_round_trip(settings, tmp_path):
    settings.ARCHIVE_COMPRESSION = "gzip"
    workspace = ended_session_workspace(days_ago=30)
    root = Path(workspace.root_path)
    fill_tree(root, outside=tmp_path / "outside")
    before = tree_state(root)

    archived = workspace_archive(workspace_id=workspace.pk)
    restored = workspace_restore(workspace_id=workspace.pk)

    assert archived.location.endswith(".tar.gz")
    assert restored.outcome == "restored"
    assert tree_state(root) == without_setuid(before)


def test_archive_restore_archive_again(archived):
    workspace, before = archived
    workspace_restore(workspace_id=workspace.pk)
    (Path(workspace.root_path) / "work_products" / "new.md").write_text("after the restore\n")

    again = workspace_archive(workspace_id=workspace.pk)
    workspace_restore(workspace_id=workspace.pk)

    assert again.outcome == "archived"
    assert (Path(workspace.root_path) / "work_products" / "new.md").read_text() == "after the restore\n"
    assert Event.objects.filter(name="workspace.archived").count() == 2


def test_a_stored_archive_that_changed_is_refused_and_nothing_is_written(archive_storage, archived):
    # given one byte of the stored archive changed after it was verified
    workspace, _ = archived
    stored = archive_storage / workspace.archive_location
    data = bytearray(stored.read_bytes())
    data[-200] ^= 0x01
    stored.write_bytes(bytes(data))
    siblings = _siblings(workspace)

    # when
    with pytest.raises(ArchiveInvalid):
        workspace_restore(workspace_id=workspace.pk)

    # then nothing was written and the row still says archived
    assert _siblings(workspace) == siblings
    workspace.refresh_from_db()
    assert (workspace.status, workspace.archive_claimed_by) == ("archived", "")
    assert not Event.objects.filter(name="workspace.restored").exists()


def test_killed_after_the_rename_the_next_run_adopts_the_folder(archived, monkeypatch):
    # given a run put the folder in place and was killed before it marked the row
    workspace, before = archived
    monkeypatch.setattr(restore_module, "_mark_restored", lambda **kw: (_ for _ in ()).throw(Killed()))
    with pytest.raises(Killed):
        workspace_restore(workspace_id=workspace.pk)
    monkeypatch.undo()
    assert Workspace.objects.get(pk=workspace.pk).status == "archived"

    # when
    outcome = workspace_restore(workspace_id=workspace.pk)

    # then the folder was checked against the manifest and taken as it is
    assert outcome.outcome == "restored"
    assert tree_state(Path(workspace.root_path)) == without_setuid(before)
    assert Event.objects.filter(name="workspace.restored").count() == 1


def test_a_different_folder_in_the_way_is_left_alone(archived):
    workspace, _ = archived
    root = Path(workspace.root_path)
    root.mkdir()
    (root / "someone-elses.txt").write_text("not from the archive\n")

    with pytest.raises(Exception, match="exists and is not the archived folder"):
        workspace_restore(workspace_id=workspace.pk)

    assert os.listdir(root) == ["someone-elses.txt"]
    assert Workspace.objects.get(pk=workspace.pk).status == "archived"


def test_a_killed_runs_temporary_folder_is_cleared(archived):
    workspace, before = archived
    root = Path(workspace.root_path)
    stale = root.with_name(f".{root.name}.restoring-0123abcd")
    (stale / "half").mkdir(parents=True)

    workspace_restore(workspace_id=workspace.pk)

    assert not stale.exists()
    assert tree_state(root) == without_setuid(before)


# --- API: POST /api/v1/workspaces/{id}/restore/ -------------------------------------------------


def _url(workspace_id: int) -> str:
    return reverse("workspace-restore", args=[workspace_id])


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """Runs a block and then what it queued after commit (tasks are queued only after commit)."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


def test_staff_queue_a_restore(staff_client, archived, queued_tasks, committed):
    workspace, _ = archived

    with committed():
        response = staff_client.post(_url(workspace.pk), {}, format="json")

    assert response.status_code == 202
    assert response.json() == {
        "restore": "queued",
        "workspace": {"id": workspace.pk, "kind": "session", "path": workspace.root_path, "status": "archived"},
        "archive": {
            "location": workspace.archive_location,
            "size": workspace.archive_size,
            "sha256": workspace.archive_sha256,
        },
    }
    assert queued_tasks == [("workspace_restore_task", (workspace.pk,), {"actor_label": "user:engineer"})]


def test_restoring_an_active_workspace_is_a_no_op(staff_client, queued_tasks, committed):
    workspace = ended_session_workspace(days_ago=1)

    with committed():
        response = staff_client.post(_url(workspace.pk), {}, format="json")

    assert response.status_code == 200
    assert (response.json()["restore"], response.json()["workspace"]["status"]) == ("already_active", "active")
    assert queued_tasks == []


def test_agents_may_not_restore_and_nothing_changes(agent_client, archived, queued_tasks, committed):
    workspace, _ = archived
    before = list(Workspace.objects.values())

    with committed():
        response = agent_client.post(_url(workspace.pk), {}, format="json")

    assert response.status_code == 403
    assert response.json()["message"] == "Only staff restore archived workspaces."
    assert queued_tasks == []
    assert list(Workspace.objects.values()) == before
    assert not Path(workspace.root_path).exists()


def test_people_who_are_not_staff_and_strangers_are_refused(
    client, django_user_model, archived, queued_tasks, committed
):
    workspace, _ = archived
    with committed():
        anonymous = client.post(_url(workspace.pk), {}, content_type="application/json")
        client.force_login(django_user_model.objects.create_user("viewer", password="pw-123456789"))
        not_staff = client.post(_url(workspace.pk), {}, content_type="application/json")

    assert (anonymous.status_code, not_staff.status_code) == (401, 403)
    assert queued_tasks == []


@pytest.mark.parametrize(
    ("change", "status"),
    [("missing", 404), ("removed", 409), ("being_archived", 409), ("no_archive", 409), ("unknown_field", 400)],
)
def test_refusals(staff_client, archived, queued_tasks, committed, change, status):
    workspace, _ = archived
    workspace_id, body = workspace.pk, {}
    if change == "missing":
        workspace_id = workspace.pk + 1000
    elif change == "removed":
        Workspace.objects.filter(pk=workspace.pk).update(status="removed")
    elif change == "being_archived":
        Workspace.objects.filter(pk=workspace.pk).update(status="active", archive_claimed_by="worker")
    elif change == "no_archive":
        Workspace.objects.filter(pk=workspace.pk).update(archive_location="", archive_manifest_sha256="")
    else:
        body = {"force": True}

    before = list(Workspace.objects.values())
    with committed():
        response = staff_client.post(_url(workspace_id), body, format="json")

    assert response.status_code == status
    assert queued_tasks == []
    assert list(Workspace.objects.values()) == before


def test_the_admin_restore_action_queues_archived_ones(admin_client, archived, queued_tasks, committed):
    workspace, _ = archived
    active = ended_session_workspace(days_ago=1)

    with committed():
        response = admin_client.post(
            admin_url(Workspace, "changelist"),
            {"action": "restore_archives", "_selected_action": [workspace.pk, active.pk]},
            follow=True,
        )

    assert [m.message for m in response.context["messages"]] == ["1 workspace(s) queued for restore; 1 already active."]
    assert queued_tasks == [("workspace_restore_task", (workspace.pk,), {"actor_label": "user:admin"})]


def test_the_admin_archive_now_action_queues_what_may_be_archived(admin_client, queued_tasks, committed):
    recent = ended_session_workspace(days_ago=1)  # not due, but an engineer asked
    in_use = ended_session_workspace(days_ago=1)
    in_use.sessions.update(status="running", ended_at=None)

    with committed():
        response = admin_client.post(
            admin_url(Workspace, "changelist"),
            {"action": "archive_now", "_selected_action": [recent.pk, in_use.pk]},
            follow=True,
        )

    messages = [m.message for m in response.context["messages"]]
    assert messages[0] == "1 workspace(s) queued for archival; 1 failed."
    assert messages[1].endswith("is still open in it.")
    assert queued_tasks == [("workspace_archive_task", (recent.pk,), {"actor_label": "user:admin"})]
