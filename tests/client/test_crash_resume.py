"""Issue 6: an agent run played through the `switchyard` CLI against the live app, killed with
SIGKILL twice (while it waits after its checkpoint, and in the middle of a batch of events),
resumed with `switchyard resume`, finished; then the ledger, artifacts and backups are counted.

The agent is ``agent_script.py`` in its own process group, so SIGKILL takes it and any CLI call it
is in the middle of. It journals each acknowledged step; the test waits on the journal, never on
a sleep. The server is ``ServerProcess`` (uvicorn against the test database), the observer's
reconcile is ``manage.py observe --once`` in its own process with the server's file roots.
"""

import ast
import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import override_settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from board.models import Task, TaskClaim
from config.actors import Actor
from ledger.models import Event, ToolInvocation
from sessions_app.models import AgentSession, Checkpoint, Milestone, StreamEvent
from tests.client.live import agent_key, server_roots, sy_server  # noqa: F401
from tests.factories import TaskFactory, UserFactory
from tests.worker import FILE_ROOTS, ROOT, wait_for, worker_environment
from tests.workspaces.conftest import commit_file, git
from workspaces.models import Artifact, ArtifactVersion, Worktree
from workspaces.worktrees.services import repository_register, worktree_create

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = Path(__file__).with_name("agent_script.py")
REPORT = "work_products/report.md"
DRAFT_1 = "# Login bug\n\nFirst draft: the session cookie is dropped.\n"
DRAFT_2 = DRAFT_1 + "\nSecond draft: SameSite=None needs Secure; fixed in auth/cookies.py.\n"
CHECKPOINT_1 = {"step": 1, "plan": ["read", "fix", "report"]}
CHECKPOINT_2 = {"step": 3, "plan": ["read", "fix", "report"], "done": ["read", "report draft"], "next": "run tests"}
BATCH_SIZE = 500


class Agent:
    """One run of agent_script.py in ``folder``; killed by its process group, which it leads."""

    started: list["Agent"] = []  # so a failed test leaves no agent waiting forever

    def __init__(self, folder: Path, env: dict, steps: list, *, exit: bool = False):
        self.folder = folder
        self.start_line = len(self.journal())
        plan = folder / "plan.json"
        plan.write_text(json.dumps({"steps": steps, "exit": exit}))
        with open(folder / "agent.err", "ab") as err:
            self.process = subprocess.Popen(
                [sys.executable, str(AGENT), str(plan)],
                cwd=folder,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,  # its own process group: kill() takes any CLI call it is in
            )
        Agent.started.append(self)

    def journal(self) -> list[dict]:
        path = self.folder / "journal.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def this_run(self) -> list[dict]:
        return self.journal()[self.start_line :]

    def wait_for_entry(self, key: str, timeout: float = 45) -> dict:
        def found():
            entries = self.this_run()
            failed = [e for e in entries if "failed" in e]
            assert not failed, f"the agent stopped: {failed}"
            assert self.process.poll() is None or any(key in e for e in entries), self.errors()
            return next((e for e in entries if key in e), None)

        return wait_for(found, timeout=timeout, message=f"the agent to journal {key!r}")

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        assert self.process.wait(timeout=30) == -signal.SIGKILL

    def wait(self) -> int:
        return self.process.wait(timeout=60)

    def errors(self) -> str:
        return (self.folder / "agent.err").read_text(errors="replace")[-3000:]


