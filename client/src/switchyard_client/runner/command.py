"""`switchyard runner [options]`: its own argument parser and help (the runner is a daemon, not a
one-shot command, so it does not share the agent commands' --key/--session options)."""

from __future__ import annotations

import argparse
import sys

DESCRIPTION = """\
Run agents for Switchyard on this machine.

The runner asks the server for queued runs (a long poll), starts each run's agent in its own
process group in a worktree of the task's repository (or the run's session workspace when the
task names none, or the repository is not on this machine), ships the agent's stdout and stderr to
the session log by byte offset, turns Claude Code / Gemini stream-json and Codex --json output into
stream events, and reports how the run ended: exit 0 → the task goes to Review with a summary and a
run-<id>.patch in the session's files; non-zero or timeout → Failed with the last lines of the log.
A cancel (Stop on the card) sends SIGTERM to the agent's process group, SIGKILL after
grace_seconds.

If the runner is killed, start it again with the same root: it re-adopts agents still running
(same pid and start time) and resumes the others with the provider's resume command and the
session's last checkpoint and milestones (a new attempt).

Each agent has a watchdog beside it that outlives the runner: if no live runner renews the run's
lease (each heartbeat the server answers does), it sends the agent's process group SIGTERM
grace_seconds (at most a third of the lease) before the lease ends and SIGKILL when it ends, before
the server may declare the run lost and start another attempt.

Agents get SWITCHYARD_URL, SWITCHYARD_SESSION, SWITCHYARD_KEY (a key for that run's session only,
revoked when the run ends; never the runner's own key), SWITCHYARD_RUN, SWITCHYARD_ATTEMPT (the
run's attempt: 2 and up when resumed), SWITCHYARD_TASK, SWITCHYARD_TASK_TITLE,
SWITCHYARD_TASK_DESCRIPTION, SWITCHYARD_WORKDIR, SWITCHYARD_PROMPT, SWITCHYARD_STATE_DIR (where
`switchyard hook` keeps the run's spool) and SWITCHYARD_FENCE (a mark of the attempt's processes: its
watchdog also stops those that left the agent's process group).
"""

