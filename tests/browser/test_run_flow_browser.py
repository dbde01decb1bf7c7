"""The run loop in a real browser against real processes (issue 13, "Tests": the browser flow).

A live server, a real `switchyard runner` offering the built-in `demo` provider, and a task whose
work happens in a real git repository registered as a Repository. A person opens the board, opens
the card, chooses demo and presses Run; the card shows queued, then running on the runner (live, no
reload), the session page's log grows while the run goes, and the card lands in Review by itself
with the diff on the session page. Also: Stop, a question answered in the browser, a failed run's
error, and a product owner running and stopping.

The runner starts after Run is pressed, so "queued" is seen for sure, as a person sees it before
a runner picks the run up.
"""

import contextlib
import json
import os
import signal
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from board.models import Task
from runners.models import Run
from runners.services import runner_key_create
from tests.browser.conftest import screenshot
from tests.client.test_runner_live import GIT_ENV
from tests.factories import TaskFactory
from tests.runners.live_runner import RunnerProc
from tests.workspaces.conftest import commit_file, git
from workspaces.worktrees.services import repository_register

RUNNER = "build-1"


@pytest.fixture
def start_runner(live_app, tmp_path):
    """Start a real runner named build-1 against the live server; stopped (and its agents) after."""
    _, issued, _ = runner_key_create(name=RUNNER, capacity=2)
    root = tmp_path / "runner"
    config = tmp_path / "switchyard-runner.toml"
    config.write_text(
        f"""
[runner]
url = "{live_app.url}"
key = "{issued.key}"
name = "{RUNNER}"
capacity = 2
root = "{root}"
grace_seconds = 3
"""
    )
    started: list[RunnerProc] = []

    def start(*, speed: float, answer_wait: float = 120) -> RunnerProc:
        env = {**GIT_ENV, "DEMO_AGENT_SPEED": str(speed), "DEMO_AGENT_ANSWER_WAIT": str(answer_wait)}
        runner = RunnerProc(config, tmp_path / f"runner-{len(started)}.log", env=env).start()
        started.append(runner)
        return runner

    yield start
    for runner in started:
        runner.stop()
    for state in (root / "runs").glob("*.json"):
        pid = json.loads(state.read_text()).get("pid")
        if pid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


@pytest.fixture
def repository(tmp_path):
    clone = tmp_path / "code" / "shop"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    commit_file(clone, "README.md", "# shop\n", "Initial commit")
    return repository_register(path=str(clone))[0]


def press_run(page, task: Task):
    """Open the card and press Run with demo; returns the panel."""
    expect(page.locator("#board-live")).to_have_attribute("data-state", "live")
    page.locator(f"#task-{task.pk} .card-title").click()
    panel = page.locator("#task-panel")
    expect(panel).to_be_visible()
    panel.locator(f"#run-provider-{task.pk}").select_option("demo")
    panel.get_by_role("button", name="Run", exact=True).click()
    expect(panel.locator(".run-status")).to_contain_text("queued")
    expect(page.locator(f"#task-{task.pk} .badge.run")).to_have_text("queued")  # pushed to the card
    return panel


def the_run(task: Task) -> Run:
    return Run.objects.get(task=task)


