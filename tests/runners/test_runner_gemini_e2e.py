"""The runner's built-in `gemini` provider with the real Gemini CLI (0.61.0), end to end.

A live server, a real `switchyard runner` process offering the built-in provider (the pinned CLI on
its PATH as `gemini`), a real git repository registered as a Repository, and the scripted Gemini API
stand-in (fake_gemini_api.py) as the model, reached through GOOGLE_GEMINI_BASE_URL. What the CLI does,
it does for real, inside the runner's bubblewrap sandbox where bwrap works (as every run is by
default): its shell and write_file tools change the run's worktree, its stream-json output is shipped
and parsed by the runner into the session's events and the ledger's tool calls, and its own
OpenTelemetry export reaches the server's usage through the runner's relay.

Its home (``~/.gemini/settings.json``, gemini_cli.home_settings) turns off what the CLI would reach
for besides the model: usage statistics, update checks, IDE discovery; the API key is its sign-in.
"""

import os
import re
import shutil
import signal
from pathlib import Path

import pytest

from board.models import Task
from ledger.models import ToolInvocation
from runners.models import Run
from runners.services import run_cancel
from sessions_app.models import AgentSession
from switchyard_client.runner.process import group_alive
from switchyard_client.runner.providers import session_uuid
from tests.client.live import server_roots, sy_server  # noqa: F401
from tests.runners.fake_gemini_api import FakeGeminiAPI, function_call, function_responses, text
from tests.runners.gemini_cli import MODEL, gemini_env, home_settings, require_gemini
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
SANDBOXED = shutil.which("bwrap") is not None  # the runner's default: sandboxed where bwrap works


@pytest.fixture
def machine(tmp_path, sy_server):  # noqa: F811 - the live fixture
    """A runner offering the built-in gemini provider; ``machine.point_at(fake)`` before starting it."""
    home = tmp_path / "gemini-home"

    def env_for(fake: FakeGeminiAPI, **settings: dict) -> dict[str, str]:
        home_settings(home, **settings)
        return gemini_env(home=home, api_url=fake.url, **GIT_ENV)

    cli = require_gemini()
    with cli_machine(
        tmp_path, sy_server.url, "gm-1", provider="gemini", cli=cli, capacity=3, home=home, env_for=env_for
    ) as made:
        yield made


def queue_gemini(person, repository, title: str, description: str = "Keep it short.") -> Run:  # noqa: F811
    return queue_run(person, repository, "gemini", title, description)


def calls_of(run: Run) -> list[tuple[str, str, str]]:
    rows = ToolInvocation.objects.filter(session_id=run.session_id).order_by("started_at", "id")
    return [(c.client_id, c.tool_name, c.status) for c in rows]


def user_texts(fake: FakeGeminiAPI) -> list[str]:
    """The text parts of the user's turns in the main conversation's requests so far."""
    return [
        part["text"]
        for seen in fake.main_requests()
        for content in seen.body.get("contents", [])
        if content.get("role") == "user"
        for part in content.get("parts", [])
        if isinstance(part.get("text"), str)
    ]


