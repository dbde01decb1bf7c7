"""The git command line, called with an argument list (never a shell).

Every call runs ``git -C <folder> ...`` with a timeout, no terminal prompt and a C locale;
a failure becomes a DomainError (409) that carries git's own message, so the API says why.
Values that come from clients (refs) are checked before they reach an argument list and
are passed after ``--end-of-options`` where git allows it.
"""

import fcntl
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from config.api.errors import DomainError

LOCAL_TIMEOUT_SECONDS = 60
NETWORK_TIMEOUT_SECONDS = 120
# A ref from a client: a branch, tag, sha, `origin/x` or `HEAD~2`. No ':' (a fetch refspec
# would write a local ref), no leading '-' (an option), no spaces or control characters.
_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/@^~+-]{0,254}")
# Variables that would point git at another repository than the folder we name.
_INHERITED_GIT_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")


@dataclass(frozen=True)
class StatusEntry:
    code: str  # the two porcelain letters: " M", "A ", "??", "R " ...
    path: str
    original_path: str | None = None  # for renames and copies


def _environment() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _INHERITED_GIT_VARIABLES}
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", GIT_OPTIONAL_LOCKS="0")
    return env


def git_run(folder: str | Path, *args: str, timeout: float = LOCAL_TIMEOUT_SECONDS) -> str:
    """Run ``git -C folder args...`` and return its standard output; a DomainError (409) on failure."""
    command = [settings.GIT_BINARY, "-C", str(folder), *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=_environment(), check=False)
    except FileNotFoundError:
        raise DomainError(f"The git program ({settings.GIT_BINARY!r}) is not installed.", code="conflict") from None
    except subprocess.TimeoutExpired:
        raise DomainError(f"git {args[0]} took longer than {timeout:g} s and was stopped.", code="conflict") from None
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip() or f"exit code {done.returncode}"
        raise DomainError(f"git {args[0]} failed: {message}", code="conflict", extra={"git_stderr": done.stderr})
    return done.stdout


def git_output(
    folder: str | Path, *args: str, stdin: bytes | None = None, timeout: float = LOCAL_TIMEOUT_SECONDS
) -> bytes:
    """``git_run`` returning git's bytes as they are: a diff's content is whatever the files hold
    (not always UTF-8), so the caller decodes it, never the locale."""
    command = [settings.GIT_BINARY, "-C", str(folder), *args]
    try:
        done = subprocess.run(
            command, input=stdin, capture_output=True, timeout=timeout, env=_environment(), check=False
        )
    except FileNotFoundError:
        raise DomainError(f"The git program ({settings.GIT_BINARY!r}) is not installed.", code="conflict") from None
    except subprocess.TimeoutExpired:
        raise DomainError(f"git {args[0]} took longer than {timeout:g} s and was stopped.", code="conflict") from None
    if done.returncode != 0:
        stderr = done.stderr.decode("utf-8", "replace")
        message = stderr.strip() or f"exit code {done.returncode}"
        raise DomainError(f"git {args[0]} failed: {message}", code="conflict", extra={"git_stderr": stderr})
    return done.stdout


def git_completed(
    folder: str | Path, *args: str, timeout: float = LOCAL_TIMEOUT_SECONDS
) -> subprocess.CompletedProcess[bytes]:
    """``git -C folder args...`` whose exit code the caller reads (``merge-tree`` exits 1 on a
    conflict, an answer rather than a failure); a missing git or a timeout is still a 409."""
    command = [settings.GIT_BINARY, "-C", str(folder), *args]
    try:
        return subprocess.run(command, capture_output=True, timeout=timeout, env=_environment(), check=False)
    except FileNotFoundError:
        raise DomainError(f"The git program ({settings.GIT_BINARY!r}) is not installed.", code="conflict") from None
    except subprocess.TimeoutExpired:
        raise DomainError(f"git {args[0]} took longer than {timeout:g} s and was stopped.", code="conflict") from None


def git_succeeds(folder: str | Path, *args: str) -> bool:
    try:
        git_run(folder, *args)
    except DomainError:
        return False
    return True


def ref_check(ref: str) -> str:
    """The ref if it is safe to hand to git, else a DomainError (400)."""
    if not isinstance(ref, str) or not _REF.fullmatch(ref) or ".." in ref or ref.endswith((".lock", "/", ".")):
        raise DomainError(f"{ref!r} is not a ref this server accepts (branch, tag, sha, remote/branch).")
    return ref


def git_toplevel(folder: str | Path) -> str:
    """The real path of the working tree that holds ``folder``; 400 if it is not in a git clone."""
    if not Path(folder).is_dir():
        raise DomainError(f"{folder} is not a folder.")
    try:
        top = git_run(folder, "rev-parse", "--show-toplevel").strip()
    except DomainError as exc:
        raise DomainError(f"{folder} is not inside a git clone: {exc.message}") from None
    if not top:
        raise DomainError(f"{folder} is a bare repository; register a clone with a working tree.")
    return os.path.realpath(top)


def git_is_linked_worktree(folder: str | Path) -> bool:
    """True for a folder made by ``git worktree add`` (its git dir is not the common one)."""
    output = git_run(folder, "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir").split("\n")
    return os.path.realpath(output[0]) != os.path.realpath(output[1])


