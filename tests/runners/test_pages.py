"""The runner pages: the Runners page, Run and Stop on a task's panel, the card badge, the run line
on a session page, and "run with" on Start job."""

import json

import pytest
from django.utils import timezone

from board.live import board_cards_render
from board.models import Task
from config.actors import SYSTEM
from config.pages import ENGINEERS, PRODUCT_OWNERS
from runners.models import Run, Runner
from runners.services import run_queue, run_transition
from tests.factories import SessionFactory, TaskFactory
from tests.page_users import user_in

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


@pytest.fixture
def staff_client(client):
    user = user_in(ENGINEERS, username="erin")
    user.is_staff = True
    user.save()
    client.force_login(user)
    return client


@pytest.fixture
def owner_client(client):
    """A product owner: sees the board and the Runners page, is not staff."""
    client.force_login(user_in(PRODUCT_OWNERS, username="olivia"))
    return client


@pytest.fixture
def online_runner(runner):
    runner.status = Runner.Status.ONLINE
    runner.providers = ["shell", "demo", "claude"]
    runner.host = "build-host-1"
    runner.version = "0.2.0"
    runner.last_seen_at = timezone.now()
    runner.save()
    return runner


def _running(run: Run, runner: Runner) -> Run:
    run = run_transition(actor=SYSTEM, run=run, to=Run.Status.ASSIGNED, runner=runner)
    run = run_transition(actor=SYSTEM, run=run, to=Run.Status.STARTING)
    return run_transition(actor=SYSTEM, run=run, to=Run.Status.RUNNING)


def test_the_runners_page_lists_runners_and_recent_runs(staff_client, online_runner, person, task):
    run = _running(run_queue(actor=person, task=task, provider="demo"), online_runner)
    Run.objects.filter(pk=run.pk).update(exit_code=None)

    response = staff_client.get("/runners/")

    html = response.content.decode()
    assert response.status_code == 200
    assert '<th scope="row">build-1</th>' in html
    assert '<span class="badge status-online">Online</span>' in html
    assert "build-host-1" in html and "0.2.0" in html
    assert "1 / 2" in html  # runs now / capacity
    assert f'<tr id="run-{run.pk}">' in html
    assert "Fix the login bug" in html
    assert 'href="/runners/"' in html  # the nav links the page


def test_the_runners_page_names_the_clones_a_runner_holds(staff_client, online_runner):
    from workspaces.models import Repository

    Repository.objects.create(name="shop", path="/srv/src/shop", runner=online_runner)
    Repository.objects.create(name="web", path="/srv/src/web")  # the server's: no runner's

    html = staff_client.get("/runners/").content.decode()

    assert "clones: <code>shop</code></div>" in html
    assert "<code>web</code>" not in html


def test_the_runners_page_without_runners_tells_how_to_start_one(owner_client):
    html = owner_client.get("/runners/").content.decode()

    assert "No runner yet" in html
    assert "make run" in html
    assert "manage.py create_runner_key &lt;name&gt;" in html
    assert "switchyard runner --config switchyard-runner.toml" in html


def test_the_runners_page_escapes_what_runners_and_agents_wrote(staff_client, online_runner, person):
    online_runner.host = HOSTILE
    online_runner.labels = [HOSTILE]
    online_runner.save()
    run_queue(actor=person, task=TaskFactory(title=HOSTILE), provider="demo")

    html = staff_client.get("/runners/").content.decode()

    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert" in html


def test_the_panel_offers_the_online_providers_demo_first(staff_client, online_runner):
    task = TaskFactory(suggested_agent="codex")

    html = staff_client.get(f"/tasks/{task.pk}/", HTTP_HX_REQUEST="true").content.decode()

    run_box = html[html.index(f'id="task-run-{task.pk}"') :]  # the panel's repository select comes first
    options = [part.split('"', 1)[0] for part in run_box.split('<option value="')[1:]]
    assert options == ["demo", "claude", "codex", "shell"]
    assert '<option value="codex" selected>codex (suggested)</option>' in html
    assert "No runner online" not in html
    assert f'hx-post="/runners/tasks/{task.pk}/run/"' in html


