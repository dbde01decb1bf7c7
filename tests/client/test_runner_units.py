"""The runner's own parts, without a server: config, argv templates, log shipping by offset, the
state files, the process wrapper, stream-json → events, the git summary."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from switchyard_client.api.errors import SwitchyardError
from switchyard_client.runner import logship
from switchyard_client.runner.config import RunnerConfigError, load_config, parse_config
from switchyard_client.runner.git import changes_since, head
from switchyard_client.runner.logship import LeaseLost, last_lines, parse_lines, ship_log
from switchyard_client.runner.process import describe_exit, group_alive, read_exit_file, spawn, stop_group
from switchyard_client.runner.providers import (
    claude_hook_settings,
    providers_for,
    render,
    resume_prompt,
    session_uuid,
    template_values,
)
from switchyard_client.runner.state import RunState, StateStore, pid_start_time, same_process

ENV = {"SWITCHYARD_RUNNER_KEY": "sy_runner"}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "switchyard-runner.toml"
    path.write_text(text)
    return path


# --- config -------------------------------------------------------------------------------------------
def test_config_reads_the_file_and_the_key_from_the_environment(tmp_path):
    path = write(
        tmp_path,
        """
[runner]
url = "http://127.0.0.1:8000"
name = "build-1"
labels = ["linux", "gpu"]
capacity = 3
root = "state"

