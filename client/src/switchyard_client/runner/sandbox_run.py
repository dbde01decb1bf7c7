"""Whether a run's agent starts in a sandbox, and with what (sandbox.py builds it): the runner's
``sandbox`` mode, the provider's own ``sandbox`` switch, and where this run's files are."""

from __future__ import annotations

import os
from pathlib import Path

from switchyard_client.runner.config import ProviderConfig, RunnerConfig
from switchyard_client.runner.git import GitError, git
from switchyard_client.runner.repos import HostedRepository
from switchyard_client.runner.sandbox import (
    SandboxUnavailable,
    bwrap_argv,
    bwrap_problem,
    plan_for,
    private_home_prepare,
    program_folders,
)
from switchyard_client.runner.state import RunState


def sandbox_wanted(config: RunnerConfig, provider: ProviderConfig) -> bool:
    """True when this provider's runs go in a sandbox on this runner (``sandbox`` not false on either),
    where bwrap can make one; raises SandboxUnavailable when the config requires one that cannot be
    made (``sandbox = true``), so the run fails with the reason rather than running unsandboxed."""
    if config.sandbox is False or not provider.sandbox:
        return False
    problem = bwrap_problem()
    if problem is None:
        return True
    if config.sandbox == "if-available":
        return False
    raise SandboxUnavailable(
        f'{problem}; this runner\'s config asks for a sandbox (set [runner] sandbox = "if-available" '
        "or false to run agents unsandboxed)"
    )


def _git_common_dir(workdir: str) -> str | None:
    try:
        out = git(workdir, "rev-parse", "--path-format=absolute", "--git-common-dir", check=False).strip()
    except GitError:  # no git, or it timed out: nothing to share
        return None
    return out if out and os.path.isdir(out) else None


def sandboxed_argv(
    argv: list[str],
    *,
    state: RunState,
    config: RunnerConfig,
    provider: ProviderConfig,
    repos: list[HostedRepository],
    env: dict[str, str],
    hook_dir: Path,
) -> list[str]:
    """``argv`` wrapped in bwrap for this run (sandbox.py's plan, filled in from the run and the config)."""
    s = state
    workdir = os.path.realpath(s.workdir)
    home = env.get("HOME") or os.path.expanduser("~")
    task = (s.assignment.get("task") or {}).get("id")
    private_home = config.root / "homes" / (f"{provider.name}-task-{task}" if task else f"{provider.name}-run-{s.id}")
    private_home_prepare(private_home, home=home, files=provider.home_files)
    hook_dir.mkdir(parents=True, exist_ok=True)
    parents = {os.path.dirname(workdir), *(repo.parent for repo in repos)}
    hide = [home, str(config.root), *parents, *(str(p) for p in config.sandbox_hide)]
    if config.source:
        hide.append(config.source)
    common = _git_common_dir(workdir)
    plan = plan_for(
        workdir=workdir,
        home=home,
        private_home=str(private_home),
        hide=hide,
        programs=program_folders(argv[0], env),
        # The shared sync folders, and the hooks that refuse a review run's commits (review_guard.py).
        readable=[*(os.path.join(parent, "sync") for parent in parents), str(config.root / "review-hooks")],
        writable=[str(hook_dir)],
        git_dir=common,
    )
    return bwrap_argv(plan, argv)