def test_gemini_works_a_task_in_its_worktree_and_lands_it_in_review(person, machine, repository, sy_server):  # noqa: F811
    run = queue_gemini(person, repository, "Write the notes")
    tree = worktree_of(repository, run)
    script = [
        function_call(
            "run_shell_command",
            {"command": "echo 'made by gemini' > notes.txt && git add notes.txt && git commit -qm 'Add notes'"},
        ),
        function_call("write_file", {"file_path": str(tree / "draft.md"), "content": "# Draft\n"}),
        text("Done: notes committed, draft written."),
    ]
    with FakeGeminiAPI(script) as fake:
        machine.point_at(fake)
        machine.start()
        wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=240, what="the run to end", machines=[machine])
        traffic = fake.describe()
        main = fake.main_requests()
        asked = [s for s in fake.requests if s.method == "POST" and "countTokens" not in s.path]

    assert run.status == "succeeded", f"{run.error}\n{machine.output()}\n{traffic}"
    assert run.attempt == 1 and run.exit_code == 0
    assert run.sandboxed is SANDBOXED
    assert Path(run.workdir) == tree
    assert Task.objects.get(pk=run.task_id).status == "review"
    # The model was asked three times in the main conversation: each tool's result came back.
    assert len(main) == 3, traffic
    assert all(f"/models/{MODEL}:streamGenerateContent" in seen.path for seen in main), traffic

    # The tools ran for real in the worktree: a commit by the scripted `git commit`, and a new file.
    assert (tree / "notes.txt").read_text() == "made by gemini\n"
    assert git(tree, "log", "--format=%s", "-1").strip() == "Add notes"
    assert (tree / "draft.md").read_text() == "# Draft\n"
    assert "draft.md" in git(tree, "status", "--porcelain")  # left uncommitted
    assert run.summary["commits_ahead"] == 1
    assert set(run.summary["files_changed"]) == {"notes.txt", "draft.md"}

    # The session is the run's, and the CLI's session is the run's uuid (--session-id).
    session = AgentSession.objects.get(pk=run.session_id)
    assert session.agent.slug == "gemini-at-gm-1" and session.status == "completed"
    uuid = session_uuid(run.session_id)
    with owner_client(sy_server.url, run) as sy:
        events = sy.events_list(run.session_id, limit=500)["results"]
    payloads = [e["payload"] for e in events]
    (init,) = [p for p in payloads if p.get("event") == "init"]
    assert init == {"source": "gemini", "event": "init", "session_id": uuid, "model": MODEL}
    assert run.agent_session == uuid

    # stream-json became events: each tool's start and end, the words, and the result with its tokens.
    tools = [(e["type"], e["payload"].get("tool")) for e in events if e["type"].startswith("tool_")]
    assert tools == [
        ("tool_started", "run_shell_command"),
        ("tool_finished", None),
        ("tool_started", "write_file"),
        ("tool_finished", None),
    ], tools
    finished = [p for p in payloads if "is_error" in p]
    assert [p["is_error"] for p in finished] == [False, False]
    words = [e["payload"] for e in events if e["type"] == "log" and "event" not in e["payload"]]
    assert "".join(p["message"] for p in words) == "Done: notes committed, draft written.", payloads
    (result,) = [p for p in payloads if p.get("event") == "result"]
    assert result["status"] == "success" and result["stats"]["tool_calls"] == 2
    assert result["stats"]["input_tokens"] == 120 * len(asked) and result["stats"]["output_tokens"] == 30 * len(asked)

    # The tool calls are in the ledger, once each, under the CLI's own ids, finished.
    calls = calls_of(run)
    assert [(name, status) for _, name, status in calls] == [
        ("run_shell_command", "success"),
        ("write_file", "success"),
    ], calls
    assert calls[0][0].endswith("fake_00") and calls[1][0].endswith("fake_01"), calls

    # Tokens as Claude Code's arrive (SPEC §9): the CLI's own OpenTelemetry export, through the
    # runner's relay, one usage row per model call of its llm_call spans (Gemini prints no cost).
    rows = UsageRecord.objects.filter(session_id=run.session_id, input_tokens__gt=0)
    assert rows.count() == len(asked), list(rows.values("model", "input_tokens", "operation"))
    assert {r.model for r in rows} == {MODEL} and {r.input_tokens for r in rows} == {120}
    assert sum(r.output_tokens for r in rows) == 30 * len(asked)

    # The ledger: each step once.
    assert [p["attempt"] for p in ledger(run, "run.started")] == [1]
    assert len(ledger(run, "run.finished")) == 1 and not ledger(run, "run.resumed")
    if SANDBOXED:
        # Its home was the sandbox's private one (kept per task): the session is there, not in the home.
        kept = machine.root / "homes" / f"gemini-task-{run.task_id}" / ".gemini"
        assert list(kept.glob(f"tmp/*/chats/session-*-{uuid[:8]}.jsonl")), sorted(kept.rglob("*"))
        assert not (machine.home / ".gemini" / "tmp").exists()


