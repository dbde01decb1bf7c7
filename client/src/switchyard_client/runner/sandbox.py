"""A sandbox per run (SPEC §8): on Linux with bubblewrap (`bwrap`), the agent sees the system read-only,
writes only its own work, and cannot see the runner or other runs.

What the agent gets, in the order bwrap applies it (a later mount lies over an earlier one):
1. ``/`` read-only, a fresh ``/dev``, its own ``/proc`` (its own PID namespace: the runner and other
   runs are not in it, so ``/proc/<runner pid>/environ`` does not exist) and a private ``/tmp``;
2. the hidden folders made empty and read-only (a tmpfs; a hidden file reads as empty): the runner's home, its root
   (other runs' state and logs), its config file (its key), the folders worktrees live in (other runs'
   worktrees are siblings of this one) and whatever ``sandbox_hide`` adds;
3. a private home at the home's own path, kept per task and provider under the runner's root (Claude
   Code's transcripts stay there for ``--resume``), holding copies of the ``home_files`` the provider
   names (settings, credentials) and nothing else of the runner's home;
4. read-only again: the programs it runs where a hidden folder held them (the PATH's folders, the
   program's own folder, this Python's installation), and the repository's shared ``sync`` folder;
5. writable: its worktree and its hook state folder;
6. the repository's git folder read-only, and writable again only the folders a commit writes in
   (``objects``, ``refs``, ``logs``, ``worktrees``...; never ``hooks``, ``info`` or ``modules``): a merge
   driver, a filter or a hook written to its ``config`` or ``hooks`` would run outside the sandbox, in the
   server's merge or a person's git. The folder, not the ``config`` file, is the mount: a file bound over
   ``config`` comes loose as soon as any git outside (the runner's, another run's) renames a new
   ``config`` into place, as every ``git config`` does, and the agent could write it from then on.
The network is kept: agents need their model and Switchyard.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

# Folders never hidden whatever a path computes to: hiding them would hide the system itself.
_NEVER_HIDDEN = frozenset(
    {"/", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc", "/opt", "/var", "/dev", "/proc", "/sys", "/run"}
)


class SandboxUnavailable(RuntimeError):
    """bwrap is missing or cannot start a sandbox here; the message says which and what to do."""


@dataclass
class SandboxPlan:
    """What one run's sandbox shows. Paths are absolute; ``hidden`` folders and files are masked,
    ``readable`` ones shown again read-only over them, ``writable`` ones bound read-write last."""

    home: str
    private_home: str
    workdir: str
    hidden: list[str] = field(default_factory=list)
    readable: list[str] = field(default_factory=list)
    writable: list[str] = field(default_factory=list)
    # The repository's git folder, bound read-only after the writable ones (it may lie inside the
    # workdir), and then its subfolders a commit writes in, bound read-write again (step 6 above).
    git_dir: str | None = None
    git_writable: list[str] = field(default_factory=list)


# What a commit, a branch or a fetch in a worktree never needs to write, and which would run code
# outside the sandbox if it could: hooks; info/attributes (naming filter and merge drivers); the
# submodules' own git folders, each with its own config and hooks.
_GIT_READ_ONLY = frozenset({"hooks", "info", "modules"})


def git_writable_folders(git_dir: str) -> list[str]:
    """The subfolders of a repository's git folder that its worktrees' commits write in."""
    return sorted(
        entry.path
        for entry in os.scandir(git_dir)
        if entry.is_dir(follow_symlinks=False) and entry.name not in _GIT_READ_ONLY
    )


@cache
def bwrap_problem(bwrap: str = "bwrap") -> str | None:
    """None when ``bwrap`` can start a sandbox with its own PID namespace here, else why not (cached:
    one check per runner process)."""
    found = shutil.which(bwrap)
    if found is None:
        return f"{bwrap} (bubblewrap) is not installed: apt-get install bubblewrap"
    try:
        done = subprocess.run(
            [found, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--", "true"],
            capture_output=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{found} could not start: {exc}"
    if done.returncode != 0:
        return f"{found} cannot make a sandbox here: {done.stderr.decode(errors='replace').strip()[:300]}"
    return None


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _real(path: str | os.PathLike) -> str:
    return os.path.realpath(os.fspath(path))


def program_folders(argv0: str, env: dict[str, str]) -> list[str]:
    """The folders the agent's programs come from: the program's own (and its real target's), each
    folder on its PATH, and this Python's installation and import path (the hook and the demo agent
    run on it)."""
    found: list[str] = []
    program = shutil.which(argv0, path=env.get("PATH")) if os.sep not in argv0 else argv0
    if program:
        found += [os.path.dirname(os.path.abspath(program)), os.path.dirname(_real(program))]
        # A package's bin link (node_modules/.bin/claude) runs a file of its package: show the package tree.
        parts = Path(_real(program)).parts
        if "node_modules" in parts:
            found.append(str(Path(*parts[: parts.index("node_modules") + 1])))
    found += [p for p in env.get("PATH", "").split(os.pathsep) if p]
    found += [sys.prefix, sys.base_prefix, os.path.dirname(sys.executable), os.path.dirname(_real(sys.executable))]
    # What this Python imports from (an editable install's source folder too, which may lie in a /tmp
    # the sandbox replaces): the hook and the demo agent are `{python} -m switchyard_client...`.
    found += [p for p in sys.path if os.path.isabs(p) and os.path.isdir(p)]
    return found


def plan_for(
    *,
    workdir: str,
    home: str,
    private_home: str,
    hide: list[str],
    programs: list[str],
    writable: list[str],
    readable: list[str] = (),
    git_dir: str | None = None,
) -> SandboxPlan:
    """The run's plan: ``hide`` less the system's folders, the programs found under a hidden folder
    shown again read-only, and ``writable`` (the workdir first) bound last."""
    hidden = sorted(
        {_real(p) for p in hide if p and os.path.lexists(p)} - _NEVER_HIDDEN, key=lambda p: (p.count("/"), p)
    )
    real_home = _real(home)
    hidden = [p for p in hidden if p != real_home]  # the private home is bound over it
    masked = [*hidden, real_home]

    def under_mask(path: str) -> bool:
        return any(_inside(path, m) for m in masked) or _inside(path, "/tmp")

    shown = []
    for folder in [*programs, *readable]:
        real = _real(folder)
        # A folder holding a hidden one (or the home) is never shown whole: that would undo the hiding
        # (the runner's working folder on its import path, say, holding the instance's var/).
        holds_hidden = any(_inside(m, real) for m in masked)
        if os.path.isdir(real) and under_mask(real) and not holds_hidden and real not in shown:
            shown.append(real)
    writes = []
    for folder in [workdir, *writable]:
        real = _real(folder)
        if os.path.exists(real) and real not in writes:
            writes.append(real)
    git = _real(git_dir) if git_dir and os.path.isdir(git_dir) else None
    return SandboxPlan(
        home=home,
        private_home=private_home,
        workdir=_real(workdir),
        hidden=hidden,
        readable=shown,
        writable=writes,
        git_dir=git,
        git_writable=git_writable_folders(git) if git else [],
    )


def bwrap_argv(plan: SandboxPlan, argv: list[str], *, bwrap: str = "bwrap") -> list[str]:
    """``bwrap <mounts> -- argv``: the plan as bubblewrap's arguments, in the order they apply."""
    out = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc"]
    out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for path in plan.hidden:
        out += ["--tmpfs", path] if os.path.isdir(path) else ["--ro-bind", "/dev/null", path]
    out += ["--bind", plan.private_home, plan.home]
    for path in plan.readable:
        out += ["--ro-bind", path, path]
    for path in plan.writable:
        out += ["--bind", path, path]
    if plan.git_dir:
        out += ["--ro-bind", plan.git_dir, plan.git_dir]
        for path in plan.git_writable:
            out += ["--bind", path, path]
    # Last, once every mount point in them is made: a hidden folder's empty stand-in takes no writes
    # either (what lies below it, the worktree and the git folder, are mounts of their own and stay writable).
    for path in plan.hidden:
        if os.path.isdir(path):
            out += ["--remount-ro", path]
    out += ["--chdir", plan.workdir, "--setenv", "HOME", plan.home, "--", *argv]
    return out


def private_home_prepare(private_home: str | Path, *, home: str | Path, files: list[str]) -> list[str]:
    """Make the private home and copy in each of ``files`` (paths relative to the real home) that
    exists and is newer than its copy, so a credential refreshed inside the sandbox is kept. Returns
    the files copied. A name that leaves the home (``../x``, an absolute path) is refused."""
    private, real_home = Path(private_home), Path(home)
    private.mkdir(parents=True, exist_ok=True, mode=0o700)
    copied = []
    for name in files:
        relative = Path(name.removeprefix("~/"))
        if relative.is_absolute() or ".." in relative.parts:
            raise ValueError(f"home file {name!r} must be a path inside the home, like .claude/settings.json")
        source, target = real_home / relative, private / relative
        if not source.is_file():
            continue
        if target.exists() and target.stat().st_mtime >= source.stat().st_mtime:
            continue
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.copy2(source, target)
        copied.append(str(relative))
    return copied
