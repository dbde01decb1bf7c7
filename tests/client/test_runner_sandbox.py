"""The runner's sandbox (client/src/switchyard_client/runner/sandbox.py, sandbox_run.py): the config's
switches, the plan of what an agent sees, its private home, and real bubblewrap where installed."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from switchyard_client.runner import sandbox_run
from switchyard_client.runner.config import ProviderConfig, RunnerConfigError, parse_config, parse_provider
from switchyard_client.runner.process import fenced_kill, group_alive, read_exit_file, spawn, stop_group
from switchyard_client.runner.sandbox import (
    SandboxUnavailable,
    bwrap_argv,
    bwrap_problem,
    plan_for,
    private_home_prepare,
    program_folders,
)
from switchyard_client.runner.watchdog import lease_path, watchdog_start, watchdog_stop

BASE = {"url": "http://127.0.0.1:8000", "key": "sy_x", "name": "box-1"}
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@pytest.mark.parametrize("value", [True, False, "if-available"])
def test_the_runners_sandbox_switch_takes_its_three_values(value):
    assert parse_config({"runner": {**BASE, "sandbox": value}}).sandbox == value


def test_the_sandbox_is_on_unless_the_config_says_otherwise():
    assert parse_config({"runner": BASE}).sandbox is True
    assert ProviderConfig(name="x", command=["x"]).sandbox is True


@pytest.mark.parametrize("value", ["yes", 1, "off", None])
def test_another_sandbox_value_is_refused_with_the_three_it_takes(value):
    with pytest.raises(RunnerConfigError, match=r'\[runner\] sandbox: must be true, false or "if-available"'):
        parse_config({"runner": {**BASE, "sandbox": value}})


@pytest.mark.parametrize("name", ["/etc/passwd", "../.ssh/id_rsa", ".claude/../../x"])
def test_a_home_file_outside_the_home_is_refused(name):
    with pytest.raises(RunnerConfigError, match="must be a path inside the home"):
        parse_provider("claude", {"command": ["claude"], "home_files": [name]})


def test_sandbox_hide_is_relative_to_the_config_file(tmp_path):
    config = parse_config(
        {"runner": {**BASE, "sandbox_hide": ["secrets", "/srv/keys"]}}, source=str(tmp_path / "runner.toml")
    )
    assert config.sandbox_hide == [tmp_path / "secrets", Path("/srv/keys")]


def test_a_missing_bwrap_is_named_with_how_to_install_it():
    assert bwrap_problem("bwrap-not-here") == "bwrap-not-here (bubblewrap) is not installed: apt-get install bubblewrap"


def test_required_and_missing_fails_if_available_and_missing_runs_plain(monkeypatch):
    monkeypatch.setattr(sandbox_run, "bwrap_problem", lambda: "bwrap (bubblewrap) is not installed")
    provider = ProviderConfig(name="demo", command=["demo"])
    with pytest.raises(SandboxUnavailable, match="bubblewrap\\) is not installed; this runner's config asks"):
        sandbox_run.sandbox_wanted(parse_config({"runner": BASE}), provider)
    assert sandbox_run.sandbox_wanted(parse_config({"runner": {**BASE, "sandbox": "if-available"}}), provider) is False
    assert sandbox_run.sandbox_wanted(parse_config({"runner": {**BASE, "sandbox": False}}), provider) is False
    provider.sandbox = False
    assert sandbox_run.sandbox_wanted(parse_config({"runner": BASE}), provider) is False


def test_the_plan_hides_the_private_places_and_never_the_system(tmp_path):
    home, root, code = tmp_path / "home", tmp_path / "root", tmp_path / "code"
    for folder in (home / "bin", root, code / "task-1", code / "task-2", code / "sync"):
        folder.mkdir(parents=True)
    plan = plan_for(
        workdir=str(code / "task-1"),
        home=str(home),
        private_home=str(root / "homes" / "demo-task-1"),
        hide=[str(home), str(root), str(code), "/", "/usr", "/etc", str(tmp_path / "absent")],
        programs=[str(home / "bin"), "/usr/bin"],
        readable=[str(code / "sync")],
        writable=[str(root)],
    )
    assert plan.hidden == [str(code), str(root)]  # the home is replaced, not hidden; nothing that is missing
    assert plan.readable == [str(home / "bin"), str(code / "sync")]  # /usr/bin was never hidden
    assert plan.writable == [str(code / "task-1"), str(root)]
    argv = bwrap_argv(plan, ["demo", "--", "-x"])
    assert argv[-3:] == ["demo", "--", "-x"]
    assert argv.index(str(code / "task-1")) > argv.index(str(code))  # the worktree lies over its hidden folder


def test_the_private_home_gets_copies_of_the_named_files_only_and_keeps_a_newer_copy(tmp_path):
    home, private = tmp_path / "home", tmp_path / "private"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text("{}")
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text("KEY")

    copied = private_home_prepare(private, home=home, files=["~/.claude/settings.json", ".claude/absent.json"])

    assert copied == [".claude/settings.json"]
    assert sorted(str(p.relative_to(private)) for p in private.rglob("*")) == [".claude", ".claude/settings.json"]
    (private / ".claude" / "settings.json").write_text('{"refreshed": true}')  # written inside the sandbox
    os.utime(home / ".claude" / "settings.json", (1, 1))
    assert private_home_prepare(private, home=home, files=[".claude/settings.json"]) == []
    assert (private / ".claude" / "settings.json").read_text() == '{"refreshed": true}'
    with pytest.raises(ValueError, match="must be a path inside the home"):
        private_home_prepare(private, home=home, files=["../etc/passwd"])


@needs_bwrap
def test_in_bwrap_the_agent_writes_its_worktree_and_nothing_hidden_and_sees_only_its_own_processes(tmp_path):
    home, root, code = tmp_path / "home", tmp_path / "root", tmp_path / "code"
    for folder in (home / ".ssh", root, code / "task-1", code / "task-2"):
        folder.mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("KEY")
    (code / "task-2" / "theirs.txt").write_text("theirs")
    plan = plan_for(
        workdir=str(code / "task-1"),
        home=str(home),
        private_home=str(root / "homes" / "x"),
        hide=[str(root), str(code)],
        programs=[],
        writable=[],
    )
    os.makedirs(plan.private_home)
    script = (
        "echo mine > mine.txt; "
        "cat ../task-2/theirs.txt 2>/dev/null && echo SAW-THEIRS; "
        'cat "$HOME/.ssh/id_rsa" 2>/dev/null && echo SAW-KEY; '
        "echo x > ../task-2/x.txt 2>/dev/null && echo WROTE-THEIRS; "
        "echo pid $$; ls /proc | grep -c '^[0-9]'"
    )
    done = subprocess.run(bwrap_argv(plan, ["sh", "-c", script]), capture_output=True, text=True, timeout=30)

    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert "SAW-THEIRS" not in lines and "SAW-KEY" not in lines and "WROTE-THEIRS" not in lines
    assert (code / "task-1" / "mine.txt").read_text() == "mine\n"
    assert not (code / "task-2" / "x.txt").exists()
    assert int(lines[-1]) <= 4  # bwrap's init, sh, ls and grep: nothing of the host's


@needs_bwrap
def test_a_sandboxed_agent_is_seen_by_its_fence_and_nothing_of_it_outlives_its_group_signal(tmp_path):
    """The watchdog's fence (SWITCHYARD_FENCE in /proc/*/environ) sees agents inside bwrap's PID
    namespace from outside it, and the runner's stop (SIGTERM to the group) ends them all: even a
    detached tool call deaf to SIGTERM ends with the namespace's first process."""
    work = tmp_path / "work"
    work.mkdir()
    plan = plan_for(
        workdir=str(work), home=str(tmp_path), private_home=str(tmp_path / "home"), hide=[], programs=[], writable=[]
    )
    os.makedirs(plan.private_home)
    fence = os.urandom(6).hex()
    script = "setsid sh -c 'trap \"\" TERM; echo started > tool; while :; do sleep 0.1; done' & wait"
    env = {**os.environ, "SWITCHYARD_FENCE": fence}
    agent = subprocess.Popen(bwrap_argv(plan, ["sh", "-c", script]), env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while not (work / "tool").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (work / "tool").exists()
        assert len(_fenced(fence)) >= 3  # bwrap's init, the agent's sh, the detached tool (and its sleep)

        os.killpg(agent.pid, signal.SIGTERM)

        assert agent.wait(10) is not None
        deadline = time.monotonic() + 10
        while _fenced(fence) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _fenced(fence) == []
    finally:
        fenced_kill(fence)
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)


