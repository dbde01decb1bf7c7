"""What the end-to-end tests of the runner's built-in providers share (test_runner_claude_e2e.py,
test_runner_codex_e2e.py, test_runner_gemini_e2e.py): a real `switchyard runner` offering one
provider with the real CLI first on its PATH, a registered git repository for its tasks, and the reads
of what a run left behind (its worktree, the ledger, the agent's argv).

The fixtures here (``person``, ``repository``) are imported by those modules, and from them by others.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from config.actors import Actor
from ledger.models import Event
from runners.models import Run
from runners.services import run_queue
from sessions_app.keys import api_key_create
from switchyard_client.api.client import Client
from tests.factories import TaskFactory, UserFactory
from tests.runners.live_runner import Machine
from tests.workspaces.conftest import commit_file, git
from workspaces.worktrees.services import repository_register


@pytest.fixture
def person():
    return Actor(user=UserFactory(username="po", is_staff=True))


@pytest.fixture
def repository(tmp_path):
    clone = tmp_path / "code" / "shop"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    commit_file(clone, "README.md", "# shop\n", "Initial commit")
    repository, _ = repository_register(path=str(clone))
    return repository


@contextlib.contextmanager
def cli_machine(
    tmp_path: Path,
    url: str,
    name: str,
    *,
    provider: str,
    cli: Path,
    capacity: int,
    home: Path,
    env_for: Callable[..., dict[str, str]],
) -> Iterator[Machine]:
    """A runner ``name`` offering the built-in ``provider``, with the CLI ``cli`` under the provider's
    name first on its PATH; ``machine.point_at(fake, ...)`` offers the provider with ``env_for(fake,
    ...)`` (the CLI's environment, pointed at the fake) before the test starts it. ``home`` is the
    CLI's home there, for the test to look into. Its processes are stopped after."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / provider).symlink_to(cli.resolve())
    machine = Machine(
        tmp_path / "machines",
        url,
        name,
        capacity=capacity,
        env={"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"},
    )

    def point_at(fake, **options) -> None:
        env = env_for(fake, **options)
        env.pop("PATH")  # the runner's, with the CLI on it
        machine.providers[provider] = {"env": env}
        machine.write()

    machine.point_at = point_at
    machine.home = home
    try:
        yield machine
    finally:
        machine.cleanup()


def queue_run(person, repository, provider: str, title: str, description: str = "Keep it short.") -> Run:
    task = TaskFactory(title=title, description=description, repository=repository)
    return run_queue(actor=person, task=task, provider=provider)


def worktree_of(repository, run: Run) -> Path:
    # A task of no type gets the worktree `task-<id>` beside the clone (workspaces/worktrees/services.py).
    return Path(os.path.realpath(Path(repository.path).parent / f"task-{run.task_id}"))


def owner_client(url: str, run: Run) -> Client:
    """A client with a fresh key of the run's agent (it owns the run's session)."""
    run.refresh_from_db()
    return Client(url, api_key_create(agent=run.agent, scopes=["agent"]).key, timeout=20)


def ledger(run: Run, name: str) -> list[dict]:
    """The payloads of the run's ledger events called ``name``, oldest first."""
    rows = Event.objects.filter(name=name, subject_type="run", subject_id=str(run.pk)).order_by("id")
    return list(rows.values_list("payload", flat=True))


def agent_argv(pid: int) -> list[str]:
    """The agent's argv as the runner gave it: after its wrapper's ``sh -c WRAPPER EXIT_FILE``, and
    after bwrap's ``... --`` when sandboxed."""
    argv = [part.decode() for part in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if part]
    agent = argv[argv.index("-c") + 3 :]
    if Path(agent[0]).name == "bwrap":
        agent = agent[agent.index("--") + 1 :]
    return agent
