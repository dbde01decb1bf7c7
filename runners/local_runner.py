"""`make run`'s own runner (SPEC §8, "Embedded default"): the runner ``local`` and its config file.

``setup_demo --runner-config FILE`` calls ``local_runner_config_write``; ``serve --runner-config FILE``
starts `switchyard runner --config FILE` as one of its children. The file is the only copy of the
runner's key, so it is private (0600) and kept between runs: a key still valid is reused, and a new
one is minted only when the file (or its key) is gone, revoked or not the local runner's. The runner
offers its providers itself (its heartbeat says which: demo and shell always, claude/codex/gemini when
their programs are on PATH), so the file names none.
"""

import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from runners.models import Runner
from runners.services import runner_key_create
from sessions_app.keys import api_key_find
from sessions_app.models import AgentApiKey

LOCAL_RUNNER_NAME = "local"
LOCAL_RUNNER_LABELS = ["local"]
# Two runs at once: a person can try a second card while the first runs, without a laptop
# running a dozen agents.
LOCAL_RUNNER_CAPACITY = 2

HEADER = """\
# make run's local runner: written by `manage.py setup_demo --runner-config`, started by
# `manage.py serve --runner-config` as `switchyard runner --config <this file>`. Private (0600): it
# holds the runner's key. Rewritten only when the port or the root changes or the key is no longer
# valid; see README "Runners" to start a runner on another machine.
"""


@dataclass(frozen=True)
class LocalRunnerConfig:
    path: Path
    runner: Runner
    minted: bool  # a new key was made (the old one was missing or no longer valid)
    written: bool  # the file was (re)written


def _read(path: Path) -> dict:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    runner = data.get("runner")
    return runner if isinstance(runner, dict) else {}


def _key_valid(key: object, runner: Runner | None) -> bool:
    if runner is None or not isinstance(key, str):
        return False
    found = api_key_find(key=key)
    return found is not None and found.agent_id == runner.agent_id and found.has_scope(AgentApiKey.Scope.RUN)


def _toml(value: object) -> str:
    # JSON's strings, numbers and arrays of strings are valid TOML values.
    return json.dumps(value, ensure_ascii=False)


def _write_private(path: Path, text: str) -> None:
    """Atomically, created 0600 before a byte of the key is in it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o600)  # an existing tmp keeps its mode through O_CREAT
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@transaction.atomic
def local_runner_config_write(*, path: Path, url: str, root: Path) -> LocalRunnerConfig:
    """Make sure runner ``local`` exists and ``path`` holds a config with a valid key for it."""
    path = Path(path)
    current = _read(path)
    runner = Runner.objects.filter(name=LOCAL_RUNNER_NAME).first()
    key = current.get("key")
    minted = False
    if not _key_valid(key, runner):
        # Labels and capacity are set when the runner is made; a person may change them in the admin.
        created_with = {} if runner else {"labels": LOCAL_RUNNER_LABELS, "capacity": LOCAL_RUNNER_CAPACITY}
        runner, issued, _ = runner_key_create(name=LOCAL_RUNNER_NAME, **created_with)
        key, minted = issued.key, True
    wanted = {
        "url": url,
        "key": key,
        "name": LOCAL_RUNNER_NAME,
        "root": str(Path(root).resolve()),
        # Sandboxed where bubblewrap is installed (`make run` installs it when it can), else the demo
        # still runs, said once; the agents never see this instance's files (database, keys, workspaces).
        "sandbox": "if-available",
        "sandbox_hide": [str(path.resolve().parent)],
    }
    written = minted or any(current.get(k) != v for k, v in wanted.items())
    if written:
        lines = [HEADER, "[runner]"]
        lines += [f"{name} = {_toml(value)}" for name, value in wanted.items()]
        lines += [f"capacity = {runner.capacity}", f"labels = {_toml(list(runner.labels))}"]
        text = "\n".join(lines) + "\n"
        # Once the key is committed: a file must never hold a key the database rolled back.
        transaction.on_commit(lambda: _write_private(path, text))
    elif (path.stat().st_mode & 0o777) != 0o600:
        os.chmod(path, 0o600)
    return LocalRunnerConfig(path=path, runner=runner, minted=minted, written=written)
