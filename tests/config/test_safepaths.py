"""The safe-path module on its own; tests/workspaces/test_files_api.py drives the same
cases through the API."""

import os

import pytest

from config.safepaths import (
    UnsafePath,
    clean_relative,
    open_file_beneath,
    parent_descriptor,
    resolve_under_roots,
)

REFUSED = [
    ("../escape.txt", "'..' component"),
    ("work_products/../../escape.txt", "'..' component"),
    ("%2e%2e/escape.txt", "percent-encoded"),
    ("%252e%252e/escape.txt", "percent-encoded"),
    ("%C0%AE%C0%AE/escape.txt", "percent-encoded"),
    ("....//escape.txt", "'....' component"),
    ("..;/escape.txt", "'..;' component"),
    ("./escape.txt", "'.' component"),
    ("/etc/passwd", "absolute"),
    ("//host/share", "absolute"),
    ("a//b", "empty component"),
    ("a\\..\\b", "backslash"),
    ("\\\\host\\share", "backslash"),
    ("C:\\Windows", "backslash"),
    ("C:notes.txt", "drive"),
    ("notes.txt.", "ends with a dot"),
    ("notes.txt ", "ends with a dot or space"),
    ("CON", "reserved device name"),
    ("work/nul.txt", "reserved device name"),
    ("com1", "reserved device name"),
    ("a\x00b", "NUL"),
    ("\uff0e\uff0e\uff0fescape.txt", "normalises to '.'"),
    ("a\uff0fb", "normalises to '/'"),
    ("a\u2024b", "normalises to '.'"),
    ("x" * 256, "longer than 255 bytes"),
    ("/".join(["d" * 200] * 21), "longer than 4096 bytes"),
    ("bad\ud800name", "lone surrogate"),
    ("notes:stream", "contains ':'"),
    ("dir/", "names a folder"),
    ("", "empty"),
    ("a\ufffdb", "not valid UTF-8"),
    ("tab\there", "contains '\\t'"),
]


@pytest.mark.parametrize(("raw", "reason"), REFUSED)
def test_refused_with_a_reason(raw, reason):
    with pytest.raises(UnsafePath) as error:
        clean_relative(raw)

    assert reason in error.value.message
    assert error.value.status_code == 400


@pytest.mark.parametrize(
    ("raw", "parts"),
    [
        ("report.md", ("report.md",)),
        ("work_products/2026/q1 report.pdf", ("work_products", "2026", "q1 report.pdf")),
        (".env", (".env",)),
        ("..hidden-but-fine", ("..hidden-but-fine",)),
        ("café/naïve.txt", ("café", "naïve.txt")),
        ("a" * 255, ("a" * 255,)),
    ],
)
def test_plain_names_pass(raw, parts):
    assert clean_relative(raw) == parts


def test_flat_workspace_refuses_sub_folders():
    assert clean_relative("report.md", flat=True) == ("report.md",)
    with pytest.raises(UnsafePath, match="sub-folders"):
        clean_relative("work_products/report.md", flat=True)


def test_a_symlinked_folder_on_the_way_is_refused(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (root / "link").symlink_to(outside)

    with pytest.raises(UnsafePath, match="symbolic link"):
        open_file_beneath(root, ("link", "secret.txt"))
    with pytest.raises(UnsafePath, match="symbolic link"), parent_descriptor(root, ("link", "new.txt"), create=True):
        pass
    assert os.listdir(outside) == ["secret.txt"]


def test_a_symlinked_file_is_refused_even_inside_the_root(tmp_path):
    (tmp_path / "real.txt").write_text("x")
    (tmp_path / "alias.txt").symlink_to(tmp_path / "real.txt")

    with pytest.raises(UnsafePath, match="symbolic link"):
        open_file_beneath(tmp_path, ("alias.txt",))


def test_export_destination_must_lie_in_a_root(tmp_path):
    roots = [tmp_path / "downloads", tmp_path / "shared"]

    assert resolve_under_roots(f"{tmp_path}/shared/a/b.txt", roots) == (roots[1], ("a", "b.txt"))
    for bad in [f"{tmp_path}/elsewhere/x", f"{tmp_path}/downloads/../x", "relative/x", f"{tmp_path}/downloadsX/x", 5]:
        with pytest.raises(UnsafePath):
            resolve_under_roots(bad, roots)
