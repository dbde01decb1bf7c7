"""Repositories on a runner's machine (SPEC §8): `POST /runners/me/repositories/` and
`/runners/me/worktrees/`, worktree reports with the heartbeat, dispatch only to the host runner,
and what the server refuses to do to a clone it cannot see."""

import pytest

from config.actors import Actor
from runners.models import Run
from runners.services import run_queue, runner_key_create
from tests.factories import TaskFactory, UserFactory
from tests.runners.runner_clients import client_with_key, next_runs
from workspaces.models import Repository, Worktree
from workspaces.worktrees.status import worktree_status

pytestmark = pytest.mark.django_db
REPOS = "/api/v1/runners/me/repositories/"
TREES = "/api/v1/runners/me/worktrees/"
BEAT = "/api/v1/runners/me/heartbeat/"
SHOP = {"name": "shop", "path": "/srv/src/shop", "default_branch": "main"}


@pytest.fixture
def other_runner():
    runner, issued, _ = runner_key_create(name="build-2", labels=["linux"], capacity=2)
    runner.providers = ["demo", "claude"]
    runner.status = "online"
    runner.save()
    client = client_with_key(issued.key)
    client.runner = runner
    return client


@pytest.fixture
def shop(runner_client) -> Repository:
    response = runner_client.post(REPOS, SHOP, format="json")
    assert response.status_code == 201, response.json()
    return Repository.objects.get(pk=response.json()["id"])


def snapshot() -> tuple:
    return (
        list(Repository.objects.order_by("pk").values()),
        list(Worktree.objects.order_by("pk").values()),
    )


def test_a_runner_registers_its_clone_once_and_updates_it(runner_client):
    first = runner_client.post(REPOS, SHOP, format="json")
    again = runner_client.post(REPOS, {**SHOP, "path": "/srv/src/shop2", "default_branch": "trunk"}, format="json")

    assert first.status_code == 201
    assert first.json()["runner"] == "build-1"
    assert first.json()["sync_dir"] == "/srv/src/sync/shop"
    assert again.status_code == 200
    stored = Repository.objects.get(name="shop")
    assert (stored.path, stored.default_branch, stored.runner_id) == (
        "/srv/src/shop2",
        "trunk",
        runner_client.runner.pk,
    )
    # and the repository list says where it is
    listed = runner_client.post(REPOS, SHOP, format="json").json()
    assert listed["id"] == stored.pk


@pytest.mark.parametrize(
    "body, field",
    [
        ({**SHOP, "path": "src/shop"}, "path"),
        ({**SHOP, "path": "/srv/src/../shop"}, "path"),
        ({**SHOP, "path": "/srv/src/shop/"}, "path"),
        ({**SHOP, "name": "Shop Repo"}, "name"),
        ({**SHOP, "default_branch": "a..b"}, "branch"),
        ({"name": "shop"}, "path"),
    ],
)
def test_bad_registrations_are_refused_and_nothing_is_stored(runner_client, body, field):
    before = snapshot()
    response = runner_client.post(REPOS, body, format="json")

    assert response.status_code == 400, response.json()
    assert field in str(response.json()).lower()
    assert snapshot() == before


def test_a_name_on_another_host_is_refused(runner_client, other_runner, shop):
    Repository.objects.create(name="web", path="/home/me/web")  # the server's own clone
    before = snapshot()

    taken = other_runner.post(REPOS, SHOP, format="json")
    server_name = other_runner.post(REPOS, {**SHOP, "name": "web"}, format="json")

    assert taken.status_code == 409
    assert "runner build-1" in taken.json()["message"]
    assert server_name.status_code == 409
    assert "the server" in server_name.json()["message"]
    assert snapshot() == before


def test_the_same_path_on_two_machines_is_two_repositories(runner_client, other_runner, shop):
    response = other_runner.post(REPOS, {**SHOP, "name": "shop-eu"}, format="json")

    assert response.status_code == 201
    assert Repository.objects.filter(path=SHOP["path"]).count() == 2


def test_agent_keys_are_refused(shop, agent_client):
    agent = agent_client
    before = snapshot()

    assert agent.post(REPOS, {**SHOP, "name": "mine"}, format="json").status_code == 403
    assert agent.post(TREES, {"repository": shop.pk, "type": "feat", "name": "1"}, format="json").status_code == 403
    assert snapshot() == before


def test_a_runner_registers_the_worktree_it_made(runner_client, shop):
    response = runner_client.post(TREES, {"repository": shop.pk, "type": "feat", "name": "42"}, format="json")
    again = runner_client.post(TREES, {"repository": shop.pk, "type": "feat", "name": "42"}, format="json")

    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["path"], body["branch"], body["repository_name"], body["holder"]) == (
        "/srv/src/feat-42",
        "feat-42",
        "shop",
        None,
    )
    assert again.status_code == 200 and again.json()["id"] == body["id"]
    assert Worktree.objects.get(pk=body["id"]).workspace_id is None  # no folder of the server's