def wait_for(check, *, timeout: float, what: str, runner=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    detail = f"\nrunner output:\n{runner.output()}" if runner else ""
    raise AssertionError(f"timed out waiting for {what}{detail}")


def test_press_run_watch_it_run_stream_its_log_and_land_in_review_with_its_diff(
    new_page, engineer, start_runner, repository
):
    task = TaskFactory(title="Write the onboarding notes", description="Notes for new people.", repository=repository)
    board = new_page(engineer)
    panel = press_run(board, task)
    screenshot(board, "run_flow_1_queued")

    runner = start_runner(speed=1.0)  # ~10 s: long enough to watch the log grow
    expect(panel.locator(".run-status")).to_contain_text(f"running on {RUNNER}", timeout=20_000)
    expect(board.locator(f"#task-{task.pk} .badge.run")).to_contain_text(RUNNER)
    expect(board.locator(f"#column-in_progress #task-{task.pk}")).to_be_visible()
    expect(panel.locator(".detail-facts")).to_contain_text("In progress")  # the open panel follows its card
    screenshot(board, "run_flow_2_running")

    # The session page, in a second tab: the log area gains text while the run goes.
    session_url = panel.get_by_role("link", name="Open its session").get_attribute("href")
    session_page = board.context.new_page()
    session_page.goto(session_url)
    box = session_page.locator("#session-run")
    expect(box).to_contain_text(f"on {RUNNER} (demo)")
    log = session_page.locator("#log-output")
    seen: list[str] = []

    def grown_while_running() -> bool:
        text = log.text_content() or ""
        if text and (not seen or text != seen[-1]):
            seen.append(text)
        partial = [t for t in seen if "[demo-agent] done" not in t]
        return len(partial) >= 2 and len(partial[-1]) > len(partial[0])

    wait_for(grown_while_running, timeout=20, what="the log to grow while the run goes", runner=runner)
    assert seen[0].startswith("[demo-agent] starting on task #")
    screenshot(session_page, "run_flow_3_session_log_streaming")

    # By itself: the card moves to Review on the open board, no reload.
    expect(board.locator(f"#column-review #task-{task.pk}")).to_be_visible(timeout=30_000)
    expect(board.locator(f"#task-{task.pk} .badge.run")).to_have_count(0)
    run = the_run(task)
    assert run.status == "succeeded", runner.output()
    expect(log).to_contain_text("[demo-agent] done", timeout=30_000)

    # The diff: a .patch link on the session page's run box, and on the card panel's last run.
    expect(box).to_contain_text("Succeeded", timeout=30_000)
    patch_link = box.get_by_role("link", name=f"run-{run.pk}.patch")
    expect(patch_link).to_be_visible()
    patch = session_page.request.get(patch_link.get_attribute("href"))
    assert patch.ok
    assert f"NOTES-task-{task.pk}.md" in patch.text() and "+# Notes for task" in patch.text()
    screenshot(session_page, "run_flow_4_session_succeeded")
    expect(panel.locator(".run-last")).to_contain_text("Succeeded", timeout=30_000)
    expect(panel.get_by_role("link", name=f"run-{run.pk}.patch")).to_be_visible()
    expect(panel.locator(".detail-facts")).to_contain_text("Review")
    screenshot(board, "run_flow_5_review_panel")
    panel.locator("button.close").click()
    screenshot(board, "run_flow_6_review_board")


def test_stop_while_running_cancels_within_seconds_and_the_card_stays(new_page, engineer, start_runner, repository):
    task = TaskFactory(title="Rename the checkout button", repository=repository)
    board = new_page(engineer)
    panel = press_run(board, task)
    runner = start_runner(speed=0.5)  # ~20 s: it is still going when Stop is pressed
    expect(panel.locator(".run-status")).to_contain_text(f"running on {RUNNER}", timeout=20_000)
    wait_for(lambda: the_run(task).status == "running", timeout=20, what="the run to be running", runner=runner)

    panel.get_by_role("button", name="Stop").click()
    expect(panel.locator(".run-status")).to_contain_text("stopping")
    screenshot(board, "run_flow_stop_1_stopping")
    # Cancelled, not ended on its own (its ~20 s of work would end it "succeeded"): a deadline, not a timing
    # (a loaded machine stretches how fast; bench/ measures figures).
    wait_for(lambda: the_run(task).status == "cancelled", timeout=15, what="the cancel", runner=runner)

    # Given back where it was put (Ready), not failed; the panel shows the cancelled run.
    expect(board.locator(f"#column-ready #task-{task.pk}")).to_be_visible(timeout=30_000)
    expect(board.locator(f"#task-{task.pk} .badge.run")).to_have_count(0)
    expect(panel.locator(".run-last")).to_contain_text("Cancelled", timeout=30_000)
    assert Task.objects.get(pk=task.pk).status == "ready"
    screenshot(board, "run_flow_stop_2_cancelled")


def test_the_demo_asks_the_person_answers_in_the_browser_and_it_goes_on_to_review(
    new_page, engineer, start_runner, repository
):
    task = TaskFactory(
        title="Pick the button colour",
        description="ask: Which colour should the checkout button be?",
        repository=repository,
    )
    board = new_page(engineer)
    panel = press_run(board, task)
    runner = start_runner(speed=20)
    expect(board.locator(f"#task-{task.pk} .badge.waiting")).to_have_text("Waiting for input", timeout=20_000)
    screenshot(board, "run_flow_ask_1_card_waiting")

    session_url = panel.get_by_role("link", name="Open its session").get_attribute("href")
    session_page = board.context.new_page()
    session_page.goto(session_url)
    question = session_page.locator("#session-input")
    expect(question).to_contain_text("Which colour should the checkout button be?")
    session_page.get_by_label("Your answer").fill("Green, like the logo.")
    screenshot(session_page, "run_flow_ask_2_answering")
    session_page.get_by_role("button", name="Send answer").click()
    # "Answer sent", or already the live push of the session running again: the form is gone.
    expect(session_page.get_by_label("Your answer")).to_have_count(0)

    expect(board.locator(f"#column-review #task-{task.pk}")).to_be_visible(timeout=30_000)
    expect(board.locator(f"#task-{task.pk} .badge.waiting")).to_have_count(0)
    run = the_run(task)
    assert run.status == "succeeded", runner.output()
    expect(session_page.locator("#log-output")).to_contain_text("the product owner answered: Green, like the logo.")
    patch = session_page.request.get(f"{session_url}files/run-{run.pk}.patch")
    assert "+A: Green, like the logo." in patch.text()
    screenshot(session_page, "run_flow_ask_3_answered")
    screenshot(board, "run_flow_ask_4_review")


def test_a_failed_run_shows_its_error_escaped(new_page, engineer, start_runner, repository):
    task = TaskFactory(
        title="Break on purpose",
        description="fail: the <b>build</b> is <script>alert(1)</script> broken",
        repository=repository,
    )
    board = new_page(engineer)
    panel = press_run(board, task)
    runner = start_runner(speed=20)

    expect(board.locator(f"#column-failed #task-{task.pk}")).to_be_visible(timeout=30_000)
    run = the_run(task)
    assert run.status == "failed" and run.exit_code == 1, runner.output()
    # The panel follows the card into Failed and shows the run's error once: the exit code and the
    # log's last lines, as text.
    expect(panel.locator(".detail-facts")).to_contain_text("Failed", timeout=30_000)
    expect(panel.locator(".run-last")).to_contain_text("Failed")
    error = panel.locator(".task-error")
    expect(error).to_contain_text("exit code 1")
    expect(error).to_contain_text("failing as the task asks: the <b>build</b> is <script>alert(1)</script> broken")
    expect(panel.locator(".run-error")).to_have_count(0)
    expect(panel.locator(".task-error b, .task-error script")).to_have_count(0)
    screenshot(board, "run_flow_fail_1_panel")

    board.goto(f"/sessions/{run.session_id}/")
    box = board.locator("#session-run")
    expect(box).to_contain_text("Failed")
    expect(box.locator(".run-error")).to_contain_text("the <b>build</b> is")
    expect(box.locator(".run-error b, .run-error script")).to_have_count(0)
    screenshot(board, "run_flow_fail_2_session")


def test_a_product_owner_runs_and_stops_from_the_card(new_page, product_owner, start_runner, repository):
    task = TaskFactory(title="Draft the FAQ", repository=repository)
    board = new_page(product_owner)
    panel = press_run(board, task)
    assert the_run(task).provider == "demo"
    runner = start_runner(speed=0.5)
    expect(panel.locator(".run-status")).to_contain_text(f"running on {RUNNER}", timeout=20_000)
    screenshot(board, "run_flow_po_1_running")

    panel.get_by_role("button", name="Stop").click()
    expect(panel.locator(".run-status")).to_contain_text("stopping")
    wait_for(lambda: the_run(task).status == "cancelled", timeout=15, what="the cancel", runner=runner)
    expect(panel.locator(".run-last")).to_contain_text("Cancelled", timeout=30_000)
    screenshot(board, "run_flow_po_2_stopped")


def test_a_product_owner_sets_the_repository_and_answers_the_agent_from_the_card_panel(
    new_page, product_owner, start_runner, repository
):
    """No session page for a product owner: the card panel names the repository, and the question
    comes into its run box by itself; the box's poll does not wipe an answer being written."""
    task = TaskFactory(title="Pick the button colour", description="ask: Which colour should the checkout button be?")
    board = new_page(product_owner)
    expect(board.locator("#board-live")).to_have_attribute("data-state", "live")
    board.locator(f"#task-{task.pk} .card-title").click()
    panel = board.locator("#task-panel")
    repo_box = panel.locator(f"#task-repo-{task.pk}")
    expect(repo_box.get_by_label("Repository")).to_have_value("")  # none: the session workspace
    repo_box.get_by_label("Repository").select_option(label="shop")
    repo_box.get_by_role("button", name="Save").click()
    expect(repo_box).to_contain_text("Saved: runs of this task work in shop")
    assert Task.objects.get(pk=task.pk).repository == repository

    panel.locator(f"#run-provider-{task.pk}").select_option("demo")
    panel.get_by_role("button", name="Run", exact=True).click()
    expect(panel.locator(".run-status")).to_contain_text("queued")
    runner = start_runner(speed=20)

    question = panel.locator(".run-question")
    expect(question).to_contain_text("Which colour should the checkout button be?", timeout=30_000)
    expect(board.locator(f"#task-{task.pk} .badge.waiting")).to_have_text("Waiting for input")
    answer = panel.get_by_label("Your answer")
    answer.fill("Green, like")
    board.wait_for_timeout(4_500)  # two polls' worth: the box must not be swapped under the person
    expect(answer).to_have_value("Green, like")
    expect(answer).to_be_focused()
    answer.press("End")
    answer.type(" the logo.")
    screenshot(board, "run_flow_po_ask_1_answering_in_the_panel")
    panel.get_by_role("button", name="Send answer").click()
    expect(panel.locator(".run-question")).to_have_count(0)

    expect(board.locator(f"#column-review #task-{task.pk}")).to_be_visible(timeout=30_000)
    run = the_run(task)
    assert run.status == "succeeded", runner.output()
    # It worked in a worktree of the repository set on the panel, not in its session workspace.
    assert (Path(run.workdir) / ".git").read_text().startswith(f"gitdir: {repository.path}/.git/worktrees/")
    events = run.session.events.filter(type="input_request", payload__has_key="answer")
    assert [(e.payload["answer"], e.payload["answered_by"]) for e in events] == [("Green, like the logo.", "olivia")]
    expect(panel.locator(".run-last")).to_contain_text("Succeeded", timeout=30_000)
    screenshot(board, "run_flow_po_ask_2_review")


def test_the_push_of_a_save_made_in_the_panel_does_not_fetch_the_panel_again(new_page, product_owner, repository):
    """The save's answer carries the task's new stamp; its own push (which carries the same) must not
    make the panel fetch itself again over what the person does next, whenever the push lands."""
    task = TaskFactory(title="Pick the repository")
    board = new_page(product_owner)
    expect(board.locator("#board-live")).to_have_attribute("data-state", "live")
    board.locator(f"#task-{task.pk} .card-title").click()
    panel = board.locator("#task-panel")
    repo_box = panel.locator(f"#task-repo-{task.pk}")
    expect(repo_box.get_by_label("Repository")).to_have_value("")
    # htmx settles a swap 20 ms after the request ends; stretched, so the push surely lands before
    board.evaluate(
        """() => {
            htmx.config.defaultSettleDelay = 3000;
            window.settled = new Promise((done) => document.body.addEventListener("htmx:afterSettle", done, { once: true }));
        }"""
    )
    fetched = []
    board.on(
        "request", lambda request: fetched.append(request.url) if request.url.endswith(f"/tasks/{task.pk}/") else None
    )
    card = board.locator(f"#task-{task.pk}")
    shown = card.get_attribute("data-edited")

    repo_box.get_by_label("Repository").select_option(label="shop")
    repo_box.get_by_role("button", name="Save").click()
    expect(repo_box).to_contain_text("Saved: runs of this task work in shop")
    # the push came (the card carries the new stamp) before the answer settled
    expect(card).not_to_have_attribute("data-edited", shown)
    assert board.evaluate("Promise.race([window.settled.then(() => 'settled'), 'not yet'])") == "not yet"
    # then the answer settled, and the panel was never fetched again
    board.evaluate("window.settled")
    assert fetched == []
    expect(repo_box).to_contain_text("Saved: runs of this task work in shop")
