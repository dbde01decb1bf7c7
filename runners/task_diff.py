"""The task's change (SPEC §10): the task branch (``<type>-<task>``) against its base, every run's
commits together, read from the repository's clone on the server.

The base: nothing records the commit the first run started from yet (a run's summary has the
commits it made, not its base), so it is the merge-base of the branch and the repository's default
branch; the answer says so (``base.how``). A change from the default branch is then never shown
twice, and a default branch that moved on since does not show up as the task's own.

Huge changes are cut before git writes them: git's listing of the two trees (``--raw``: no file
is read) and the blobs' sizes say which files fit, and only those are diffed. A binary file, a file
past ``DIFF_MAX_FILE_BYTES``, the files past ``DIFF_MAX_FILES`` and those past the change's
``DIFF_MAX_BYTES`` are summarised ("too large to show"), never sent whole. The unified diff is
parsed with ``unidiff``, never by hand. Everything in it (paths, content) is the agent's: the
caller escapes it wherever it is shown.

Cost (bench/diff_bench.py): the files' contents are diffed once, by one ``git diff --numstat
--patch`` that gives the counts and the patch together; a second content diff runs only when the
change has a binary file or files cut for size (rare, and then for them). A diff between two
commits never changes, so the read is cached by the commits' ids (the default branch's and the
branch's heads: the base is their merge-base), the parsed hunks under the base's and the head's:
a request for a change seen before runs one git process (the refs).
"""

import gc
import hashlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from django.core.cache import cache
from unidiff import PatchSet

from board.models import Task
from config.api.errors import DomainError
from runners.selectors import task_type
from workspaces.models import Worktree
from workspaces.worktrees.git import git_output

DIFF_MAX_FILES = 500
DIFF_MAX_FILE_BYTES = 1024 * 1024  # either side of one file, as stored in git
DIFF_MAX_BYTES = 16 * 1024 * 1024  # all the files shown, added up the same way
CACHE_SECONDS = 24 * 3600
CACHE_MAX_CHARS = 4 * 1024 * 1024  # a larger change is read again each time rather than held

# A diff never runs a program the repository's config or attributes name (an agent can write both).
_DIFF_FLAGS = ("-c", "core.quotePath=false", "diff", "--no-ext-diff", "--no-textconv", "--no-color", "-M")
_STATUS = {"A": "added", "M": "modified", "T": "modified", "D": "deleted", "R": "renamed", "C": "added"}
_NULL_SHA = "0" * 40


_KIND = {"+": "added", "-": "removed", " ": "context"}


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
class TaskChange:
    task_id: int
    repository: str
    branch: str
    base_branch: str
    base_commit: str
    head_commit: str
    files: list[DiffFile]
    text: str  # the unified diff of the files shown, after a preamble naming the summarised ones

    @property
    def summarised(self) -> list[DiffFile]:
        return [f for f in self.files if f.too_large]


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
    # One git call for the three refs; the default branch as the clone has it, else as its origin has
    # it (a clone made for the server).
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


def task_change(*, task: Task, parse: bool = True) -> TaskChange:
    """The task's change; ``parse`` adds each shown file's hunks (the JSON form and the page)."""
    path, branch, head, tip = task_change_source(task=task)
    base_branch = task.repository.default_branch
    if tip is None:
        raise DomainError(
            f"The default branch {base_branch!r} of {task.repository.name} does not exist; fix the repository's "
            "default branch.",
            code="conflict",
        )
    # Keyed by the two heads, not the base: the base is their merge-base, so a change seen before
    # needs no git but the refs. A branch or a default branch that moved is another key.
    read = cache.get(key := _cache_key("task-change", path, tip, head))
    if read is None:
        read = _read(path, git_output(path, "merge-base", tip, head).decode().strip(), head)
        if len(read.patch) <= CACHE_MAX_CHARS:
            cache.set(key, read, timeout=CACHE_SECONDS)
    if parse:
        _attach_hunks(path, read, head)
    return TaskChange(
        task_id=task.pk,
        repository=task.repository.name,
        branch=branch,
        base_branch=base_branch,
        base_commit=read.base,
        head_commit=head,
        files=read.files,
        text=read.preamble + read.patch,
    )