# On SIGTERM it takes half a second to save its work (as an agent writing out its session does), then
# exits 0; a SIGTERM to bubblewrap itself used to end the sandbox, and the agent with it, mid-handler.
SAVES_ON_SIGTERM = (
    'trap "sleep 0.5; echo saved > saved; exit 0" TERM; echo started > started; while :; do sleep 0.1; done'
)


def _sandbox_plan(tmp_path: Path):
    work = tmp_path / "work"
    work.mkdir()
    plan = plan_for(
        workdir=str(work), home=str(tmp_path), private_home=str(tmp_path / "home"), hide=[], programs=[], writable=[]
    )
    os.makedirs(plan.private_home)
    return plan, work


def _wait_for_file(path: Path, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists(), f"{path.name} never appeared"


@needs_bwrap
def test_a_stopped_sandboxed_agent_finishes_its_sigterm_handler_and_its_exit_code_is_its_own(tmp_path):
    plan, work = _sandbox_plan(tmp_path)
    log, exit_file = tmp_path / "agent.log", tmp_path / "agent.exit"
    wrapper = spawn(
        bwrap_argv(plan, ["sh", "-c", SAVES_ON_SIGTERM]),
        cwd=str(work),
        env=dict(os.environ),
        log_path=log,
        exit_path=exit_file,
    )
    try:
        _wait_for_file(work / "started")
        # when the runner stops it (a cancel), with a grace far longer than the handler takes
        stop_group(wrapper.pid, grace=30, reap=wrapper.poll)
        # then the handler ran to its end inside the sandbox, and the code recorded is the agent's
        assert (work / "saved").read_text() == "saved\n", log.read_text()
        assert read_exit_file(exit_file) == 0
        assert not group_alive(wrapper.pid)
    finally:
        if wrapper.poll() is None:
            os.killpg(wrapper.pid, signal.SIGKILL)


@needs_bwrap
def test_a_watchdog_stopping_a_sandboxed_agent_lets_its_sigterm_handler_finish(tmp_path):
    plan, work = _sandbox_plan(tmp_path)
    fence = os.urandom(6).hex()
    env = {**os.environ, "SWITCHYARD_FENCE": fence}
    agent = subprocess.Popen(bwrap_argv(plan, ["sh", "-c", SAVES_ON_SIGTERM]), env=env, start_new_session=True)
    lease = lease_path(tmp_path, 11)
    dog = None
    try:
        _wait_for_file(work / "started")
        # when its lease has lapsed (SIGTERM due now, SIGKILL in 20 s)
        now = int(time.time())
        lease.write_text(f"{now} {now + 20}\n")
        dog = watchdog_start(lease, agent.pid, fence)
        # then the agent ended on its own (bubblewrap passes its code on), its handler done, before any SIGKILL
        assert agent.wait(30) == 0
        assert (work / "saved").read_text() == "saved\n"
    finally:
        if dog is not None:
            watchdog_stop(dog.pid, dog)
        fenced_kill(fence)
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)


