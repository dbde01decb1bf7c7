"""The runner's built-in `codex` provider with the real Codex CLI, end to end.

A live server, a real `switchyard runner` process offering the built-in provider (the pinned CLI on
its PATH as `codex`), a real git repository registered as a Repository, and the scripted Responses
API stand-in (fake_openai_responses.py) as the model, named in the home's ``.codex/config.toml`` as
a custom model provider (the runner copies that file into the run's private home). What Codex does,
it does for real: its shell tool runs the scripted command in the run's worktree, inside the runner's
sandbox; its `--json` output is shipped and parsed by the runner into the session's events, its tool
calls into the ledger and its tokens into usage rows.

Also: a runner and Codex killed with SIGKILL while the model holds its answer, then `codex exec
resume <thread id>` as attempt 2; a cancel while Codex waits on the model; a provider that answers
500 or 401, which ends the run failed with the CLI's message; a task titled as an option.
"""

import json
import os
import signal
from pathlib import Path

import pytest

from board.models import Task
from composition.run_watch import codex_jsonl
from ledger.models import ToolInvocation
from runners.models import Run
from runners.services import run_cancel
from switchyard_client.runner.sandbox import bwrap_problem
from tests.client.live import server_roots, sy_server  # noqa: F401
from tests.runners.codex_cli import CODEX_VERSION, codex_env, codex_version, require_codex
from tests.runners.fake_openai_responses import (
    CACHED_TOKENS,
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    FakeResponses,
    codex_config,
    input_texts,
    shell,
    text,
)
from tests.runners.live_runner import GIT_ENV, run_in, wait_for
from tests.runners.provider_e2e import (  # noqa: F401 - the fixtures person and repository
    agent_argv,
    cli_machine,
    ledger,
    owner_client,
    person,
    queue_run,
    repository,
    worktree_of,
)
from tests.workspaces.conftest import git
from usage.models import UsageRecord

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture
def machine(tmp_path, sy_server):  # noqa: F811 - the live fixture
    """A runner offering the built-in codex provider; ``machine.point_at(fake)`` before starting it."""
    home = tmp_path / "codex-home"

    def env_for(fake: FakeResponses, *, key: str = "test-key") -> dict[str, str]:
        codex_config(home, fake.url)
        return codex_env(home=home, key=key, **GIT_ENV)

    cli = require_codex()
    with cli_machine(
        tmp_path, sy_server.url, "cx-1", provider="codex", cli=cli, capacity=2, home=home, env_for=env_for
    ) as made:
        yield made


def queue_codex(person, repository, title: str, description: str = "Keep it short.") -> Run:  # noqa: F811
    return queue_run(person, repository, "codex", title, description)


def fenced(fence: str) -> list[int]:
    """The live processes marked with an attempt's SWITCHYARD_FENCE (the runner's watchdog finds them so)."""
    mark = f"SWITCHYARD_FENCE={fence}".encode()
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and mark in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                found.append(int(entry))
        except OSError:
            continue
    return found


def sandboxed_here() -> bool:
    return bwrap_problem() is None


def test_the_pinned_cli_is_the_version_the_provider_was_written_against(tmp_path):
    binary = require_codex()
    assert codex_version(binary, tmp_path / "home") == CODEX_VERSION