def git_current_branch(folder: str | Path) -> str | None:
    """The checked-out branch, or None on a detached HEAD."""
    try:
        return git_run(folder, "symbolic-ref", "--quiet", "--short", "HEAD").strip() or None
    except DomainError:
        return None


def git_default_branch(folder: str | Path) -> str:
    """The remote's default branch when known (origin/HEAD), else the branch checked out, else main."""
    try:
        remote_head = git_run(folder, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD").strip()
    except DomainError:
        remote_head = ""
    if remote_head.startswith("origin/"):
        return remote_head.removeprefix("origin/")
    return git_current_branch(folder) or "main"


def git_branch_exists(folder: str | Path, branch: str) -> bool:
    return git_succeeds(folder, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}")


def git_remote_exists(folder: str | Path, remote: str = "origin") -> bool:
    return remote in git_run(folder, "remote").split()


def git_resolve(folder: str | Path, ref: str) -> str | None:
    """The commit sha ``ref`` names, or None."""
    ref_check(ref)
    try:
        return git_run(folder, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}").strip()
    except DomainError:
        return None


def git_fetch_ref(folder: str | Path, ref: str, *, remote: str = "origin") -> str:
    """Fetch ``ref`` from the remote and return the commit it names (from FETCH_HEAD)."""
    ref_check(ref)
    git_run(folder, "fetch", "--no-tags", remote, ref, timeout=NETWORK_TIMEOUT_SECONDS)
    sha = git_resolve(folder, "FETCH_HEAD")
    if sha is None:
        raise DomainError(f"Fetched {ref!r} from {remote}, but it names no commit here.", code="conflict")
    return sha


def git_fetch_pull_request(folder: str | Path, *, number: int, branch: str, remote: str = "origin") -> None:
    """Fetch ``refs/pull/<number>/head`` into the local ``branch`` (fast-forward only)."""
    if not git_remote_exists(folder, remote):
        raise DomainError(
            f"The repository has no {remote!r} remote to fetch pull request #{number} from.", code="conflict"
        )
    refspec = f"refs/pull/{number}/head:refs/heads/{branch}"
    git_run(folder, "fetch", "--no-tags", "--no-write-fetch-head", remote, refspec, timeout=NETWORK_TIMEOUT_SECONDS)


@contextmanager
def clone_locked(clone: str | Path) -> Iterator[None]:
    """One worktree change at a time per clone, across threads and processes (web workers, runners).

    ``git worktree add`` makes ``.git/worktrees/<name>/`` and then writes its files: another
    ``git worktree`` command that lists the worktrees in between fails with "failed to read
    .../commondir". An exclusive flock on the clone's folder (nothing is written into it) held for
    the whole look-then-change sequence also keeps two callers from adding the same folder.
    """
    try:
        fd = os.open(clone, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise DomainError(f"The clone {clone} cannot be opened here: {exc.strerror}.", code="conflict") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def git_worktree_add(repository: str | Path, *, path: str | Path, branch: str, base: str | None = None) -> None:
    """``git worktree add``: a new ``branch`` from ``base``, or the existing ``branch`` when no base."""
    if base is None:
        git_run(repository, "worktree", "add", "--", str(path), branch)
    else:
        git_run(repository, "worktree", "add", "-b", branch, "--", str(path), base)


def git_worktree_remove(repository: str | Path, *, path: str | Path, force: bool = False) -> None:
    git_run(repository, "worktree", "remove", *(["--force"] if force else []), "--", str(path))


def git_worktree_prune(repository: str | Path) -> None:
    """Forget worktrees whose folders are gone (only git's own records change)."""
    git_run(repository, "worktree", "prune")


def git_worktree_branches(repository: str | Path) -> dict[str, str | None]:
    """Every worktree git knows of: real path -> branch (None when detached)."""
    found: dict[str, str | None] = {}
    current: str | None = None
    for line in git_run(repository, "worktree", "list", "--porcelain", "-z").split("\0"):
        if line.startswith("worktree "):
            current = os.path.realpath(line.removeprefix("worktree "))
            found[current] = None
        elif line.startswith("branch ") and current is not None:
            found[current] = line.removeprefix("branch ").removeprefix("refs/heads/")
    return found


def git_status(folder: str | Path) -> list[StatusEntry]:
    """``git status --porcelain=v1 -z``, every untracked file listed on its own."""
    output = git_run(folder, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    fields = output.split("\0")
    entries: list[StatusEntry] = []
    index = 0
    while index < len(fields):
        field = fields[index]
        index += 1
        if len(field) < 4:
            continue
        code, path = field[:2], field[3:]
        original = None
        if "R" in code or "C" in code:
            # -z puts the source of a rename or copy in the next field.
            original = fields[index] if index < len(fields) else None
            index += 1
        entries.append(StatusEntry(code=code, path=path, original_path=original))
    return entries


def git_commits_ahead(folder: str | Path, base: str) -> int | None:
    """Commits on HEAD that ``base`` does not have; None if the base is unknown."""
    if git_resolve(folder, base) is None:
        return None
    return int(git_run(folder, "rev-list", "--count", f"{base}..HEAD").strip())