def test_a_killed_runner_and_gemini_resume_the_conversation_as_attempt_two(person, machine, repository, sy_server):  # noqa: F811
    run = queue_gemini(person, repository, "Write one.txt and commit it")
    first = FakeGeminiAPI(
        [function_call("run_shell_command", {"command": "echo one > one.txt"}), text("One.")],
        hold_at=1,  # the answer after the tool's result: the CLI waits on it, mid-run
    ).start()
    machine.point_at(first)
    runner = machine.start()
    try:
        assert first.held.wait(180), f"the Gemini CLI never came back with the tool's result\n{machine.output()}"
        tree = worktree_of(repository, run)
        assert (tree / "one.txt").read_text() == "one\n"
        before = machine.state(run)
        assert before["attempt"] == 1 and before["pid"], before
        uuid = session_uuid(before["session"])
        argv = agent_argv(before["pid"])
        assert Path(argv[0]).name == "gemini" and argv[1:3] == ["--session-id", uuid], argv
        # The machine goes down: the runner, then the CLI and everything in its process group.
        runner.kill9()
        os.killpg(before["pid"], signal.SIGKILL)
    finally:
        first.stop()
    run.refresh_from_db()
    assert run.status == "running" and run.attempt == 1

    second = FakeGeminiAPI(
        [
            function_call("run_shell_command", {"command": "git add one.txt && git commit -qm 'one'"}),
            text("Committed."),
        ],
        tag="resumed",
        hold_at=0,  # hold the first answer, to look at the resumed process
    ).start()
    try:
        machine.point_at(second)
        machine.start()
        assert second.held.wait(180), f"the resumed Gemini CLI never asked the model\n{machine.output()}"
        after = wait_for(
            lambda: (s := machine.state(run)).get("attempt") == 2 and s.get("pid") != before["pid"] and s,
            what="the new attempt's state",
            machines=[machine],
        )
        argv = agent_argv(after["pid"])
        assert Path(argv[0]).name == "gemini" and argv[1:3] == ["--resume", uuid], argv
        assert "--session-id" not in argv, argv
        prompt = next(part for part in argv if part.startswith("--prompt=")).removeprefix("--prompt=")
        assert "You are resuming this work after an interruption" in prompt, prompt
        second.go.set()
        wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=240, what="the run to end", machines=[machine])
        main = second.main_requests()
    finally:
        second.stop()

    assert run.status == "succeeded", f"{run.error}\n{machine.output()}"
    assert run.attempt == 2 and run.exit_code == 0
    assert git(tree, "log", "--format=%s", "-1").strip() == "one"
    assert run.summary["commits_ahead"] == 1 and run.summary["files_changed"] == ["one.txt"]
    # The conversation was resumed: the new requests carry the first attempt's call and its result.
    assert function_responses(main[-1].body, "fake_") >= 1 and function_responses(main[-1].body, "resumed_") == 1
    assert any("Write one.txt and commit it" in t for t in user_texts(second))

    # Every step once: the tool calls (one per call, across both attempts) ...
    calls = calls_of(run)
    assert [(name, status) for _, name, status in calls] == [
        ("run_shell_command", "success"),
        ("run_shell_command", "success"),
    ], calls
    assert calls[0][0].endswith("fake_00") and calls[1][0].endswith("resumed_00"), calls
    # ... the ledger: started once per attempt, resumed once, finished once, never lost ...
    assert [p["attempt"] for p in ledger(run, "run.started")] == [1, 2]
    assert [p["attempt"] for p in ledger(run, "run.resumed")] == [2]
    assert len(ledger(run, "run.finished")) == 1 and not ledger(run, "run.lost")
    # ... and the session's events: one init per attempt, both the same CLI session, one result.
    with owner_client(sy_server.url, run) as sy:
        events = sy.events_list(run.session_id, limit=500)["results"]
        log = sy.session_log(run.session_id, limit=1_000_000)["data"]
    payloads = [e["payload"] for e in events]
    inits = [p for p in payloads if p.get("event") == "init"]
    assert len(inits) == 2 and {p.get("session_id") for p in inits} == {uuid}, inits
    assert len([p for p in payloads if p.get("event") == "result"]) == 1
    assert log == (machine.root / run.log_path).read_text()  # shipped once, byte for byte