def test_codex_runs_a_shell_call_in_its_worktree_commits_and_lands_it_in_review(
    person,  # noqa: F811 - the fixtures
    machine,
    repository,  # noqa: F811
    sy_server,  # noqa: F811
):
    run = queue_codex(person, repository, "Write the notes")
    tree = worktree_of(repository, run)
    script = [
        shell("echo 'made by codex' > notes.txt && git add notes.txt && git commit -qm 'Add notes' && echo committed"),
        text("Done: notes committed."),
    ]
    with FakeResponses(script) as fake:
        machine.point_at(fake)
        machine.start()
        wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=240, what="the run to end", machines=[machine])
        traffic = fake.describe()
        asked = fake.model_requests()

    assert run.status == "succeeded", f"{run.error}\n{machine.output()}\n{traffic}"
    assert run.attempt == 1 and run.exit_code == 0
    assert run.sandboxed is sandboxed_here()
    assert Path(run.workdir) == tree
    assert Task.objects.get(pk=run.task_id).status == "review"
    # The model was asked twice: the shell call, then with its output, for the final message.
    assert len(asked) == 2, traffic
    assert "Write the notes" in "\n".join(input_texts(asked[0].body)), asked[0].body
    (output,) = [i for i in asked[1].body["input"] if i.get("type") == "function_call_output"]
    assert output["call_id"] == "call_fake_00" and "committed" in json.dumps(output), output

    # The command ran for real in the worktree, and committed.
    assert (tree / "notes.txt").read_text() == "made by codex\n"
    assert git(tree, "log", "--format=%s", "-1").strip() == "Add notes"
    assert run.summary["commits_ahead"] == 1 and run.summary["files_changed"] == ["notes.txt"]

    # The run's agent_session is Codex's thread, named by its thread.started.
    with owner_client(sy_server.url, run) as sy:
        events = sy.events_list(run.session_id, limit=500)["results"]
        log = sy.session_log(run.session_id, limit=1_000_000)["data"]
    payloads = [e["payload"] for e in events]
    (started,) = [p for p in payloads if p.get("event") == "thread.started"]
    assert started["thread_id"] and run.agent_session == started["thread_id"]
    assert all(p.get("source") == "codex" for p in payloads if "source" in p)
    if run.sandboxed:
        # Codex kept its thread in the run's private home (the copy of the config's home the sandbox
        # shows), not in the home the config named: that one it never saw.
        private = machine.root / "homes" / f"codex-task-{run.task_id}" / ".codex"
        assert list((private / "sessions").rglob(f"rollout-*-{started['thread_id']}.jsonl"))
        assert (private / "config.toml").read_text() == (machine.home / ".codex" / "config.toml").read_text()
        assert not (machine.home / ".codex" / "sessions").exists()

    # The shell call became a started and a finished tool event, with its command, output and exit code.
    tools = [e for e in events if e["type"] in ("tool_started", "tool_finished")]
    assert [(e["type"], e["payload"]["tool"]) for e in tools] == [
        ("tool_started", "command_execution"),
        ("tool_finished", "command_execution"),
    ], tools
    finished = tools[1]["payload"]
    assert "git commit -qm" in finished["input"] and "committed" in finished["output"]
    assert finished["exit_code"] == 0 and finished["is_error"] is False
    assert any(p.get("message") == "Done: notes committed." for p in payloads)
    (turn,) = [p for p in payloads if p.get("event") == "turn.completed"]
    usage = turn["usage"]
    assert usage["output_tokens"] == 2 * OUTPUT_TOKENS and usage["cached_input_tokens"] == 2 * CACHED_TOKENS

    # The ledger: the call, once, finished; the turn's tokens as a usage row, cached ones apart.
    calls = ToolInvocation.objects.filter(session_id=run.session_id)
    assert [(c.tool_name, c.status) for c in calls] == [("command_execution", "success")]
    rows = UsageRecord.objects.filter(session_id=run.session_id, tool_name="")
    assert [(r.input_tokens, r.cache_read_tokens, r.output_tokens) for r in rows] == [
        (usage["input_tokens"] - usage["cached_input_tokens"], usage["cached_input_tokens"], usage["output_tokens"])
    ]
    assert usage["input_tokens"] == 2 * INPUT_TOKENS
    assert [p["attempt"] for p in ledger(run, "run.started")] == [1]
    assert len(ledger(run, "run.finished")) == 1 and not ledger(run, "run.resumed")
    assert log == (machine.root / run.log_path).read_text()  # shipped once, byte for byte

    # The card's conversation (composition/run_watch) reads the same log: the warning, the command with
    # its output, and the final words.
    notice, call, words = codex_jsonl.parse(log.encode()).items
    assert notice.kind == "notice" and "Model metadata" in notice.text
    assert "git commit -qm" in call.headline and (call.status, call.output) == ("done", "committed\n")
    assert words.markdown == "Done: notes committed."


