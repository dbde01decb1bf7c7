"""Unchanged lines of a file of the task's change, read from its branch's head: what the change
page's "show more" rows load between and after the hunks."""

from board.models import Task
from config.api.errors import DomainError
from runners.task_diff import DIFF_MAX_FILE_BYTES, task_change_source
from workspaces.worktrees.git import git_output


def change_file_lines(*, task: Task, path: str, start: int, end: int) -> list[str]:
    """Lines ``start``..``end`` (``end`` 0: to the end) of ``path`` on the task's branch, as the diff
    shows a line (no newline); 400 for a path git would read another way, 404 for one not on the
    branch, 413 for a file too large to show."""
    if not path or "\n" in path or "\0" in path or path.startswith(("./", "../", "/")):
        raise DomainError(f"{path[:200]!r} is not a path of a file on the task's branch.")
    if start < 1 or (end and end < start):
        raise DomainError(f"Lines {start}–{end or 'end'} are not a range of lines (the first line is 1).")
    clone, _, head, _ = task_change_source(task=task)
    spec = f"{head}:{path}"
    # One --batch-check first: a file past the limit is never read into memory.
    found = git_output(clone, "cat-file", "--batch-check=%(objecttype) %(objectsize)", stdin=spec.encode() + b"\n")
    kind, _, size = found.decode("utf-8", "replace").strip().rpartition(" ")
    if kind != "blob":
        raise DomainError(f"{path[:200]!r} is not a file on the task's branch.", code="not_found")
    if int(size) > DIFF_MAX_FILE_BYTES:
        raise DomainError(f"{path[:200]!r} is too large to show ({size} bytes).", code="too_large")
    text = git_output(clone, "cat-file", "blob", spec).decode("utf-8", "replace")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines[start - 1 : end or None]