[providers.mine]
command = ["my-agent", "--", "{prompt}"]
output = "jsonl"
timeout_seconds = 60
env = { A = "1" }
""",
    )
    config = load_config(path, env=ENV)
    assert (config.url, config.key, config.name, config.capacity) == (
        "http://127.0.0.1:8000",
        "sy_runner",
        "build-1",
        3,
    )
    assert config.labels == ["linux", "gpu"]
    assert config.root == (tmp_path / "state").resolve()  # relative to the file, not the cwd
    providers = providers_for(config)
    assert "mine" not in providers  # my-agent is not on PATH
    assert "demo" in providers


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[runner\nurl=", "not valid TOML"),
        ('[runner]\nurl = "ftp://x"', "[runner] url: must be the server's http(s) URL"),
        ('[runner]\nurl = "http://x"\ncapacity = 0', "[runner] capacity: must be an integer ≥ 1"),
        ('[runner]\nurl = "http://x"\ncapacity = "2"', "[runner] capacity"),
        ('[runner]\nurl = "http://x"\nlabels = "gpu"', "[runner] labels: must be a list of strings"),
        ('[runner]\nurl = "http://x"\nname = "a b"', "[runner] name"),
        ('[runner]\nurl = "http://x"\nspeed = 1', "[runner]: unknown key(s) speed"),
        ('[runner]\nurl = "http://x"\n[providers.x]\noutput = "text"', "[providers.x]: needs a command"),
        ('[runner]\nurl = "http://x"\n[providers.x]\ncommand = "x"', "[providers.x] command: must be a list"),
        ('[runner]\nurl = "http://x"\n[providers.x]\ncommand = ["x"]\noutput = "xml"', "output: must be one of"),
        ('[runner]\nurl = "http://x"\n[providers.x]\ncommand = ["x"]\nflavour = 1', "unknown key(s) flavour"),
        ('[runner]\nurl = "http://x"\n[providers.claude]\nenabled = "no"', "enabled: must be true or false"),
        ('[runner]\nurl = "http://x"\n[runners]\n', "unknown section(s) runners"),
    ],
)
def test_a_bad_config_says_what_is_wrong(tmp_path, text, message):
    with pytest.raises(RunnerConfigError) as caught:
        load_config(write(tmp_path, text), env=ENV)
    assert message in caught.value.message


def test_a_missing_key_or_file_is_a_clear_error(tmp_path):
    with pytest.raises(RunnerConfigError, match="key: missing"):
        parse_config({"runner": {"url": "http://x"}}, env={})
    with pytest.raises(RunnerConfigError, match="cannot read the runner config"):
        load_config(tmp_path / "nope.toml", env=ENV)


def test_unknown_placeholders_are_refused_at_start_up(tmp_path):
    path = write(tmp_path, '[runner]\nurl = "http://x"\n[providers.x]\ncommand = ["x", "{promt}"]')
    with pytest.raises(RunnerConfigError, match=r"unknown placeholder\(s\) \{promt\}"):
        providers_for(load_config(path, env=ENV))


def test_a_builtin_can_be_turned_off_or_overridden(tmp_path):
    path = write(
        tmp_path,
        '[runner]\nurl = "http://x"\n[providers.demo]\nenabled = false\n'
        '[providers.shell]\ncommand = ["sh", "-c", "echo $SWITCHYARD_TASK_TITLE"]\ntimeout_seconds = 5\n',
    )
    providers = providers_for(load_config(path, env=ENV))
    assert "demo" not in providers
    assert providers["shell"].timeout_seconds == 5.0
    assert providers["shell"].output == "text"


# --- argv templates -----------------------------------------------------------------------------------------
def test_each_placeholder_fills_exactly_one_argument():
    values = template_values(
        prompt='Fix "it"; rm -rf / {not a field}', session_id="session_1", workdir="/w d", run_id=7, task_id=3
    )
    argv = render(["agent", "-p", "{prompt}", "--cd", "{workdir}", "run-{run_id}-{task_id}", "{{literal}}"], values)
    assert argv == ["agent", "-p", 'Fix "it"; rm -rf / {not a field}', "--cd", "/w d", "run-7-3", "{literal}"]


def test_the_claude_session_uuid_is_stable_and_a_uuid():
    import uuid

    assert session_uuid("session_20260101_000000_abcd") == session_uuid("session_20260101_000000_abcd")
    assert session_uuid("a") != session_uuid("b")
    uuid.UUID(session_uuid("a"))


def test_the_claude_provider_wires_every_hook_to_switchyard_hook(tmp_path, monkeypatch):
    settings = json.loads(claude_hook_settings())
    events = settings["hooks"]
    assert {"SessionStart", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"} <= set(events)
    command = events["PreToolUse"][0]["hooks"][0]["command"]
    assert command.endswith("-m switchyard_client.cli hook") and sys.executable in command
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text("#!/bin/sh\n")
    (bin_dir / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    claude = providers_for(parse_config({"runner": {"url": "http://x"}}, env=ENV))["claude"]
    values = template_values(prompt="p", session_id="s1", workdir="/w", run_id=1, task_id=2)
    argv = render(claude.command, values)
    assert argv[:3] == ["claude", "-p", "--session-id"] and "p" not in argv  # the prompt: on its stdin
    assert claude.prompt_stdin
    assert argv[argv.index("--session-id") + 1] == session_uuid("s1")
    assert json.loads(argv[argv.index("--settings") + 1]) == settings
    assert "--resume" in render(claude.resume_command, values)
    assert claude.hooks and claude.output == "stream-json"


def test_the_resume_prompt_carries_checkpoint_and_milestones():
    packet = {"checkpoint": {"state": {"step": 3}}, "milestones": [{"text": "tests written"}], "open_tool_calls": []}
    prompt = resume_prompt("Fix the bug", packet)
    assert prompt.startswith("Fix the bug\n")
    assert '{"step": 3}' in prompt and "- tests written" in prompt
    assert resume_prompt("Fix the bug", None) == "Fix the bug"


# --- log shipping -------------------------------------------------------------------------------------------
class FakeLogServer:
    """The server's rule: append only the bytes past what it has; 409 with its size past the end."""

    def __init__(self, fail_every: int = 0):
        self.data = b""
        self.calls = 0
        self.fail_every = fail_every

    def send(self, offset: int, length: int, body) -> dict:
        self.calls += 1
        self.pieces = list(body())
        chunk = b"".join(self.pieces)
        assert len(chunk) == length
        if offset > len(self.data):
            raise SwitchyardError("ahead", status=409, body={"detail": "ahead", "offset": len(self.data)})
        end = offset + len(chunk)
        if end > len(self.data):
            self.data += chunk[len(self.data) - offset :]
        return {"offset": len(self.data)}