@dataclass
class _Read:
    """What git said of a change, as cached: the files (no hunks), the unified diff of the shown ones
    and the preamble naming the summarised ones."""

    base: str
    files: list[DiffFile]
    preamble: str
    patch: str


def _cache_key(kind: str, path: str, old: str, new: str) -> str:
    clone = hashlib.sha256(path.encode()).hexdigest()[:16]
    return f"{kind}:2:{clone}:{old}:{new}:{DIFF_MAX_FILES}:{DIFF_MAX_FILE_BYTES}:{DIFF_MAX_BYTES}"


def _read(path: str, base: str, head: str) -> _Read:
    files, cut = _listing(path, base, head)
    shown = [f for f in files if not f.too_large]
    patch = ""
    counts: dict[str, tuple[int | None, int]] = {}
    if shown:
        counts, patch = _numstat_and_patch(path, base, head, _pathspecs(shown) if cut else [])
        binary = {f.path for f in shown if counts.get(f.path, (0, 0))[0] is None}
        if binary:  # git printed "Binary files differ" for them: diff the others again without them
            shown = [f for f in shown if f.path not in binary]
            patch = _numstat_and_patch(path, base, head, _pathspecs(shown))[1] if shown else ""
    if cut:  # the files never diffed above: their counts (and which are binary) from a numstat of all
        every = git_output(path, *_DIFF_FLAGS, "--numstat", "-z", base, head).decode("utf-8", "replace")
        counts = {**_numstat(every.split("\0")), **counts}
    for item in files:
        added, removed = counts.get(item.path, (0, 0))
        if added is None:
            item.binary, item.status = True, "binary"
            item.too_large = "binary file, not shown"
        else:
            item.additions, item.deletions = added, removed
    # Text before the first "diff --git" is commentary to git apply and patch; a path is the agent's,
    # so a newline in it must not start a line of the diff.
    preamble = "".join(f"# {_one_line(f.path)}: {f.too_large}\n" for f in files if f.too_large)
    return _Read(base=base, files=files, preamble=preamble, patch=patch)


def _pathspecs(files: list[DiffFile]) -> list[str]:
    return ["--", *(f":(literal){p}" for f in files for p in (f.old_path, f.path) if p)]


def _numstat_and_patch(path: str, base: str, head: str, pathspecs: list[str]) -> tuple[dict, str]:
    """One content diff: ``--numstat -z`` entries, an empty one, then the patch (which may hold any
    byte, so only the entries before it are split at NUL)."""
    raw = git_output(path, *_DIFF_FLAGS, "--numstat", "-z", "--patch", base, head, *pathspecs)
    fields: list[str] = []
    position = 0
    while position < len(raw):
        end = raw.find(b"\0", position)
        if end < 0:
            break
        field = raw[position:end].decode("utf-8", "replace")
        position = end + 1
        if field == "":  # after the last entry (a path is never empty)
            break
        fields.append(field)
    return _numstat(fields + [""]), raw[position:].decode("utf-8", "replace")


