"""Runner hosts are not one namespace (SPEC §8: a repository lives on one host). A path names a folder
on one machine: the server's, or one runner's. A runner that registers the server's own clone path
(or another runner's) as its repository takes no worktree folder from them; a path with a control
character is refused; and a runner's labels are the ones its key was made with, not the ones its
heartbeat claims."""

import pytest

from config.api.errors import DomainError
from runners.models import Runner
from runners.services import runner_key_create
from tests.runners.runner_clients import next_runs, world_state
from tests.workspaces.conftest import commit_file, git
from workspaces.models import Repository, Worktree
from workspaces.worktrees.services import repository_register

pytestmark = pytest.mark.django_db
REPOS = "/api/v1/runners/me/repositories/"
TREES = "/api/v1/runners/me/worktrees/"
BEAT = "/api/v1/runners/me/heartbeat/"


@pytest.fixture
def server_clone(tmp_path):
    """The server's own clone, registered: ``<tmp>/code/shop``, its worktrees beside it."""
    folder = tmp_path / "code" / "shop"
    folder.mkdir(parents=True)
    git(folder, "init", "-q", "-b", "main")
    commit_file(folder, "README.md", "# shop\n", "Initial commit")
    repository, _ = repository_register(path=str(folder))
    return repository


def _rows() -> tuple:
    return list(Repository.objects.order_by("pk").values()), list(Worktree.objects.order_by("pk").values())


def _register_on(client, *, name: str, path: str) -> Repository:
    response = client.post(REPOS, {"name": name, "path": path, "default_branch": "main"}, format="json")
    assert response.status_code == 201, response.json()
    return Repository.objects.get(pk=response.json()["id"])


def _runner_worktree(client, repository: Repository, name: str):
    return client.post(TREES, {"repository": repository.pk, "type": "task", "name": name}, format="json")


def test_a_runner_registering_the_servers_clone_path_takes_no_worktree_from_it(
    runner_client, server_clone, agent_client
):
    # given a runner that registers the server's own clone path as its repository, and registers
    # the worktree folder the server's repository will need for task 7
    squat = _register_on(runner_client, name="squat", path=server_clone.path)
    squatted = _runner_worktree(runner_client, squat, "7")
    assert squatted.status_code == 201, squatted.json()

    # when an agent makes that worktree of the server's repository
    made = agent_client.post(
        f"/api/v1/repositories/{server_clone.pk}/worktrees/", {"type": "task", "name": "7"}, format="json"
    )

    # then it is made on the server's machine: the runner's row is another host's folder
    assert made.status_code == 201, made.json()
    ours = Worktree.objects.get(pk=made.json()["id"])
    theirs = Worktree.objects.get(pk=squatted.json()["id"])
    assert ours.real_path == theirs.real_path  # the same spelling, on two machines
    assert (ours.repository_id, ours.runner_id) == (server_clone.pk, None)
    assert (theirs.repository_id, theirs.runner_id) == (squat.pk, runner_client.runner.pk)


def test_the_servers_worktree_does_not_stop_a_runner_from_registering_its_own_folder(
    runner_client, server_clone, agent_client
):
    made = agent_client.post(
        f"/api/v1/repositories/{server_clone.pk}/worktrees/", {"type": "task", "name": "8"}, format="json"
    )
    assert made.status_code == 201, made.json()
    same_path = _register_on(runner_client, name="shop-on-build-1", path=server_clone.path)

    response = _runner_worktree(runner_client, same_path, "8")

    assert response.status_code == 201, response.json()
    assert Worktree.objects.filter(real_path=made.json()["path"]).count() == 2


def test_two_runners_with_clones_at_one_path_each_have_their_own_worktree(runner_client, other_runner_client):
    first = _register_on(runner_client, name="shop-a", path="/srv/src/shop")
    second = _register_on(other_runner_client, name="shop-b", path="/srv/src/shop")

    a = _runner_worktree(runner_client, first, "3")
    b = _runner_worktree(other_runner_client, second, "3")

    assert (a.status_code, b.status_code) == (201, 201), (a.json(), b.json())
    assert a.json()["id"] != b.json()["id"]
    # and each one's registration again finds its own row
    assert _runner_worktree(runner_client, first, "3").json()["id"] == a.json()["id"]
    assert _runner_worktree(other_runner_client, second, "3").json()["id"] == b.json()["id"]


@pytest.mark.parametrize(
    "path",
    [
        "/srv/src/sh\nop",
        "/srv/src/shop\r",
        "/srv/src/\tshop",
        "/srv/src/\x1b[31mshop",
        "/srv/src/shop\x7f",
        "/srv/src/shop\x85",
        "/srv/src/\u202eshop",
    ],
    ids=["newline", "carriage-return", "tab", "escape", "delete", "c1-next-line", "rtl-override"],
)
def test_a_path_with_a_control_character_is_refused_with_400_and_nothing_is_stored(runner_client, path):
    before = _rows()

    response = runner_client.post(REPOS, {"name": "shop", "path": path, "default_branch": "main"}, format="json")

    assert response.status_code == 400, response.json()
    assert "control character" in response.json()["message"]
    assert "path" in response.json()["errors"]
    assert _rows() == before


def test_the_server_refuses_a_clone_path_with_a_control_character_too(db, tmp_path):
    folder = tmp_path / "code" / "sh\nop"  # a real clone: only its name is wrong
    folder.mkdir(parents=True)
    git(folder, "init", "-q", "-b", "main")
    commit_file(folder, "README.md", "# shop\n", "Initial commit")
    with pytest.raises(DomainError, match="control character U\\+000A"):
        repository_register(path=str(folder))
    assert Repository.objects.count() == 0


def test_a_heartbeat_claiming_a_label_does_not_give_it(runner_client, queue_run):
    # given build-1, whose key was made with the label linux only, and a run that needs a gpu
    needs_gpu = queue_run(labels=["runner:gpu"])

    # when its heartbeat claims gpu (and drops linux)
    beat = runner_client.post(BEAT, {"labels": ["gpu"], "providers": ["demo"]}, format="json")

    # then the claim is ignored: its labels are its key's, and the gpu run is not handed to it
    assert beat.status_code == 200
    assert beat.json()["runner"]["labels"] == ["linux"]
    assert Runner.objects.get(pk=runner_client.runner.pk).labels == ["linux"]
    before = world_state()
    assert next_runs(runner_client).json()["runs"] == []
    assert world_state() == before
    needs_gpu.refresh_from_db()
    assert needs_gpu.status == "queued"


def test_a_runner_given_the_label_gets_the_run(runner_client, queue_run):
    """The way to give a runner a label: its key (create_runner_key --label, which replaces them)."""
    needs_gpu = queue_run(labels=["runner:gpu"])
    runner_key_create(name="build-1", labels=["linux", "gpu"])

    handed = next_runs(runner_client).json()["runs"]

    assert [run["id"] for run in handed] == [needs_gpu.pk]
