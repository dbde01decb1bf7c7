"""The git wrapper: argument lists, no prompts, git's message in the error."""

import subprocess

import pytest

from config.api.errors import DomainError
from tests.workspaces.conftest import commit_file, git
from workspaces.worktrees import git as g


def test_it_runs_git_with_an_argument_list_and_no_prompt(clone, monkeypatch):
    seen = {}
    real_run = subprocess.run

    def spy(command, **kwargs):
        seen.update(command=command, **kwargs)
        return real_run(command, **kwargs)

    monkeypatch.setattr(g.subprocess, "run", spy)
    monkeypatch.setenv("GIT_DIR", "/somewhere/else")
    assert g.git_current_branch(clone) == "main"
    assert seen["command"] == ["git", "-C", str(clone), "symbolic-ref", "--quiet", "--short", "HEAD"]
    assert "shell" not in seen
    assert seen["env"]["GIT_TERMINAL_PROMPT"] == "0"
    assert "GIT_DIR" not in seen["env"]
    assert seen["timeout"] == g.LOCAL_TIMEOUT_SECONDS


def test_a_failure_is_a_409_with_gits_message(clone):
    with pytest.raises(DomainError) as failed:
        g.git_run(clone, "checkout", "no-such-branch")
    assert failed.value.code == "conflict"
    assert failed.value.message.startswith("git checkout failed: error: pathspec 'no-such-branch'")
    assert "no-such-branch" in failed.value.extra["git_stderr"]


def test_a_missing_git_binary_is_a_clear_409(clone, settings):
    settings.GIT_BINARY = "/nonexistent/git"
    with pytest.raises(DomainError, match="is not installed") as failed:
        g.git_run(clone, "status")
    assert failed.value.code == "conflict"


def test_a_slow_git_is_stopped(clone, monkeypatch):
    def too_slow(command, **kwargs):
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])

    monkeypatch.setattr(g.subprocess, "run", too_slow)
    with pytest.raises(DomainError, match="took longer than 60 s"):
        g.git_run(clone, "status")


def test_toplevel_and_default_branch(clone, tmp_path):
    assert g.git_toplevel(clone / "src") == str(clone)
    assert g.git_default_branch(clone) == "main"
    with pytest.raises(DomainError, match="is not a folder"):
        g.git_toplevel(tmp_path / "missing")


def test_default_branch_follows_origin_head(clone, origin):
    git(clone, "remote", "set-head", "origin", "main")
    git(clone, "checkout", "-q", "-b", "elsewhere")
    assert g.git_default_branch(clone) == "main"


def test_status_parses_modified_untracked_and_renamed(clone):
    (clone / "README.md").write_text("changed\n")
    (clone / "new dir").mkdir()
    (clone / "new dir" / "a file.txt").write_text("x")
    git(clone, "mv", "src/app.py", "src/main.py")
    entries = {(e.code, e.path, e.original_path) for e in g.git_status(clone)}
    assert entries == {
        (" M", "README.md", None),
        ("??", "new dir/a file.txt", None),
        ("R ", "src/main.py", "src/app.py"),
    }


def test_commits_ahead_of_a_base(clone):
    git(clone, "checkout", "-q", "-b", "topic")
    commit_file(clone, "a.txt", "a", "A")
    commit_file(clone, "b.txt", "b", "B")
    assert g.git_commits_ahead(clone, "main") == 2
    assert g.git_commits_ahead(clone, "no-such-base") is None


@pytest.mark.parametrize("ref", ["-x", "--upload-pack=x", "a b", "a:b", "a..b", "x.lock", "", "x\n"])
def test_refs_that_could_be_options_or_refspecs_are_refused(ref):
    with pytest.raises(DomainError) as refused:
        g.ref_check(ref)
    assert refused.value.code == "invalid"


@pytest.mark.parametrize("ref", ["main", "origin/main", "v1.2.3", "HEAD~2", "a1b2c3d", "feature/x-y"])
def test_ordinary_refs_pass(ref):
    assert g.ref_check(ref) == ref
