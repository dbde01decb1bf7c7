"""The task's change (SPEC §10): the task branch (``<type>-<task>``) against its base, every run's
commits together, read from the repository's clone on the server.

The base: nothing records the commit the first run started from yet (a run's summary has the
commits it made, not its base), so it is the merge-base of the branch and the repository's default
branch; the answer says so (``base.how``). A change from the default branch is then never shown
twice, and a default branch that moved on since does not show up as the task's own.

Read in the server's process by libgit2 (pygit2): the refs, the merge-base, the two trees compared,
the blobs' sizes and the shown files' hunks, as files, hunks and lines, with no git process to start
and no text to parse (each git process cost more than the diff of a 200-file change, and parsing
git's text twice the diff: bench/diff_bench.py). libgit2 runs no program that a repository's config
or attributes name (no external diff, no textconv): an agent writes both. Each shown blob is opened
once (its size, then whole into libgit2's object cache, where the diff finds it), and the clone is read
bare when no ``.gitattributes`` of its checkout can apply (runners/task_diff_attributes.py).

Huge changes are cut before any file is diffed: the trees compared (no file read) and the blobs'
sizes say which files fit, and only those are diffed. A binary file (as git decides it: a NUL byte
near its start, or its attributes), a file past ``DIFF_MAX_FILE_BYTES``, the files past
``DIFF_MAX_FILES`` and those past the change's ``DIFF_MAX_BYTES`` are summarised ("too large to
show"), never sent whole. The unified diff (``text``: the download, the review prompt) is git's own
``git diff`` of the files shown, made only when it is asked for. Everything in a change (paths,
content) is the agent's: the caller escapes it wherever it is shown.

About 450 lines: the read, its limits and the unified text are one contract (SPEC §10), kept together.

A diff between two commits never changes, so the read is cached by the commits' ids (the default
branch's and the branch's heads: the base is their merge-base): a change seen before costs the
refs' lookup and the cache's read.
"""

import gc
import hashlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pygit2
from django.core.cache import cache
from pygit2.enums import DiffFind, DiffOption, ObjectType

from board.models import Task
from config.api.errors import DomainError
from runners.selectors import task_type
from runners.task_diff_attributes import attributes_apply, bare, diff_folders
from workspaces.models import Worktree
from workspaces.worktrees.git import git_output

DIFF_MAX_FILES = 500
DIFF_MAX_FILE_BYTES = 1024 * 1024  # either side of one file, as stored in git
DIFF_MAX_BYTES = 16 * 1024 * 1024  # all the files shown, added up the same way
CACHE_SECONDS = 24 * 3600
CACHE_MAX_BYTES = 4 * 1024 * 1024  # a larger change is read again each time rather than held

# A diff never runs a program the repository's config or attributes name (an agent can write both).
_DIFF_FLAGS = ("-c", "core.quotePath=false", "diff", "--no-ext-diff", "--no-textconv", "--no-color", "-M")
_STATUS = {"A": "added", "M": "modified", "T": "modified", "D": "deleted", "R": "renamed", "C": "added"}


@dataclass
class DiffFile:
    path: str
    old_path: str | None
    status: str  # added, modified, deleted, renamed, binary
    additions: int
    deletions: int
    binary: bool = False
    too_large: str = ""  # why it is summarised, or "" when shown
    # {"header", "old_start", "old_lines", "new_start", "new_lines", "lines": [{"kind", "old", "new",
    # "text"}]}: plain dicts, as the JSON sends them (a 5,000-line change is 5,000 of them).
    hunks: list[dict] = field(default_factory=list)
    old_size: int = 0
    new_size: int = 0


@dataclass
class ChangeIdentity:
    """Which change: the task's, in its repository, its branch from the base branch's commit to its head."""

    task_id: int
    repository: str
    branch: str
    base_branch: str
    base_commit: str
    head_commit: str


@dataclass
class TaskChange(ChangeIdentity):
    files: list[DiffFile]
    path: str = field(repr=False)  # the clone

    @property
    def summarised(self) -> list[DiffFile]:
        return [f for f in self.files if f.too_large]

    @cached_property
    def text(self) -> str:
        """The unified diff of the files shown, after a preamble naming the summarised ones: git's own,
        made on the first ask (the download, a review prompt) and cached as the read is."""
        return task_change_text(path=self.path, base=self.base_commit, head=self.head_commit, files=self.files)


def task_branch_name(*, task: Task) -> str:
    """The branch runs of ``task`` work on: its worktree's, else ``<type>-<task>`` as the runners
    and ``worktree_create`` name it (``task`` when it has no type)."""
    tree = (
        Worktree.objects.filter(repository_id=task.repository_id, name=str(task.pk))
        .order_by("-updated_at")
        .values_list("branch", flat=True)
        .first()
    )
    return tree or f"{task_type(task=task) or 'task'}-{task.pk}"


