"""`switchyard-runner.toml`: what a runner is called, where it keeps its files, and how it starts agents.

Read with the standard library (tomllib). Every mistake is a ``RunnerConfigError`` naming the key
and what was expected, so `switchyard runner` stops at start-up with one clear line instead of
failing on the first run.
"""

from __future__ import annotations

import os
import socket
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from switchyard_client.api.errors import ConfigurationError

OUTPUTS = ("stream-json", "jsonl", "text")
RUNNER_KEYS = {
    "url",
    "key",
    "name",
    "labels",
    "capacity",
    "root",
    "grace_seconds",
    "host",
    "sandbox",
    "sandbox_hide",
    "min_free_memory_mb",
}
PROVIDER_KEYS = {
    "command",
    "resume_command",
    "env",
    "output",
    "timeout_seconds",
    "enabled",
    "hooks",
    "prompt_stdin",
    "sandbox",
    "home_files",
    "memory_mb",
}
# [runner] sandbox: true (every run in bubblewrap; a run fails when it cannot be), "if-available"
# (sandboxed where bwrap works, else said once at start and run as plain processes), false (never).
SANDBOX_MODES = (True, False, "if-available")
REPOSITORY_KEYS = {"path", "default_branch"}
DEFAULT_ROOT = "./var/runner"
DEFAULT_GRACE = 10.0
# Memory the runner leaves to the rest of the machine: a run starts only while MemAvailable minus this
# is at least its provider's memory_mb (room.py).
DEFAULT_MIN_FREE_MEMORY_MB = 1024
MEMORY_MB_MAX = 1 << 24  # 16 TB: a bigger figure is a typo
# The built-in providers (providers.py): a config table of one of these names may leave out the command.
BUILTIN_NAMES = ("claude", "codex", "gemini", "shell", "demo")


class RunnerConfigError(ConfigurationError):
    """The config file is missing, not TOML, or says something the runner cannot use."""


@dataclass
class ProviderConfig:
    """How to start one kind of agent. ``command``/``resume_command`` are argv templates (see
    providers.render); ``hooks``: the agent reports its own tool calls through
    `switchyard hook`, so the runner does not turn its output into tool events too."""

    name: str
    command: list[str]
    resume_command: list[str] | None = None
    env: dict[str, str] = field(default_factory=dict)
    output: str = "text"
    timeout_seconds: float | None = None
    enabled: bool = True
    hooks: bool = False
    prompt_stdin: bool = False  # the prompt is also the agent's standard input (else /dev/null)
    sandbox: bool = True  # false: this provider's agents run unsandboxed even where the runner sandboxes
    home_files: list[str] = field(default_factory=list)  # copied from the home into the sandbox's private home
    # What one run of it takes (MB, resident): the runner starts one only while the machine has that
    # to spare (room.py). None: the built-in's default, else DEFAULT_PROVIDER_MEMORY_MB (providers.py).
    memory_mb: int | None = None


@dataclass
class RepositoryConfig:
    """A git clone on this machine: tasks of the repository of this name run only on this runner,
    in worktrees it makes beside the clone (``<parent>/<type>-<task>``)."""

    name: str
    path: Path
    default_branch: str = ""  # '' = the clone's origin HEAD, else the branch checked out


@dataclass
class RunnerConfig:
    url: str
    key: str
    name: str
    labels: list[str] = field(default_factory=list)
    capacity: int = 1
    root: Path = Path(DEFAULT_ROOT)
    grace_seconds: float = DEFAULT_GRACE
    host: str = ""
    sandbox: bool | str = True  # one of SANDBOX_MODES
    sandbox_hide: list[Path] = field(default_factory=list)  # more folders or files the agents never see
    min_free_memory_mb: int = DEFAULT_MIN_FREE_MEMORY_MB
    # What the file says about providers; the built-ins are merged in by providers.providers_for.
    providers: dict[str, dict[str, Any]] = field(default_factory=dict)
    repositories: list[RepositoryConfig] = field(default_factory=list)
    source: str = ""


def _fail(where: str, message: str) -> RunnerConfigError:
    return RunnerConfigError(f"{where}: {message}")


def _str_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _fail(where, "must be a list of strings")
    return list(value)


