"""A PreToolUse deferred to a person in a runner's run (issue 26 §2), the client's pure parts: which
calls the hook defers (hook/defer.py: what Claude Code would ask about, read from the run's
--allowedTools and permission mode), the resumed call's decision, and the runner's side
(runner/deferral.py: the environment, the result line, the resume's launch)."""

import json

import pytest

from switchyard_client.hook import defer
from switchyard_client.runner.config import ProviderConfig
from switchyard_client.runner.deferral import allowed_tools, defer_env, deferred_tool_use, parked_log
from switchyard_client.runner.launch import launch_plan
from switchyard_client.runner.providers import CLAUDE_TOOLS
from switchyard_client.runner.state import RunState

WORK = "/work/task-7"


def _call(tool: str, mode: str = "default", **tool_input) -> dict:
    return {"tool_name": tool, "tool_input": tool_input, "permission_mode": mode, "cwd": WORK, "tool_use_id": "t1"}


@pytest.mark.parametrize(
    ("call", "rules", "asks"),
    [
        (_call("Write", file_path=f"{WORK}/a.txt"), ["Bash", "Read"], True),  # outside --allowedTools
        (_call("Write", file_path=f"{WORK}/a.txt"), ["Bash", "Write"], False),
        (_call("Write", "acceptEdits", file_path=f"{WORK}/a.txt"), ["Read"], False),  # accepted in its folder
        (_call("Write", "acceptEdits", file_path="/etc/passwd"), ["Read"], True),  # not outside it
        (_call("Write", "bypassPermissions", file_path="/etc/passwd"), [], False),
        (_call("Write", "dontAsk", file_path=f"{WORK}/a"), [], False),  # refused, never asked
        (_call("Read", file_path=f"{WORK}/a"), [], False),  # a tool that never asks
        (_call("Grep", pattern="x"), [], False),
        (_call("Bash", command="npm test -q"), ["Bash(npm test:*)"], False),
        (_call("Bash", command="npm testify"), ["Bash(npm test:*)"], True),  # a word, not a prefix of letters
        (_call("Bash", command="git status"), ["Bash(git status)"], False),
        (_call("Bash", command="git status; rm -rf /"), ["Bash(git status)"], True),
        (_call("Bash", command="ls"), ["Bash"], False),
        (_call("Write", file_path=f"{WORK}/src/a.py"), ["Write(src/**)"], True),  # not read here: asked
        (_call("mcp__github__create_issue", title="x"), ["mcp__github"], False),
        (_call("mcp__github__create_issue", title="x"), ["mcp__github__*"], False),
        (_call("mcp__github__create_issue", title="x"), ["mcp__gitlab"], True),
        (_call("WebFetch", url="https://example.com"), ["Read"], True),
    ],
)
def test_the_hook_defers_what_claude_code_would_ask_a_person_about(call, rules, asks):
    assert defer.would_ask(call, rules) is asks


def test_allowed_tools_are_read_as_claude_code_reads_them():
    assert defer.allowed_rules("Bash(npm test:*),Read Edit,  Write") == ["Bash(npm test:*)", "Read", "Edit", "Write"]
    assert defer.allowed_rules("") == []


def test_the_runner_passes_the_argvs_allowed_tools():
    assert allowed_tools(["claude", "-p", "--allowedTools", CLAUDE_TOOLS, "--verbose"]) == CLAUDE_TOOLS
    assert allowed_tools(["claude", "--allowedTools", "Bash(git:*)", "Read", "--verbose"]) == "Bash(git:*),Read"
    assert allowed_tools(["claude", "--allowed-tools=Read"]) == "Read"
    assert allowed_tools(["claude", "-p"]) == ""


def test_defer_is_on_for_a_provider_with_switchyards_hooks_only():
    claude = ProviderConfig(name="claude", command=["claude"], hooks=True)
    shell = ProviderConfig(name="shell", command=["sh"])
    argv = ["claude", "--allowedTools", "Read"]

    assert defer_env(argv, provider=claude, assignment={}) == {
        "SWITCHYARD_DEFER": "1",
        "SWITCHYARD_ALLOWED_TOOLS": "Read",
    }
    assert defer_env(argv, provider=shell, assignment={}) == {}
    answered = {"deferred": {"tool_use_id": "t1", "kind": "policy", "decision": "deny", "message": "No", "x": 1}}
    env = defer_env(argv, provider=claude, assignment=answered)
    assert json.loads(env["SWITCHYARD_DEFERRED"]) == {
        "tool_use_id": "t1",
        "kind": "policy",
        "decision": "deny",
        "message": "No",
        "answered_by": "",
    }