def task_change_source(*, task: Task) -> tuple[str, str, str, str | None]:
    """(clone path, branch, head commit, the default branch's commit or None) of the task's change;
    409 saying why when there is none the server can read."""
    repository = task.repository
    if repository is None:
        raise DomainError(
            f"Task {task.pk} has no repository, so it has no branch to show; set its repository first.",
            code="conflict",
        )
    if repository.runner_id is not None:
        raise DomainError(
            f"Task {task.pk}'s change lives on runner {repository.runner.name} (its clone of {repository.name}) "
            "and is not readable from the server yet; each run's own patch is in its session's files.",
            code="conflict",
            extra={"runner": repository.runner.name},
        )
    if not Path(repository.path).is_dir():
        raise DomainError(f"The clone of {repository.name} is not on this server any more.", code="conflict")
    branch = task_branch_name(task=task)
    default = repository.default_branch
    # The default branch as the clone has it, else as its origin has it (a clone made for the server).
    refs = refs_resolve(
        repository.path, [f"refs/heads/{branch}", f"refs/heads/{default}", f"refs/remotes/origin/{default}"]
    )
    head = refs.get(f"refs/heads/{branch}")
    if head is None:
        raise DomainError(
            f"Task {task.pk} has no branch yet ({branch} is not in {repository.name}): no run has worked on it.",
            code="conflict",
            extra={"branch": branch},
        )
    tip = refs.get(f"refs/heads/{default}") or refs.get(f"refs/remotes/origin/{default}")
    return repository.path, branch, head, tip


def task_change_heads(*, task: Task) -> tuple[str, str, str, str]:
    """(clone path, branch, head commit, the default branch's commit) of the task's change; 409 saying
    why when there is none (as task_change_source) or the default branch is missing."""
    path, branch, head, tip = task_change_source(task=task)
    if tip is None:
        raise DomainError(
            f"The default branch {task.repository.default_branch!r} of {task.repository.name} does not exist; fix "
            "the repository's default branch.",
            code="conflict",
        )
    return path, branch, head, tip


def task_change(*, task: Task) -> TaskChange:
    """The task's change, each shown file with its hunks (they come with the read, at no extra cost)."""
    path, branch, head, tip = task_change_heads(task=task)
    # Keyed by the two heads, not the base: the base is their merge-base, so a change seen before
    # needs no merge-base. A branch or a default branch that moved is another key.
    key = cache_key("task-change", path, tip, head)
    with collector_paused():  # unpickling the hunks makes as many objects as reading them
        read = cache.get(key)
    if read is None:
        with collector_paused():
            read = change_read(path, tip, head)
        if read.size <= CACHE_MAX_BYTES:
            cache.set(key, read, timeout=CACHE_SECONDS)
    return TaskChange(
        task_id=task.pk,
        repository=task.repository.name,
        branch=branch,
        base_branch=task.repository.default_branch,
        base_commit=read.base,
        head_commit=head,
        files=read.files,
        path=path,
    )


@dataclass
class ChangeRead:
    """What libgit2 said of a change, as cached: its base and its files with their hunks."""

    base: str
    files: list[DiffFile]
    size: int  # the bytes of the files shown: what decides whether it is cached


def cache_key(kind: str, path: str, old: str, new: str) -> str:
    clone = hashlib.sha256(path.encode()).hexdigest()[:16]
    return f"{kind}:3:{clone}:{old}:{new}:{DIFF_MAX_FILES}:{DIFF_MAX_FILE_BYTES}:{DIFF_MAX_BYTES}"


# libgit2 hashes every object it reads to check it against its name (git itself does not, outside
# fsck): a quarter of a 200-file change's read (bench/diff_bench.py). The diff shows what git would
# show; the merge and the download are git's own. Process-wide, as libgit2's options are.
pygit2.settings.enable_strict_hash_verification(False)
# Blobs up to the largest file shown stay in a repository's object cache (libgit2 keeps none by
# default): _listing reads each shown file once, whole, after its size, and the diff then finds it
# there instead of opening the object again for its size and again for its content (each loose object
# a file to open and inflate). The cache lives as long as the Repository, one read (bench/diff_bench.py).
pygit2.settings.cache_object_limit(ObjectType.BLOB, DIFF_MAX_FILE_BYTES)


def _repository(path: str) -> pygit2.Repository:
    try:
        return pygit2.Repository(path)
    except pygit2.GitError as exc:
        raise DomainError(
            f"The clone at this repository's path cannot be read as git: {exc}", code="conflict"
        ) from None