def _number(value: Any, where: str, *, minimum: float, integer: bool = False, maximum: float | None = None) -> Any:
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or value < minimum or (maximum is not None and value > maximum):
        kind = "an integer" if integer else "a number"
        bounds = f"≥ {minimum:g}" if maximum is None else f"from {minimum:g} to {maximum:g}"
        raise _fail(where, f"must be {kind} {bounds}, not {value!r}")
    return value


def parse_provider(name: str, table: Any, *, base: ProviderConfig | None = None) -> ProviderConfig:
    """A ``[providers.<name>]`` table over the built-in of that name (if any)."""
    where = f"[providers.{name}]"
    if not isinstance(table, dict):
        raise _fail(where, "must be a table")
    unknown = set(table) - PROVIDER_KEYS
    if unknown:
        raise _fail(where, f"unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(PROVIDER_KEYS))})")
    out = ProviderConfig(name=name, command=[]) if base is None else ProviderConfig(**vars(base))
    out.env = dict(out.env)
    if "command" in table:
        out.command = _str_list(table["command"], f"{where} command")
    if "resume_command" in table:
        out.resume_command = _str_list(table["resume_command"], f"{where} resume_command") or None
    if "env" in table:
        env = table["env"]
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise _fail(f"{where} env", "must be a table of strings")
        out.env.update(env)
    if "output" in table:
        if table["output"] not in OUTPUTS:
            raise _fail(f"{where} output", f"must be one of {', '.join(OUTPUTS)}, not {table['output']!r}")
        out.output = table["output"]
    if "timeout_seconds" in table:
        out.timeout_seconds = float(_number(table["timeout_seconds"], f"{where} timeout_seconds", minimum=1))
    if "home_files" in table:
        out.home_files = _str_list(table["home_files"], f"{where} home_files")
        for name in out.home_files:
            if name.startswith("/") or ".." in Path(name.removeprefix("~/")).parts:
                raise _fail(
                    f"{where} home_files", f"{name!r} must be a path inside the home, like .claude/settings.json"
                )
    if "memory_mb" in table:
        out.memory_mb = _number(
            table["memory_mb"], f"{where} memory_mb", minimum=0, integer=True, maximum=MEMORY_MB_MAX
        )
    for flag in ("enabled", "hooks", "prompt_stdin", "sandbox"):
        if flag in table:
            if not isinstance(table[flag], bool):
                raise _fail(f"{where} {flag}", "must be true or false")
            setattr(out, flag, table[flag])
    if not out.command and out.enabled and name != "shell":
        raise _fail(where, 'needs a command (an argv list, e.g. ["my-agent", "--", "{prompt}"])')
    return out


