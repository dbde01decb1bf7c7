"""A repository on a runner's machine, end to end: real `switchyard runner` processes with roots of
their own standing in for two machines, a real git clone on one of them, a live server.

The runner holding the clone registers it at start-up; runs of its tasks go to it alone (the other
runner takes the rest), each in a worktree it makes beside its clone with the sync folder's files
linked in, registered and claimed through the API; the worktree's status reaches the monitor with
the heartbeat; a worktree removed in Switchyard is removed on the runner's machine.
"""

import os
from pathlib import Path
from unittest import mock

import pytest
from django.test import Client, override_settings
from django.urls import reverse

from config.actors import Actor
from runners.models import Run, Runner
from runners.services import run_queue
from tests.browser.server import ServerProcess
from tests.client.live import server_roots  # noqa: F401
from tests.factories import TaskFactory, UserFactory
from tests.runners.live_runner import GIT_ENV, Machine, git, wait_for
from tests.worker import FILE_ROOTS
from workspaces.models import Repository, Worktree
from workspaces.worktrees.services import worktree_remove

pytestmark = pytest.mark.usefixtures("transactional_db")

COMMIT = {
    "command": [
        "sh",
        "-c",
        'test -L .env && echo "work of task $SWITCHYARD_TASK on $MACHINE" > note.txt '
        '&& git add note.txt && git commit -qm "note for $SWITCHYARD_TASK" && echo committed on $MACHINE',
    ]
}


@pytest.fixture(scope="module")
def sy_server(django_db_setup, django_db_blocker, server_roots, tmp_path_factory):  # noqa: F811
    """The app with a heartbeat every second, so worktree reports arrive within the test."""
    settings = {name: server_roots[name] for name in FILE_ROOTS}
    with (
        mock.patch.dict(os.environ, {"RUNNER_HEARTBEAT_SECONDS": "1"}),
        django_db_blocker.unblock(),
        override_settings(**settings, EXPORT_ROOTS=[server_roots["EXPORT_ROOT"]]),
    ):
        server = ServerProcess(tmp_path_factory.mktemp("server-log") / "server.log").start()
    yield server
    server.stop()


def make_clone(base: Path) -> Path:
    """``<base>/src/shop`` on main with one commit, and ``<base>/src/sync/shop/.env`` to link in."""
    clone = base / "src" / "shop"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    (clone / "README.md").write_text("shop\n")
    git(clone, "add", "README.md")
    git(clone, "commit", "-qm", "start")
    sync = base / "src" / "sync" / "shop"
    sync.mkdir(parents=True)
    (sync / ".env").write_text("TOKEN=not-a-secret\n")
    return clone


@pytest.fixture
def two_machines(tmp_path, sy_server):
    made = []
    for name in ("build-a", "build-b"):
        shell = {**COMMIT, "env": {"MACHINE": name}}
        plain = {"command": ["sh", "-c", "echo plain work on $MACHINE"], "output": "text", "env": {"MACHINE": name}}
        providers = {"shell": shell, "plain": plain}
        made.append(Machine(tmp_path, sy_server.url, name, capacity=3, providers=providers, env=GIT_ENV))
    yield made
    for machine in made:
        machine.cleanup()


def test_runs_of_a_runner_clone_run_there_in_worktrees_it_makes_and_reports(tmp_path, two_machines):
    host, other = two_machines
    clone = make_clone(tmp_path / "machine-a")
    host.repositories = {"shop": {"path": str(clone)}}
    host.write()
    host.start()
    other.start()
    shop = wait_for(
        lambda: Repository.objects.filter(name="shop", runner__name="build-a").first(),
        what="the runner to register its clone",
        machines=two_machines,
    )
    assert (shop.path, shop.default_branch) == (os.path.realpath(clone), "main")
    person = Actor(user=UserFactory(username="po", is_staff=True))

    # when three tasks of the clone's repository and one of none are run
    hosted = [run_queue(actor=person, task=TaskFactory(repository=shop), provider="shell") for _ in range(3)]
    anywhere = run_queue(actor=person, task=TaskFactory(), provider="plain")
    every = [*hosted, anywhere]

    def all_ended():
        runs = list(Run.objects.filter(pk__in=[r.pk for r in every]).select_related("runner"))
        return runs if all(run.status in Run.TERMINAL for run in runs) else None

    ended = {run.pk: run for run in wait_for(all_ended, timeout=90, what="the runs to end", machines=two_machines)}

    # then each hosted run ran on the clone's machine, in its own worktree beside the clone
    parent = Path(shop.path).parent
    for queued in hosted:
        run = ended[queued.pk]
        assert (run.status, run.runner.name) == ("succeeded", "build-a"), (run.error, host.output())
        folder = parent / f"task-{run.task_id}"
        assert run.workdir == str(folder)
        assert os.readlink(folder / ".env") == "../sync/shop/.env"
        assert git(clone, "log", "--format=%s", f"task-{run.task_id}").splitlines()[0] == f"note for {run.task_id}"
        assert run.summary["commits_ahead"] == 1 and run.summary["files_changed"] == ["note.txt"]
        tree = Worktree.objects.get(real_path=str(folder))
        assert (tree.repository_id, tree.branch, tree.holder_id, tree.status) == (
            shop.pk,
            f"task-{run.task_id}",
            None,  # released when the run ended
            "active",
        )
    assert ended[anywhere.pk].status == "succeeded"
    assert len(git(clone, "worktree", "list").splitlines()) == 4  # the clone and three worktrees

    # and their status reaches the monitor with the heartbeat: ahead by one, the sync link not a change
    def reported():
        rows = list(Worktree.objects.filter(repository=shop, reported__present=True))
        return rows if len(rows) == 3 and all(r.reported["commits_ahead"] == 1 for r in rows) else None

    rows = wait_for(reported, timeout=30, what="the worktree reports", machines=two_machines)
    assert all(r.reported["uncommitted"] == 0 for r in rows), [r.reported for r in rows]
    assert all(r.reported["recent_files"][0]["path"] == "note.txt" for r in rows)
    page = Client()
    page.force_login(UserFactory(username="engineer", is_staff=True, is_superuser=True))
    html = page.get(reverse("workspaces:worktrees")).content.decode()
    assert html.count("on runner <strong>build-a</strong>") == 3
    assert "note.txt" in html

    # when a person removes one in Switchyard, its runner removes the folder on its machine
    removed = rows[0]
    worktree_remove(actor=person, worktree=removed)
    # (the runner says so once `git worktree remove` has returned: the folder goes before git's records)
    said = f"worktree {removed.real_path} removed"
    wait_for(lambda: said in host.output(), timeout=30, what="the runner's removal line", machines=[host])
    assert not Path(removed.real_path).exists()
    assert removed.real_path not in git(clone, "worktree", "list")
    assert (clone / "README.md").exists()  # the clone itself is untouched


def test_a_runner_configured_with_a_label_its_key_lacks_says_it_is_ignored(tmp_path, sy_server):
    """A runner's labels are its key's (tests/runners/test_runner_host_namespaces.py): a real runner
    whose config claims gpu says at start that gpu is ignored, and the server keeps linux alone."""
    machine = Machine(tmp_path, sy_server.url, "build-l", labels=["linux"], providers={"plain": {"command": ["true"]}})
    machine.runner_table["labels"] = ["linux", "gpu"]
    machine.write()
    try:
        machine.start()
        said = "labels gpu ignored: this runner's labels are its key's (linux)"
        wait_for(lambda: said in machine.output(), timeout=30, what="the runner's labels line", machines=[machine])
        assert Runner.objects.get(name="build-l").labels == ["linux"]
    finally:
        machine.cleanup()
