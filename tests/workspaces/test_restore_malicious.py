"""Malicious archives are refused whole, before anything is written where the workspace goes.

Each archive here is planted with a matching manifest and recorded sha256s, as if our own
archiver had made it: only what is inside may make the restore refuse it. The "manifest"
cases list the bad member in the manifest (refused before any folder is made); the "tar"
cases hide it in the tar behind an innocent manifest (refused at that member, and the
temporary folder goes).
"""

import os
import tarfile
from pathlib import Path

import pytest

from ledger.models import Event
from tests.workspaces.archive_support import (
    archive_storage_fixture,  # noqa: F401 - autouse: storages["archives"] in ARCHIVE_ROOT
    ended_session_workspace,
    entry,
    member,
    planted_archive,
)
from workspaces.archive.format import ArchiveInvalid
from workspaces.archive.restore import workspace_restore
from workspaces.archive.services import folder_remove
from workspaces.models import Workspace

pytestmark = pytest.mark.django_db

OK = b"harmless\n"
BAD = b"payload\n"


@pytest.fixture
def emptied(tmp_path):
    """An archived-looking workspace whose folder is gone, and a folder outside it to watch."""
    workspace = ended_session_workspace(days_ago=30)
    folder_remove(Path(workspace.root_path))
    outside = tmp_path / "outside"
    outside.mkdir()
    return workspace, outside


def _everything_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _cases(outside: Path) -> dict[str, tuple[list, list, str]]:
    """name -> (tar members, manifest entries, what the refusal says)."""
    escape = str(outside)
    return {
        "absolute member": (
            [member("/etc/cron.d/evil", data=BAD)],
            [entry("/etc/cron.d/evil", data=BAD)],
            "it is absolute",
        ),
        "dot-dot member": (
            [member("ok.txt", data=OK), member("../../escape.txt", data=BAD)],
            [entry("ok.txt", data=OK), entry("../../escape.txt", data=BAD)],
            "contains a '..' component",
        ),
        "symlink out, then a file through it": (
            [member("evil", kind=tarfile.SYMTYPE, link=escape), member("evil/pwned.txt", data=BAD)],
            [entry("evil", kind="symlink", target=escape), entry("evil/pwned.txt", data=BAD)],
            "inside 'evil', which is a symlink",
        ),
        "hard link out of the root": (
            [member("passwd", kind=tarfile.LNKTYPE, link="/etc/passwd")],
            [entry("passwd", kind="hardlink")],
            "only files, folders and symlinks are restored",
        ),
        "device node": (
            [member("null", kind=tarfile.CHRTYPE)],
            [entry("null", kind="chardev")],
            "only files, folders and symlinks are restored",
        ),
        "setuid bit": (
            [member("tool", data=BAD, mode=0o4755)],
            [entry("tool", data=BAD, mode=0o4755)],
            "setuid, setgid and sticky bits are refused",
        ),
    }


def _hidden_cases(outside: Path) -> dict[str, tuple[list, list, str]]:
    """The same tricks behind a manifest that lists only an innocent file."""
    innocent = [entry("ok.txt", data=OK)]
    escape = str(outside)
    return {
        "absolute member": ([member("/abs.txt", data=OK)], innocent, "where the manifest has 'ok.txt'"),
        "dot-dot member": ([member("../ok.txt", data=OK)], innocent, "where the manifest has 'ok.txt'"),
        "symlink out, then a file through it": (
            [member("ok.txt", kind=tarfile.SYMTYPE, link=escape), member("ok.txt/pwned", data=BAD)],
            innocent,
            "differs from the manifest",
        ),
        "hard link out of the root": (
            [member("ok.txt", kind=tarfile.LNKTYPE, link="/etc/passwd")],
            innocent,
            "is a hard link",
        ),
        "device node": ([member("ok.txt", kind=tarfile.CHRTYPE)], innocent, "is a device node"),
        "setuid bit": ([member("ok.txt", data=OK, mode=0o4755)], innocent, "setuid, setgid and sticky bits"),
        "extra member after the listed ones": (
            [member("ok.txt", data=OK), member("extra.txt", data=BAD)],
            innocent,
            "'extra.txt' is not in the manifest",
        ),
        "different bytes than listed": (
            [member("ok.txt", data=b"harmles!\n")],
            innocent,
            "'ok.txt' does not match its sha256 in the manifest",
        ),
    }


CASES = [
    "absolute member",
    "dot-dot member",
    "symlink out, then a file through it",
    "hard link out of the root",
    "device node",
    "setuid bit",
]


HIDDEN_ONLY = ["extra member after the listed ones", "different bytes than listed"]


@pytest.mark.parametrize(
    ("where", "case"), [("manifest", case) for case in CASES] + [("tar", case) for case in CASES + HIDDEN_ONLY]
)
def test_a_malicious_archive_is_refused_with_nothing_written(emptied, archive_storage, where, case):
    # given
    workspace, outside = emptied
    cases = _cases(outside) if where == "manifest" else _hidden_cases(outside)
    members, entries, says = cases[case]
    planted_archive(workspace, archive_storage, members=members, entries=entries)
    parent = Path(workspace.root_path).parent
    before = (_everything_under(parent), _everything_under(outside))

    # when
    with pytest.raises(ArchiveInvalid) as refused:
        workspace_restore(workspace_id=workspace.pk)

    # then it says why, and nothing was written anywhere
    assert says in refused.value.message
    assert (_everything_under(parent), _everything_under(outside)) == before
    assert not os.path.lexists(workspace.root_path)
    workspace.refresh_from_db()
    assert (workspace.status, workspace.archive_claimed_by) == ("archived", "")
    assert not Event.objects.filter(name="workspace.restored").exists()


def test_a_manifest_changed_after_archiving_is_not_trusted(emptied, archive_storage):
    workspace, _ = emptied
    planted_archive(workspace, archive_storage, members=[member("ok.txt", data=OK)], entries=[entry("ok.txt", data=OK)])
    manifest = archive_storage / workspace.archive_location.replace(".tar.zst", ".manifest.json")
    manifest.write_bytes(manifest.read_bytes().replace(b'"mode": 420', b'"mode": 511'))

    with pytest.raises(ArchiveInvalid, match="the stored manifest is not the one recorded"):
        workspace_restore(workspace_id=workspace.pk)

    assert not os.path.lexists(workspace.root_path)


def test_a_planted_archive_that_is_honest_restores(emptied, archive_storage):
    # the builder itself is sound: the same route with harmless members restores them
    workspace, outside = emptied
    planted_archive(
        workspace,
        archive_storage,
        members=[
            member("docs", kind=tarfile.DIRTYPE, mode=0o755),
            member("docs/ok.txt", data=OK),
            member("out", kind=tarfile.SYMTYPE, link=str(outside)),
        ],
        entries=[
            entry("docs", kind="dir", mode=0o755),
            entry("docs/ok.txt", data=OK),
            entry("out", kind="symlink", target=str(outside)),
        ],
    )

    assert workspace_restore(workspace_id=workspace.pk).outcome == "restored"

    root = Path(workspace.root_path)
    assert (root / "docs" / "ok.txt").read_bytes() == OK
    assert os.readlink(root / "out") == str(outside)  # restored as the link it was, never followed
    assert _everything_under(outside) == []
    assert Workspace.objects.get(pk=workspace.pk).status == "active"
