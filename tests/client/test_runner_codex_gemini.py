"""The runner's built-in gemini provider, end to end, with a fake on the wire.

fake_gemini.py is put first on the runner's PATH under the real binary's name, so the runner finds
and starts it exactly as it would the real CLI (the built-in argv, the workdir, the environment). It
prints what `gemini --output-format stream-json` prints; the tests check that the runner turned that
into the session's stream events, and that after a kill -9 of the runner and the agent it starts the
provider's resume command.

The codex provider meets the real Codex CLI instead: tests/runners/test_runner_codex_e2e.py.
"""

import json
import os
import signal
import stat
import sys
from pathlib import Path

import pytest

from board.models import Task
from config.actors import Actor
from ledger.models import Event
from runners.models import Run
from runners.services import run_queue
from sessions_app.keys import api_key_create
from switchyard_client.api.client import Client
from tests.factories import TaskFactory, UserFactory
from tests.runners.live_runner import GIT_ENV, Machine, run_in, wait_for
from tests.workspaces.conftest import commit_file, git
from workspaces.worktrees.services import repository_register

pytestmark = pytest.mark.usefixtures("transactional_db")
HERE = Path(__file__).parent
PROVIDERS = ("gemini",)


@pytest.fixture
def person():
    return Actor(user=UserFactory(username="po", is_staff=True))


