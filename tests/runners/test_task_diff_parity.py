"""runners.task_diff reads a change with libgit2 (pygit2) in the server's process: its files, counts and
hunks must be what git itself says of the same change. Here every file of a varied change (an edit
with a function heading, a rename with an edit, a deletion, a file without a final newline, CRLF
lines, non-ASCII text and a non-UTF-8 byte, a binary file, an empty file) against `git diff -M
--numstat` and `git diff -M` parsed by unidiff, the parser the change page used before."""

import re
import subprocess
from pathlib import Path

import pygit2
import pytest
from django.core.cache import cache
from unidiff import PatchSet

from board.models import Task
from runners import task_diff, task_diff_attributes
from tests.factories import TaskFactory
from tests.runners.test_task_review_api import commit, git
from workspaces.worktrees.services import repository_register

pytestmark = pytest.mark.django_db


def git_text(folder: Path, *args: str) -> str:
    """git's output decoded as the server decodes a diff (its content is not always UTF-8)."""
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, check=True)
    return done.stdout.decode("utf-8", "replace")


PYTHON = "".join(f"def step_{n}(value):\n    return value + {n}\n\n" for n in range(30))
PROSE = "".join(f"Paragraph {n}: the quick brown fox jumps over the lazy dog.\n" for n in range(40))

BEFORE = {
    "src/steps.py": PYTHON,
    "docs/guide.md": PROSE,
    "old/gone.txt": "one\ntwo\nthree\n",
    "tail.txt": "first\nsecond\n",
    "windows.txt": "alpha\r\nbeta\r\ngamma\r\n",
    "empty.txt": "",
}
AFTER = {
    "src/steps.py": PYTHON.replace("return value + 7\n", "return value + 70\n")
    .replace("return value * 22\n", "return value * 22\n")
    .replace(
        "def step_22(value):\n    return value + 22\n\n",
        "def step_22(value):\n    return value * 22\n\n",
    )
    # a function put between two others
    .replace("def step_12(value):", "def inserted(value):\n    return value\n\n\ndef step_12(value):"),
    "docs/guide.md": None,
    "docs/handbook.md": PROSE.replace("Paragraph 3:", "Paragraph three:"),  # renamed, and edited
    "old/gone.txt": None,
    "tail.txt": "first\nsecond, with no newline at its end",
    "windows.txt": "alpha\r\nBETA\r\ngamma\r\n",
    "unicode.txt": "Grüße, 世界 🌍\nLatin-1 byte: ".encode() + b"\xe9\n",
    "logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4,
    "empty.txt": "now it has a line\n",
}


@pytest.fixture
def change(tmp_path):
    clone = tmp_path / "code" / "app"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    commit(clone, BEFORE, "Before")
    repository, _ = repository_register(path=str(clone))
    task = TaskFactory(title="Parity", repository=repository, status=Task.Status.REVIEW)
    git(clone, "checkout", "-q", "-b", f"task-{task.pk}")
    commit(clone, AFTER, "After")
    git(clone, "checkout", "-q", "main")
    return clone, task


def test_files_counts_and_hunks_are_what_git_says_of_the_same_change(change):
    clone, task = change
    read = task_diff.task_change(task=task)
    branch = f"task-{task.pk}"

    # the files: git's statuses and paths, renames with their old path
    raw = git_text(clone, "diff", "-M", "--name-status", f"main...{branch}").splitlines()
    git_files = {line.split("\t")[-1]: line.split("\t")[0][0] for line in raw}
    assert {f.path: f.status for f in read.files} == {
        path: {"A": "added", "M": "modified", "D": "deleted", "R": "renamed"}[letter]
        if path != "logo.png"
        else "binary"
        for path, letter in git_files.items()
    }
    assert {f.path: f.old_path for f in read.files if f.old_path} == {"docs/handbook.md": "docs/guide.md"}

    # the counts: git's --numstat, "-" for the binary file
    numstat = {}
    for line in git_text(clone, "diff", "-M", "--numstat", f"main...{branch}").splitlines():
        added, removed, path = line.split("\t")
        numstat[path.split(" => ")[-1].rstrip("}")] = (added, removed)
    for item in read.files:
        key = next(k for k in numstat if k.endswith(item.path.rsplit("/", 1)[-1]))
        expected = numstat[key]
        if item.binary:
            assert expected == ("-", "-") and item.hunks == [] and item.too_large == "binary file, not shown"
        else:
            assert (str(item.additions), str(item.deletions)) == expected, item.path

    # the hunks, line by line: git's unified diff as unidiff parses it
    patch = PatchSet(git_text(clone, "-c", "core.quotePath=false", "diff", "-M", f"main...{branch}"))
    by_path = {patched.path: patched for patched in patch}
    kinds = {"+": "added", "-": "removed", " ": "context"}
    for item in read.files:
        if item.binary:
            continue
        expected = [
            {
                "header": hunk.section_header,
                "old_start": hunk.source_start,
                "old_lines": hunk.source_length,
                "new_start": hunk.target_start,
                "new_lines": hunk.target_length,
                "lines": [
                    {
                        "kind": kinds[line.line_type],
                        "old": line.source_line_no,
                        "new": line.target_line_no,
                        "text": line.value.rstrip("\n"),
                    }
                    for line in hunk
                    if line.line_type in kinds
                ],
            }
            for hunk in by_path[item.path]
        ]
        assert item.hunks == expected, item.path
    assert any(hunk["header"].startswith("def step_") for f in read.files for hunk in f.hunks)  # a heading was compared