def test_a_killed_runner_and_codex_resume_the_thread_as_attempt_two(person, machine, repository, sy_server):  # noqa: F811
    run = queue_codex(person, repository, "Write one.txt and commit it")
    first = FakeResponses(
        [shell("echo one > one.txt"), text("One.")],
        hold_at=1,  # the answer after the call's output: Codex waits on it, mid-turn
    ).start()
    machine.point_at(first)
    runner = machine.start()
    try:
        assert first.held.wait(180), f"Codex never came back with the call's output\n{machine.output()}"
        tree = worktree_of(repository, run)
        assert (tree / "one.txt").read_text() == "one\n"
        before = wait_for(
            lambda: (s := machine.state(run)).get("agent_session") and s,
            what="the thread id in the runner's state",
            machines=[machine],
        )
        assert before["attempt"] == 1 and before["pid"], before
        thread = before["agent_session"]
        argv = agent_argv(before["pid"])
        assert argv[:2] == ["codex", "exec"] and "resume" not in argv, argv
        assert argv[argv.index("--cd") + 1] == before["workdir"] and argv[-2:] == ["--", run.prompt], argv
        # The machine goes down: the runner, then Codex and everything in its process group.
        runner.kill9()
        os.killpg(before["pid"], signal.SIGKILL)
    finally:
        first.stop()
    run.refresh_from_db()
    assert run.status == "running" and run.attempt == 1

    second = FakeResponses(
        [shell("git add one.txt && git commit -qm one"), text("Committed.")],
        tag="resumed",
        hold_at=0,  # hold the first answer, to look at the resumed process
    ).start()
    try:
        machine.point_at(second)
        machine.start()
        assert second.held.wait(180), f"the resumed Codex never asked the model\n{machine.output()}"
        after = wait_for(
            lambda: (s := machine.state(run)).get("attempt") == 2 and s.get("pid") not in (None, before["pid"]) and s,
            what="the new attempt's state",
            machines=[machine],
        )
        argv, cwd = agent_argv(after["pid"]), os.readlink(f"/proc/{after['pid']}/cwd")
        # `codex exec resume ... -- <thread id> <prompt>`, in the worktree (resume takes no --cd).
        assert argv[:3] == ["codex", "exec", "resume"] and "--cd" not in argv, argv
        assert argv[-3:-1] == ["--", thread] and "resuming this work" in argv[-1], argv
        assert os.path.realpath(cwd) == os.path.realpath(before["workdir"])
        second.go.set()
        wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=240, what="the run to end", machines=[machine])
        asked = second.model_requests()
    finally:
        second.stop()

    assert run.status == "succeeded", f"{run.error}\n{machine.output()}\n{second.describe()}"
    assert run.attempt == 2 and run.exit_code == 0
    assert git(tree, "log", "--format=%s", "-1").strip() == "one"
    assert run.summary["commits_ahead"] == 1 and run.summary["files_changed"] == ["one.txt"]
    # The thread was resumed: the new requests carry the first attempt's call and its output.
    carried = {i.get("call_id") for i in asked[-1].body["input"] if i.get("type") == "function_call_output"}
    assert {"call_fake_00", "call_resumed_00"} <= carried, carried
    assert any("You are resuming this work after an interruption" in t for t in input_texts(asked[0].body))

    # Every step once: a tool call per attempt, started once per attempt, resumed once, finished once.
    calls = ToolInvocation.objects.filter(session_id=run.session_id).order_by("id")
    assert [(c.tool_name, c.status) for c in calls] == [("command_execution", "success")] * 2
    assert [p["attempt"] for p in ledger(run, "run.started")] == [1, 2]
    assert [p["attempt"] for p in ledger(run, "run.resumed")] == [2]
    assert len(ledger(run, "run.finished")) == 1 and not ledger(run, "run.lost")
    with owner_client(sy_server.url, run) as sy:
        payloads = [e["payload"] for e in sy.events_list(run.session_id, limit=500)["results"]]
    starts = [p["thread_id"] for p in payloads if p.get("event") == "thread.started"]
    assert starts == [thread, thread], starts
    assert run.agent_session == thread