def test_log_shipping_sends_new_bytes_in_chunks_and_a_resend_adds_nothing(tmp_path):
    log = tmp_path / "job.log"
    log.write_bytes(b"a" * 1000)
    server = FakeLogServer()
    offset = ship_log(server.send, log, 0, chunk=300)
    assert offset == 1000 and server.data == b"a" * 1000 and server.calls == 4
    with open(log, "ab") as fh:
        fh.write(b"b" * 10)
    offset = ship_log(server.send, log, offset, chunk=300)
    assert offset == 1010
    # A restarted runner whose state lagged sends from an old offset: nothing is doubled.
    assert ship_log(server.send, log, 200, chunk=300) == 1010
    assert server.data == log.read_bytes()


def test_log_shipping_follows_the_server_when_it_has_less(tmp_path):
    log = tmp_path / "job.log"
    log.write_bytes(b"0123456789")
    server = FakeLogServer()
    server.data = b"01234"
    assert ship_log(server.send, log, 8) == 10  # 409 offset=5 → sends from 5
    assert server.data == b"0123456789"


def test_a_lost_lease_stops_shipping(tmp_path):
    log = tmp_path / "job.log"
    log.write_bytes(b"x")

    def send(offset, length, body):
        raise SwitchyardError("stale", status=409, body={"code": "lease_lost"})

    with pytest.raises(LeaseLost):
        ship_log(send, log, 0)


def test_the_whole_backlog_goes_in_one_request_read_in_pieces(tmp_path, monkeypatch):
    monkeypatch.setattr(logship, "PIECE", 100)
    log = tmp_path / "job.log"
    log.write_bytes(bytes(range(256)) * 4)
    server = FakeLogServer()

    assert ship_log(server.send, log, 0) == 1024

    assert server.calls == 1 and server.data == log.read_bytes()
    assert [len(piece) for piece in server.pieces] == [100] * 10 + [24]


def test_a_body_is_read_afresh_for_a_retry(tmp_path):
    log = tmp_path / "job.log"
    log.write_bytes(b"0123456789")
    bodies = []

    def send(offset, length, body):
        bodies.extend([b"".join(body()), b"".join(body())])  # a first try and its retry
        return {"offset": offset + length}

    assert ship_log(send, log, 4) == 10
    assert bodies == [b"456789", b"456789"]


def test_a_log_that_has_not_grown_is_not_even_opened(tmp_path, monkeypatch):
    log = tmp_path / "job.log"
    log.write_bytes(b"abc")

    def no_open(*args, **kwargs):
        raise AssertionError("opened")

    monkeypatch.setattr(logship, "open", no_open, raising=False)

    assert ship_log(FakeLogServer().send, log, 3) == 3
    assert ship_log(FakeLogServer().send, tmp_path / "missing.log", 0) == 0


def test_a_server_with_a_lower_limit_gets_1_mib_requests(tmp_path, monkeypatch):
    log = tmp_path / "job.log"
    log.write_bytes(b"x" * 2500)
    monkeypatch.setattr(logship, "SMALL_CHUNK", 1000)
    server = FakeLogServer()
    sizes = []

    def send(offset, length, body):
        sizes.append(length)
        if length > 1000:
            raise SwitchyardError("too large", status=413, body={"code": "too_large"})
        return server.send(offset, length, body)

    assert ship_log(send, log, 0) == 2500
    assert sizes == [2500, 1000, 1000, 500] and server.data == log.read_bytes()


def test_last_lines(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("".join(f"line {i}\n" for i in range(30)))
    assert last_lines(log, 3) == "line 27\nline 28\nline 29"
    assert last_lines(tmp_path / "none.log") == ""


# --- stream-json → events -----------------------------------------------------------------------------------
CLAUDE_LINES = [
    {"type": "system", "subtype": "init", "session_id": "u-1", "model": "claude"},
    {
        "type": "assistant",
        "message": {
            "content": [
                {"type": "text", "text": "Looking"},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
            ]
        },
    },
    {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]}},
    {"type": "result", "subtype": "success", "total_cost_usd": 0.01, "usage": {"input_tokens": 5}, "result": "done"},
]