def _fenced(fence: str) -> list[int]:
    """Live processes (not zombies) whose environment holds SWITCHYARD_FENCE=``fence``."""
    mark, found = f"SWITCHYARD_FENCE={fence}".encode(), []
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX":
                continue
            if mark in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_the_programs_include_this_pythons_import_path(tmp_path):
    """`{python} -m switchyard_client...` (the hook, the demo agent) must import inside the sandbox
    even when the client is an editable install whose source lies in the /tmp the sandbox replaces."""
    source = tmp_path / "client" / "src"
    source.mkdir(parents=True)
    sys.path.append(str(source))
    try:
        found = program_folders("sh", {"PATH": "/usr/bin"})
    finally:
        sys.path.remove(str(source))
    assert str(source) in found
    plan = plan_for(
        workdir=str(tmp_path),
        home=str(tmp_path),
        private_home=str(tmp_path / "h"),
        hide=[],
        programs=found,
        writable=[],
    )
    assert str(source) in plan.readable  # under the private /tmp: shown again, read-only


def test_a_program_folder_that_holds_a_hidden_one_is_not_shown_whole(tmp_path):
    """The runner's working folder (on its import path) holding the instance's var/ (hidden): showing
    it again would undo the hiding, and bwrap then fails to remount var/ read-only."""
    project = tmp_path / "project"
    (project / "var" / "runner").mkdir(parents=True)
    (project / "client" / "src").mkdir(parents=True)
    plan = plan_for(
        workdir=str(project / "var" / "code" / "task-1"),
        home=str(tmp_path / "home"),
        private_home=str(tmp_path / "h"),
        hide=[str(project / "var")],
        programs=[str(project), str(project / "client" / "src"), str(tmp_path)],
        writable=[],
    )
    assert plan.hidden == [str(project / "var")]
    assert plan.readable == [str(project / "client" / "src")]


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30, check=True)
    return done.stdout