def switchyard(folder: Path, env: dict, *args: str) -> dict:
    """`switchyard --json ARGS` in a new process, as a restarted agent would run it."""
    done = subprocess.run(
        [sys.executable, "-m", "switchyard_client.cli", "--json", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def observe_once(server_roots) -> dict:  # noqa: F811
    """One reconcile pass of the observer, in its own process, over the server's file roots."""
    with override_settings(**{name: server_roots[name] for name in FILE_ROOTS}):
        env = worker_environment()
    done = subprocess.run(
        [sys.executable, "manage.py", "observe", "--once"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("Reconciled: "))
    return ast.literal_eval(line.removeprefix("Reconciled: "))  # the report as a dict's repr


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(autouse=True)
def _no_agent_left_running():
    yield
    while Agent.started:
        agent = Agent.started.pop()
        if agent.process.poll() is None:
            agent.kill()


@pytest.fixture
def worktree(tmp_path) -> Worktree:
    clone = tmp_path / "code" / "app"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    commit_file(clone, "auth/cookies.py", "SAMESITE = 'None'\n", "Initial commit")
    repository, _ = repository_register(path=str(clone))
    made, _ = worktree_create(
        actor=Actor(user=UserFactory(is_staff=True)), repository=repository, type="fix", name="login"
    )
    return made


@pytest.fixture
def agent_env(sy_server, agent_key) -> dict:  # noqa: F811
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "SWITCHYARD_", "DJANGO_"))}
    return {**env, "SWITCHYARD_URL": sy_server.url, "SWITCHYARD_KEY": agent_key}