def test_the_text_is_gits_own_diff_of_the_files_shown(change):
    clone, task = change
    read = task_diff.task_change(task=task)

    expected = git_text(clone, "diff", "-M", f"main...task-{task.pk}", "--", ":(exclude)logo.png")
    assert read.text == "# logo.png: binary file, not shown\n" + expected


def _binary(clone: Path, task) -> tuple[set[str], set[str]]:
    """The files git's --numstat of the change calls binary ("-" for both counts, a rename by its new
    path), and those the read does."""
    lines = git_text(clone, "diff", "-M", "--numstat", f"main...task-{task.pk}").splitlines()
    renamed = re.compile(r"\{[^{}]* => ([^{}]*)\}")
    git_binary = {renamed.sub(r"\1", line.split("\t")[2]) for line in lines if line.startswith("-\t-\t")}
    return git_binary, {f.path for f in task_diff.task_change(task=task).files if f.binary}


def test_a_gitattributes_in_a_folder_of_the_change_applies_as_git_applies_it(change):
    """Read as it is, not bare (runners/task_diff_attributes.py): docs/*.md are binary to git and the read."""
    clone, task = change
    (clone / "docs" / ".gitattributes").write_text("*.md -diff\n")
    git_binary, read_binary = _binary(clone, task)
    assert git_binary == read_binary == {"docs/handbook.md", "logo.png"}


def test_a_gitattributes_only_in_the_index_is_read_alike_bare_or_not(change, monkeypatch):
    """libgit2 reads a .gitattributes missing on disk from the index, with the checkout or without it
    (git's diff does not: a difference from git that the bare read neither adds nor removes)."""
    clone, task = change
    (clone / ".gitattributes").write_text("windows.txt -diff\n")
    git(clone, "add", ".gitattributes")
    (clone / ".gitattributes").unlink()
    _, read_bare = _binary(clone, task)
    cache.clear()
    monkeypatch.setattr(task_diff, "attributes_apply", lambda repository, folders: True)
    _, read_whole = _binary(clone, task)
    assert read_bare == read_whole == {"windows.txt", "logo.png"}


def test_attributes_apply_only_from_the_folders_of_the_change(change):
    clone, task = change
    repository = pygit2.Repository(str(clone))
    base = repository.merge_base(repository.head.target, repository.references[f"refs/heads/task-{task.pk}"].target)
    diff = repository.diff(repository[base], repository.references[f"refs/heads/task-{task.pk}"].peel(pygit2.Tree))
    folders = task_diff_attributes.diff_folders(diff)
    assert folders == {b"", b"src", b"docs", b"old"}
    assert not task_diff_attributes.attributes_apply(repository, folders)

    (clone / "elsewhere").mkdir()
    (clone / "elsewhere" / ".gitattributes").write_text("* -diff\n")  # no file of the change is there
    assert not task_diff_attributes.attributes_apply(repository, folders)
    read = task_diff.task_change(task=task)
    assert read.files[0].hunks
    assert {f.path for f in read.files if f.binary} == {"logo.png"}  # nothing binary but the image

    (clone / "src" / ".gitattributes").write_text("*.py -diff\n")
    assert task_diff_attributes.attributes_apply(repository, folders)
