"""The worktree monitor page (/worktrees/): holder, lease, commits ahead, uncommitted and recent files."""

from pathlib import Path

import pytest
from django.test import Client

from config.actors import Actor
from config.pages import ENGINEERS, PRODUCT_OWNERS
from tests.page_users import user_in
from tests.workspaces.conftest import commit_file
from workspaces.models import Worktree
from workspaces.worktrees.claims import worktree_claim
from workspaces.worktrees.selectors import worktree_monitor_list
from workspaces.worktrees.services import worktree_create

pytestmark = pytest.mark.django_db


def _client(*groups) -> Client:
    client = Client()
    client.force_login(user_in(*groups))
    return client


def test_shows_each_worktree_with_its_holder_lease_and_git_status(repository, actor, agent):
    worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name="login")
    folder = Path(worktree.real_path)
    commit_file(folder, "src/login.py", "def login(): ...\n", "Add login")
    (folder / "notes.txt").write_text("draft\n")
    worktree_claim(actor=actor, agent=agent, worktree=worktree)

    response = _client(ENGINEERS).get("/worktrees/")

    html = response.content.decode()
    assert response.status_code == 200
    assert "<code>feat-login</code>" in html
    assert "Claude-1" in html  # the holder
    assert "expires in" in html
    assert '<td class="num">1 <span class="muted small">vs main</span></td>' in html
    assert '<span class="badge waiting">1</span>' in html  # notes.txt is uncommitted
    assert "<code>notes.txt</code>" in html
    assert 'hx-trigger="every 5s"' in html


def test_many_worktrees_each_get_their_own_status_in_a_constant_number_of_queries(
    repository, actor, agent, other_agent, django_assert_num_queries
):
    # given five worktrees, the nth with n commits of its own, and a queue on the first
    made = []
    for n in range(5):
        worktree, _ = worktree_create(actor=actor, repository=repository, type="feat", name=f"w{n}")
        for i in range(n):
            commit_file(Path(worktree.real_path), f"f{i}.txt", f"{i}\n", f"Commit {i}")
        made.append(worktree)
    worktree_claim(actor=actor, agent=agent, worktree=made[0])
    worktree_claim(actor=Actor(agent=other_agent), agent=other_agent, worktree=made[0], wait=True)

    # when the monitor lists them
    with django_assert_num_queries(1):  # the worktrees with their queue lengths; git in threads
        rows = worktree_monitor_list()

    # then each row's status is its own worktree's
    assert [(w.name, status.commits_ahead, status.waiting) for w, status in rows] == [
        ("w0", 0, 1),
        ("w1", 1, 0),
        ("w2", 2, 0),
        ("w3", 3, 0),
        ("w4", 4, 0),
    ]


def test_listing_a_single_worktree_leaves_the_callers_connection_usable(repository, actor):
    # (one worktree is looked at on the caller's thread, inside the test's transaction here)
    worktree_create(actor=actor, repository=repository, type="feat", name="alone")

    rows = worktree_monitor_list()

    assert [w.name for w, _ in rows] == ["alone"]
    assert Worktree.objects.count() == 1  # a closed connection would refuse this inside the transaction


def test_an_htmx_poll_gets_the_list_alone(repository, actor):
    worktree_create(actor=actor, repository=repository, type="fix", name="crash")

    response = _client(ENGINEERS).get("/worktrees/", HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert html.startswith('<div id="worktree-list"')
    assert "<html" not in html
    assert "<code>fix-crash</code>" in html


def test_no_worktrees_says_so():
    response = _client(ENGINEERS).get("/worktrees/")

    assert "No active worktrees." in response.content.decode()


def test_a_product_owner_is_refused():
    assert _client(PRODUCT_OWNERS).get("/worktrees/").status_code == 403