def test_with_no_runner_online_a_run_can_still_be_queued(staff_client):
    task = TaskFactory()

    html = staff_client.get(f"/tasks/{task.pk}/", HTTP_HX_REQUEST="true").content.decode()

    assert "No runner online; it waits in the queue." in html
    assert '<option value="demo"' in html


def test_run_queues_a_run_and_the_box_shows_it(staff_client, online_runner):
    task = TaskFactory(title="Ship it", description="Now.")

    response = staff_client.post(
        f"/runners/tasks/{task.pk}/run/", {"provider": "demo", "prompt": ""}, HTTP_HX_REQUEST="true"
    )

    html = response.content.decode()
    run = Run.objects.get(task=task)
    assert response.status_code == 200
    assert (run.provider, run.status, run.prompt) == ("demo", "queued", "Ship it\n\nNow.")
    assert "<strong>queued</strong>" in html
    assert 'class="spinner"' in html
    assert f'hx-post="/runners/runs/{run.pk}/stop/"' in html
    assert 'hx-trigger="every 2s [' in html  # polls while active (unless an answer is being written)


def test_a_prompt_override_is_kept(staff_client):
    task = TaskFactory()

    staff_client.post(f"/runners/tasks/{task.pk}/run/", {"provider": "shell", "prompt": "just do it"})

    assert Run.objects.get(task=task).prompt == "just do it"