def test_cancel_stops_the_gemini_cli_mid_run(person, machine, repository):  # noqa: F811 - the fixtures
    run = queue_gemini(person, repository, "Write one.txt")
    fake = FakeGeminiAPI(
        [function_call("run_shell_command", {"command": "echo one > one.txt"}), text("One.")], hold_at=1
    ).start()
    try:
        machine.point_at(fake)
        machine.start()
        assert fake.held.wait(180), f"the Gemini CLI never came back with the tool's result\n{machine.output()}"
        pid = machine.state(run)["pid"]
        run_cancel(actor=person, run=Run.objects.get(pk=run.pk))
        wait_for(lambda: run_in(run, "cancelled"), timeout=60, what="the cancel", machines=[machine])
    finally:
        fake.stop()
    assert run.status == "cancelled" and run.attempt == 1
    # The CLI's whole process group is gone (dead: its last zombies are init's to reap, in its own time).
    wait_for(lambda: group_gone(pid), timeout=30, what=f"process group {pid} to end", machines=[machine])
    assert (worktree_of(repository, run) / "one.txt").read_text() == "one\n"  # its work stays
    assert [status for _, _, status in calls_of(run)] == ["success"]
    assert len(ledger(run, "run.cancel_requested")) == 1 and len(ledger(run, "run.cancelled")) == 1
    assert not ledger(run, "run.finished")


def group_gone(pgid: int) -> bool:
    """No live member of the group is left. Its zombies do not count: an orphan's waits for this
    container's init, which reaped them too late for the test once (CI)."""
    return not group_alive(pgid)


def answer_as_asked(body: dict):
    """The API error a task asks for in its description ("answer with HTTP 401"), else None."""
    found = re.search(r"answer with HTTP (\d{3})", str(body.get("contents")))
    return (int(found.group(1)), f"the stand-in refuses with {found.group(1)}") if found else None


def test_an_api_error_ends_the_run_failed_with_the_clis_message(person, machine, repository):  # noqa: F811 - the fixtures
    # One runner, three runs at once, each answered with its error. The CLI retries a 500 (not a 400
    # or 401) up to general.maxAttempts times (10, over minutes): one attempt here.
    runs = {
        status: queue_gemini(person, repository, f"Run {status}", f"answer with HTTP {status}")
        for status in (500, 401, 400)
    }
    with FakeGeminiAPI([text("never")], fail=answer_as_asked) as fake:
        machine.point_at(fake, general={"maxAttempts": 1})
        machine.start()
        for run in runs.values():
            wait_for(
                lambda run=run: run_in(run, "succeeded", "failed"),
                timeout=240,
                what="the run to end",
                machines=[machine],
            )
        traffic = fake.describe()

    for status, run in runs.items():
        assert run.status == "failed", f"{status}: {run.status}\n{machine.output()}\n{traffic}"
        headline = run.error.splitlines()[0]
        # The CLI's own words first ("[API Error: ...]"), after the exit code the CLI chose (the status's low byte).
        assert headline.startswith(f"exit code {status % 256}: [API Error: "), run.error
        assert f"the stand-in refuses with {status}" in headline, run.error
        assert Task.objects.get(pk=run.task_id).status != "review"


def test_a_task_titled_as_an_option_reaches_gemini_as_the_prompt(person, machine, repository):  # noqa: F811 - the fixtures
    """A title that is one of the CLI's options (its help, or turning approvals off) is the prompt."""
    runs = [queue_gemini(person, repository, title, "") for title in ("--help", "--yolo")]
    with FakeGeminiAPI([function_call("run_shell_command", {"command": "true"}), text("Nothing to do.")]) as fake:
        machine.point_at(fake)
        machine.start()
        for run in runs:
            wait_for(
                lambda run=run: run_in(run, "succeeded", "failed"),
                timeout=240,
                what="the run to end",
                machines=[machine],
            )
        said = user_texts(fake)

    for run in runs:
        assert run.status == "succeeded", f"{run.error}\n{machine.output()}"
        assert run.prompt in said, said