def refs_resolve(path: str, names: list[str]) -> dict[str, str]:
    """ref name -> commit, for those of ``names`` that exist."""
    references = _repository(path).references
    found: dict[str, str] = {}
    for name in names:
        reference = references.get(name)
        if reference is not None:
            found[name] = str(reference.resolve().target)
    return found


def change_read(path: str, tip: str, head: str) -> ChangeRead:
    """The change from the merge-base of ``tip`` and ``head`` to ``head`` in the clone at ``path``."""
    repository = _repository(path)
    try:
        base = repository.merge_base(pygit2.Oid(hex=tip), pygit2.Oid(hex=head))
        if base is None:
            raise DomainError(
                "The task's branch and the default branch share no commit: there is no base.", code="conflict"
            )
        # Read bare unless a .gitattributes of the checkout may apply (runners/task_diff_attributes.py).
        reader = bare(repository)
        diff = _tree_diff(reader, base, head)
        if attributes_apply(repository, diff_folders(diff)):  # never for a bare clone
            reader = repository
            diff = _tree_diff(reader, base, head)
        files, shown = _listing(reader, diff)
        for index, item in shown:
            _attach(item, diff[index])
    except pygit2.GitError as exc:
        raise DomainError(f"git could not read the task's change: {exc}", code="conflict") from None
    cut = [item for item in files if item.too_large and not item.binary]
    if cut:  # the files never diffed: their line counts from git, which reads them without holding them
        counts = _numstat(str(base), head, path, cut)
        for item in cut:
            added, removed = counts.get(item.path, (0, 0))
            if added is None:
                item.binary, item.status, item.too_large = True, "binary", "binary file, not shown"
            else:
                item.additions, item.deletions = added, removed
    size = sum(max(item.old_size, item.new_size) for item in files if not item.too_large)
    return ChangeRead(base=str(base), files=files, size=size)


def _tree_diff(repository: pygit2.Repository, base: pygit2.Oid, head: str) -> pygit2.Diff:
    # As git diff does by default: hunks slid to where an indented block begins and ends.
    diff = repository.diff(
        repository[base].peel(pygit2.Tree),
        repository[head].peel(pygit2.Tree),
        flags=DiffOption.INDENT_HEURISTIC,
        context_lines=3,
    )
    diff.find_similar(flags=DiffFind.FIND_RENAMES)  # git diff -M: renames at 50 % alike
    return diff


def _listing(repository: pygit2.Repository, diff: pygit2.Diff) -> tuple[list[DiffFile], list[tuple[int, DiffFile]]]:
    """Every file the change touches with its status and sizes, those that do not fit marked
    ``too_large``; and the others with their place in ``diff``. No file is diffed here."""
    files: list[DiffFile] = []
    shown: list[tuple[int, DiffFile]] = []
    total = 0
    odb = repository.odb
    for index, delta in enumerate(diff.deltas):
        letter = delta.status_char()
        old, new = delta.old_file, delta.new_file
        item = DiffFile(
            path=_path(new),
            old_path=_path(old) if letter == "R" else None,
            status=_STATUS.get(letter, "modified"),
            additions=0,
            deletions=0,
            old_size=_size(odb, old) if letter != "A" else 0,
            new_size=_size(odb, new) if letter != "D" else 0,
        )
        largest = max(item.old_size, item.new_size)
        if index >= DIFF_MAX_FILES:
            item.too_large = f"too large to show: the change has more than {DIFF_MAX_FILES} files"
        elif largest > DIFF_MAX_FILE_BYTES:
            item.too_large = f"too large to show: {largest} bytes (the limit is {DIFF_MAX_FILE_BYTES} per file)"
        elif total + largest > DIFF_MAX_BYTES:
            item.too_large = f"too large to show: the change is past {DIFF_MAX_BYTES} bytes"
        else:
            total += largest  # a binary file too: which are binary is known once they are diffed
            shown.append((index, item))
            for side, size in ((old, item.old_size), (new, item.new_size)):
                if size:
                    odb.read(side.id)  # into the object cache, where the diff reads it (above)
        files.append(item)
    return files, shown


def _path(side: pygit2.DiffFile) -> str:
    return side.raw_path.decode("utf-8", "replace")


def _size(odb: pygit2.Odb, side: pygit2.DiffFile) -> int:
    try:
        return odb.read_header(side.id)[1]
    except (KeyError, pygit2.GitError):  # a submodule's commit: not in this repository
        return 0


