"""The runner's own clones (client/src/switchyard_client/runner/repos.py), with real git: the config's
[repositories.<name>] tables, the checks at start-up, worktrees made beside the clone with the sync
folder linked in, their reports, and their removal."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from switchyard_client.runner.config import RunnerConfigError, parse_config
from switchyard_client.runner.git import changes_since
from switchyard_client.runner.repos import (
    HostedRepository,
    repository_check,
    sync_link,
    sync_links_in,
    worktree_add,
    worktree_paths,
    worktree_remove,
    worktree_report,
)
from tests.runners.live_runner import GIT_ENV, git

BASE = {"runner": {"url": "http://127.0.0.1:8000", "key": "sy_x", "name": "build-1"}}


@pytest.fixture(autouse=True)
def git_identity(monkeypatch):
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def clone(tmp_path) -> Path:
    folder = tmp_path / "src" / "shop"
    folder.mkdir(parents=True)
    git(folder, "init", "-q", "-b", "trunk")
    (folder / "app.py").write_text("print('shop')\n")
    git(folder, "add", "app.py")
    git(folder, "commit", "-qm", "start")
    sync = tmp_path / "src" / "sync" / "shop"
    (sync / "config").mkdir(parents=True)
    (sync / ".env").write_text("TOKEN=x\n")
    (sync / "config" / "local.toml").write_text("debug = true\n")
    return folder


def repo_of(clone: Path, **config) -> HostedRepository:
    parsed = parse_config({**BASE, "repositories": {"shop": {"path": str(clone), **config}}})
    return repository_check(parsed.repositories[0])


def test_the_config_reads_repositories_relative_to_the_file(tmp_path):
    config = parse_config(
        {**BASE, "repositories": {"shop": {"path": "clones/shop", "default_branch": "main"}}},
        source=str(tmp_path / "switchyard-runner.toml"),
    )

    [repo] = config.repositories
    assert (repo.name, repo.path, repo.default_branch) == ("shop", tmp_path / "clones" / "shop", "main")


@pytest.mark.parametrize(
    "tables, message",
    [
        ({"Shop": {"path": "/x"}}, "lowercase letters"),
        ({"shop": "/x"}, "must be a table"),
        ({"shop": {}}, "path: must be the folder of a git clone"),
        ({"shop": {"path": "/x", "branch": "main"}}, "unknown key(s) branch"),
        ({"shop": {"path": "/x", "default_branch": 3}}, "default_branch: must be a branch name"),
    ],
)
def test_config_mistakes_name_the_table_and_what_was_expected(tables, message):
    with pytest.raises(RunnerConfigError) as raised:
        parse_config({**BASE, "repositories": tables})

    assert "[repositories." in raised.value.message and message in raised.value.message


def test_the_check_takes_the_branch_checked_out_when_none_is_given(clone):
    repo = repo_of(clone)

    assert (repo.path, repo.default_branch, repo.sync_dir) == (
        str(clone),
        "trunk",
        str(clone.parent / "sync" / "shop"),
    )


def test_the_check_refuses_what_is_not_a_main_clone(tmp_path, clone):
    plain = tmp_path / "plain"
    plain.mkdir()
    (clone / "sub").mkdir()
    git(clone, "worktree", "add", "-q", "-b", "side", str(tmp_path / "src" / "side"))

    for folder, message in [
        (tmp_path / "missing", "is not a folder"),
        (plain, "is not a git clone"),
        (clone / "sub", "is inside the clone"),
        (tmp_path / "src" / "side", "was made by `git worktree add`"),
    ]:
        with pytest.raises(RunnerConfigError, match=message):
            repo_of(folder)


def test_a_worktree_is_made_beside_the_clone_with_the_sync_files_linked(clone):
    repo = repo_of(clone)

    path = worktree_add(repo, "feat-7")

    assert path == str(clone.parent / "feat-7")
    assert git(Path(path), "branch", "--show-current").strip() == "feat-7"
    assert os.readlink(Path(path) / ".env") == "../sync/shop/.env"
    assert os.readlink(Path(path) / "config" / "local.toml") == "../../sync/shop/config/local.toml"
    assert (Path(path) / "config" / "local.toml").read_text() == "debug = true\n"
    assert worktree_paths(repo) == [path]
    # asked again (a runner restarted), the same folder as it was left
    (Path(path) / "work.txt").write_text("half done\n")
    assert worktree_add(repo, "feat-7") == path
    assert (Path(path) / "work.txt").read_text() == "half done\n"


def test_an_existing_branch_is_checked_out_as_it_is(clone):
    repo = repo_of(clone)
    git(clone, "branch", "fix-3")
    git(clone, "commit", "-q", "--allow-empty", "-m", "later on trunk")

    path = worktree_add(repo, "fix-3")

    assert git(Path(path), "log", "--format=%s").splitlines() == ["start"]


def test_a_folder_in_the_way_is_left_alone(clone):
    repo = repo_of(clone)
    (clone.parent / "feat-9").mkdir()
    (clone.parent / "feat-9" / "mine.txt").write_text("not git's\n")

    with pytest.raises(Exception, match="is not a worktree"):
        worktree_add(repo, "feat-9")
    assert (clone.parent / "feat-9" / "mine.txt").read_text() == "not git's\n"


def test_a_symlinked_folder_in_the_worktree_never_carries_a_link_outside(tmp_path, clone):
    repo = repo_of(clone)
    path = Path(worktree_add(repo, "feat-1"))
    os.unlink(path / "config" / "local.toml")
    os.rmdir(path / "config")
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, path / "config")

    made = sync_link(repo, str(path))

    assert made == []
    assert list(outside.iterdir()) == []


def test_the_report_and_the_summary_leave_out_the_sync_links(clone):
    repo = repo_of(clone)
    path = Path(worktree_add(repo, "feat-2"))
    base = git(path, "rev-parse", "HEAD").strip()
    (path / "notes.md").write_text("done\n")
    git(path, "add", "notes.md")
    git(path, "commit", "-qm", "notes")
    (path / "app.py").write_text("print('changed')\n")

    report = worktree_report(repo, str(path))
    changes = changes_since(str(path), base, leave_out=sync_links_in(repo, str(path)))

    assert (report["commits_ahead"], report["uncommitted"]) == (1, 1)
    assert report["changes"] == [{"code": " M", "path": "app.py"}]
    assert {f["path"] for f in report["recent_files"]} >= {"notes.md", "app.py"}
    assert sorted(changes.files_changed) == ["app.py", "notes.md"]
    assert b".env" not in changes.patch


def test_removing_takes_the_links_away_first_and_refuses_uncommitted_work_unless_forced(clone):
    repo = repo_of(clone)
    path = Path(worktree_add(repo, "feat-5"))
    (path / "draft.txt").write_text("unsaved\n")

    with pytest.raises(Exception, match="untracked|modified"):
        worktree_remove(repo, str(path), force=False)
    assert (path / "draft.txt").exists() and os.path.islink(path / ".env")  # as it was

    worktree_remove(repo, str(path), force=True)

    assert not path.exists()
    assert worktree_paths(repo) == []
    assert (clone.parent / "sync" / "shop" / ".env").exists()  # the sync folder itself stays


def test_a_worktree_waits_while_another_process_changes_the_clones_worktrees(clone):
    # given another process (the server, or a second runner on this machine) holding the clone
    repo = repo_of(clone)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX);"
            " print('held', flush=True); sys.stdin.readline()",
            str(clone),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        made: list[str] = []
        maker = threading.Thread(target=lambda: made.append(worktree_add(repo, "task-9")))
        maker.start()

        # when it still holds the clone, git is not asked; then it lets go
        maker.join(0.5)
        assert maker.is_alive()
        assert not (clone.parent / "task-9").exists()
        holder.stdin.write("\n")
        holder.stdin.flush()

        # then the worktree is made
        maker.join(30)
        assert made == [str(clone.parent / "task-9")]
        assert made[0] in worktree_paths(repo)
    finally:
        holder.kill()
        holder.wait()
