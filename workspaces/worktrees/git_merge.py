"""Merging a branch into another without touching anyone's checkout half-way (SPEC §10 "Ship").

The merge is computed in the object store alone: ``git merge-tree --write-tree`` (git 2.38+) writes
the merged tree or names the conflicting files, ``git commit-tree`` makes the commit. Only then does
the target branch move, in one step that fails whole:

- where the target branch is checked out (the clone's own folder, usually), ``git merge --ff-only``
  in that folder moves the branch, index and files together; git refuses before writing anything
  when a local change there would be overwritten, or when the branch moved since we read it;
- elsewhere, ``git update-ref <new> <old>``: a compare-and-swap on the ref.

So a conflict, a race or a dirty checkout leaves every ref and folder as it was. The caller holds
``clone_locked`` around the whole sequence. Hooks and an fsmonitor program never run (an agent may
have written some into the clone's git folder).
"""

from dataclasses import dataclass
from pathlib import Path

from config.api.errors import DomainError
from workspaces.worktrees.git import git_completed, git_run, git_worktree_branches

# No hooks and no fsmonitor program: an agent's worktree shares the clone's git folder, so it could
# have written either. (Merge drivers and smudge filters named in that folder's config still run, as
# in the person's own ``git merge``: the config is the clone's, which a sandboxed run sees read-only,
# client runner/sandbox.py; an unsandboxed run's host is trusted by its config.)
_SAFE = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")


@dataclass(frozen=True)
class MergeTree:
    tree: str
    conflicts: list[str]  # paths git could not merge; empty when ``tree`` is the merged tree


def git_merge_tree(clone: str | Path, *, ours: str, theirs: str) -> MergeTree:
    """The tree of ``theirs`` merged into ``ours`` and the conflicting paths, nothing written to a ref."""
    done = git_completed(
        clone, *_SAFE, "merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", ours, theirs
    )
    if done.returncode not in (0, 1):
        message = done.stderr.decode("utf-8", "replace").strip() or f"exit code {done.returncode}"
        raise DomainError(f"git merge-tree failed: {message}", code="conflict")
    fields = done.stdout.decode("utf-8", "replace").split("\0")
    conflicts = [] if done.returncode == 0 else sorted({name for name in fields[1:] if name})
    return MergeTree(tree=fields[0].strip(), conflicts=conflicts)


def git_commit_tree(clone: str | Path, *, tree: str, parents: list[str], message: str, author: tuple[str, str]) -> str:
    """A commit of ``tree`` with ``parents``; the person (or key) who merged is its author and committer."""
    name, email = author
    args = [*_SAFE, "-c", f"user.name={name}", "-c", f"user.email={email}", "commit-tree", tree]
    for parent in parents:
        args += ["-p", parent]
    return git_run(clone, *args, "-m", message).strip()


def git_is_ancestor(clone: str | Path, *, commit: str, of: str) -> bool:
    done = git_completed(clone, "merge-base", "--is-ancestor", commit, of)
    if done.returncode not in (0, 1):
        raise DomainError(f"git merge-base failed: {done.stderr.decode('utf-8', 'replace').strip()}", code="conflict")
    return done.returncode == 0


def _checked_out(clone: str | Path, branch: str) -> list[str]:
    """The folders where ``branch`` is checked out. Read from the HEAD files of the clone's git folder
    (its own and each linked worktree's) when it is a plain ``.git`` folder: a git process less on the
    merge's path. Anything else (a gitfile, a HEAD that is not a symbolic ref) asks git."""
    common = Path(clone) / ".git"
    if not common.is_dir():
        return [path for path, name in git_worktree_branches(clone).items() if name == branch]
    wanted = f"ref: refs/heads/{branch}"
    found = []
    for head, folder in [(common / "HEAD", Path(clone))] + [
        (tree / "HEAD", tree / "gitdir") for tree in (common / "worktrees").glob("*") if tree.is_dir()
    ]:
        try:
            if head.read_text().strip() != wanted:
                continue
            found.append(str(folder if folder == Path(clone) else Path(folder.read_text().strip()).parent))
        except OSError:
            return [path for path, name in git_worktree_branches(clone).items() if name == branch]
    return found


def git_branch_advance(clone: str | Path, *, branch: str, old: str, new: str, reason: str) -> str | None:
    """Move ``branch`` from ``old`` to ``new`` (a descendant) in one step; returns the folder whose
    files moved with it, or None when the branch is checked out nowhere. 409 naming why when git
    refuses (a local change in that folder, or the branch moved since ``old`` was read)."""
    checked_out = _checked_out(clone, branch)
    if not checked_out:
        git_run(clone, "update-ref", "-m", reason, f"refs/heads/{branch}", new, old)
        return None
    folder = checked_out[0]
    # A branch that moved on since ``old`` was read is no ancestor of ``new``: --ff-only refuses it.
    # No ``gc --auto`` afterwards (merge starts one): the archive and people's own git runs do that.
    done = git_completed(folder, *_SAFE, "-c", "gc.auto=0", "merge", "--ff-only", "--no-stat", "--quiet", new)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).decode("utf-8", "replace").strip()
        raise DomainError(
            f"{branch} is checked out in {folder} and git would not move it there: {said} "
            "Commit or put aside the local changes in that folder, then merge again.",
            code="conflict",
            extra={"checkout": folder},
        )
    return folder
