"""A run acts only for itself (SPEC §8). Every run of one provider on one runner works as one agent
row (``claude@build-1``), so "the agent holds it" cannot tell run A from run B: the per-run key does.
With run B's key, every task and worktree endpoint on run A's task and worktree (and every claim)
is 403 with nothing changed; with its own key each run still works its own task and worktree.
"""

import pytest

from board.models import Task, TaskClaim
from ledger.models import Event
from runners.models import Run
from runners.services import run_queue
from sessions_app.models import AgentSession
from tests.factories import TaskFactory
from tests.runners.runner_clients import client_with_key, next_runs, report
from tests.workspaces.conftest import commit_file, git, tree_snapshot
from workspaces.models import Worktree, WorktreeClaimRequest
from workspaces.worktrees.services import repository_register

pytestmark = pytest.mark.django_db


@pytest.fixture
def code_dir(tmp_path):
    folder = tmp_path / "code"
    (folder / "shop").mkdir(parents=True)
    git(folder / "shop", "init", "-q", "-b", "main")
    commit_file(folder / "shop", "README.md", "# shop\n", "Initial commit")
    return folder


@pytest.fixture
def two_runs(runner_client, person, code_dir):
    """Runs A and B of claude on build-1, both started (one agent row, two per-run keys), each with
    its task's worktree made and claimed with its own key; and a ready task nobody holds."""
    repository, _ = repository_register(path=str(code_dir / "shop"))
    tasks = [TaskFactory(title=f"task {label}", repository=repository) for label in "AB"]
    runs = [run_queue(actor=person, task=task, provider="claude") for task in tasks]
    assert sorted(r["id"] for r in next_runs(runner_client).json()["runs"]) == [run.pk for run in runs]
    keys = []
    for run in runs:
        started = report(runner_client, run.pk, "starting")
        assert started.status_code == 200, started.json()
        keys.append(client_with_key(started.json()["agent_key"]))
    trees = []
    for task, key in zip(tasks, keys, strict=True):
        made = key.post(
            f"/api/v1/repositories/{repository.pk}/worktrees/", {"type": "task", "name": str(task.pk)}, format="json"
        )
        assert made.status_code == 201, made.json()
        claimed = key.post(f"/api/v1/worktrees/{made.json()['id']}/claim/", {}, format="json")
        assert claimed.status_code == 200, claimed.json()
        trees.append(Worktree.objects.get(pk=made.json()["id"]))
    a, b = (Run.objects.get(pk=run.pk) for run in runs)
    assert a.agent_id == b.agent_id  # the premise: one agent row for both runs
    return {
        "repository": repository,
        "runs": (a, b),
        "tasks": tasks,
        "trees": trees,
        "keys": keys,
        "free": TaskFactory(title="nobody's", status=Task.Status.READY),
        "code_dir": code_dir,
    }


def _world(code_dir) -> tuple:
    """What a refused request must leave as it was: the board, the claims, the worktrees, their
    queues, the sessions, the ledger, and every file of the clone and its worktrees."""
    return (
        list(Task.objects.order_by("pk").values("pk", "status", "assignee_id", "session_id", "error", "retries")),
        list(TaskClaim.objects.order_by("pk").values()),
        list(Worktree.objects.order_by("pk").values("pk", "status", "holder_id", "lease_expires_at", "released_at")),
        WorktreeClaimRequest.objects.count(),
        AgentSession.objects.count(),
        Event.objects.count(),
        tree_snapshot(code_dir),
    )


# Each request run B's key makes on run A's task or worktree (or on a task of nobody's): (method, path, body).
NEIGHBOUR_REQUESTS = {
    "read A's task": ("get", "/api/v1/tasks/{task_a}/", None),
    "claim A's task": ("post", "/api/v1/tasks/{task_a}/claim/", {}),
    "claim a free task": ("post", "/api/v1/tasks/{free}/claim/", {}),
    "claim-next": ("post", "/api/v1/tasks/claim-next/", {}),
    "release A's task": ("post", "/api/v1/tasks/{task_a}/release/", {}),
    "complete A's task": ("post", "/api/v1/tasks/{task_a}/complete/", {"review": False}),
    "fail A's task": ("post", "/api/v1/tasks/{task_a}/fail/", {"error": "sabotage"}),
    "read A's worktree": ("get", "/api/v1/worktrees/{tree_a}/", None),
    "claim A's worktree": ("post", "/api/v1/worktrees/{tree_a}/claim/", {}),
    "queue for A's worktree": ("post", "/api/v1/worktrees/{tree_a}/claim/", {"wait": True}),
    "release A's worktree": ("post", "/api/v1/worktrees/{tree_a}/release/", {}),
    "config-sync A's worktree": ("post", "/api/v1/worktrees/{tree_a}/config-sync/", {"repair": True}),
    "remove A's worktree": ("delete", "/api/v1/worktrees/{tree_a}/?force=true", None),
    "make A's worktree": ("post", "/api/v1/repositories/{repo}/worktrees/", {"type": "task", "name": "{task_a}"}),
    "make another worktree": ("post", "/api/v1/repositories/{repo}/worktrees/", {"type": "feat", "name": "side"}),
    "open a session on A's task": (
        "post",
        "/api/v1/sessions/",
        {"intent": "x", "parent": "{session_b}", "task": "#{task_a}"},
    ),
}