def test_the_resumed_call_gets_the_persons_decision_and_no_other_call_does(monkeypatch):
    answer = {"tool_use_id": "t1", "kind": "permission", "decision": "allow", "message": "ok", "answered_by": "olivia"}
    monkeypatch.setenv("SWITCHYARD_DEFERRED", json.dumps(answer))

    assert defer.decided(_call("Write")) == answer
    assert defer.decided({**_call("Write"), "tool_use_id": "t2"}) is None
    assert defer.decided_output(answer) == ("allow", "Allowed by olivia in Switchyard: ok")
    assert defer.decided_output({**answer, "decision": "deny", "message": ""}) == (
        "deny",
        "Denied by olivia in Switchyard.",
    )
    # A budget raised: no decision of the hook's, the call goes through every check again.
    assert defer.decided_output({**answer, "kind": "budget"}) is None
    assert defer.decided_output({**answer, "kind": "budget", "decision": "deny"})[0] == "deny"
    monkeypatch.setenv("SWITCHYARD_DEFERRED", "{not json")
    assert defer.decided(_call("Write")) is None


def test_the_result_line_names_the_deferred_call(tmp_path):
    log = tmp_path / "job.log"
    deferred = {"type": "result", "subtype": "success", "stop_reason": "tool_deferred", "result": ""}
    deferred["deferred_tool_use"] = {"id": "toolu_9", "name": "Write", "input": {"file_path": "a"}}
    log.write_text('{"type":"system","subtype":"init"}\nnot json\n' + json.dumps(deferred) + "\n")

    assert deferred_tool_use(str(log)) == {"tool_use_id": "toolu_9", "tool_name": "Write"}

    log.write_text(json.dumps({"type": "result", "subtype": "success", "result": "Done."}) + "\n")
    assert deferred_tool_use(str(log)) is None
    assert deferred_tool_use(str(tmp_path / "missing.log")) is None


def test_an_answered_waiting_run_resumes_the_session_that_deferred_the_call():
    provider = ProviderConfig(
        name="claude",
        command=["claude", "-p", "--session-id", "{session_uuid}"],
        resume_command=["claude", "-p", "--resume", "{session_uuid}"],
        prompt_stdin=True,
        hooks=True,
    )
    parked = {"tool_use_id": "t1", "decision": "allow", "agent_session": "cc-uuid-1", "workdir": WORK}
    state = RunState(id=3, attempt=2, provider="claude", session="s-3", assignment={"prompt": "P", "deferred": parked})

    plan = launch_plan(state, provider, runner_name="r", restart=False, packet=None)

    assert (plan.resume, plan.agent_session) == (True, "cc-uuid-1")


def test_an_answered_run_goes_on_in_the_job_log_it_waited_with(tmp_path):
    jobs = tmp_path / "running-jobs"
    jobs.mkdir()
    (jobs / "job-1-3.log").write_bytes(b'{"type":"system"}\n{"type":"result"}\n')
    parked = {"decision": "allow", "log_path": "running-jobs/job-1-3.log"}
    state = RunState(id=3, attempt=2, provider="claude", assignment={"deferred": parked})

    parked_log(state, root=tmp_path, exit_folder=tmp_path / "runs")

    # Everything in it was shipped and parsed before the run waited: the resumed agent's output follows.
    assert state.log_path == str(jobs / "job-1-3.log") and state.exit_path == str(tmp_path / "runs" / "3.exit")
    assert (state.shipped, state.parsed, state.parsed_lines) == (36, 36, 2)


@pytest.mark.parametrize("log_path", ["", "running-jobs/missing.log", "../outside.log"])
def test_without_its_old_log_here_a_resumed_run_starts_a_log_of_its_own(tmp_path, log_path):
    (tmp_path / "outside.log").write_text("x\n")
    root = tmp_path / "root"
    root.mkdir()
    state = RunState(id=3, attempt=2, provider="claude", assignment={"deferred": {"log_path": log_path}})

    parked_log(state, root=root, exit_folder=root / "runs")

    assert (state.log_path, state.shipped) == ("", 0)
