"""Archival: stream, re-read and verify, and only then delete the folder (SPEC §7)."""

import hashlib
import io
import json
import os
import tarfile
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
import zstandard
from django.utils import timezone

from ledger.models import Event
from sessions_app.models import AgentSession
from tests.factories import AgentFactory, SessionFactory
from tests.workspaces.archive_support import (
    Killed,
    archive_storage_fixture,  # noqa: F401 - autouse: storages["archives"] in ARCHIVE_ROOT
    ended_session_workspace,
    fill_tree,
    tree_state,
)
from workspaces.archive import services as archival
from workspaces.archive.format import ArchiveInvalid, FolderChanged
from workspaces.archive.services import archive_claim, tombstone_path, workspace_archive
from workspaces.archive.storage import archive_storage as archive_storage_for_tests
from workspaces.archive.storage import stored_atomically
from workspaces.files.services import workspace_shared
from workspaces.models import Repository, Workspace, Worktree

pytestmark = pytest.mark.django_db


@pytest.fixture
def workspace(tmp_path):
    workspace = ended_session_workspace(days_ago=30)
    fill_tree(Path(workspace.root_path), outside=tmp_path / "outside")
    return workspace


def _stored(storage_root: Path) -> list[str]:
    return sorted(p.name for p in storage_root.iterdir())


def _manifest(storage_root: Path, workspace: Workspace) -> dict:
    name = workspace.archive_location.replace(".tar.zst", ".manifest.json")
    return json.loads((storage_root / name).read_bytes())


def _tar_bytes(storage_root: Path, workspace: Workspace) -> bytes:
    compressed = (storage_root / workspace.archive_location).read_bytes()
    return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(compressed)).read()


def test_archive_streams_verifies_then_deletes_the_folder(workspace, archive_storage, tmp_path):
    # given
    root = Path(workspace.root_path)
    before = tree_state(root)

    # when
    outcome = workspace_archive(workspace_id=workspace.pk)

    # then the folder is gone and the workspace points at a stored, verified archive
    workspace.refresh_from_db()
    name = f"workspace-{workspace.pk}-{root.name}"
    assert (outcome.outcome, outcome.location) == ("archived", f"{name}.tar.zst")
    assert not root.exists() and not tombstone_path(workspace).exists()
    assert workspace.status == Workspace.Status.ARCHIVED
    assert _stored(archive_storage) == [f"{name}.manifest.json", f"{name}.tar.zst"]
    stored = (archive_storage / workspace.archive_location).read_bytes()
    assert (workspace.archive_size, workspace.archive_sha256) == (len(stored), hashlib.sha256(stored).hexdigest())
    manifest_bytes = (archive_storage / f"{name}.manifest.json").read_bytes()
    assert workspace.archive_manifest_sha256 == hashlib.sha256(manifest_bytes).hexdigest()
    assert (workspace.archive_claimed_by, workspace.archive_claimed_until) == ("", None)
    assert workspace.archive_verified_at is not None
    # and the manifest lists every member with its sha256, in archive order
    manifest = json.loads(manifest_bytes)
    files = {e["path"]: e for e in manifest["entries"] if e["type"] == "file"}
    assert set(files) == {p for p, v in before.items() if v[0] == "file"}
    for path, item in files.items():
        assert (item["size"], item["sha256"]) == (len(before[path][2]), hashlib.sha256(before[path][2]).hexdigest())
    assert files["setuid-tool"]["mode"] == 0o755  # setuid never stored
    assert manifest["skipped"] == [{"path": "a-fifo", "type": "fifo"}]
    # and it is an ordinary tar: the stdlib lists the same members in the same order
    with tarfile.open(fileobj=io.BytesIO(_tar_bytes(archive_storage, workspace))) as tar:
        assert tar.getnames() == [e["path"] for e in manifest["entries"]]
    # and one event says so
    event = Event.objects.get(name="workspace.archived")
    assert (event.subject_type, event.subject_id, event.actor) == ("workspace", str(workspace.pk), "system")
    assert event.payload == {
        "location": f"{name}.tar.zst",
        "size": len(stored),
        "sha256": workspace.archive_sha256,
        "files": len(files),
        "bytes": sum(item["size"] for item in files.values()),
        "skipped": 1,
    }
    # and nothing outside the folder was touched
    assert (tmp_path / "outside" / "outside.txt").read_text() == "must never be archived or touched\n"


def test_symlinks_are_stored_as_links_and_never_followed(workspace, archive_storage, tmp_path):
    workspace_archive(workspace_id=workspace.pk)
    workspace.refresh_from_db()

    entries = {e["path"]: e for e in _manifest(archive_storage, workspace)["entries"]}
    links = {path: e["target"] for path, e in entries.items() if e["type"] == "symlink"}
    assert links["link-inside"] == "work_products/report.md"
    assert links["link-to-folder"] == "work_products/deep"
    assert links["dangling"] == "missing-target"
    assert links["work_products/link-out-relative"] == "../../outside-rel"
    assert links["link-out-absolute"] == str(tmp_path / "outside" / "outside.txt")
    # nothing was archived through a link: no member under one, and the outside file's bytes are absent
    assert not [p for p in entries if p.startswith(("link-to-folder/", "link-inside/"))]
    assert b"must never be archived" not in _tar_bytes(archive_storage, workspace)
    assert (tmp_path / "outside" / "outside.txt").exists()


