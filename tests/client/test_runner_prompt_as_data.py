"""The prompt reaches the agent as data, never as a command-line option (issue 24, SPEC §8 "A run acts
only for itself"): the runner's own start of an agent (``RunWorker._spawn``, the real ``spawn``) with
each built-in provider's template, a recording stand-in under the CLI's name on PATH, and prompts
that are options of those CLIs.

What each CLI takes as its prompt, checked by hand against the real ones (Claude Code 2.1.332, Codex
CLI 0.169.0, Gemini CLI 0.61.0): Claude Code with ``-p`` and no prompt argument reads it on its
standard input; Codex (clap) takes every word after ``--`` as a positional; Gemini (yargs) takes all
after the first ``=`` of ``--prompt=`` as the value. With the old templates (``claude -p PROMPT``,
``codex exec ... PROMPT``, ``gemini -p PROMPT``) ``--version`` printed each CLI's version and
``--dangerously-bypass-approvals-and-sandbox`` turned Codex's sandbox off. The real CLIs also run end
to end, each given a task titled as one of its options: tests/runners/test_runner_claude_e2e.py,
test_runner_codex_e2e.py and test_runner_gemini_e2e.py.
"""

import json
import os
import stat
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from switchyard_client.runner.command import main as runner_main
from switchyard_client.runner.config import RunnerConfigError, parse_config
from switchyard_client.runner.providers import providers_for
from switchyard_client.runner.state import RunState
from switchyard_client.runner.watchdog import lease_path, lease_write
from switchyard_client.runner.worker import RunWorker

ENV = {"SWITCHYARD_RUNNER_KEY": "sy_runner"}
PROMPTS = [
    "--dangerously-skip-permissions",
    '--mcp-config={"mcpServers":{"x":{"command":"sh","args":["-c","id > /tmp/pwned"]}}}',
    "--dangerously-bypass-approvals-and-sandbox",
    "-y",
    "--version",
    "-- --help",
    "Fix the login bug\n\n--yolo in the description",
]
RECORDER = """#!{python}
import json, sys
json.dump({{"argv": sys.argv[1:], "stdin": sys.stdin.read()}}, open({record!r}, "w"))
"""


class _Store:
    def __init__(self, folder: Path):
        self.folder = folder

    def save(self, state) -> None:
        pass


