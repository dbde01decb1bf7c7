"""Config sync: every file in a repository's ``sync/`` folder is linked into each worktree.

A link is relative (``.env -> ../sync/<repo>/.env``), so a worktree folder can be moved
together with its siblings. Names from the sync folder go through ``clean_relative``, and
links are made relative to a directory descriptor opened with ``O_NOFOLLOW`` all the way
down, so a symlinked folder inside a worktree can never carry a link outside it. A regular
file in the way is reported, never overwritten.
"""

import os
import stat
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from config.api.errors import DomainError
from config.safepaths import UnsafePath, clean_relative, parent_descriptor
from workspaces.models import Repository, Worktree

# Never linked: a `.git` entry would replace the worktree's own link to its repository.
RESERVED_NAMES = {".git"}


@dataclass
class ConfigSyncReport:
    worktree_id: int
    sync_dir: str
    linked: list[str] = field(default_factory=list)  # already the right link
    missing: list[str] = field(default_factory=list)  # no link (yet)
    wrong: list[dict] = field(default_factory=list)  # {"path", "points_to"}: a link to somewhere else
    blocked: list[dict] = field(default_factory=list)  # {"path", "reason"}: a file or folder in the way
    skipped: list[dict] = field(default_factory=list)  # {"path", "reason"}: a sync entry that can't be linked
    repaired: list[str] = field(default_factory=list)

    @property
    def in_sync(self) -> bool:
        broken = set(self.missing) | {item["path"] for item in self.wrong}
        return not self.blocked and broken <= set(self.repaired)


def sync_sources(*, repository: Repository) -> tuple[dict[str, tuple[str, ...]], list[dict]]:
    """The files of the sync folder (logical path -> clean parts), and the entries skipped with why."""
    sources: dict[str, tuple[str, ...]] = {}
    skipped: list[dict] = []
    root = repository.sync_dir
    if not root or not os.path.isdir(root):
        return sources, skipped
    for folder, subfolders, files in os.walk(root):
        relative_folder = os.path.relpath(folder, root)
        # Symlinked folders are listed but not walked into; a .git folder is not walked at all.
        not_walked = [d for d in subfolders if d in RESERVED_NAMES or os.path.islink(os.path.join(folder, d))]
        subfolders[:] = sorted(set(subfolders) - set(not_walked))
        for name in sorted(files + not_walked):
            logical = name if relative_folder == "." else f"{relative_folder}/{name}"
            reason = _source_problem(os.path.join(folder, name), logical)
            if reason:
                skipped.append({"path": logical, "reason": reason})
                continue
            sources[logical] = clean_relative(logical)
    return sources, skipped


def _source_problem(full_path: str, logical: str) -> str | None:
    try:
        clean_relative(logical)
    except UnsafePath as exc:
        return exc.reason
    if RESERVED_NAMES & set(logical.split("/")):
        return "a .git entry would replace the worktree's link to its repository"
    mode = os.lstat(full_path).st_mode
    if not stat.S_ISREG(mode):
        return "not a regular file (symbolic links and special files in the sync folder are not linked)"
    return None


def sync_link_target(*, repository: Repository, worktree_root: str, logical: str) -> str:
    """The relative text of the link at ``logical`` inside the worktree."""
    source = os.path.join(os.path.realpath(repository.sync_dir), logical)
    return os.path.relpath(source, start=os.path.dirname(os.path.join(worktree_root, logical)))


def sync_links_expected(*, worktree: Worktree) -> dict[str, str]:
    """Logical path -> link text, for every file the sync folder should link into this worktree."""
    sources, _ = sync_sources(repository=worktree.repository)
    return {
        logical: sync_link_target(repository=worktree.repository, worktree_root=worktree.real_path, logical=logical)
        for logical in sources
    }


def worktree_config_sync(*, worktree: Worktree, repair: bool) -> ConfigSyncReport:
    """Check (and with ``repair``, fix) the links from the worktree into the sync folder.

    Missing links are made and links that point elsewhere are replaced (atomically, by a
    rename); anything else in the way is reported and left alone. Safe to run twice.
    """
    repository = worktree.repository
    root = Path(worktree.real_path)
    if not root.is_dir():
        raise DomainError(f"The folder of worktree {worktree} is missing: {root}", code="conflict")
    sources, skipped = sync_sources(repository=repository)
    report = ConfigSyncReport(worktree_id=worktree.pk, sync_dir=repository.sync_dir, skipped=skipped)
    for logical, parts in sources.items():
        target = sync_link_target(repository=repository, worktree_root=str(root), logical=logical)
        _sync_one(root=root, parts=parts, logical=logical, target=target, repair=repair, report=report)
    return report


def _sync_one(
    *, root: Path, parts: tuple[str, ...], logical: str, target: str, repair: bool, report: ConfigSyncReport
) -> None:
    try:
        with parent_descriptor(root, parts, create=repair) as dir_fd:
            _sync_in_folder(dir_fd, parts[-1], logical=logical, target=target, repair=repair, report=report)
    except FileNotFoundError:
        report.missing.append(logical)  # its folder does not exist yet (only when not repairing)
    except UnsafePath as exc:
        report.blocked.append({"path": logical, "reason": exc.reason})


def _sync_in_folder(dir_fd: int, name: str, *, logical: str, target: str, repair: bool, report) -> None:
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        report.missing.append(logical)
        if repair:
            os.symlink(target, name, dir_fd=dir_fd)
            report.repaired.append(logical)
        return
    if not stat.S_ISLNK(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "a regular file"
        report.blocked.append({"path": logical, "reason": f"{kind} is in the way; it is left as it is"})
        return
    current = os.readlink(name, dir_fd=dir_fd)
    if current == target:
        report.linked.append(logical)
        return
    report.wrong.append({"path": logical, "points_to": current})
    if repair:
        temporary = f".{name}.sync-{uuid.uuid4().hex[:8]}"
        os.symlink(target, temporary, dir_fd=dir_fd)
        os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        report.repaired.append(logical)


def sync_links_unlink(*, worktree: Worktree, links: dict[str, str]) -> list[str]:
    """Remove the links this module made (only links with exactly the expected text)."""
    removed = []
    root = Path(worktree.real_path)
    for logical, target in links.items():
        parts = tuple(logical.split("/"))
        try:
            with parent_descriptor(root, parts) as dir_fd:
                if os.readlink(parts[-1], dir_fd=dir_fd) == target:
                    os.unlink(parts[-1], dir_fd=dir_fd)
                    removed.append(logical)
        except (OSError, UnsafePath):
            continue  # not our link, or not there: nothing to remove
    return removed