def _one_line(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def refs_resolve(path: str, names: list[str]) -> dict[str, str]:
    """ref name -> commit, for those of ``names`` that exist (``for-each-ref`` also lists refs under a
    name, ``main/x`` under ``main``: only exact names are kept)."""
    listing = git_output(path, "for-each-ref", "--format=%(objectname) %(refname)", *names).decode("utf-8", "replace")
    wanted = set(names)
    found: dict[str, str] = {}
    for line in listing.splitlines():
        sha, _, name = line.partition(" ")
        if name in wanted:
            found[name] = sha
    return found


def _listing(path: str, base: str, head: str) -> tuple[list[DiffFile], bool]:
    """Every file the change touches with its status and sizes, the ones that do not fit marked
    ``too_large``; and whether any was. Git compares the trees only (``--raw``): no file is diffed
    here (renames aside), so a 50 MB file costs nothing yet."""
    listing = git_output(path, *_DIFF_FLAGS, "--raw", "-z", "--no-abbrev", base, head)
    fields = listing.decode("utf-8", "replace").split("\0")
    files: list[DiffFile] = []
    blobs: list[tuple[str, str]] = []
    index = 0
    while index < len(fields) - 1 and fields[index].startswith(":"):
        meta = fields[index].lstrip(":").split()
        index += 1
        if len(meta) < 5:
            continue
        letter = meta[4][:1]
        old_path = None
        if letter in ("R", "C"):
            old_path, new_path = fields[index], fields[index + 1]
            index += 2
        else:
            new_path = fields[index]
            index += 1
        files.append(
            DiffFile(
                path=new_path,
                old_path=old_path if letter == "R" else None,
                status=_STATUS.get(letter, "modified"),
                additions=0,
                deletions=0,
            )
        )
        blobs.append((meta[2], meta[3]))
    sizes = _sizes(path, {sha for pair in blobs for sha in pair if sha != _NULL_SHA})
    total = 0
    cut = False
    for position, (item, (old_sha, new_sha)) in enumerate(zip(files, blobs, strict=True)):
        item.old_size, item.new_size = sizes.get(old_sha, 0), sizes.get(new_sha, 0)
        largest = max(item.old_size, item.new_size)
        if position >= DIFF_MAX_FILES:
            item.too_large = f"too large to show: the change has more than {DIFF_MAX_FILES} files"
        elif largest > DIFF_MAX_FILE_BYTES:
            item.too_large = f"too large to show: {largest} bytes (the limit is {DIFF_MAX_FILE_BYTES} per file)"
        elif total + largest > DIFF_MAX_BYTES:
            item.too_large = f"too large to show: the change is past {DIFF_MAX_BYTES} bytes"
        else:
            total += largest  # a binary file too: which are binary is known once they are diffed
        cut = cut or bool(item.too_large)
    return files, cut


def _numstat(fields: list[str]) -> dict[str, tuple[int | None, int]]:
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


def _sizes(path: str, shas: set[str]) -> dict[str, int]:
    if not shas:
        return {}
    listing = git_output(
        path, "cat-file", "--batch-check=%(objectname) %(objectsize)", stdin="\n".join(sorted(shas)).encode() + b"\n"
    )
    sizes: dict[str, int] = {}
    for line in listing.decode().splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            sizes[parts[0]] = int(parts[1])
    return sizes


def _attach_hunks(path: str, read: _Read, head: str) -> None:
    """Each shown file's hunks, parsed from the patch once per base and head and then cached (a
    5,000-line change is 5,000 line dicts: unidiff's parse of it costs more than git's diff)."""
    key = _cache_key("task-change-hunks", path, read.base, head)
    with _collector_paused():  # unpickling them makes as many objects as parsing them
        hunks = cache.get(key)
    if hunks is None:
        with _collector_paused():
            hunks = _parse_hunks(read.patch)
        if len(read.patch) <= CACHE_MAX_CHARS:
            cache.set(key, hunks, timeout=CACHE_SECONDS)
    for item in read.files:
        if not item.too_large:
            item.hunks = hunks.get(item.path, [])


@contextmanager
def _collector_paused():
    """The parse makes two objects a diff line, all kept: with the cyclic garbage collector on, its
    collections (each a walk over the whole process's objects) took a third of it (diff_bench.py).
    None of them is in a cycle; the collector is back on after, as it was."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _parse_hunks(patch: str) -> dict[str, list[dict]]:
    """new path -> its hunks as plain dicts, from the unified diff."""
    by_path: dict[str, list[dict]] = {}
    for patched in PatchSet(patch):
        by_path[patched.path] = [
            {
                "header": hunk.section_header,
                "old_start": hunk.source_start,
                "old_lines": hunk.source_length,
                "new_start": hunk.target_start,
                "new_lines": hunk.target_length,
                "lines": [
                    {
                        "kind": _KIND[line.line_type],
                        "old": line.source_line_no,
                        "new": line.target_line_no,
                        "text": line.value.rstrip("\n"),
                    }
                    for line in hunk
                    if line.line_type in _KIND
                ],
            }
            for hunk in patched
        ]
    return by_path


def diff_lines(item: DiffFile) -> set[int]:
    """The line numbers a comment on ``item`` may name: new lines (added or context) and removed ones."""
    lines: set[int] = set()
    for hunk in item.hunks:
        for line in hunk["lines"]:
            number = line["old"] if line["kind"] == "removed" else line["new"]
            if number is not None:
                lines.add(number)
    return lines
