"""Which repository a change's diff reads through: the clone as it is, or its git folder alone (bare).

libgit2 asks each file's attributes (``diff``, ``binary``: git's diff driver) before diffing it, and
in a clone with a checkout that means the ``.gitattributes`` of every folder from the file's up to
the checkout's root, each found by a ``realpath`` of the file's whole path: for a 200-file change,
2,400 ``readlink`` calls and a fifth of the read (bench/HISTORY.md, 2026-11-28 22:40). Opened bare,
libgit2 reads the same repository's ``info/attributes`` and the user's attributes file, and skips the
checkout. So when no folder of the change has a ``.gitattributes`` in the checkout, both reads are
the same, and the change is read bare; otherwise as it is. (libgit2 reads a ``.gitattributes`` that
is in the index and not on disk either way; git's diff does not.) tests/runners/test_task_diff_parity.py
holds both reads against git's own diff.
"""

import os

import pygit2
from pygit2.enums import RepositoryOpenFlag

ATTRIBUTES = b".gitattributes"


def diff_folders(diff: pygit2.Diff) -> set[bytes]:
    """Every folder that holds a file of ``diff`` (either side), and each folder above it: b"" the root."""
    folders = {b""}
    for delta in diff.deltas:
        for side in (delta.old_file, delta.new_file):
            folder = side.raw_path.rpartition(b"/")[0]
            while folder not in folders:
                folders.add(folder)
                folder = folder.rpartition(b"/")[0]
    return folders


def attributes_apply(repository: pygit2.Repository, folders: set[bytes]) -> bool:
    """Whether the checkout has a ``.gitattributes`` in one of ``folders``."""
    workdir = repository.workdir
    if workdir is None:
        return False  # a bare clone has no checkout to read them from
    root = os.fsencode(workdir)
    return any(os.path.lexists(os.path.join(root, folder, ATTRIBUTES)) for folder in folders)


def bare(repository: pygit2.Repository) -> pygit2.Repository:
    """The same repository without its checkout (a clone's git folder, opened bare)."""
    if repository.workdir is None:
        return repository
    return pygit2.Repository(repository.path, RepositoryOpenFlag.BARE)