@contextmanager
def _flip_a_byte_after_writing(name_suffix: str):
    real = stored_atomically

    @contextmanager
    def corrupting(name):
        with real(name) as sink:
            yield sink
        if name.endswith(name_suffix):
            path = Path(archive_storage_for_tests().path(name))
            data = bytearray(path.read_bytes())
            data[len(data) // 2] ^= 0x01
            path.write_bytes(bytes(data))

    yield corrupting


@pytest.mark.parametrize(
    ("suffix", "reason"),
    [(".tar.zst", "damaged|sha256"), (".manifest.json", "the stored manifest is not the one")],
    ids=["archive", "manifest"],
)
def test_an_archive_corrupted_after_writing_is_not_trusted_and_the_folder_stays(workspace, monkeypatch, suffix, reason):
    # given the storage flips one byte of what was just written
    root = Path(workspace.root_path)
    before = tree_state(root)
    with _flip_a_byte_after_writing(suffix) as corrupting:
        monkeypatch.setattr(archival, "stored_atomically", corrupting)

        # when
        with pytest.raises(ArchiveInvalid) as refused:
            workspace_archive(workspace_id=workspace.pk)

    # then the archive was not trusted: the folder and the row are as they were
    assert any(part in refused.value.reason for part in reason.split("|"))
    assert tree_state(root) == before
    workspace.refresh_from_db()
    assert (workspace.status, workspace.archive_location, workspace.archive_verified_at) == ("active", "", None)
    assert (workspace.archive_claimed_by, workspace.archive_claimed_until) == ("", None)
    assert not Event.objects.filter(name="workspace.archived").exists()
    # and a later run, with an honest storage, archives it
    monkeypatch.undo()
    assert workspace_archive(workspace_id=workspace.pk).outcome == "archived"


def test_a_folder_that_changes_while_archived_stays(workspace, monkeypatch):
    # given an agent writes a file while the archive is being verified
    root = Path(workspace.root_path)
    real = archival.archive_read

    def read_while_someone_writes(**kwargs):
        (root / "work_products" / "late.md").write_text("written during the archive\n")
        return real(**kwargs)

    monkeypatch.setattr(archival, "archive_read", read_while_someone_writes)

    # when
    with pytest.raises(FolderChanged):
        workspace_archive(workspace_id=workspace.pk)

    # then nothing is lost
    assert (root / "work_products" / "late.md").read_text() == "written during the archive\n"
    workspace.refresh_from_db()
    assert (workspace.status, workspace.archive_verified_at, workspace.archive_claimed_by) == ("active", None, "")


def test_archiving_twice_archives_once(workspace):
    first = workspace_archive(workspace_id=workspace.pk)
    second = workspace_archive(workspace_id=workspace.pk)

    assert (first.outcome, second.outcome) == ("archived", "already_archived")
    assert second.location == first.location
    assert Event.objects.filter(name="workspace.archived").count() == 1


def test_a_claimed_workspace_is_left_to_its_claimant_until_the_lease_lapses(workspace):
    # given another worker holds the claim
    assert archive_claim(workspace_id=workspace.pk, token="other", status="active")
    root = Path(workspace.root_path)
    before = tree_state(root)

    # when
    busy = workspace_archive(workspace_id=workspace.pk)

    # then nothing was done and its claim is untouched
    assert busy.outcome == "busy"
    assert tree_state(root) == before
    workspace.refresh_from_db()
    assert (workspace.status, workspace.archive_claimed_by) == ("active", "other")
    # and once its lease lapses (the worker died), the next run takes over
    Workspace.objects.filter(pk=workspace.pk).update(archive_claimed_until=timezone.now() - timedelta(seconds=1))
    assert workspace_archive(workspace_id=workspace.pk).outcome == "archived"


def test_only_one_of_two_claims_wins():
    workspace = ended_session_workspace(days_ago=30)

    first = archive_claim(workspace_id=workspace.pk, token="a", status="active")
    second = archive_claim(workspace_id=workspace.pk, token="b", status="active")

    assert (first, second) == (True, False)
    assert Workspace.objects.get(pk=workspace.pk).archive_claimed_by == "a"


def test_the_shared_workspace_an_open_session_and_a_held_worktree_are_refused(agent, tmp_path):
    shared = workspace_shared()
    SessionFactory(workspace=shared, status=AgentSession.Status.COMPLETED, ended_at=timezone.now())
    in_use = ended_session_workspace(days_ago=30)
    SessionFactory(workspace=in_use, status=AgentSession.Status.RUNNING)
    held = Workspace.objects.create(kind=Workspace.Kind.WORKTREE, root_path=str(tmp_path / "feat-x"))
    repository = Repository.objects.create(name="app", path=str(tmp_path / "app"))
    Worktree.objects.create(
        repository=repository,
        type="feat",
        name="x",
        branch="feat-x",
        real_path=held.root_path,
        workspace=held,
        holder=AgentFactory(slug="holder"),
        lease_expires_at=timezone.now() + timedelta(hours=1),
    )

    outcomes = [workspace_archive(workspace_id=w.pk) for w in (shared, in_use, held)]

    assert [(o.outcome, o.reason.split(" ")[0]) for o in outcomes] == [
        ("refused", "The"),
        ("refused", "Session"),
        ("refused", "Its"),
    ]
    assert "never archived" in outcomes[0].reason
    assert "held by holder" in outcomes[2].reason
    assert set(Workspace.objects.values_list("status", flat=True)) == {"active"}
    assert Path(in_use.root_path).exists()
    assert not Event.objects.filter(name="workspace.archived").exists()


def test_a_name_restore_would_refuse_keeps_the_folder(archive_storage):
    workspace = ended_session_workspace(days_ago=30)
    root = Path(workspace.root_path)
    (root / "notes:v2.txt").write_text("a colon is not portable\n")

    with pytest.raises(ArchiveInvalid) as refused:
        workspace_archive(workspace_id=workspace.pk)

    assert "'notes:v2.txt' could not be restored safely" in refused.value.message
    assert (root / "notes:v2.txt").exists()
    assert _stored(archive_storage) == []  # the half-written archive went with the refusal
    assert Workspace.objects.get(pk=workspace.pk).status == "active"


# --- A run killed halfway is finished by the next one -------------------------------------------


def test_killed_after_verification_the_next_run_deletes_and_finishes(workspace, monkeypatch):
    # given a run verified the archive and was killed before it deleted anything
    root = Path(workspace.root_path)
    monkeypatch.setattr(archival, "folder_remove", lambda *a, **kw: (_ for _ in ()).throw(Killed()))
    with pytest.raises(Killed):
        workspace_archive(workspace_id=workspace.pk)
    workspace.refresh_from_db()
    assert (workspace.status, workspace.archive_verified_at is not None, root.exists()) == ("active", True, True)
    monkeypatch.undo()

    # when
    outcome = workspace_archive(workspace_id=workspace.pk)

    # then it re-read the archive, checked the folder still matches, and finished
    assert outcome.outcome == "archived"
    assert not root.exists()
    assert Event.objects.filter(name="workspace.archived").count() == 1


def test_killed_while_deleting_the_next_run_removes_the_rest(workspace, monkeypatch):
    # given a run renamed the folder to its tombstone and was killed with half of it deleted
    root = Path(workspace.root_path)
    tombstone = tombstone_path(workspace)
    real_rmtree = archival._rmtree

    def killed_halfway(path):
        real_rmtree(Path(path) / "work_products")
        raise Killed()

    monkeypatch.setattr(archival, "_rmtree", killed_halfway)
    with pytest.raises(Killed):
        workspace_archive(workspace_id=workspace.pk)
    assert not root.exists() and tombstone.exists() and not (tombstone / "work_products").exists()
    monkeypatch.undo()

    # when
    outcome = workspace_archive(workspace_id=workspace.pk)

    # then
    assert outcome.outcome == "archived"
    assert not tombstone.exists()
    assert Workspace.objects.get(pk=workspace.pk).status == "archived"


def test_a_folder_changed_after_a_killed_verification_is_archived_again(workspace, monkeypatch, archive_storage):
    # given a run verified and was killed, and then someone wrote into the folder
    root = Path(workspace.root_path)
    monkeypatch.setattr(archival, "folder_remove", lambda *a, **kw: (_ for _ in ()).throw(Killed()))
    with pytest.raises(Killed):
        workspace_archive(workspace_id=workspace.pk)
    monkeypatch.undo()
    (root / "work_products" / "after.md").write_text("after the first archive\n")

    # when
    outcome = workspace_archive(workspace_id=workspace.pk)

    # then the new file is in the new archive
    assert outcome.outcome == "archived"
    workspace.refresh_from_db()
    paths = [e["path"] for e in _manifest(archive_storage, workspace)["entries"]]
    assert "work_products/after.md" in paths


def test_temporary_files_a_killed_writer_left_are_removed(workspace, archive_storage):
    name = f"workspace-{workspace.pk}-{Path(workspace.root_path).name}.tar.zst"
    (archive_storage / f".{name}.0123abcd.part").write_bytes(b"half an archive")

    workspace_archive(workspace_id=workspace.pk)

    assert not [p for p in os.listdir(archive_storage) if p.endswith(".part")]