def _attach(item: DiffFile, patch: pygit2.Patch) -> None:
    """``item``'s counts and hunks from its patch, or it summarised as binary."""
    if patch.delta.is_binary:
        item.binary, item.status, item.too_large = True, "binary", "binary file, not shown"
        return
    _, item.additions, item.deletions = patch.line_stats
    item.hunks = [
        {
            "header": _section(hunk.header),
            "old_start": hunk.old_start,
            "old_lines": hunk.old_lines,
            "new_start": hunk.new_start,
            "new_lines": hunk.new_lines,
            "lines": _lines(hunk),
        }
        for hunk in patch.hunks
    ]


def _lines(hunk: pygit2.DiffHunk) -> list[dict]:
    """A hunk's lines, numbered from its starts as git numbers them (a context line takes one of each
    side, an added line the next new one, a removed line the next old one): the same numbers as each
    line's own ``old_lineno``/``new_lineno``, about a tenth faster (two attributes fewer a line)."""
    old, new = hunk.old_start, hunk.new_start
    lines = []
    for line in hunk.lines:
        origin = line.origin
        if origin == " ":
            lines.append({"kind": "context", "old": old, "new": new, "text": line.content.rstrip("\n")})
            old += 1
            new += 1
        elif origin == "+":
            lines.append({"kind": "added", "old": None, "new": new, "text": line.content.rstrip("\n")})
            new += 1
        elif origin == "-":
            lines.append({"kind": "removed", "old": old, "new": None, "text": line.content.rstrip("\n")})
            old += 1
        # else: a "no newline at end of file" mark, not a line of either side
    return lines


def _section(header: str) -> str:
    """What follows a hunk's ``@@ -a,b +c,d @@``: the function or heading it is in (git's funcname)."""
    after = header.split("@@", 2)[-1] if header.count("@@") >= 2 else ""
    return after.removeprefix(" ").rstrip("\n")


def _numstat(base: str, head: str, path: str, files: list[DiffFile]) -> dict[str, tuple[int | None, int]]:
    """new path -> (additions, deletions) of ``files`` by ``git diff --numstat``; (None, 0) for a binary one."""
    fields = git_output(path, *_DIFF_FLAGS, "--numstat", "-z", base, head, *_pathspecs(files)).decode(
        "utf-8", "replace"
    )
    return _numstat_fields(fields.split("\0"))


def task_change_text(*, path: str, base: str, head: str, files: list[DiffFile]) -> str:
    """git's unified diff of the shown files of a change, after a ``# path: why`` line for each
    summarised one. Text before the first "diff --git" is commentary to git apply and patch; a path
    is the agent's, so a newline in it must not start a line of the diff."""
    key = cache_key("task-change-text", path, base, head)
    text = cache.get(key)
    if text is not None:
        return text
    shown = [item for item in files if not item.too_large]
    patch = ""
    if shown:
        pathspecs = _pathspecs(shown) if len(shown) < len(files) else []
        patch = git_output(path, *_DIFF_FLAGS, base, head, *pathspecs).decode("utf-8", "replace")
    preamble = "".join(f"# {_one_line(item.path)}: {item.too_large}\n" for item in files if item.too_large)
    text = preamble + patch
    if len(text) <= CACHE_MAX_BYTES:
        cache.set(key, text, timeout=CACHE_SECONDS)
    return text


def _pathspecs(files: list[DiffFile]) -> list[str]:
    return ["--", *(f":(literal){p}" for f in files for p in (f.old_path, f.path) if p)]


def _one_line(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _numstat_fields(fields: list[str]) -> dict[str, tuple[int | None, int]]:
    """``--numstat -z`` split at NUL: new path -> (additions, deletions); (None, 0) for a binary file."""
    counts: dict[str, tuple[int | None, int]] = {}
    index = 0
    while index < len(fields) - 1:
        parts = fields[index].split("\t")
        index += 1
        if len(parts) < 3:
            continue
        if parts[2] == "":  # a rename: the old and the new path follow in fields of their own
            path = fields[index + 1]
            index += 2
        else:
            path = parts[2]
        if parts[0] == "-":
            counts[path] = (None, 0)
        else:
            counts[path] = (int(parts[0]), int(parts[1]))
    return counts


@contextmanager
def collector_paused():
    """A read makes two objects a diff line, all kept: with the cyclic garbage collector on, its
    collections (each a walk over the whole process's objects) took a third of it (diff_bench.py).
    None of them is in a cycle; the collector is back on after, as it was."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def diff_lines(item: DiffFile) -> set[int]:
    """The line numbers a comment on ``item`` may name: new lines (added or context) and removed ones."""
    lines: set[int] = set()
    for hunk in item.hunks:
        for line in hunk["lines"]:
            number = line["old"] if line["kind"] == "removed" else line["new"]
            if number is not None:
                lines.add(number)
    return lines