def test_an_agent_killed_twice_resumes_and_finishes_with_every_step_recorded_once(
    tmp_path,
    agent_env,
    worktree,
    server_roots,  # noqa: F811
):
    # Given a ready task, a worktree of a real repository, and an agent in its own folder
    task = TaskFactory(title="Fix the login bug")
    folder = tmp_path / "agent"
    folder.mkdir()

    # When the agent works up to its second checkpoint and is killed while it waits
    first = Agent(
        folder,
        agent_env,
        [
            ["cli", "session", "start", "--intent", "Fix the login bug"],
            ["cli", "task", "claim-next"],
            ["cli", "worktree", "claim", str(worktree.pk)],
            ["cli", "checkpoint", "save", json.dumps(CHECKPOINT_1)],
            ["cli", "tool", "start", "Read", "--id", "toolu_read", "--input", '{"file_path": "auth/cookies.py"}'],
            ["cli", "tool", "start", "Bash", "--id", "toolu_test", "--input", '{"command": "pytest tests/auth"}'],
            ["cli", "tool", "finish", "toolu_read", "--output", '{"lines": 1}'],
            ["write", "report.md", DRAFT_1],
            ["cli", "put", "report.md", "--as", REPORT],
            ["cli", "milestone", "Cause found: SameSite cookie"],
            ["write", "report.md", DRAFT_2],
            ["cli", "put", "report.md", "--as", REPORT, "--tool-use-id", "toolu_read"],
            ["cli", "milestone", "Report drafted"],
            ["cli", "checkpoint", "save", json.dumps(CHECKPOINT_2)],
        ],
    )
    first.wait_for_entry("waiting")
    first.kill()
    entries = first.this_run()
    session_id = entries[0]["out"]["id"]
    claimed_at_lease = parse_datetime(entries[2]["out"]["worktree"]["lease_expires_at"])

    # Then `switchyard resume` in a new process gives back exactly where it stopped
    resumed = switchyard(folder, agent_env, "resume")
    assert resumed["session"]["id"] == session_id and resumed["status"] == "running"
    assert (resumed["checkpoint"]["seq"], resumed["checkpoint"]["state"]) == (2, CHECKPOINT_2)
    assert [(c["client_id"], c["tool_name"], c["status"]) for c in resumed["open_tool_calls"]] == [
        ("toolu_test", "Bash", "running")
    ]
    assert [m["text"] for m in resumed["milestones"]] == ["Cause found: SameSite cookie", "Report drafted"]
    assert [(t["id"], t["status"], t["assignee"]) for t in resumed["claimed_tasks"]] == [
        (task.pk, "in_progress", "claude-1")
    ]
    held = resumed["claimed_worktrees"]
    assert [(w["id"], w["holder"]) for w in held] == [(worktree.pk, "claude-1")]
    # ... and the lease it still holds was renewed by the restart, not merely still running
    lease = parse_datetime(held[0]["lease_expires_at"])
    assert lease > claimed_at_lease and lease > timezone.now()
    assert Worktree.objects.get(pk=worktree.pk).lease_expires_at == lease

    # When the resumed agent is killed halfway through sending a batch of events
    second = Agent(folder, agent_env, [["batch-stall", BATCH_SIZE]])
    second.wait_for_entry("half_sent")
    second.kill()

    # When it restarts, sends the batch it still owes with the same ids, and finishes the work
    again = switchyard(folder, agent_env, "resume")
    assert (again["checkpoint"]["seq"], len(again["open_tool_calls"]), len(again["claimed_worktrees"])) == (2, 1, 1)
    last = Agent(
        folder,
        agent_env,
        [
            ["resend"],
            ["resend"],
            ["cli", "tool", "finish", "toolu_test", "--output", '{"passed": 12}'],
            ["cli", "task", "complete", str(task.pk)],
            ["cli", "worktree", "release", str(worktree.pk)],
            ["cli", "session", "end"],
        ],
        exit=True,
    )
    assert last.wait() == 0, last.errors() + str(last.this_run())
    resent, replayed = (e["acked"] for e in last.this_run()[:2])
    # ... the half-sent batch had stored nothing, so every item is new; sent again (an answer
    # lost), every item is answered with the stored row and nothing is stored twice
    assert (resent, replayed) == ([201] * BATCH_SIZE, [200] * BATCH_SIZE)

    # Then every step is in the database exactly once
    session = AgentSession.objects.get()
    assert (session.pk, session.status) == (session_id, "completed")
    assert list(TaskClaim.objects.values_list("task_id", "session_id", "outcome")) == [
        (task.pk, session_id, "completed")
    ]
    assert Task.objects.get(pk=task.pk).status == Task.Status.DONE
    assert sorted(ToolInvocation.objects.values_list("client_id", "tool_name", "status")) == [
        ("toolu_read", "Read", "success"),
        ("toolu_test", "Bash", "success"),
    ]
    assert list(Checkpoint.objects.order_by("seq").values_list("seq", "state")) == [
        (1, CHECKPOINT_1),
        (2, CHECKPOINT_2),
    ]
    assert list(Milestone.objects.order_by("created_at", "id").values_list("text", flat=True)) == [
        "Cause found: SameSite cookie",
        "Report drafted",
    ]
    batch = StreamEvent.objects.filter(session_id=session_id, payload__has_key="batch_item")
    assert sorted(batch.values_list("payload__batch_item", flat=True)) == list(range(BATCH_SIZE))
    assert batch.values("client_id").distinct().count() == BATCH_SIZE
    artifact = Artifact.objects.get()
    assert (artifact.path, artifact.kind, artifact.tool_invocation.client_id) == (REPORT, "work_product", "toolu_read")
    versions = list(ArtifactVersion.objects.filter(artifact=artifact).order_by("number"))
    assert [(v.number, v.sha256) for v in versions] == [(1, sha256(DRAFT_1)), (2, sha256(DRAFT_2))]
    released = Worktree.objects.get(pk=worktree.pk)
    assert (released.holder_id, released.lease_expires_at) == (None, None)

    def events(name: str) -> list[dict]:
        return list(Event.objects.filter(name=name).order_by("id").values_list("payload", flat=True))

    assert len(events("task.claimed")) == len(events("worktree.claimed")) == len(events("worktree.released")) == 1
    assert [p["version"] for p in events("artifact.created")] == [1, 2]

    # And the observer's reconcile leaves each version with exactly one verified backup
    observe_once(server_roots)
    backups = server_roots["SAVED_REPORTS_ROOT"] / Path(session.workspace.root_path).name
    on_disk = sorted(p.relative_to(backups).as_posix() for p in backups.rglob("*") if p.is_file())
    assert on_disk == ["report.md.v1", "report.md.v2"]
    for version, text in zip(versions, (DRAFT_1, DRAFT_2), strict=True):
        version.refresh_from_db()
        assert version.backup_location == str(backups / f"report.md.v{version.number}")
        assert hashlib.sha256(Path(version.backup_location).read_bytes()).hexdigest() == sha256(text)
    assert sorted(p["version"] for p in events("artifact.backed_up")) == [1, 2]

    # ... and a second pass adds nothing
    report = observe_once(server_roots)
    assert (report["recorded"], report["backed_up"]) == (0, 0)
    assert sorted(p.relative_to(backups).as_posix() for p in backups.rglob("*") if p.is_file()) == on_disk
    assert (ArtifactVersion.objects.count(), len(events("artifact.backed_up"))) == (2, 2)
    assert len(events("artifact.created")) == 2