def _stream(lines, tail=b"") -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines) + tail


def test_stream_json_lines_become_events_with_ids_from_their_line():
    data = _stream(CLAUDE_LINES, b"stderr noise\n" + b'{"type": "resu')
    events, used, lines = parse_lines(data, start_line=0, provider="claude", hooks=False, run_id=9)
    assert used == data.rfind(b"\n") + 1 and lines == 5  # the half line waits for the next tick
    types = [e["type"] for e in events]
    assert types == ["log", "log", "tool_started", "tool_finished", "log"]
    assert [e["id"] for e in events] == ["run9-l1-0", "run9-l2-0", "run9-l2-1", "run9-l3-0", "run9-l4-0"]
    result = events[-1]["payload"]
    assert result["total_cost_usd"] == 0.01 and result["usage"] == {"input_tokens": 5} and result["event"] == "result"
    again, _, _ = parse_lines(data, start_line=0, provider="claude", hooks=False, run_id=9)
    assert again == events  # re-reading the same lines makes the same ids


def test_with_hooks_wired_tool_events_are_left_to_the_hooks():
    events, _, _ = parse_lines(_stream(CLAUDE_LINES), start_line=10, provider="claude", hooks=True, run_id=9)
    assert [e["type"] for e in events] == ["log", "log", "log"]
    assert events[0]["id"] == "run9-l11-0"
    assert events[-1]["payload"]["total_cost_usd"] == 0.01


# Codex's --json output: tests/client/test_runner_codex_output.py, on lines the real CLI printed.


# --- state files --------------------------------------------------------------------------------------------
def test_state_files_round_trip_and_ignore_junk(tmp_path):
    store = StateStore(tmp_path)
    state = RunState(id=12, attempt=2, provider="demo", assignment={"id": 12, "task": {"id": 3}}, session="s", pid=5)
    state.shipped, state.parsed_lines = 1234, 7
    store.save(state)
    (store.folder / "junk.json").write_text("{not json")
    (store.folder / "13.json").write_text(json.dumps({"id": 13, "attempt": 1, "provider": "x", "future": 1}))
    loaded = {s.id: s for s in store.load_all()}
    assert loaded[12] == state
    assert loaded[13].provider == "x"
    assert not list(store.folder.glob("*.tmp"))
    assert store.path(12).stat().st_mode & 0o777 == 0o600  # it holds the run's key
    store.forget(12)
    store.forget(12)
    assert [s.id for s in store.load_all()] == [13]


def test_pid_start_time_tells_a_recycled_pid_apart():
    start = pid_start_time(os.getpid())
    assert isinstance(start, int) and start > 0
    assert same_process(os.getpid(), start)
    assert not same_process(os.getpid(), start + 1)
    assert not same_process(None, start)
    child = subprocess.Popen(["sleep", "0"])
    child.wait()
    assert pid_start_time(child.pid) is None


# --- the process wrapper ------------------------------------------------------------------------------------
def test_the_wrapper_writes_the_exit_code_and_the_log(tmp_path):
    log, exit_file = tmp_path / "job.log", tmp_path / "run.exit"
    proc = spawn(
        ["sh", "-c", "echo out; echo err >&2; exit 3"],
        cwd=str(tmp_path),
        env=dict(os.environ),
        log_path=log,
        exit_path=exit_file,
    )
    assert proc.wait(10) == 3
    assert read_exit_file(exit_file) == 3
    assert sorted(log.read_text().split()) == ["err", "out"]


