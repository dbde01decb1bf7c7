"""The repository part of a task's panel: shown, set and cleared by people of the board (through
task_set_repository, which records task.repository_set and pushes the card), refused for others."""

import pytest
from django.test import Client

from board import services
from board.models import Task
from config.pages import ENGINEERS
from ledger.models import Event
from tests.board.board_helpers import product_owner
from tests.factories import TaskFactory
from tests.page_users import user_in
from workspaces.models import Repository

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("x")</script>'
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def po_client(client):
    client.force_login(product_owner())
    return client


@pytest.fixture
def repos(tmp_path):
    return {
        "shop": Repository.objects.create(name="shop", path=str(tmp_path / "shop")),
        "api": Repository.objects.create(name="api", path=str(tmp_path / "api")),
    }


@pytest.fixture
def task(db):
    return TaskFactory(title="Fix the login bug")


@pytest.fixture
def pushed(monkeypatch):
    """The task ids the card pushes were asked for (the push itself is board/live.py's, tested there)."""
    ids: list[int] = []
    monkeypatch.setattr(services, "board_push_tasks", lambda *, task_ids: ids.extend(task_ids))
    return ids


def _events(task: Task) -> list[Event]:
    return list(Event.objects.filter(subject_type="task", subject_id=str(task.pk), name="task.repository_set"))


def _post(client, task: Task, value: str, **extra):
    return client.post(f"/tasks/{task.pk}/repository/", {"repository": value}, **extra)


def test_the_panel_shows_none_first_then_the_registered_repositories(po_client, task, repos):
    html = po_client.get(f"/tasks/{task.pk}/", **HTMX).content.decode()

    assert f'<section id="task-repo-{task.pk}"' in html
    options = html[html.index(f'id="task-repo-select-{task.pk}"') :]
    options = options[: options.index("</select>")]
    assert options.index("— none (the run's session workspace)") < options.index(">api<") < options.index(">shop<")
    assert '<option value="" selected>' in options
    assert f'action="/tasks/{task.pk}/repository/"' in html
    assert 'name="csrfmiddlewaretoken"' in html


def test_the_panel_preselects_the_tasks_repository(po_client, repos):
    task = TaskFactory(repository=repos["shop"])

    html = po_client.get(f"/tasks/{task.pk}/", **HTMX).content.decode()

    assert f'<option value="{repos["shop"].pk}" selected>shop</option>' in html
    assert '<option value="" selected>' not in html


def test_a_product_owner_sets_the_repository_and_the_card_is_pushed(po_client, task, repos, pushed):
    response = _post(po_client, task, str(repos["shop"].pk), **HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert html.startswith(f'<section id="task-repo-{task.pk}"')
    assert f'<option value="{repos["shop"].pk}" selected>shop</option>' in html
    assert "Saved: runs of this task work in" in html
    task.refresh_from_db()
    assert task.repository == repos["shop"]
    [event] = _events(task)
    assert event.actor == "user:po"
    assert event.payload == {"title": "Fix the login bug", "status": "ready", "repository": "shop", "from": None}
    assert pushed == [task.pk]


def test_clearing_sends_runs_back_to_the_session_workspace(po_client, repos, pushed):
    task = TaskFactory(title="Tidy up", repository=repos["api"])

    response = _post(po_client, task, "", **HTMX)

    assert response.status_code == 200
    assert "runs of this task work in their session workspace" in response.content.decode()
    task.refresh_from_db()
    assert task.repository is None
    [event] = _events(task)
    assert event.payload["repository"] is None and event.payload["from"] == "api"
    assert pushed == [task.pk]


def test_saving_the_same_repository_again_records_nothing(po_client, repos, pushed):
    task = TaskFactory(repository=repos["api"])

    response = _post(po_client, task, str(repos["api"].pk), **HTMX)

    assert response.status_code == 200
    assert "Saved" not in response.content.decode()
    assert _events(task) == [] and pushed == []


def test_without_htmx_it_redirects_to_the_task_with_a_message(po_client, task, repos):
    response = _post(po_client, task, str(repos["api"].pk), follow=True)

    assert response.redirect_chain == [(f"/tasks/{task.pk}/", 302)]
    assert "Repository saved." in response.content.decode()
    task.refresh_from_db()
    assert task.repository == repos["api"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("999999", "Repository 999999 not found. It may have been removed"),
        ("shop", "Choose a repository from the list (or none)."),
        ("-1", "Choose a repository from the list (or none)."),
        ("9" * 40, "Choose a repository from the list (or none)."),
    ],
)
def test_an_unknown_or_malformed_id_is_a_clear_error_and_nothing_changes(po_client, repos, value, message):
    task = TaskFactory(repository=repos["shop"])

    response = _post(po_client, task, value, **HTMX)

    html = response.content.decode()
    assert response.status_code == 200  # htmx swaps only 2xx: the part comes back with the error in it
    assert f'<p class="message error" role="alert">{message}' in html
    task.refresh_from_db()
    assert task.repository == repos["shop"]
    assert _events(task) == []


def test_an_unknown_id_without_htmx_is_a_message_not_a_500(po_client, task, repos):
    response = _post(po_client, task, "999999", follow=True)

    assert response.status_code == 200
    assert "Repository 999999 not found." in response.content.decode()
    task.refresh_from_db()
    assert task.repository is None


def test_a_person_outside_the_board_groups_is_refused_and_nothing_changes(client, task, repos, pushed):
    client.force_login(user_in(username="visitor"))

    response = _post(client, task, str(repos["shop"].pk), **HTMX)

    assert response.status_code == 403
    task.refresh_from_db()
    assert task.repository is None
    assert _events(task) == [] and pushed == []


def test_anonymous_goes_to_the_login_and_nothing_changes(client, task, repos):
    response = _post(client, task, str(repos["shop"].pk))

    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    task.refresh_from_db()
    assert task.repository is None


def test_a_post_without_the_csrf_token_is_refused(task, repos):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user_in(ENGINEERS, username="erin"))

    response = _post(client, task, str(repos["shop"].pk), **HTMX)

    assert response.status_code == 403
    task.refresh_from_db()
    assert task.repository is None


def test_a_missing_task_is_404_and_get_is_not_allowed(po_client, repos):
    assert _post(po_client, Task(pk=987654), str(repos["shop"].pk)).status_code == 404
    assert po_client.get("/tasks/1/repository/").status_code == 405


def test_a_hostile_repository_name_is_escaped(po_client, tmp_path):
    hostile = Repository.objects.create(name=HOSTILE, path=str(tmp_path / "x"))
    task = TaskFactory(repository=hostile)

    html = po_client.get(f"/tasks/{task.pk}/", **HTMX).content.decode()

    assert HOSTILE not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html


def test_the_service_refuses_an_agent_without_orchestrate(agent, repos):
    from config.actors import Actor
    from config.api.errors import DomainError

    task = TaskFactory()
    with pytest.raises(DomainError) as raised:
        services.task_set_repository(actor=Actor(agent=agent), task=task, repository=repos["shop"])

    assert raised.value.code == "forbidden"
    task.refresh_from_db()
    assert task.repository is None and _events(task) == []
