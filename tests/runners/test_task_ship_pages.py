# ruff: noqa: F811 (the fixtures imported from test_task_review_api are parameters here)
"""The card's Ship box: Merge (merge or squash, a person confirming an unapproved change), a conflict's
files with "Ask the agent to resolve it", Open pull request; refused for people outside the board,
agent-written names escaped."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from board.models import Task
from runners.models import PullRequest, Run
from tests.board.board_helpers import product_owner
from tests.runners.test_task_review_api import APP, branch, clone, commit, git, run, task  # noqa: F401

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
HOSTILE = '<img src=x onerror="alert(1)">.py'


@pytest.fixture
def po(client):
    client.force_login(product_owner())
    return client


def _panel(client, task) -> str:
    page = client.get(f"/tasks/{task.pk}/", **HTMX)
    assert page.status_code == 200
    return page.content.decode()


def test_the_panel_offers_merge_and_pull_request_and_says_it_is_not_approved(po, task, branch, run):
    html = _panel(po, task)

    assert 'id="task-ship-' in html
    assert f'task-{task.pk}</span> → <span class="mono">main</span>' in html
    assert "Not approved yet." in html
    assert 'name="force" required' in html
    assert "Merge into main" in html and "Open pull request" in html


def test_a_person_confirming_merges_from_the_card_and_the_task_is_done(po, clone, task, branch, run):
    response = po.post(f"/runners/tasks/{task.pk}/merge/", {"strategy": "squash", "force": "on"}, **HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert f"Merged task-{task.pk} into main as" in html and "Done: the change is shipped." in html
    # the panel's Column badge, outside the box, follows out of band
    assert f'<span id="task-column-{task.pk}" hx-swap-oob="true" class="badge status-done">Done</span>' in html
    assert Task.objects.get(pk=task.pk).status == Task.Status.DONE
    assert "line five" in (clone / "src/app.py").read_text()


def test_without_the_confirmation_an_unapproved_change_is_refused_in_the_box(po, clone, task, branch, run):
    main = git(clone, "rev-parse", "main")

    response = po.post(f"/runners/tasks/{task.pk}/merge/", {"strategy": "merge"}, **HTMX)

    assert response.status_code == 200
    assert "it is not approved" in response.content.decode()
    assert git(clone, "rev-parse", "main") == main


def test_a_conflict_lists_the_files_escaped_and_offers_the_agent_to_resolve_it(po, clone, task, branch, run):
    git(clone, "checkout", "-q", f"task-{task.pk}")
    commit(clone, {HOSTILE: "mine\n"}, "Hostile name")
    git(clone, "checkout", "-q", "main")
    commit(clone, {HOSTILE: "theirs\n", "src/app.py": APP.replace("line 5\n", "FIVE\n")}, "Main too")

    response = po.post(f"/runners/tasks/{task.pk}/merge/", {"strategy": "merge", "force": "on"}, **HTMX)

    html = response.content.decode()
    assert "conflicts with main in 2 file(s)" in html
    assert HOSTILE not in html and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;.py" in html
    assert "Ask the agent to resolve it" in html
    resolved = po.post(f"/runners/tasks/{task.pk}/merge/resolve/", **HTMX)
    assert "the agent is asked to resolve the conflict" in resolved.content.decode()
    assert Run.objects.filter(task=task).count() == 2


def test_open_pull_request_without_a_remote_says_why_in_the_box(po, task, branch, run):
    response = po.post(f"/runners/tasks/{task.pk}/pull-request/", **HTMX)

    assert response.status_code == 200
    assert "app has no &#x27;origin&#x27; remote" in response.content.decode()
    assert not PullRequest.objects.exists()


def test_the_pull_requests_link_and_state_are_on_the_card(po, task, branch, run):
    PullRequest.objects.create(
        task=task,
        remote="origin",
        branch=f"task-{task.pk}",
        state="open",
        number=7,
        url="https://github.com/o/r/pull/7",
    )

    html = _panel(po, task)
    assert '<a href="https://github.com/o/r/pull/7"' in html and "Pull request #7" in html and "pr-open" in html
    PullRequest.objects.filter(task=task).update(url="javascript:alert(1)")  # only https links are links
    assert 'href="javascript:' not in _panel(po, task)


def test_people_outside_the_board_and_anonymous_visitors_may_not_ship(clone, task, branch, run):
    outsider = Client()
    outsider.force_login(get_user_model().objects.create_user("nobody", password="pw-nobody-1"))
    main = git(clone, "rev-parse", "main")

    answers = [
        outsider.post(f"/runners/tasks/{task.pk}/merge/", {"strategy": "merge", "force": "on"}),
        Client().post(f"/runners/tasks/{task.pk}/merge/", {"strategy": "merge", "force": "on"}),
        outsider.post(f"/runners/tasks/{task.pk}/pull-request/"),
    ]

    assert [answers[0].status_code, answers[2].status_code] == [403, 403]
    assert answers[1].status_code == 302  # to the sign-in page
    assert git(clone, "rev-parse", "main") == main and Task.objects.get(pk=task.pk).status == Task.Status.REVIEW