@needs_bwrap
def test_in_bwrap_the_agent_commits_but_cannot_write_git_config_or_hooks_even_after_a_git_outside_rewrote_config(
    tmp_path,
):
    """`git config` outside (the runner's, an unsandboxed run's) renames a new config file into place:
    a read-only mount of the config file itself came loose then, and the agent wrote a merge driver
    that the server's merge would run. The git folder is the mount, so it holds whatever git does outside."""
    code = tmp_path / "code"
    clone, worktree = code / "shop", code / "task-1"
    clone.mkdir(parents=True)
    _git(clone, "init", "-q", "-b", "main")
    _git(clone, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "--allow-empty", "-m", "start")
    _git(clone, "worktree", "add", "-q", "-b", "task-1", str(worktree))
    plan = plan_for(
        workdir=str(worktree),
        home=str(tmp_path / "person"),
        private_home=str(tmp_path / "private-home"),
        hide=[str(code)],
        programs=[],
        writable=[],
        git_dir=str(clone / ".git"),
    )
    os.makedirs(plan.private_home)
    script = (
        "touch ready; while [ ! -e go ]; do sleep 0.05; done; "
        "git config merge.evil.driver 'touch pwned' 2>/dev/null && echo WROTE-CONFIG; "
        'echo "touch pwned" > "$(git rev-parse --git-common-dir)/hooks/post-merge" 2>/dev/null && echo WROTE-HOOK; '
        "echo mine > mine.txt && git add mine.txt && "
        "git -c user.name=agent -c user.email=a@x commit -qm mine && echo COMMITTED"
    )
    agent = subprocess.Popen(bwrap_argv(plan, ["sh", "-c", script]), stdout=subprocess.PIPE, text=True)
    try:
        # when a git outside the sandbox rewrites the config while the agent runs
        deadline = time.monotonic() + 20
        while not (worktree / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        _git(clone, "config", "user.name", "the runner")
        (worktree / "go").write_text("")
        out, _ = agent.communicate(timeout=30)
    finally:
        if agent.poll() is None:
            agent.kill()

    assert (worktree / "ready").exists()
    assert out.split() == ["COMMITTED"]
    assert "evil" not in (clone / ".git" / "config").read_text()
    assert not (clone / ".git" / "hooks" / "post-merge").exists()
    assert _git(clone, "log", "-1", "--format=%s", "task-1").strip() == "mine"
