"""runners.task_diff's cost and its cache (issue 25's benchmarks): a change is read by libgit2 in the
server's process, its unified diff by one git process when asked for, a change seen before from the
cache alone, and a branch or default branch that moved is never answered from the cache. Against a
real git clone; git's processes are counted by wrapping the function that runs them (the real git
still runs)."""

import orjson
import pytest

from board.models import Task
from runners import task_diff, task_diff_json
from tests.factories import TaskFactory
from tests.runners.test_task_review_api import APP, commit, git
from workspaces.worktrees.services import repository_register

pytestmark = pytest.mark.django_db


@pytest.fixture
def clone(tmp_path):
    folder = tmp_path / "code" / "app"
    folder.mkdir(parents=True)
    git(folder, "init", "-q", "-b", "main")
    commit(folder, {"README.md": "# app\n", "src/app.py": APP}, "Initial commit")
    return folder


@pytest.fixture
def task(clone):
    repository, _ = repository_register(path=str(clone))
    task = TaskFactory(title="Fix the app", repository=repository, status=Task.Status.REVIEW)
    git(clone, "checkout", "-q", "-b", f"task-{task.pk}")
    commit(clone, {"src/app.py": APP.replace("line 5\n", "line five\n"), "docs/new.md": "# new\n"}, "Run 1")
    git(clone, "checkout", "-q", "main")
    return task


@pytest.fixture
def git_calls(monkeypatch):
    """The argument lists of every git process task_diff runs, in order."""
    calls: list[tuple[str, ...]] = []
    real = task_diff.git_output

    def counting(folder, *args, **kwargs):
        calls.append(args)
        return real(folder, *args, **kwargs)

    monkeypatch.setattr(task_diff, "git_output", counting)
    return calls


def _lines(change: task_diff.TaskChange, path: str) -> list[str]:
    [item] = [f for f in change.files if f.path == path]
    return [line["text"] for hunk in item.hunks for line in hunk["lines"] if line["kind"] == "added"]


def test_a_change_is_read_with_no_git_process_its_text_with_one_and_both_then_from_the_cache(task, git_calls):
    first = task_diff.task_change(task=task)

    assert git_calls == []  # libgit2 in this process: refs, merge-base, trees, sizes and hunks
    assert {f.path: (f.additions, f.deletions) for f in first.files} == {"docs/new.md": (1, 0), "src/app.py": (1, 1)}
    assert _lines(first, "src/app.py") == ["line five"]
    text = first.text
    assert [args[2] for args in git_calls] == ["diff"] and "+line five" in text  # git's own unified diff
    git_calls.clear()

    again = task_diff.task_change(task=task)

    assert again.text == text and again.base_commit == first.base_commit
    assert _lines(again, "src/app.py") == ["line five"]
    assert git_calls == []  # the read and the text both from the cache


def test_a_new_commit_on_the_branch_is_never_answered_from_the_cache(clone, task):
    before = task_diff.task_change(task=task)
    git(clone, "checkout", "-q", f"task-{task.pk}")
    commit(clone, {"src/app.py": APP.replace("line 5\n", "line five\n").replace("line 9\n", "line nine\n")}, "Run 2")

    after = task_diff.task_change(task=task)

    assert after.head_commit != before.head_commit
    assert _lines(after, "src/app.py") == ["line five", "line nine"]
    assert "+line nine" in task_diff.task_change(task=task).text


def test_a_default_branch_that_moved_on_gives_the_base_it_has_now(clone, task):
    before = task_diff.task_change(task=task)
    git(clone, "merge", "-q", "--no-ff", "-m", "Merge the docs", f"task-{task.pk}")  # main takes the change
    git(clone, "checkout", "-q", f"task-{task.pk}")
    commit(clone, {"docs/new.md": "# newer\n"}, "Run 2")

    after = task_diff.task_change(task=task)

    assert after.base_commit != before.base_commit  # the merge-base moved with main
    assert [f.path for f in after.files] == ["docs/new.md"]  # what main already has is not the task's now
    assert _lines(after, "docs/new.md") == ["# newer"]


@pytest.fixture
def reads(monkeypatch):
    """How many times libgit2 read a change (task_diff.change_read), through the JSON's module."""
    calls: list[tuple[str, str]] = []
    real = task_diff_json.change_read

    def counting(path, tip, head):
        calls.append((tip, head))
        return real(path, tip, head)

    monkeypatch.setattr(task_diff_json, "change_read", counting)
    return calls


def _encoded_files(task) -> list[dict]:
    return orjson.loads(orjson.dumps(task_diff_json.task_change_encoded(task=task).files))


def test_the_jsons_files_are_the_read_encoded_and_a_change_seen_before_is_not_read_again(task, reads):
    encoded = task_diff_json.task_change_encoded(task=task)
    change = task_diff.task_change(task=task)

    assert orjson.loads(orjson.dumps(encoded.files)) == [task_diff_json.file_json(item) for item in change.files]
    assert (encoded.base_commit, encoded.head_commit) == (change.base_commit, change.head_commit)
    assert encoded.totals == {"files": 2, "additions": 2, "deletions": 1, "summarised": 0}
    assert len(reads) == 1

    assert _encoded_files(task) == orjson.loads(orjson.dumps(encoded.files))
    assert len(reads) == 1  # from the cache


def test_the_json_of_a_branch_that_moved_is_read_again(clone, task, reads):
    before = task_diff_json.task_change_encoded(task=task)
    git(clone, "checkout", "-q", f"task-{task.pk}")
    commit(clone, {"src/app.py": APP.replace("line 5\n", "line five\n").replace("line 9\n", "line nine\n")}, "Run 2")

    after = task_diff_json.task_change_encoded(task=task)

    assert after.head_commit != before.head_commit and len(reads) == 2
    [app] = [f for f in _encoded_files(task) if f["path"] == "src/app.py"]
    added = [line["text"] for hunk in app["hunks"] for line in hunk["lines"] if line["kind"] == "added"]
    assert added == ["line five", "line nine"]