def _fill(value, names: dict):
    if isinstance(value, str) and value.startswith("#"):  # a number
        return int(value[1:].format(**names))
    if isinstance(value, str):
        return value.format(**names)
    if isinstance(value, dict):
        return {key: _fill(item, names) for key, item in value.items()}
    return value


def _names(world: dict) -> dict:
    return {
        "task_a": world["tasks"][0].pk,
        "free": world["free"].pk,
        "tree_a": world["trees"][0].pk,
        "repo": world["repository"].pk,
        "session_b": world["runs"][1].session_id,
    }


@pytest.mark.parametrize("request_name", list(NEIGHBOUR_REQUESTS))
def test_a_runs_key_is_refused_on_its_neighbours_task_and_worktree_and_on_every_claim(two_runs, request_name):
    method, path, body = NEIGHBOUR_REQUESTS[request_name]
    names = _names(two_runs)
    key_b = two_runs["keys"][1]
    before = _world(two_runs["code_dir"])

    response = getattr(key_b, method)(_fill(path, names), _fill(body, names), format="json")

    assert response.status_code == 403, (request_name, response.content)
    message = response.json()["message"]
    assert f"This key belongs to the run of session {two_runs['runs'][1].session_id!r}" in message
    assert f"task {two_runs['tasks'][1].pk}" in message  # it says which task the key does reach
    assert _world(two_runs["code_dir"]) == before
    assert (two_runs["code_dir"] / f"task-{two_runs['tasks'][0].pk}").is_dir()  # A's folder is still there


def test_a_runs_task_list_shows_its_own_task_only(two_runs):
    key_a, key_b = two_runs["keys"]

    listed = key_b.get("/api/v1/tasks/")

    assert listed.status_code == 200
    assert [row["id"] for row in listed.json()["results"]] == [two_runs["tasks"][1].pk]
    assert [row["id"] for row in key_a.get("/api/v1/tasks/").json()["results"]] == [two_runs["tasks"][0].pk]


def test_each_run_still_works_its_own_task_and_worktree(two_runs):
    key_a, key_b = two_runs["keys"]
    task_a, task_b = two_runs["tasks"]
    tree_a, tree_b = two_runs["trees"]

    # reads, a renewal, the config links and a second "make" of its own worktree
    assert key_a.get(f"/api/v1/tasks/{task_a.pk}/").status_code == 200
    assert key_a.get(f"/api/v1/worktrees/{tree_a.pk}/").status_code == 200
    assert key_a.post(f"/api/v1/worktrees/{tree_a.pk}/claim/", {}, format="json").json()["outcome"] == "renewed"
    assert key_a.post(f"/api/v1/worktrees/{tree_a.pk}/config-sync/", {"repair": True}, format="json").status_code == 200
    again = {"type": "task", "name": str(task_a.pk)}
    assert (
        key_a.post(f"/api/v1/repositories/{two_runs['repository'].pk}/worktrees/", again, format="json").status_code
        == 200
    )
    # A ends its task and gives its worktree back; B fails its own and removes its worktree
    assert key_a.post(f"/api/v1/tasks/{task_a.pk}/complete/", {"review": True}, format="json").status_code == 200
    assert key_a.post(f"/api/v1/worktrees/{tree_a.pk}/release/", {}, format="json").status_code == 200
    assert key_b.post(f"/api/v1/tasks/{task_b.pk}/fail/", {"error": "no luck"}, format="json").status_code == 200
    assert key_b.delete(f"/api/v1/worktrees/{tree_b.pk}/?force=true").status_code == 200

    task_a.refresh_from_db()
    task_b.refresh_from_db()
    assert (task_a.status, task_b.status) == (Task.Status.REVIEW, Task.Status.FAILED)
    assert Worktree.objects.get(pk=tree_a.pk).holder_id is None
    assert Worktree.objects.get(pk=tree_b.pk).status == Worktree.Status.REMOVED
    assert not (two_runs["code_dir"] / f"task-{task_b.pk}").exists()


def test_the_agents_own_key_is_not_bound_and_reaches_every_task(two_runs, make_agent_client):
    """The limit is the per-run key's, not the agent's: a key of the same agent made otherwise (an
    engineer's, for the agent working by hand) is the agent's as before."""
    agent = two_runs["runs"][0].agent
    client = make_agent_client(agent)

    assert client.get(f"/api/v1/tasks/{two_runs['tasks'][0].pk}/").status_code == 200
    assert client.post("/api/v1/tasks/claim-next/", {}, format="json").json()["id"] == two_runs["free"].pk
