"""The `switchyard` command against the live app: human output, --json, and an exit code per error."""

import json
import subprocess
import sys

import pytest

from board.models import Task
from ledger.models import ToolInvocation
from sessions_app.models import AgentSession, Checkpoint, Milestone, StreamEvent
from switchyard_client.cli import main

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(sy_server, agent_key, monkeypatch, tmp_path, capsys):
    """Run `switchyard ARGS...` in-process in a fresh folder; (exit code, stdout, stderr)."""
    monkeypatch.setenv("SWITCHYARD_URL", sy_server.url)
    monkeypatch.setenv("SWITCHYARD_KEY", agent_key)
    monkeypatch.delenv("SWITCHYARD_SESSION", raising=False)
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_a_session_from_start_to_end_in_human_output(cli, tmp_path):
    code, out, _ = cli("session", "start", "--intent", "Fix the login bug", "--id", "sess-cli")
    assert code == 0
    assert out.startswith("session sess-cli (running) agent claude-1")
    assert (tmp_path / ".switchyard" / "session").read_text().strip() == "sess-cli"

    assert cli("event", "compiling module 3")[1].strip() == "event #1 (log)"
    assert (
        cli("tool", "start", "Bash", "--input", '{"command": "make test"}', "--id", "toolu_9")[1].strip() == "toolu_9"
    )
    assert cli("tool", "finish", "toolu_9", "--output", '{"stdout": "ok"}')[1].startswith(
        "tool call toolu_9 Bash success"
    )
    assert cli("checkpoint", "save", '{"step": 4}')[1].startswith("checkpoint #1 saved")
    assert json.loads(cli("checkpoint", "show")[1]) == {"step": 4}
    assert cli("milestone", "Login fixed")[1].strip().endswith("Login fixed")
    (tmp_path / "notes.md").write_text("hello\n")
    assert cli("put", "notes.md", "--as", "work_products/notes.md")[1].strip() == (
        "work_products/notes.md v1 (6 bytes, work_product)"
    )
    assert cli("get", "work_products/notes.md", "-o", "back.md")[0] == 0
    assert (tmp_path / "back.md").read_text() == "hello\n"
    assert "work_products/notes.md" in cli("files")[1]
    resume = cli("resume")[1]
    assert "latest checkpoint #1" in resume and '{"step": 4}' in resume
    assert "open tool calls: 0" in resume and "Login fixed" in resume
    assert cli("session", "end")[1].strip() == "session sess-cli is completed"

    session = AgentSession.objects.get()
    assert (session.id, session.status, session.intent) == ("sess-cli", "completed", "Fix the login bug")
    assert list(StreamEvent.objects.filter(type="log").values_list("payload", flat=True)) == [
        {"message": "compiling module 3"}
    ]
    assert ToolInvocation.objects.get().status == "success"
    assert (Checkpoint.objects.count(), Milestone.objects.count()) == (1, 1)


def test_json_output_for_scripts(cli):
    code, out, _ = cli("--json", "session", "start", "--intent", "scripted")
    session = json.loads(out)
    assert code == 0 and session["status"] == "running"

    event = json.loads(cli("--json", "event", "--type", "plan_update", "--payload", '{"steps": ["a"]}')[1])
    resume = json.loads(cli("--json", "resume")[1])
    nothing = json.loads(cli("--json", "task", "claim-next")[1])

    assert (event["type"], event["payload"]) == ("plan_update", {"steps": ["a"]})
    assert resume["session"]["id"] == session["id"] and resume["checkpoint"] is None
    assert nothing is None


def test_task_commands(cli, sy):
    sy.task_create("Write docs", priority="P0")
    sy.task_create("Fix bug", priority="P1")
    cli("session", "start", "--intent", "tasks", "--id", "sess-tasks")

    claimed = json.loads(cli("--json", "task", "claim-next")[1])
    assert cli("task", "complete", str(claimed["id"]))[1].startswith(f"task {claimed['id']} [done]")
    second = json.loads(cli("--json", "task", "claim-next")[1])
    assert cli("task", "fail", str(second["id"]), "--error", "flaky", "--retry")[0] == 0
    assert cli("task", "claim-next")[0] == 0

    assert Task.objects.get(pk=claimed["id"]).session_id == "sess-tasks"
    assert Task.objects.get(pk=second["id"]).retries == 1


def test_worktree_commands(cli, tmp_path):
    from tests.workspaces.conftest import commit_file, git
    from workspaces.worktrees.services import repository_register

    clone = tmp_path / "code" / "app"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    commit_file(clone, "README.md", "# app\n", "Initial commit")
    repository, _ = repository_register(path=str(clone))

    created = json.loads(
        cli("--json", "worktree", "create", str(repository.pk), "--type", "feat", "--name", "login")[1]
    )
    code, out, _ = cli("worktree", "claim", str(created["id"]))
    assert code == 0 and out.startswith("granted: worktree")
    assert "held by claude-1" in out
    assert cli("worktree", "release", str(created["id"]))[1].strip().endswith("held by nobody")


def test_exit_codes_name_the_error(cli, sy_server, other_key, monkeypatch, dead_url):
    cli("session", "start", "--intent", "mine", "--id", "sess-codes")
    cli("session", "end")

    conflict = cli("event", "too late")
    missing = cli("--session", "no-such", "event", "x")
    bad_json = cli("--json", "--session", "no-such", "event", "x")
    monkeypatch.setenv("SWITCHYARD_KEY", other_key)
    forbidden = cli("session", "show", "sess-codes")
    monkeypatch.setenv("SWITCHYARD_KEY", "sy_not_a_key")
    unauthorized = cli("whoami")
    monkeypatch.delenv("SWITCHYARD_URL")
    unconfigured = cli("whoami")

    assert conflict[0] == 8 and "409" in conflict[2] and "completed" in conflict[2]
    assert missing[0] == 7 and "404" in missing[2]
    assert json.loads(bad_json[2])["status"] == 404
    assert forbidden[0] == 6 and "403" in forbidden[2]
    assert unauthorized[0] == 5 and "401" in unauthorized[2]
    assert unconfigured[0] == 3 and "SWITCHYARD_URL" in unconfigured[2]
    assert StreamEvent.objects.filter(type="log").count() == 0


def test_the_console_script_reports_an_unreachable_server(dead_url, tmp_path):
    env = {"SWITCHYARD_URL": dead_url, "SWITCHYARD_KEY": "sy_x", "PATH": "/usr/bin:/bin"}

    done = subprocess.run(
        [sys.executable, "-m", "switchyard_client.cli", "whoami"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    usage = subprocess.run(
        [sys.executable, "-m", "switchyard_client.cli", "tool"], env=env, capture_output=True, text=True
    )

    assert done.returncode == 11
    assert "did not answer" in done.stderr
    assert usage.returncode == 2
