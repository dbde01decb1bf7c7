"""The whole review loop by API alone (SPEC §10), as an orchestrating script runs it: an `orchestrate`
key creates a task of a repository, queues a demo run on a real runner, reads the run's session log and
the task's change, requests changes with a line comment, sees the same task's branch move on in a
continuing run, approves, squash-merges, and finds the change on the default branch and the task Done.
Real server, real runner process, real git."""

import time

import httpx
import pytest

from sessions_app.keys import api_key_create
from tests.client.live import server_roots, sy_server  # noqa: F401
from tests.factories import AgentFactory
from tests.runners.live_runner import GIT_ENV, Machine, git, wait_for
from workspaces.worktrees.services import repository_register

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture
def machine(tmp_path, sy_server):  # noqa: F811
    made = Machine(
        tmp_path / "machines",
        sy_server.url,
        "loop-1",
        capacity=2,
        providers={"demo": {"env": {"DEMO_AGENT_SPEED": "1000"}}},
        env=GIT_ENV,
    )
    made.start()
    yield made
    made.cleanup()


@pytest.fixture
def clone(tmp_path):
    folder = tmp_path / "code" / "shop"
    folder.mkdir(parents=True)
    git(folder, "init", "-q", "-b", "main")
    (folder / "README.md").write_text("# shop\n")
    git(folder, "add", "README.md")
    git(folder, "commit", "-qm", "start")
    repository_register(path=str(folder))
    return folder


@pytest.fixture
def api(sy_server):  # noqa: F811
    key = api_key_create(agent=AgentFactory(slug="conductor"), scopes=["agent", "orchestrate"]).key
    with httpx.Client(base_url=f"{sy_server.url}/api/v1/", headers={"Authorization": f"Bearer {key}"}) as client:
        yield client


def _ok(response: httpx.Response, *codes: int) -> dict:
    assert response.status_code in (codes or (200,)), (response.status_code, response.text)
    return response.json()


def _run_ended(api: httpx.Client, run_id: int, machine: Machine) -> dict:
    def ended():
        run = _ok(api.get(f"runs/{run_id}/"))
        return run if run["status"] in ("succeeded", "failed", "cancelled", "lost") else None

    return wait_for(ended, timeout=120, what=f"run {run_id} to end", machines=[machine], interval=0.2)


def test_an_orchestrate_key_runs_reviews_and_ships_a_task_by_api_alone(api, machine, clone):
    # Create the task and run it with the demo agent
    task = _ok(api.post("tasks/", json={"title": "Write the notes", "repository": "shop"}), 201)
    first = _ok(api.post(f"tasks/{task['id']}/runs/", json={"provider": "demo"}), 201)
    first = _run_ended(api, first["id"], machine)
    assert first["status"] == "succeeded", (first["error"], machine.output())

    # Watch what it did: its session log, then the task's change
    log = api.get(f"sessions/{first['session']}/log/")
    assert log.status_code == 200 and log.content, log.text
    change = _ok(api.get(f"tasks/{task['id']}/diff/", params={"format": "json"}))
    [notes] = [f["path"] for f in change["files"]]
    head_before = change["head"]

    # Request changes with a line comment: the same task's branch moves on in a continuing run
    comment = {"path": notes, "line": 1, "body": "Say who it is for."}
    review = _ok(
        api.post(
            f"tasks/{task['id']}/review/",
            json={"decision": "request_changes", "message": "Add a summary.", "comments": [comment]},
        ),
        200,
        201,
    )
    second = _run_ended(api, review["run"]["id"], machine)
    assert second["status"] == "succeeded", (second["error"], machine.output())
    runs = _ok(api.get(f"tasks/{task['id']}/runs/"))
    listed = runs["results"] if isinstance(runs, dict) and "results" in runs else runs
    assert {r["id"] for r in listed} >= {first["id"], second["id"]}
    change = _ok(api.get(f"tasks/{task['id']}/diff/", params={"format": "json"}))
    assert change["head"] != head_before
    added = [
        line["text"] for f in change["files"] for h in f["hunks"] for line in h["lines"] if line["kind"] == "added"
    ]
    assert any("Add a summary." in text for text in added) and any("Say who it is for." in text for text in added)
    assert _ok(api.get(f"tasks/{task['id']}/comments/"))

    # Approve, then squash-merge: the change is on main and the task is Done
    _ok(api.post(f"tasks/{task['id']}/review/", json={"decision": "approve"}), 200, 201)
    _ok(api.post(f"tasks/{task['id']}/merge/", json={"strategy": "squash"}), 200)
    deadline = time.monotonic() + 30
    while _ok(api.get(f"tasks/{task['id']}/"))["status"] != "done" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ok(api.get(f"tasks/{task['id']}/"))["status"] == "done"
    assert notes in git(clone, "ls-tree", "--name-only", "main").split()
    assert "Add a summary." in git(clone, "show", f"main:{notes}")
