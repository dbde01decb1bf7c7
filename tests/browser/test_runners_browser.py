"""Runs in a real browser: press Run on a card, see it queued live, watch it run, stop it, and
the Runners page."""

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from django.db import connection
from django.utils import timezone
from playwright.sync_api import expect

from config.actors import SYSTEM
from runners.models import Run, Runner
from runners.services import run_transition, runner_key_create
from tests.browser.conftest import screenshot
from tests.factories import TaskFactory


def _runner(name: str, *, status: str, providers: list[str], labels: list[str], seen_ago: int, capacity: int = 2):
    runner = runner_key_create(name=name, labels=labels, capacity=capacity)[0]
    Runner.objects.filter(pk=runner.pk).update(
        status=status,
        providers=providers,
        host=f"{name}.example.internal",
        version="0.2.0",
        last_seen_at=timezone.now() - timedelta(seconds=seen_ago),
    )
    return Runner.objects.get(pk=runner.pk)


def test_press_run_on_a_card_see_it_queued_then_running_and_stop_it(new_page, engineer, transactional_db):
    build = _runner("build-1", status="online", providers=["demo", "shell", "claude"], labels=["linux"], seen_ago=3)
    _runner("gpu-box", status="draining", providers=["claude"], labels=["linux", "gpu"], seen_ago=8)
    _runner("old-laptop", status="offline", providers=["codex"], labels=["mac"], seen_ago=7200)
    task = TaskFactory(title="Try the demo agent", description="Write a work product and commit it.", labels=["demo"])
    TaskFactory(title="Write the release notes", status="backlog")
    page = new_page(engineer)
    expect(page.locator("#board-live")).to_have_attribute("data-state", "live")

    page.locator(f"#task-{task.pk} .card-title").click()
    panel = page.locator("#task-panel")
    expect(panel).to_be_visible()
    expect(panel.locator(f"#run-provider-{task.pk}")).to_have_value("demo")
    panel.locator(".run-prompt summary").click()
    screenshot(page, "runners_card_panel_form")
    panel.get_by_role("button", name="Run", exact=True).click()

    expect(panel.locator(".run-status")).to_contain_text("queued")
    expect(page.locator(f"#task-{task.pk} .badge.run")).to_have_text("queued")  # pushed live
    run = Run.objects.get(task=task)
    assert (run.provider, run.status) == ("demo", "queued")

    # The runner takes it (here the test drives the moves); the panel follows by polling, the card by push.
    run = run_transition(actor=SYSTEM, run=run, to=Run.Status.ASSIGNED, runner=build)
    run = run_transition(actor=SYSTEM, run=run, to=Run.Status.STARTING)
    run_transition(actor=SYSTEM, run=run, to=Run.Status.RUNNING)
    expect(panel.locator(".run-status")).to_contain_text("running on build-1", timeout=30_000)
    expect(panel.get_by_role("button", name="Stop")).to_be_visible()
    screenshot(page, "runners_card_panel_running")

    panel.get_by_role("button", name="Stop").click()
    expect(panel.locator(".run-status")).to_contain_text("stopping")
    run.refresh_from_db()
    assert run.cancel_requested_at is not None
    panel.locator("button.close").click()
    expect(page.locator(f"#task-{task.pk} .badge.run")).to_contain_text("build-1")
    screenshot(page, "runners_board_badge")

    page.get_by_role("link", name="Runners").click()
    expect(page.get_by_role("heading", name="Runners")).to_be_visible()
    expect(page.locator("table.runners tbody tr")).to_have_count(3)
    expect(page.locator("table.runners tbody tr").first).to_contain_text("build-1")
    expect(page.locator(f"#run-{run.pk}")).to_contain_text("Try the demo agent")
    screenshot(page, "runners_page")


def test_the_runners_page_when_nothing_is_set_up(new_page, engineer, transactional_db):
    page = new_page(engineer)

    page.goto("/runners/")

    expect(page.get_by_role("heading", name="No runner yet")).to_be_visible()
    screenshot(page, "runners_page_empty")


PRIORITIES = """# Launch

## P0 Blockers
- [ ] Fix the checkout crash #payments

## Low
- [ ] Polish the footer
"""


def test_start_job_with_run_with_queues_runs(new_page, engineer, file_roots):
    _runner("build-1", status="online", providers=["demo", "shell"], labels=["linux"], seen_ago=2)
    (file_roots["REPORTS_DIR"] / "launch.md").write_text(PRIORITIES)
    (file_roots["TASK_DEFS_DIR"] / "spring.json").write_text('{"type": "launch", "deliverables": ["blog-post"]}')
    page = new_page(engineer)

    page.goto("/priorities/?file=launch.md")
    page.get_by_label("Run with").select_option("demo")
    screenshot(page, "runners_start_job_run_with")
    page.get_by_role("button", name="Start job").click()

    expect(page.get_by_role("heading", name="Imported launch.md")).to_be_visible()
    expect(page.locator(".runs-queued")).to_contain_text("Queued 2 runs with demo")
    assert sorted(Run.objects.values_list("task__title", "provider")) == [
        ("Fix the checkout crash", "demo"),
        ("Polish the footer", "demo"),
    ]
    page.goto("/campaigns/")
    expect(page.get_by_label("Run with")).to_have_value("")
    screenshot(page, "runners_campaigns_run_with")


def test_the_session_page_of_a_run_shows_it_and_stops_it(new_page, engineer, file_roots):
    from config.actors import Actor
    from runners.services import run_queue
    from tests.factories import SessionFactory

    def set_up():
        build = _runner("build-1", status="online", providers=["demo"], labels=["linux"], seen_ago=2)
        task = TaskFactory(title="Try the demo agent")
        run = run_queue(actor=Actor(user=engineer), task=task, provider="demo")
        for to, extra in (
            (Run.Status.ASSIGNED, {"runner": build}),
            (Run.Status.STARTING, {}),
            (Run.Status.RUNNING, {}),
        ):
            run = run_transition(actor=SYSTEM, run=run, to=to, **extra)
        session = SessionFactory(intent="Try the demo agent", task=task)
        Run.objects.filter(pk=run.pk).update(session=session)
        connection.close()  # this thread's own connection, so the test database can be dropped
        return run, session

    # Queueing pushes the card to open boards at once (autocommit), and a push cannot be sent from
    # this thread while Playwright's event loop runs in it: the set-up runs in a thread of its own.
    with ThreadPoolExecutor(1) as pool:
        run, session = pool.submit(set_up).result()
    page = new_page(engineer)

    page.goto(f"/sessions/{session.pk}/")
    box = page.locator("#session-run")
    expect(box).to_contain_text(f"Run #{run.pk} on build-1 (demo)")
    screenshot(page, "runners_session_page")
    box.get_by_role("button", name="Stop").click()

    expect(box).to_contain_text("stopping")
    run.refresh_from_db()
    assert run.cancel_requested_at is not None