def test_stop_group_gives_sigterm_then_sigkill(tmp_path):
    log, exit_file = tmp_path / "job.log", tmp_path / "run.exit"
    # An agent that saves its work on SIGTERM, and a child that ignores it: the agent is ready once the
    # child says its trap is set (a TERM that came before the trap would end the child, and no KILL be needed).
    script = (
        "import signal, subprocess, sys, time\n"
        "child = subprocess.Popen(['sh', '-c', 'trap \"\" TERM; echo trapped; exec sleep 60'], stdout=subprocess.PIPE)\n"
        "child.stdout.readline()\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('saving', flush=True), time.sleep(0.3), sys.exit(0)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = spawn(
        [sys.executable, "-c", script], cwd=str(tmp_path), env=dict(os.environ), log_path=log, exit_path=exit_file
    )
    deadline = time.monotonic() + 10
    while "ready" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    started = time.monotonic()
    stop_group(proc.pid, grace=1.5, reap=proc.poll)
    took = time.monotonic() - started
    assert "saving" in log.read_text()  # the agent had its SIGTERM and time to act on it
    assert 1.0 < took < 5  # the TERM-ignoring child needed the SIGKILL
    assert proc.wait(5) == 0  # the wrapper outlived the SIGTERM and passed on the agent's own exit
    deadline = time.monotonic() + 5
    while group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # killed members linger until their new parent reaps them
    assert not group_alive(proc.pid)
    assert read_exit_file(exit_file) == 0


def test_an_agent_ended_by_sigterm_is_reaped_at_once_and_its_code_recorded(tmp_path):
    log, exit_file = tmp_path / "job.log", tmp_path / "run.exit"
    proc = spawn(["sleep", "30"], cwd=str(tmp_path), env=dict(os.environ), log_path=log, exit_path=exit_file)
    time.sleep(0.2)
    started = time.monotonic()
    stop_group(proc.pid, grace=5, reap=proc.poll)
    assert time.monotonic() - started < 1
    assert proc.wait(5) == 128 + signal.SIGTERM
    assert read_exit_file(exit_file) == 128 + signal.SIGTERM


def test_describe_exit():
    assert describe_exit(2) == "exit code 2"
    assert describe_exit(-9) == "killed by SIGKILL"
    assert describe_exit(137) == "exit code 137 (killed by SIGKILL)"


# --- git summary ---------------------------------------------------------------------------------------------
def test_changes_since_covers_commits_edits_and_new_files(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "T")
    (tmp_path / "a.py").write_text("a = 1\n")
    git("add", ".")
    git("commit", "-qm", "base")
    base = head(str(tmp_path))
    (tmp_path / "a.py").write_text("a = 2\n")
    git("commit", "-qam", "change a")
    (tmp_path / "b.py").write_text("b = 1\n")  # new, never added
    (tmp_path / "a.py").write_text("a = 3\n")  # uncommitted edit
    changes = changes_since(str(tmp_path), base)
    assert changes.commits_ahead == 1
    assert sorted(changes.files_changed) == ["a.py", "b.py"]
    assert b"+a = 3" in changes.patch and b"+b = 1" in changes.patch
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert "?? b.py" in status  # the agent's own index was not touched


# --- the hook inside a run ------------------------------------------------------------------------------------
def test_inside_a_run_the_hook_reports_to_the_runs_session(tmp_path, monkeypatch):
    from switchyard_client.hook.plan import SessionMemory, plan

    monkeypatch.setenv("SWITCHYARD_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("SWITCHYARD_RUN", "12")
    monkeypatch.setenv("SWITCHYARD_SESSION", "session_run")
    claude_id = session_uuid("session_run")
    memory = SessionMemory(claude_id)
    start = plan({"session_id": claude_id, "hook_event_name": "SessionStart", "source": "startup"}, memory)
    # No session of its own opened, no status moves (the runner reports how the run ends): a log line.
    assert [(r["method"], r["path"]) for r in start] == [("POST", "sessions/session_run/events/")]
    tool = plan(
        {"session_id": claude_id, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "t1"}, memory
    )
    assert [r["path"] for r in tool] == ["sessions/session_run/tool-calls/"]
    stop = plan({"session_id": claude_id, "hook_event_name": "Stop"}, memory)
    assert all("transition" not in r["path"] for r in stop)
