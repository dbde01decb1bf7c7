import os
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.factories import SessionFactory
from workspaces.models import Artifact, ArtifactVersion, Workspace

pytestmark = pytest.mark.django_db


def snapshot(root: Path) -> dict[str, tuple[bytes, float]]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() and not p.is_symlink() else b"", p.lstat().st_mtime)
        for p in root.rglob("*")
    }


def run(*args) -> str:
    out = StringIO()
    call_command("import_workspace", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_adopts_an_old_session_folder_without_changing_it(tmp_path):
    folder = tmp_path / "session_20260101_120000_abcd1234"
    (folder / "work_products").mkdir(parents=True)
    (folder / "search_results").mkdir()
    (folder / "work_products" / "report.md").write_text("# done")
    (folder / "search_results" / "q1.json").write_text("{}")
    (folder / "work_products" / ".report.md.123.part").write_text("half")
    (folder / "work_products" / "link.md").symlink_to("/etc/hostname")
    before = snapshot(folder)

    output = run(str(folder))

    assert snapshot(folder) == before
    workspace = Workspace.objects.get()
    assert (workspace.kind, workspace.root_path) == ("session", str(folder))
    assert dict(Artifact.objects.values_list("path", "kind")) == {
        "work_products/report.md": "work_product",
        "search_results/q1.json": "search_result",
    }
    assert "2 new version(s)" in output
    assert "link.md: a symbolic link" in output
    assert "unfinished upload" in output


def test_adopts_the_flat_layout_and_skips_sub_folders(tmp_path):
    folder = tmp_path / "denker"
    (folder / "nested").mkdir(parents=True)
    (folder / "summary.pdf").write_bytes(b"%PDF")
    (folder / "nested" / "x.txt").write_text("x")

    output = run(str(folder))

    assert Workspace.objects.get().kind == "shared"
    assert list(Artifact.objects.values_list("path", flat=True)) == ["summary.pdf"]
    assert "nested/: a sub-folder" in output


def test_running_again_adds_only_changed_files(tmp_path):
    folder = tmp_path / "denker"
    folder.mkdir()
    (folder / "a.md").write_text("one")
    (folder / "b.md").write_text("two")
    run(str(folder))
    (folder / "b.md").write_text("two, edited")

    output = run(str(folder))

    assert Workspace.objects.count() == 1
    assert ArtifactVersion.objects.count() == 3
    assert "Re-scanned" in output and "1 new version(s), 1 unchanged" in output


def test_attaches_to_a_session(tmp_path):
    session = SessionFactory()
    folder = tmp_path / "old"
    folder.mkdir()

    run(str(folder), "--session", session.pk)

    session.refresh_from_db()
    assert session.workspace == Workspace.objects.get()


@pytest.mark.parametrize("make", ["missing", "file", "symlink"])
def test_refuses_what_is_not_a_folder(tmp_path, make):
    target = tmp_path / "target"
    if make == "file":
        target.write_text("x")
    elif make == "symlink":
        (tmp_path / "real").mkdir()
        target.symlink_to(tmp_path / "real")

    with pytest.raises(CommandError, match="not a folder"):
        run(str(target))
    assert Workspace.objects.count() == 0


def test_relative_paths_are_taken_from_the_current_folder(tmp_path, monkeypatch):
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path)

    run("here")

    assert Workspace.objects.get().root_path == os.path.realpath(tmp_path / "here")