def test_cancel_while_codex_waits_on_the_model_stops_it(person, machine, repository, sy_server):  # noqa: F811
    run = queue_codex(person, repository, "Think for a long time")
    with FakeResponses([text("Never said.")], hold_at=0) as fake:
        machine.point_at(fake)
        machine.start()
        assert fake.held.wait(180), f"Codex never asked the model\n{machine.output()}"
        state = wait_for(lambda: (s := machine.state(run)).get("pid") and s, what="the agent", machines=[machine])
        assert fenced(state["fence"]), "no process of the attempt found by its fence"
        run_cancel(actor=person, run=run)
        wait_for(
            lambda: run_in(run, "cancelled", "failed", "succeeded"), timeout=60, what="the cancel", machines=[machine]
        )
    assert run.status == "cancelled", f"{run.error}\n{machine.output()}"
    # Codex and everything it started are gone (a zombie awaiting its reaping has no environment).
    wait_for(lambda: not fenced(state["fence"]), timeout=15, what="the attempt's processes to go", machines=[machine])
    assert len(ledger(run, "run.cancelled")) == 1 and not ledger(run, "run.finished")


# What the stand-in answers, and what Codex 0.171.0 says of it: a 5xx in words of its own (whatever
# the body), a 401 with the status and the API's message.
API_ERRORS = [
    (500, "The server had an error while processing your request.", "experiencing high demand"),
    (401, "Incorrect API key provided.", "unexpected status 401 Unauthorized: Incorrect API key provided."),
]


@pytest.mark.parametrize(("status", "answer", "cli_says"), API_ERRORS, ids=["500", "401"])
def test_an_api_error_ends_the_run_failed_with_the_clis_message(
    status,
    answer,
    cli_says,
    person,  # noqa: F811 - the fixtures
    machine,
    repository,  # noqa: F811
    sy_server,  # noqa: F811
):
    run = queue_codex(person, repository, "Write the notes")
    with FakeResponses([text("Never said.")], fail=(status, answer)) as fake:
        machine.point_at(fake)
        machine.start()
        wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=240, what="the run to end", machines=[machine])
        asked = fake.model_requests()
    assert run.status == "failed", f"{run.error}\n{machine.output()}"
    assert run.exit_code == 1 and len(asked) == 1  # no retries: the config says so (codex_config)
    # The CLI's own words lead the run's error (and so its card), not just an exit code.
    first = run.error.splitlines()[0]
    assert first.startswith("exit code 1: ") and cli_says in first, run.error
    assert Task.objects.get(pk=run.task_id).status != "review"
    with owner_client(sy_server.url, run) as sy:
        payloads = [e["payload"] for e in sy.events_list(run.session_id, limit=500)["results"]]
    failed = [p for p in payloads if p.get("event") == "turn.failed"]
    assert len(failed) == 1 and cli_says in failed[0]["message"], payloads


def test_a_task_titled_as_an_option_reaches_codex_as_the_prompt(person, machine, repository, sy_server):  # noqa: F811
    title = "--help"  # read as an option, Codex would print its help and never ask the model
    run = queue_codex(person, repository, title, description="")
    with FakeResponses([text("Nothing to do.")]) as fake:
        machine.point_at(fake)
        machine.start()
        wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=240, what="the run to end", machines=[machine])
        asked = fake.model_requests()
    assert run.status == "succeeded", f"{run.error}\n{machine.output()}"
    assert run.prompt == title and asked and title in input_texts(asked[0].body), asked