def test_another_runner_cannot_register_worktrees_of_my_clone(runner_client, other_runner, shop):
    before = snapshot()
    response = other_runner.post(TREES, {"repository": shop.pk, "type": "feat", "name": "1"}, format="json")

    assert response.status_code == 404
    assert snapshot() == before


def make_tree(runner_client, shop, name="7") -> Worktree:
    body = runner_client.post(TREES, {"repository": shop.pk, "type": "feat", "name": name}, format="json").json()
    return Worktree.objects.select_related("repository__runner", "holder").get(pk=body["id"])


def test_the_heartbeat_stores_worktree_reports_and_marks_missing_ones(runner_client, shop):
    reported, missing = make_tree(runner_client, shop, "1"), make_tree(runner_client, shop, "2")
    report = {
        "path": reported.real_path,
        "head": "a" * 40,
        "commits_ahead": 2,
        "uncommitted": 1,
        "changes": [{"code": "??", "path": "notes.txt"}],
        "recent_files": [{"path": "notes.txt", "age_seconds": 3}],
    }

    answer = runner_client.post(BEAT, {"worktrees": [report]}, format="json")

    assert answer.status_code == 200, answer.json()
    assert answer.json()["remove_worktrees"] == []
    status = worktree_status(worktree=Worktree.objects.select_related("repository__runner").get(pk=reported.pk))
    assert (status.present, status.host, status.commits_ahead, status.uncommitted) == (True, "build-1", 2, 1)
    assert [(c.code, c.path) for c in status.changes] == [("??", "notes.txt")]
    assert status.recent_files[0].path == "notes.txt" and status.recent_files[0].age_seconds >= 3
    gone = worktree_status(worktree=Worktree.objects.select_related("repository__runner").get(pk=missing.pk))
    assert gone.present is False and gone.reported_at is not None


def test_removing_a_runner_worktree_is_done_by_its_runner(runner_client, shop, staff_client):
    tree = make_tree(runner_client, shop)
    dirty = {"path": tree.real_path, "uncommitted": 1, "changes": [{"code": " M", "path": "app.py"}]}
    runner_client.post(BEAT, {"worktrees": [dirty]}, format="json")

    refused = staff_client.delete(f"/api/v1/worktrees/{tree.pk}/")
    forced = staff_client.delete(f"/api/v1/worktrees/{tree.pk}/?force=true")
    plain = runner_client.post(BEAT, {}, format="json").json()  # a beat without reports asks too
    answer = runner_client.post(BEAT, {"worktrees": [dirty]}, format="json").json()
    after = runner_client.post(BEAT, {"worktrees": []}, format="json").json()

    assert refused.status_code == 409
    assert "app.py" in refused.json()["message"]
    assert forced.status_code == 200 and forced.json()["status"] == "removed"
    assert plain["remove_worktrees"] == [{"id": tree.pk, "path": tree.real_path, "force": True}]
    assert answer["remove_worktrees"] == plain["remove_worktrees"]
    assert after["remove_worktrees"] == []  # the folder is gone: nothing more to ask


def test_the_server_does_not_run_git_on_a_runner_clone(runner_client, shop, staff_client):
    tree = make_tree(runner_client, shop)
    before = snapshot()

    create = staff_client.post(
        f"/api/v1/repositories/{shop.pk}/worktrees/", {"type": "fix", "name": "1"}, format="json"
    )
    sync = staff_client.post(f"/api/v1/worktrees/{tree.pk}/config-sync/", {"repair": True}, format="json")

    assert create.status_code == 409
    assert "lives on runner build-1" in create.json()["message"]
    assert sync.status_code == 409
    assert snapshot() == before


def test_runs_of_a_runner_clone_go_only_to_that_runner(runner_client, other_runner, shop):
    person = Actor(user=UserFactory(username="po-2", is_staff=True))
    hosted = run_queue(actor=person, task=TaskFactory(repository=shop), provider="demo")
    anywhere = run_queue(actor=person, task=TaskFactory(), provider="demo")

    to_other = next_runs(other_runner).json()["runs"]
    to_host = next_runs(runner_client).json()["runs"]

    assert [r["id"] for r in to_other] == [anywhere.pk]
    assert [r["id"] for r in to_host] == [hosted.pk]
    assert to_host[0]["task"]["repository"] == {
        "id": shop.pk,
        "name": "shop",
        "path": "/srv/src/shop",
        "default_branch": "main",
        "runner": "build-1",
    }
    assert Run.objects.get(pk=hosted.pk).runner_id == runner_client.runner.pk