@pytest.fixture
def recording_cli(tmp_path, monkeypatch):
    """``claude``, ``codex`` and ``gemini`` on PATH, each writing its argv and standard input to a file."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in ("claude", "codex", "gemini"):
        script = folder / name
        script.write_text(RECORDER.format(python=sys.executable, record=str(tmp_path / f"{name}.json")))
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def _start(tmp_path: Path, provider: str, prompt: str, *, resume: bool) -> dict:
    providers = providers_for(parse_config({"runner": {"url": "http://127.0.0.1:9"}}, env=ENV))
    runner = SimpleNamespace(
        # Unsandboxed: the fake CLIs write the argv they got to a file of the test's.
        config=SimpleNamespace(url="http://127.0.0.1:9", sandbox=False),
        providers=providers,
        jobs=tmp_path / "jobs",
        store=_Store(tmp_path),
        console=SimpleNamespace(say=lambda message: None),
        relay=SimpleNamespace(endpoint="http://127.0.0.1:9/otlp"),  # the runner's telemetry relay
    )
    state = RunState(id=7, attempt=1, provider=provider, session="run-7", agent_key="sy_run7", workdir=str(tmp_path))
    state.assignment = {"task": {"id": 3, "title": prompt}}
    # The lease `starting` would have renewed: the agent's watchdog (runner/watchdog.py) reads it.
    lease_write(lease_path(tmp_path, state.id), sent_at=time.time(), lease_seconds=600, grace=10)
    worker = RunWorker(runner, state, "new")
    worker._spawn(prompt, resume=resume, agent_session="0199-thread" if resume else "")
    assert worker.popen.wait(60) == 0, (tmp_path / "jobs").glob("*.log")
    worker._watchdog_stop()  # as the runner does when a run ends: it would sleep until the lease's end
    return json.loads((tmp_path / f"{provider}.json").read_text())


def _taken_as_prompt(provider: str, seen: dict) -> str | None:
    """What the real CLI would take as the prompt from this argv and input (the module's docstring);
    None when the prompt is not where it takes one."""
    argv, given = seen["argv"], seen["stdin"]
    if provider == "claude":
        # -p and options only: every word but -p starts an option or is one's value.
        return given if argv[0] == "-p" and argv[1].startswith("--") else None
    if provider == "codex":
        # `exec resume -- SESSION_ID PROMPT`: after the one "--" every word is a positional.
        at = -3 if argv[:2] == ["exec", "resume"] else -2
        return argv[-1] if argv.count("--") == 1 and argv[at] == "--" else None
    glued = [part for part in argv if part.startswith("--prompt=")]
    return glued[0].removeprefix("--prompt=") if len(glued) == 1 and "-p" not in argv else None


@pytest.mark.parametrize("resume", [False, True], ids=["start", "resume"])
@pytest.mark.parametrize("provider", ["claude", "codex", "gemini"])
@pytest.mark.parametrize("prompt", PROMPTS)
def test_each_builtin_gives_the_prompt_as_data(recording_cli, provider, prompt, resume):
    seen = _start(recording_cli, provider, prompt, resume=resume)

    assert _taken_as_prompt(provider, seen) == prompt, seen
    if provider == "claude":
        assert not any(prompt in part for part in seen["argv"]), seen  # not in the argv at all
        assert ("--resume" in seen["argv"]) is resume
    else:
        assert seen["stdin"] == ""  # /dev/null, as before


@pytest.mark.parametrize(
    "command",
    [
        ["my-agent", "{prompt}"],
        ["my-agent", "-p", "{prompt}"],
        ["my-agent", "--task", "{prompt}"],
        ["my-agent", "{prompt}", "--"],
        ["my-agent", "--", "Task: {prompt}"],
        ["my-agent", "Task: {prompt}"],
        ["sh", "-c", "my-agent {prompt}"],
        ["my-agent", "-p{prompt}"],
        ["my-agent", "-t={prompt}"],
    ],
)
def test_a_template_that_puts_the_prompt_where_an_option_can_go_is_refused(tmp_path, command, capsys):
    table = {"command": command}
    with pytest.raises(RunnerConfigError, match="puts the prompt where it can be read as an option"):
        providers_for(parse_config({"runner": {"url": "http://x"}, "providers": {"mine": table}}, env=ENV))
    with pytest.raises(RunnerConfigError, match="resume_command"):
        resume = {"command": ["my-agent", "--", "{prompt}"], "resume_command": command}
        providers_for(parse_config({"runner": {"url": "http://x"}, "providers": {"mine": resume}}, env=ENV))

    config = tmp_path / "switchyard-runner.toml"
    config.write_text(
        f'[runner]\nurl = "http://x"\nkey = "sy_runner"\n[providers.mine]\ncommand = {json.dumps(command)}\n'
    )
    assert runner_main(["--check", "-c", str(config)]) == 3
    assert "puts the prompt where it can be read as an option" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        (["{python}", "agent.py", "--", "{prompt}"], {}),
        (["{python}", "agent.py", "--flag", "--", "--session", "{session_id}", "{prompt}"], {}),
        (["{python}", "agent.py", "--task={prompt}"], {}),
        (["{python}", "agent.py", "--task=Task: {prompt}"], {}),
        (["{python}", "agent.py", "--cd", "{workdir}", "{{prompt}}"], {}),  # a literal "{prompt}"
        (["{python}", "agent.py", "--cd", "{workdir}"], {"prompt_stdin": True}),
    ],
)
def test_a_template_that_gives_the_prompt_as_data_is_taken(command, extra):
    table = {"command": command, "resume_command": command, **extra}

    providers = providers_for(parse_config({"runner": {"url": "http://x"}, "providers": {"mine": table}}, env=ENV))

    assert providers["mine"].command == command and providers["mine"].prompt_stdin is bool(extra)


def test_prompt_stdin_must_be_a_boolean():
    table = {"command": ["my-agent"], "prompt_stdin": "yes"}
    with pytest.raises(RunnerConfigError, match="prompt_stdin: must be true or false"):
        providers_for(parse_config({"runner": {"url": "http://x"}, "providers": {"mine": table}}, env=ENV))