def parse_config(data: dict[str, Any], *, env: dict[str, str] | None = None, source: str = "") -> RunnerConfig:
    env = os.environ if env is None else env
    unknown_top = set(data) - {"runner", "providers", "repositories"}
    if unknown_top:
        raise _fail(
            source or "config",
            f"unknown section(s) {', '.join(sorted(unknown_top))} (known: runner, providers, repositories)",
        )
    runner = data.get("runner", {})
    if not isinstance(runner, dict):
        raise _fail("[runner]", "must be a table")
    unknown = set(runner) - RUNNER_KEYS
    if unknown:
        raise _fail(
            "[runner]", f"unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(RUNNER_KEYS))})"
        )
    url = runner.get("url") or env.get("SWITCHYARD_URL", "")
    key = runner.get("key") or env.get("SWITCHYARD_RUNNER_KEY", "")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise _fail("[runner] url", f"must be the server's http(s) URL, e.g. http://127.0.0.1:8000, not {url!r}")
    if not isinstance(key, str) or not key:
        raise _fail("[runner] key", "missing: set it here or in SWITCHYARD_RUNNER_KEY (manage.py create_runner_key)")
    name = runner.get("name") or socket.gethostname().split(".")[0]
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_" for c in name) or len(name) > 48:
        raise _fail("[runner] name", f"must be 1-48 letters, digits, '-' or '_', not {name!r}")
    labels = _str_list(runner.get("labels", []), "[runner] labels")
    capacity = _number(runner.get("capacity", 1), "[runner] capacity", minimum=1, integer=True)
    grace = float(_number(runner.get("grace_seconds", DEFAULT_GRACE), "[runner] grace_seconds", minimum=0))
    root = runner.get("root", DEFAULT_ROOT)
    if not isinstance(root, str) or not root:
        raise _fail("[runner] root", "must be a folder path")
    root_path = Path(root).expanduser()
    if source and not root_path.is_absolute():
        # Relative to the config file, so the runner finds its state whatever folder it starts in.
        root_path = Path(source).resolve().parent / root_path
    host = runner.get("host") or socket.gethostname()
    if not isinstance(host, str):
        raise _fail("[runner] host", "must be a string")
    sandbox = runner.get("sandbox", True)
    if sandbox not in SANDBOX_MODES or not isinstance(sandbox, (bool, str)):
        raise _fail("[runner] sandbox", f'must be true, false or "if-available", not {sandbox!r}')
    min_free = _number(
        runner.get("min_free_memory_mb", DEFAULT_MIN_FREE_MEMORY_MB),
        "[runner] min_free_memory_mb",
        minimum=0,
        integer=True,
        maximum=MEMORY_MB_MAX,
    )
    hide = []
    for item in _str_list(runner.get("sandbox_hide", []), "[runner] sandbox_hide"):
        path = Path(item).expanduser()
        if not path.is_absolute():
            path = (Path(source).resolve().parent if source else Path.cwd()) / path
        hide.append(path)
    providers = data.get("providers", {})
    if not isinstance(providers, dict):
        raise _fail("[providers]", "must be a table of [providers.<name>] tables")
    for pname, table in providers.items():
        if not isinstance(table, dict):
            raise _fail(f"[providers.{pname}]", "must be a table")
        parse_provider(pname, table, base=_placeholder(pname, table))  # validate now, merge later
    repositories = _repositories(data.get("repositories", {}), source=source)
    return RunnerConfig(
        url=url,
        key=key,
        name=name,
        labels=labels,
        capacity=capacity,
        root=root_path.resolve(),
        grace_seconds=grace,
        host=host,
        sandbox=sandbox,
        sandbox_hide=hide,
        min_free_memory_mb=min_free,
        providers=providers,
        repositories=repositories,
        source=source,
    )


def _repositories(tables: Any, *, source: str) -> list[RepositoryConfig]:
    """``[repositories.<name>]`` tables: ``path`` (the clone's top folder; relative to the config
    file) and an optional ``default_branch``. Checked as a git clone when the runner starts."""
    if not isinstance(tables, dict):
        raise _fail("[repositories]", "must be a table of [repositories.<name>] tables")
    found = []
    for name, table in tables.items():
        where = f"[repositories.{name}]"
        if not (name and len(name) <= 100 and all(c.islower() or c.isdigit() or c == "-" for c in name)):
            raise _fail(where, "the name must be 1-100 lowercase letters, digits and '-' (the repository's slug)")
        if not isinstance(table, dict):
            raise _fail(where, "must be a table")
        unknown = set(table) - REPOSITORY_KEYS
        if unknown:
            raise _fail(where, f"unknown key(s) {', '.join(sorted(unknown))} (known: path, default_branch)")
        path = table.get("path")
        if not isinstance(path, str) or not path:
            raise _fail(f"{where} path", "must be the folder of a git clone on this machine")
        folder = Path(path).expanduser()
        if source and not folder.is_absolute():
            folder = Path(source).resolve().parent / folder
        branch = table.get("default_branch", "")
        if not isinstance(branch, str):
            raise _fail(f"{where} default_branch", "must be a branch name")
        found.append(RepositoryConfig(name=name, path=Path(os.path.realpath(folder)), default_branch=branch))
    return found


def _placeholder(name: str, table: dict) -> ProviderConfig | None:
    # Built-ins have a command already, so a table that only turns one off or sets a timeout is fine.
    return ProviderConfig(name=name, command=["builtin"]) if name in BUILTIN_NAMES else None


def load_config(path: str | Path | None, *, env: dict[str, str] | None = None) -> RunnerConfig:
    """Read ``path`` (default: ./switchyard-runner.toml if it exists, else the environment alone)."""
    env = os.environ if env is None else env
    if path is None:
        default = Path("switchyard-runner.toml")
        if not default.exists():
            return parse_config({}, env=env)
        path = default
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RunnerConfigError(f"cannot read the runner config {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RunnerConfigError(f"{path} is not valid TOML: {exc}") from None
    return parse_config(data, env=env, source=str(path))