@pytest.fixture
def fake_bin(tmp_path):
    """`gemini` on a PATH of its own: the fake, run by this Python."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in PROVIDERS:
        script = folder / name
        script.write_text(f'#!/bin/sh\nexec {sys.executable} {HERE / f"fake_{name}.py"} "$@"\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder


@pytest.fixture
def machine(tmp_path, sy_server, fake_bin):
    home = tmp_path / "agent-home"
    env = {**GIT_ENV, "HOME": str(home)}
    made = Machine(
        tmp_path / "machines",
        sy_server.url,
        "fk-1",
        capacity=2,
        providers={name: {"env": env} for name in PROVIDERS},
        env={"PATH": f"{fake_bin}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"},
    )
    # The fakes write the argv they got to a file of the test's and are found by pid in /proc: plain
    # processes (a sandbox's PID namespace and hidden folders would hide both; test_runner_sandbox*.py).
    made.runner_table["sandbox"] = False
    made.write()
    yield made
    made.cleanup()


@pytest.fixture
def repository(tmp_path):
    clone = tmp_path / "code" / "shop"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    commit_file(clone, "README.md", "# shop\n", "Initial commit")
    repository, _ = repository_register(path=str(clone))
    return repository


def owner_client(url: str, run: Run) -> Client:
    run.refresh_from_db()
    return Client(url, api_key_create(agent=run.agent, scopes=["agent"]).key, timeout=20)


def session_events(url: str, run: Run) -> list[dict]:
    with owner_client(url, run) as sy:
        return sy.events_list(run.session_id, limit=500)["results"]


def ledger(run: Run, name: str) -> list[dict]:
    rows = Event.objects.filter(name=name, subject_type="run", subject_id=str(run.pk)).order_by("id")
    return list(rows.values_list("payload", flat=True))


def agent_argv(pid: int) -> tuple[list[str], str]:
    """The agent's argv as the runner gave it (the wrapper's `sh -c WRAPPER EXIT_FILE <argv>`), and its cwd."""
    argv = [part.decode() for part in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if part]
    return argv[argv.index("-c") + 3 :], os.readlink(f"/proc/{pid}/cwd")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_builtin_provider_runs_the_cli_and_parses_its_output(provider, person, machine, repository, sy_server):
    runner = machine.start()
    task = TaskFactory(title="Write the notes", description="commit: yes", repository=repository)
    run = run_queue(actor=person, task=task, provider=provider)
    wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=60, what="the run to end", machines=[machine])
    assert run.status == "succeeded", f"{run.error}\n{machine.output()}"
    assert run.exit_code == 0 and run.attempt == 1
    offered = runner.output().split(" with providers ", 1)[1].split(";", 1)[0].split(", ")
    assert "gemini" in offered, offered  # found on PATH under its real name
    assert Task.objects.get(pk=task.pk).status == "review"
    name = f"{provider}-{run.pk}.txt"
    assert git(run.workdir, "log", "--format=%s", "-1").strip() == f"Add {name}"
    assert run.summary["commits_ahead"] == 1 and run.summary["files_changed"] == [name]
    assert run.session.agent.slug == f"{provider}-at-fk-1" and run.session.agent.provider == provider

    events = session_events(sy_server.url, run)
    payloads = [e["payload"] for e in events]
    assert all(p.get("source") == provider for p in payloads if "source" in p)
    tools = [(e["type"], e["payload"].get("tool") or e["payload"].get("tool_name")) for e in events]
    (init,) = [p for p in payloads if p.get("event") == "init"]
    assert init["session_id"] and init["model"] == "gemini-2.5-pro"
    assert ("tool_started", "write_file") in tools, tools
    assert [e["type"] for e in events].count("tool_finished") == 1
    assert {p.get("message") for p in payloads} >= {"Done", " (resumed False)."}
    (result,) = [p for p in payloads if p.get("event") == "result"]
    assert result["stats"]["total_tokens"] == 1500 and result["status"] == "success"
    assert [p["attempt"] for p in ledger(run, "run.started")] == [1]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_killed_run_resumes_with_the_providers_resume_command(
    provider, person, machine, repository, sy_server, tmp_path
):
    go = tmp_path / f"go-{provider}"
    task = TaskFactory(title="Write the notes", description=f"hold: {go}\ncommit: yes", repository=repository)
    run = run_queue(actor=person, task=task, provider=provider)
    first = machine.start()
    before = wait_for(
        lambda: (
            run_in(run, "running") and (s := machine.state(run)).get("shipped", 0) > 0 and s.get("agent_session") and s
        ),
        timeout=60,
        what="the agent's first output",
        machines=[machine],
    )
    argv, cwd = agent_argv(before["pid"])
    workdir = before["workdir"]
    assert argv[:2] == ["gemini", f"--prompt={run.prompt}"] and "-r" not in argv, argv
    first.kill9()
    os.killpg(before["pid"], signal.SIGKILL)

    machine.start()
    after = wait_for(
        lambda: (s := machine.state(run)).get("attempt") == 2 and s.get("pid") not in (None, before["pid"]) and s,
        timeout=60,
        what="the resumed agent",
        machines=[machine],
    )
    argv, cwd = agent_argv(after["pid"])
    prompt = argv[3].removeprefix("--prompt=")
    assert prompt != run.prompt
    assert "You are resuming this work after an interruption" in prompt and f"hold: {go}" in prompt
    assert argv[:4] == ["gemini", "-r", "latest", f"--prompt={prompt}"], argv
    assert argv[4:] == ["--output-format", "stream-json", "--approval-mode", "auto_edit"], argv
    go.touch()
    wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=60, what="the run to end", machines=[machine])
    assert run.status == "succeeded" and run.attempt == 2, f"{run.error}\n{machine.output()}"
    # The same session went on (the fake found the first attempt's), and wrote its second turn.
    name = f"{provider}-{run.pk}.txt"
    assert (Path(workdir) / name).read_text().count("(turn ") == 2
    payloads = [e["payload"] for e in session_events(sy_server.url, run)]
    starts = [p["session_id"] for p in payloads if p.get("event") == "init"]
    assert len(starts) == 2 and len(set(starts)) == 1, starts
    assert any("(resumed True)" in str(p.get("message")) for p in payloads)
    assert [p["attempt"] for p in ledger(run, "run.started")] == [1, 2]
    assert [p["attempt"] for p in ledger(run, "run.resumed")] == [2]
    assert len(ledger(run, "run.finished")) == 1


# A task's text is data: a title that is an option of the CLI (a sandbox bypass, an MCP config that
# would start a program) arrives as the prompt, and the run works as any other.
HOSTILE_TITLES = [
    "--dangerously-bypass-approvals-and-sandbox",
    '--mcp-config={"mcpServers":{"x":{"command":"sh","args":["-c","id > pwned"]}}}',
    "-y",
    "--help",
]


@pytest.mark.parametrize("title", HOSTILE_TITLES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_prompt_that_looks_like_an_option_arrives_as_the_prompt(
    provider, title, person, machine, repository, sy_server, tmp_path
):
    record = tmp_path / f"{provider}-argv.json"
    machine.providers[provider]["env"] = {**machine.providers[provider]["env"], "FAKE_AGENT_RECORD": str(record)}
    machine.write()
    machine.start()
    task = TaskFactory(title=title, description="", repository=repository)
    run = run_queue(actor=person, task=task, provider=provider)

    wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=60, what="the run to end", machines=[machine])

    assert run.status == "succeeded", f"{run.error}\n{machine.output()}"
    assert run.prompt == title
    seen = json.loads(record.read_text())
    assert seen["prompt"] == title, seen
    assert not (Path(run.workdir) / "pwned").exists()
