"""The agents a runner can start: the built-ins (claude, codex, gemini, shell, demo) merged with the
config's ``[providers.<name>]`` tables, and the argv templating.

Flags were written against: Claude Code 2.1.x (`-p`, `--output-format stream-json --verbose`,
`--session-id <uuid>`, `--resume <uuid>`, `--settings <json>`, `--permission-mode`, `--allowedTools`),
Codex CLI 0.171.0 (`codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox
--cd DIR -- PROMPT`; `codex exec resume ... -- THREAD_ID PROMPT`, which takes no --cd, hence the
workdir as its cwd; the id is the run's ``thread.started`` ``thread_id`` or, for a run continuing
another, that run's; its output: codex_output.py) and Gemini CLI
0.61.0 (gemini_output.py reads its output): headless with ``--prompt=`` and ``--output-format stream-json``;
``--session-id <uuid>`` starts the session under the run's uuid and ``--resume <uuid>`` goes on with it
(sessions are kept per project folder under ``~/.gemini/tmp``, so a resume runs in the same worktree);
``--skip-trust``, as a headless run in a folder never trusted before exits at once otherwise;
``--approval-mode auto_edit`` with ``--allowed-tools=run_shell_command`` (edits and shell commands run
unasked, as Claude Code's acceptEdits with Bash allowed; without it the shell tool is not even offered
to the model in headless mode; the flag is deprecated in favour of policy files, to be removed in 1.0).
A config table of the same name overrides any of it.

The prompt is task text (a title, a description, a person's Run prompt): it reaches the agent as
data, never where the program could read it as an option (a task titled
``--dangerously-skip-permissions`` or ``--mcp-config={...}``). Claude Code reads it on its standard
input (``-p`` with no prompt argument: ``prompt_stdin``, so it is not in the argv at all, which
Claude Code also scans before its parser runs); Codex gets it after ``--`` (clap: every later word is
a positional); Gemini as ``--prompt={prompt}`` (yargs takes all after the first ``=`` as the value).
Every template, built-in or ``[providers.*]``, is held to that (check_prompt_placement): a word
holding ``{prompt}`` is the whole ``{prompt}`` after a ``--`` word, or ``--name={prompt}``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
import string
import sys
import uuid
from typing import Any

from switchyard_client.runner.config import ProviderConfig, RunnerConfig, RunnerConfigError, parse_provider

PLACEHOLDERS = frozenset(
    {
        "prompt",
        "session_id",
        "session_uuid",
        "agent_session",
        "workdir",
        "run_id",
        "task_id",
        "python",
        "hook_settings",
        "hook_command",
    }
)
# Fixed, so that a session id always maps to the same Claude Code session (uuid5 of the id).
SESSION_NAMESPACE = uuid.UUID("6f1c7a52-4c1e-4f7e-9a8e-2f0c3b9d5e11")
# Of every event `switchyard hook` understands, two are left out: a command hook on WorktreeCreate
# replaces Claude Code's own worktree creation, and MessageDisplay would start a process per message shown.
CLAUDE_HOOKS_LEFT_OUT = ("WorktreeCreate", "MessageDisplay")
# Events whose hooks Claude Code matches against the tool's name.
TOOL_MATCHED = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest", "PermissionDenied")
CLAUDE_TOOLS = "Bash,Read,Write,Edit,MultiEdit,Glob,Grep,LS,TodoWrite"
PERMISSION_TIMEOUT_SLACK = 10  # seconds Claude Code gives the permission hook beyond its wait
PROMPT_OPTION = re.compile(r"--[A-Za-z0-9][A-Za-z0-9_.-]*=.*", re.DOTALL)  # --task={prompt}: all after = is the value

_CLAUDE_COMMON = [
    "--output-format",
    "stream-json",
    "--verbose",
    "--settings",
    "{hook_settings}",
    "--permission-mode",
    "acceptEdits",
    "--allowedTools",
    CLAUDE_TOOLS,
]
# Codex's own sandbox is off: the runner's (sandbox.py) is the run's. Codex's workspace-write makes
# every .git read-only and writes only under the workdir, and a worktree's git metadata lies in the
# clone's .git beside it, so the agent could not commit its work (what a run is for); it also cuts the
# network off, and Switchyard is on it. Nested, it needs user namespaces inside the runner's bwrap.
# The CLI documents this flag for "environments that are externally sandboxed". In exec mode Codex
# never asks for an approval, so nothing waits on a person either.
_CODEX_COMMON = ["--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
_GEMINI_COMMON = [
    "--output-format",
    "stream-json",
    "--skip-trust",
    "--approval-mode",
    "auto_edit",
    # Glued: yargs reads an array option's later words as more values.
    "--allowed-tools=run_shell_command",
]
# memory_mb, what one run takes (room.py admits a run only while the machine has it to spare).
# Claude Code 2.1.332 (a single native binary) measured here at 208-220 MB resident through a
# scripted run with tools and hooks (VmRSS of its process tree, sampled every 100 ms); 512 leaves
# room for a long session's growing context and the commands its tools start. Codex CLI 0.171.0 (its
# node launcher and native binary) peaked at 186 MB the same way through a scripted run with a shell
# call; 512 on the same reasoning. Gemini CLI 0.61.0 measured the same way at 396-403 MB (two Node.js
# processes: its launcher and the CLI it starts with a larger heap): 768 leaves it the same room.
# demo is a small Python process; shell runs any command.
MEMORY_MB = {"claude": 512, "codex": 512, "gemini": 768, "shell": 256, "demo": 64}
DEFAULT_PROVIDER_MEMORY_MB = 256  # a [providers.<name>] of its own that does not say


def _builtins() -> dict[str, ProviderConfig]:
    # Their names are config.BUILTIN_NAMES (the config reads a table of one of them without a command).
    return {
        "claude": ProviderConfig(
            name="claude",
            command=["claude", "-p", "--session-id", "{session_uuid}", *_CLAUDE_COMMON],
            resume_command=["claude", "-p", "--resume", "{session_uuid}", *_CLAUDE_COMMON],
            output="stream-json",
            hooks=True,
            prompt_stdin=True,
            home_files=[".claude/settings.json", ".claude/.credentials.json"],
        ),
        "codex": ProviderConfig(
            name="codex",
            command=["codex", "exec", *_CODEX_COMMON, "--cd", "{workdir}", "--", "{prompt}"],
            # `exec resume` takes no --cd: the runner starts it in the workdir, where the thread was made.
            resume_command=["codex", "exec", "resume", *_CODEX_COMMON, "--", "{agent_session}", "{prompt}"],
            output="jsonl",
            home_files=[".codex/config.toml", ".codex/auth.json"],
        ),
        "gemini": ProviderConfig(
            name="gemini",
            command=["gemini", "--session-id", "{session_uuid}", "--prompt={prompt}", *_GEMINI_COMMON],
            resume_command=["gemini", "--resume", "{session_uuid}", "--prompt={prompt}", *_GEMINI_COMMON],
            output="stream-json",
            # Its settings and its sign-in (an API key in .env, or Google sign-in's tokens).
            home_files=[
                ".gemini/settings.json",
                ".gemini/.env",
                ".gemini/oauth_creds.json",
                ".gemini/google_accounts.json",
            ],
        ),
        # Runs the config's command with the task in its environment; off until a command is set.
        "shell": ProviderConfig(name="shell", command=[], output="text"),
        "demo": ProviderConfig(name="demo", command=["{python}", "-m", "switchyard_client.demo_agent"], output="text"),
    }


def session_uuid(session_id: str) -> str:
    """Claude Code and Gemini CLI want a UUID for --session-id; the same Switchyard session always gives the same one."""
    return str(uuid.uuid5(SESSION_NAMESPACE, session_id))


def hook_command() -> str:
    return f"{shlex.quote(sys.executable)} -m switchyard_client.cli hook"


def claude_hook_settings() -> str:
    """`--settings` JSON wiring every Claude Code hook to `switchyard hook` (this Python's)."""
    # Imported here, when a Claude run starts: a runner without Claude runs never needs the hook's
    # modules (a few hundred KB of its memory).
    from switchyard_client.hook.answer import permission_timeout
    from switchyard_client.hook.plan import EVENTS as HOOK_EVENTS

    entry = [{"type": "command", "command": hook_command()}]
    hooks: dict[str, Any] = {}
    # A permission request waits for a person (hook/answer.py): Claude Code's hook timeout (60 s by
    # default) must outlast the hook's own wait, or Claude Code kills it before it answers.
    asking = [{**entry[0], "timeout": int(permission_timeout()) + PERMISSION_TIMEOUT_SLACK}]
    for event in (name for name in HOOK_EVENTS if name not in CLAUDE_HOOKS_LEFT_OUT):
        block: dict[str, Any] = {"hooks": asking if event == "PermissionRequest" else entry}
        if event in TOOL_MATCHED:
            block["matcher"] = "*"
        hooks[event] = [block]
    return json.dumps({"hooks": hooks}, separators=(",", ":"))


def template_fields(template: list[str]) -> set[str]:
    names: set[str] = set()
    for part in template:
        for _, name, _, _ in string.Formatter().parse(part):
            if name is not None:
                names.add(name)
    return names


def check_template(provider: str, key: str, template: list[str]) -> None:
    try:
        unknown = template_fields(template) - PLACEHOLDERS
    except ValueError as exc:  # a lone "{" or "}"
        raise RunnerConfigError(
            f"[providers.{provider}] {key}: {exc} (write a literal brace as {{{{ or }}}})"
        ) from None
    if unknown:
        raise RunnerConfigError(
            f"[providers.{provider}] {key}: unknown placeholder(s) {', '.join('{' + n + '}' for n in sorted(unknown))}"
            f" (known: {', '.join('{' + n + '}' for n in sorted(PLACEHOLDERS))})"
        )
    check_prompt_placement(provider, key, template)


def check_prompt_placement(provider: str, key: str, template: list[str]) -> None:
    """``{prompt}`` only where no program reads it as an option: the whole word after a ``--`` word
    (whole: ``bash -c -- "x {prompt}"`` would run it), or in the value of a long option glued with
    ``=`` (``--task={prompt}``). Anywhere else a task titled ``--help`` (or ``--mcp-config=...``)
    would reach the agent as an option, so the runner refuses to start."""
    ended = False
    for part in template:
        if part == "--":
            ended = True
        if "prompt" not in template_fields([part]):
            continue
        if (ended and part == "{prompt}") or PROMPT_OPTION.fullmatch(part):
            continue
        raise RunnerConfigError(
            f"[providers.{provider}] {key}: {part!r} puts the prompt where it can be read as an option (a task "
            'titled "--help" would be one). Make "{prompt}" a whole argument after a "--" argument '
            '(["my-agent", "--", "{prompt}"]), a long option\'s value glued with "=" ("--task={prompt}"), or leave '
            "{prompt} out and set prompt_stdin = true (the prompt on the agent's standard input; it is in "
            "$SWITCHYARD_PROMPT too)."
        )


def render(template: list[str], values: dict[str, Any]) -> list[str]:
    """Each argv element with its placeholders filled in; a value is never split or re-parsed, so a
    prompt with spaces, quotes or braces stays one argument."""
    return [part.format_map(values) for part in template]


class _Values(dict):
    """Template values; the Claude hook settings are made only for a template that names them."""

    def __missing__(self, key: str) -> str:
        if key != "hook_settings":
            raise KeyError(key)
        self[key] = claude_hook_settings()
        return self[key]


def template_values(
    *,
    prompt: str,
    session_id: str,
    workdir: str,
    run_id: int,
    task_id: int | None,
    agent_session: str = "",
    resuming: bool = False,
) -> dict[str, Any]:
    """``session_uuid``: the Claude Code session the agent works in: the run's own (a uuid5 of its
    Switchyard session) when it starts afresh; when it resumes, the one it resumes (``agent_session``:
    a run continuing another resumes that run's)."""
    own = session_uuid(session_id) if session_id else ""
    return _Values(
        {
            "prompt": prompt,
            "session_id": session_id,
            "session_uuid": (agent_session or own) if resuming else own,
            "agent_session": agent_session,
            "workdir": workdir,
            "run_id": run_id,
            "task_id": task_id if task_id is not None else "",
            "python": sys.executable,
            "hook_command": hook_command(),
        }
    )


def _available(provider: ProviderConfig) -> bool:
    if not provider.enabled or not provider.command:
        return False
    head = provider.command[0]
    if head == "{python}":
        if provider.name == "demo" and provider.command[1:3] == ["-m", "switchyard_client.demo_agent"]:
            return importlib.util.find_spec("switchyard_client.demo_agent") is not None
        return True
    if "{" in head:
        return True
    return shutil.which(head) is not None


def providers_for(config: RunnerConfig) -> dict[str, ProviderConfig]:
    """The providers this runner offers: built-ins whose program is here, plus the config's own."""
    merged = _builtins()
    for name, table in config.providers.items():
        merged[name] = parse_provider(name, table, base=merged.get(name))
    for provider in merged.values():
        if provider.memory_mb is None:
            provider.memory_mb = MEMORY_MB.get(provider.name, DEFAULT_PROVIDER_MEMORY_MB)
        check_template(provider.name, "command", provider.command)
        if provider.resume_command:
            check_template(provider.name, "resume_command", provider.resume_command)
    return {name: p for name, p in sorted(merged.items()) if _available(p)}


def resume_prompt(prompt: str, packet: dict[str, Any] | None) -> str:
    """The prompt of a resumed run: the task's, then what the earlier attempt left behind."""
    if not packet:
        return prompt
    lines = [prompt, "", "---", "You are resuming this work after an interruption. Where it stood:"]
    checkpoint = packet.get("checkpoint")
    if checkpoint:
        state = json.dumps(checkpoint.get("state"), ensure_ascii=False)
        lines.append(f"Last checkpoint: {state[:4000]}")
    milestones = packet.get("milestones") or []
    if milestones:
        lines.append("Milestones reached:")
        lines += [f"- {m.get('text', '')}" for m in milestones[-50:]]
    open_calls = packet.get("open_tool_calls") or []
    if open_calls:
        lines.append("Tool calls that never finished: " + ", ".join(str(c.get("tool_name")) for c in open_calls[:20]))
    if len(lines) == 4:
        lines.append("(no checkpoint or milestones were recorded)")
    return "\n".join(lines)