def test_a_second_run_is_refused_inline_not_500(staff_client, person, task):
    first = run_queue(actor=person, task=task, provider="demo")

    response = staff_client.post(f"/runners/tasks/{task.pk}/run/", {"provider": "demo"}, HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert "already has an active run" in html
    assert list(Run.objects.filter(task=task)) == [first]


def test_a_product_owner_may_run_from_the_panel(owner_client, task):
    """The issue's loop starts with "a product owner presses Run": the board groups may, not only staff."""
    panel = owner_client.get(f"/tasks/{task.pk}/", HTTP_HX_REQUEST="true").content.decode()
    response = owner_client.post(f"/runners/tasks/{task.pk}/run/", {"provider": "demo"}, HTTP_HX_REQUEST="true")

    assert "Run</button>" in panel
    assert response.status_code == 200
    assert "<strong>queued</strong>" in response.content.decode()
    assert Run.objects.get().provider == "demo"


def test_a_person_outside_the_board_groups_gets_403(client, task):
    client.force_login(user_in(username="nobody"))

    assert client.post(f"/runners/tasks/{task.pk}/run/", {"provider": "demo"}).status_code == 403
    assert client.get("/runners/").status_code == 403
    assert Run.objects.count() == 0


def test_run_is_csrf_protected(task):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    user = user_in(ENGINEERS, username="csrf")
    user.is_staff = True
    user.save()
    client.force_login(user)

    assert client.post(f"/runners/tasks/{task.pk}/run/", {"provider": "demo"}).status_code == 403
    assert Run.objects.count() == 0


def test_stop_cancels_a_queued_run(staff_client, person, task):
    run = run_queue(actor=person, task=task, provider="demo")

    response = staff_client.post(f"/runners/runs/{run.pk}/stop/", {"box": "task"}, HTTP_HX_REQUEST="true")

    run.refresh_from_db()
    assert response.status_code == 200
    assert run.status == "cancelled"
    assert "Last run" in response.content.decode()


def test_stop_asks_a_running_run_to_cancel_and_shows_stopping(staff_client, person, task, online_runner):
    run = _running(run_queue(actor=person, task=task, provider="demo"), online_runner)

    html = staff_client.post(f"/runners/runs/{run.pk}/stop/", {"box": "task"}, HTTP_HX_REQUEST="true").content.decode()

    run.refresh_from_db()
    assert run.status == "running" and run.cancel_requested_at is not None
    assert "<strong>stopping</strong>" in html


def test_a_product_owner_may_stop_a_run(owner_client, person, task):
    run = run_queue(actor=person, task=task, provider="demo")

    response = owner_client.post(f"/runners/runs/{run.pk}/stop/", {"box": "task"}, HTTP_HX_REQUEST="true")

    run.refresh_from_db()
    assert response.status_code == 200
    assert run.status == "cancelled"
    assert "Last run" in response.content.decode()


def test_the_card_shows_a_badge_for_an_active_run(person, online_runner):
    queued_task, running_task, idle_task = TaskFactory(), TaskFactory(), TaskFactory()
    run_queue(actor=person, task=queued_task, provider="demo")
    _running(run_queue(actor=person, task=running_task, provider="demo"), online_runner)

    html = board_cards_render(task_ids=[queued_task.pk, running_task.pk, idle_task.pk])["html"]
    cards = {
        task.pk: html.split(f'id="task-{task.pk}"')[1].split("</li>\n")[0]
        for task in (queued_task, running_task, idle_task)
    }

    assert '<span class="badge run run-queued"' in cards[queued_task.pk]
    assert "&#9654; build-1" in cards[running_task.pk] or "▶ build-1" in cards[running_task.pk]
    assert 'class="spinner"' in cards[running_task.pk]
    assert "badge run" not in cards[idle_task.pk]


def test_the_board_page_shows_the_badge(staff_client, person):
    task = TaskFactory()
    run_queue(actor=person, task=task, provider="demo")

    html = staff_client.get("/").content.decode()

    assert '<span class="badge run run-queued" title="A run waits for a runner">queued</span>' in html


def test_a_run_event_pushes_its_task_card(person, task, monkeypatch):
    pushed = []
    monkeypatch.setattr("runners.services.board_push_tasks", lambda *, task_ids: pushed.append(list(task_ids)))

    run = run_queue(actor=person, task=task, provider="demo")
    run_transition(actor=SYSTEM, run=run, to=Run.Status.CANCELLED)

    assert pushed == [[task.pk], [task.pk]]  # run.queued, run.cancelled


def test_hostile_task_titles_are_escaped_in_the_panel_and_card(staff_client, person):
    task = TaskFactory(title=HOSTILE, description=HOSTILE)
    run_queue(actor=person, task=task, provider="demo", prompt=HOSTILE)

    panel = staff_client.get(f"/tasks/{task.pk}/", HTTP_HX_REQUEST="true").content.decode()
    board = staff_client.get("/").content.decode()

    for html in (panel, board):
        assert "<script>alert" not in html and "<img src=x" not in html


def test_the_session_page_shows_its_run_and_a_stop_button(staff_client, person, task, online_runner):
    run = _running(run_queue(actor=person, task=task, provider="demo"), online_runner)
    session = SessionFactory(intent="Run session")
    Run.objects.filter(pk=run.pk).update(session=session)

    html = staff_client.get(f"/sessions/{session.pk}/").content.decode()

    assert f"<strong>Run #{run.pk}</strong> on build-1 (demo)" in html
    assert '<span class="badge status-running">Running</span>' in html
    assert f'hx-post="/runners/runs/{run.pk}/stop/"' in html
    stopped = staff_client.post(f"/runners/runs/{run.pk}/stop/", {"box": "session"}, HTTP_HX_REQUEST="true")
    assert "stopping" in stopped.content.decode()
    assert staff_client.get(f"/runners/sessions/{session.pk}/run/").status_code == 200


def test_a_session_without_a_run_shows_no_run_line(staff_client):
    session = SessionFactory()

    assert 'id="session-run"' not in staff_client.get(f"/sessions/{session.pk}/").content.decode()


FILE = "# Plan\n## P1 Backend\n- [ ] Add retries #reliability\n- [ ] Old item\n"


def test_start_job_with_run_with_queues_a_run_for_each_created_ready_task(staff_client, file_roots, online_runner):
    (file_roots["REPORTS_DIR"] / "plan.md").write_text(FILE)
    preview = staff_client.get("/priorities/preview/", {"file": "plan.md"}, HTTP_HX_REQUEST="true").content.decode()

    response = staff_client.post("/priorities/apply/", {"file": "plan.md", "run_with": "demo"}, HTTP_HX_REQUEST="true")

    assert '<option value="">— don\'t start agents</option>' in preview
    assert '<option value="demo">demo</option>' in preview
    ready = Task.objects.filter(status="ready")
    assert ready.count() == 2
    assert sorted(Run.objects.values_list("task_id", "provider")) == sorted((t.pk, "demo") for t in ready)
    assert "Queued 2 runs with <code>demo</code>" in response.content.decode()


def test_start_job_without_run_with_starts_nothing(staff_client, file_roots):
    (file_roots["REPORTS_DIR"] / "plan.md").write_text(FILE)

    staff_client.post("/priorities/apply/", {"file": "plan.md", "run_with": ""}, HTTP_HX_REQUEST="true")

    assert Task.objects.count() == 2 and Run.objects.count() == 0


def test_start_job_by_a_product_owner_queues_the_runs(owner_client, file_roots):
    (file_roots["REPORTS_DIR"] / "plan.md").write_text(FILE)

    response = owner_client.post("/priorities/apply/", {"file": "plan.md", "run_with": "demo"}, follow=True)

    created = Task.objects.filter(status="ready")
    assert Task.objects.count() == 2
    assert Run.objects.filter(task__in=created, provider="demo").count() == created.count() > 0
    assert "Queued" in response.content.decode()


def test_start_campaign_with_run_with_queues_runs(staff_client, file_roots):
    definition = {"type": "launch", "name": "Spring launch", "deliverables": ["blog-post", "email"]}
    (file_roots["TASK_DEFS_DIR"] / "spring.json").write_text(json.dumps(definition))
    page = staff_client.get("/campaigns/").content.decode()

    response = staff_client.post("/campaigns/import/", {"file": "spring.json", "run_with": "shell"}, follow=True)

    assert 'id="run-with-1"' in page
    created = Task.objects.filter(campaign__name="Spring launch", status="ready")
    assert Run.objects.filter(task__in=created, provider="shell").count() == created.count() > 0
    assert "Queued" in response.content.decode()


def test_the_session_link_in_the_box_is_for_engineers_only(staff_client, person, task, online_runner):
    run = _running(run_queue(actor=person, task=task, provider="demo"), online_runner)
    session = SessionFactory()
    Run.objects.filter(pk=run.pk).update(session=session)

    engineer_box = staff_client.get(f"/runners/tasks/{task.pk}/run/", HTTP_HX_REQUEST="true").content.decode()
    staff_client.force_login(user_in(PRODUCT_OWNERS, username="olivia"))
    owner_box = staff_client.get(f"/runners/tasks/{task.pk}/run/", HTTP_HX_REQUEST="true").content.decode()

    assert f'href="/sessions/{session.pk}/"' in engineer_box
    assert f'href="/sessions/{session.pk}/"' not in owner_box
    assert "running on build-1" in owner_box


def test_error_tail_keeps_the_exit_code_and_the_last_lines():
    from runners.templatetags.runner_tags import error_tail

    text = "exit code 1\n" + "\n".join(f"line {n}" for n in range(20)) + "\n" + "x" * 400

    shown = error_tail(text).splitlines()

    assert shown[:2] == ["exit code 1", "…"]
    assert shown[2:7] == [f"line {n}" for n in range(15, 20)]
    assert shown[-1] == "x" * 299 + "…"
    assert error_tail("exit code 2\nshort") == "exit code 2\nshort"
