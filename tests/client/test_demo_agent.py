"""The demo provider's agent (`python -m switchyard_client.demo_agent`) as a runner starts it: a real
process with a run's environment, against the live app, in a temporary git repository."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from config.actors import Actor
from ledger.models import ToolInvocation
from sessions_app.input_requests import session_answer_input
from sessions_app.models import AgentSession, Milestone, StreamEvent
from switchyard_client.api.client import Client
from tests.client.live import FAST_RETRY
from tests.factories import TaskFactory, UserFactory
from tests.worker import ROOT, wait_for
from tests.workspaces.conftest import commit_file, git
from workspaces.models import Artifact

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def repo(tmp_path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    commit_file(folder, "README.md", "# Shop\n", "initial")
    return folder


@pytest.fixture
def start(sy_server, agent_key, repo):
    """Start the demo agent on a fresh task and session; returns (process, task, session id)."""
    started: list[subprocess.Popen] = []

    def start_agent(description: str = "", *, title: str = "Tidy the kanban colours", workdir: Path = repo, **env):
        task = TaskFactory(title=title, description=description)
        with Client(sy_server.url, agent_key, retry=FAST_RETRY) as client:
            session = client.session_open(intent=title, task=task.pk, status="planning")["id"]
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "GIT_"))}
        environment.update(
            SWITCHYARD_URL=sy_server.url,
            SWITCHYARD_KEY=agent_key,
            SWITCHYARD_SESSION=session,
            SWITCHYARD_RUN="12",
            SWITCHYARD_TASK=str(task.pk),
            SWITCHYARD_TASK_TITLE=title,
            SWITCHYARD_TASK_DESCRIPTION=description,
            SWITCHYARD_WORKDIR=str(workdir),
        )
        environment.update({"DEMO_AGENT_SPEED": "200", **env})
        process = subprocess.Popen(
            [sys.executable, "-m", "switchyard_client.demo_agent"],
            cwd=workdir,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started.append(process)
        return process, task, session

    yield start_agent
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_run_reports_tool_calls_events_a_milestone_an_artifact_and_commits(start, repo):
    process, task, session = start("Make the columns readable in dark mode.")
    out, _ = process.communicate(timeout=60)

    assert process.returncode == 0, out
    assert "[demo-agent] starting on task" in out and out.rstrip().endswith("[demo-agent] done")
    calls = list(ToolInvocation.objects.filter(session_id=session).order_by("id"))
    assert [c.tool_name for c in calls] == ["Read", "Bash", "Write", "Bash"]
    assert {c.status for c in calls} == {"success"}
    types = list(StreamEvent.objects.filter(session_id=session).values_list("type", flat=True))
    assert "plan_update" in types and "diff" in types and "input_request" not in types
    assert Milestone.objects.get(session_id=session).text.startswith(f"Notes for task #{task.pk} written and committed")
    notes = f"NOTES-task-{task.pk}.md"
    artifact = Artifact.objects.get(workspace__sessions=session, path=notes)
    assert artifact.tool_invocation == calls[2]
    assert "Make the columns readable in dark mode." in (repo / notes).read_text()
    log = git(repo, "log", "--format=%an <%ae>|%s", "-1").strip()
    assert log == f"Switchyard demo agent <demo-agent@switchyard.invalid>|demo: notes for task #{task.pk}: " + (
        "Tidy the kanban colours"
    )
    assert git(repo, "status", "--porcelain") == ""
    assert AgentSession.objects.get(pk=session).status == "running"  # the runner ends it, not the agent


def test_the_author_comes_from_the_environment(start, repo):
    process, task, _ = start(GIT_AUTHOR_NAME="Ada", GIT_AUTHOR_EMAIL="ada@example.com")
    assert process.wait(timeout=60) == 0
    assert git(repo, "log", "--format=%an <%ae> / %cn", "-1").strip() == "Ada <ada@example.com> / Switchyard demo agent"


def test_outside_a_git_repository_it_writes_and_uploads_without_committing(start, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    process, task, session = start(workdir=plain)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0, out
    assert (plain / f"NOTES-task-{task.pk}.md").exists()
    assert Artifact.objects.filter(workspace__sessions=session, path=f"NOTES-task-{task.pk}.md").exists()
    assert Milestone.objects.get(session_id=session).text == f"Notes for task #{task.pk} written"
    assert [c.tool_name for c in ToolInvocation.objects.filter(session_id=session).order_by("id")] == [
        "Read",
        "Bash",
        "Write",
    ]


def test_in_an_ignored_folder_of_another_repository_it_does_not_commit(start, repo):
    # given a workdir inside a checkout that ignores it (`make run` from a clone: var/workspaces/...)
    commit_file(repo, ".gitignore", "var/\n", "ignore var")
    inside = repo / "var" / "workspaces" / "session_1"
    inside.mkdir(parents=True)
    head = git(repo, "rev-parse", "HEAD").strip()

    process, task, session = start(workdir=inside)
    out, _ = process.communicate(timeout=60)

    # then it writes and uploads its notes and ends well, and the outer repository is untouched
    assert process.returncode == 0, out
    assert (inside / f"NOTES-task-{task.pk}.md").exists()
    assert Milestone.objects.get(session_id=session).text == f"Notes for task #{task.pk} written"
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert "the workdir is not a git repository" in out


def test_it_asks_the_product_owner_and_writes_the_answer_into_its_notes(start, repo):
    process, task, session = start("Pick the colours.\nask: Which palette, warm or cool?", DEMO_AGENT_ANSWER_WAIT="30")
    question = wait_for(
        lambda: StreamEvent.objects.filter(session_id=session, type="input_request").first(), message="the question"
    )
    assert question.payload == {"question": "Which palette, warm or cool?"}
    wait_for(lambda: AgentSession.objects.get(pk=session).status == "waiting_for_input", message="waiting")
    owner = Actor(user=UserFactory(username="owner", is_staff=True))
    session_answer_input(actor=owner, session=AgentSession.objects.get(pk=session), answer="Cool, please.")

    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0, out
    assert "the product owner answered: Cool, please." in out
    notes = (repo / f"NOTES-task-{task.pk}.md").read_text()
    assert "Q: Which palette, warm or cool?" in notes and "A: Cool, please." in notes


def test_with_no_answer_in_time_it_goes_on_with_a_note(start, repo):
    process, task, session = start("ask: Ship it on Friday?", DEMO_AGENT_ANSWER_WAIT="0.5")
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0, out
    assert "no answer in time" in out
    assert "A: (no answer in time; still open)" in (repo / f"NOTES-task-{task.pk}.md").read_text()
    assert AgentSession.objects.get(pk=session).status == "running"


def test_a_fail_line_makes_it_exit_non_zero(start, repo):
    process, task, session = start("Break on purpose.\nfail: the build server is on fire")
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 1
    assert "failing as the task asks: the build server is on fire" in out
    assert StreamEvent.objects.filter(session_id=session, payload__message="Giving up: the build server is on fire")
    assert not (repo / f"NOTES-task-{task.pk}.md").exists()


def test_sigterm_ends_it_promptly_with_a_cancelled_event(start):
    # At normal speed it would take ten seconds; it is stopped within the first.
    process, task, session = start(DEMO_AGENT_SPEED="1")
    wait_for(lambda: ToolInvocation.objects.filter(session_id=session).exists(), message="the first tool call")
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=10)
    assert time.monotonic() - sent < 3
    assert process.returncode == 143, out
    assert StreamEvent.objects.filter(session_id=session, type="log", payload__message="cancelled").exists()
    assert not ToolInvocation.objects.filter(session_id=session, status="running").exists()


def test_without_a_session_it_says_so(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "SWITCHYARD_"))}
    done = subprocess.run(
        [sys.executable, "-m", "switchyard_client.demo_agent"],
        cwd=ROOT,
        env={**env, "SWITCHYARD_URL": "http://127.0.0.1:9", "SWITCHYARD_KEY": "sy_x"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 3
    assert "SWITCHYARD_SESSION is not set" in done.stdout