EPILOG = """\
config file (TOML; default ./switchyard-runner.toml, see switchyard-runner.example.toml):
  [runner]
  url = "http://127.0.0.1:8000"        # or $SWITCHYARD_URL
  key = "sy_..."                       # or $SWITCHYARD_RUNNER_KEY (manage.py create_runner_key NAME)
  name = "build-1"                     # default: the host name
  labels = ["linux", "gpu"]            # a task labelled runner:gpu needs label gpu; only the key's count
  capacity = 2                         # runs at once
  root = "var/runner"                  # running-jobs/ (logs), runs/ (state), otlp-spool/ (telemetry not
                                       #   yet delivered); relative to the file
  grace_seconds = 10                   # SIGTERM → SIGKILL on cancel (and before a lease ends)
  min_free_memory_mb = 1024            # a run starts only while MemAvailable minus this (and runs
                                       #   started in the last 30 s) holds its provider's memory_mb

  [providers.NAME]                     # a new provider, or overrides of a built-in
  command = ["my-agent", "--task={prompt}"]
  resume_command = ["my-agent", "--continue", "{session_id}", "--", "{prompt}"]
  env = { MY_VAR = "1" }
  output = "text"                      # stream-json | jsonl | text
  timeout_seconds = 3600
  enabled = true
  hooks = false                        # true: the agent records its own tool calls (no duplicates)
  prompt_stdin = false                 # true: the prompt is the agent's standard input
  memory_mb = 256                      # what one run takes (claude 512, codex 512, gemini 768, shell 256, demo 64)

  [repositories.NAME]                  # a git clone on this machine, registered as repository NAME:
  path = "/srv/src/shop"               #   its tasks run only on this runner, in worktrees made
  default_branch = "main"              #   beside it (<parent>/<type>-<task>), sync/NAME/ linked in;
                                       #   their status goes to the worktree monitor every 30 s

placeholders: {prompt} {session_id} {session_uuid} (a UUID derived from the session id) {workdir}
  {run_id} {task_id} {python} (this Python) {hook_settings} (Claude Code --settings JSON wiring
  every hook to `switchyard hook`) {hook_command}; each fills exactly one argument. The prompt is
  task text, never an option: {prompt} must be a whole argument after a "--" argument, or glued to
  a long option ("--task={prompt}"); anywhere else the runner refuses to start (exit 3).

built-in providers (each offered only when its program is on PATH):
  claude  claude -p --session-id {session_uuid} --output-format stream-json --verbose
          --settings {hook_settings} --permission-mode acceptEdits --allowedTools ...
          with the prompt on its standard input (resume: --resume {session_uuid})
  codex   codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox
          --cd {workdir} -- {prompt} (its own sandbox off: the runner's is the run's)
          (resume: codex exec resume ... -- {agent_session} {prompt}, the thread id it printed)
  gemini  gemini --session-id {session_uuid} --prompt={prompt} --output-format stream-json
          --skip-trust --approval-mode auto_edit --allowed-tools=run_shell_command
          (resume: --resume {session_uuid})
  shell   your command = [...]; the task is in the environment
  demo    {python} -m switchyard_client.demo_agent

exit codes: 0 stopped, 3 bad config, 5/6 the server refused the key
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="switchyard runner",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-c", "--config", help="the TOML file (default: ./switchyard-runner.toml if present)")
    parser.add_argument("--url", help="Switchyard URL (overrides the file and $SWITCHYARD_URL)")
    parser.add_argument("--key", help="runner key, scope run (overrides the file and $SWITCHYARD_RUNNER_KEY)")
    parser.add_argument("--name", help="this runner's name")
    parser.add_argument("--label", action="append", dest="labels", help="a label (repeatable; replaces the file's)")
    parser.add_argument("--capacity", type=int, help="runs at once")
    parser.add_argument("--root", help="folder for logs and state")
    parser.add_argument(
        "--on-exit",
        choices=["leave", "stop"],
        default="leave",
        help="when the runner is stopped (SIGTERM, Ctrl-C): leave agents running to be re-adopted on "
        "restart (default), or stop them and report their runs failed",
    )
    parser.add_argument("--check", action="store_true", help="print the configuration and providers, then exit")
    return parser


def main(argv: list[str]) -> int:
    import os

    from switchyard_client.runner.config import RunnerConfigError, load_config, parse_config
    from switchyard_client.runner.providers import providers_for

    args = build_parser().parse_args(argv)
    env = dict(os.environ)
    if args.url:
        env["SWITCHYARD_URL"] = args.url
    if args.key:
        env["SWITCHYARD_RUNNER_KEY"] = args.key
    try:
        config = load_config(args.config, env=env)
        if args.url or args.key:  # the command line wins over the file
            config.url = args.url or config.url
            config.key = args.key or config.key
        overrides = {"name": args.name, "labels": args.labels, "capacity": args.capacity, "root": args.root}
        if any(v is not None for v in overrides.values()):
            runner = {"url": config.url, "key": config.key, "name": config.name, "labels": config.labels}
            runner.update(capacity=config.capacity, root=str(config.root), grace_seconds=config.grace_seconds)
            runner.update(host=config.host)
            runner.update({k: v for k, v in overrides.items() if v is not None})
            repositories = config.repositories  # already resolved against the file's folder
            config = parse_config({"runner": runner, "providers": config.providers}, env=env, source=config.source)
            config.repositories = repositories
            if args.root:
                config.root = config.root.__class__(os.path.abspath(args.root))
        providers = providers_for(config)
    except RunnerConfigError as exc:
        print(f"switchyard runner: {exc.message}", file=sys.stderr)
        return exc.exit_code
    if args.check:
        print(f"runner {config.name} → {config.url} (capacity {config.capacity}, labels {config.labels or []})")
        print(f"root {config.root}; keeps {config.min_free_memory_mb} MB of memory free")
        for name, provider in providers.items():
            print(f"  {name}: {' '.join(provider.command)} [{provider.output}; {provider.memory_mb} MB a run]")
        return _check_repositories(config)
    from switchyard_client.runner.loop import main as run

    return run(config, providers, on_exit=args.on_exit)


def _check_repositories(config) -> int:
    """--check: each configured clone as the runner will register it, or why it cannot."""
    from switchyard_client.runner.config import RunnerConfigError
    from switchyard_client.runner.repos import repository_check

    status = 0
    for item in config.repositories:
        try:
            repo = repository_check(item)
        except RunnerConfigError as exc:
            print(f"  repository {item.name}: {exc.message}", file=sys.stderr)
            status = exc.exit_code
            continue
        print(f"  repository {repo.name}: {repo.path} (default branch {repo.default_branch})")
    return status
