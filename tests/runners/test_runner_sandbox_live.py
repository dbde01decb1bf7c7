"""A sandbox per run (SPEC §8), end to end: a real `switchyard runner` holding a real clone starts a
shell agent that tries what a hostile agent would (the runner's key in /proc and in its config, another
run's worktree, the home's ~/.ssh and ~/.aws, writing outside its worktree or into the repository's git
config and hooks) and does its own work (an
edit, a commit, an upload through the API). The same probe with the provider's `sandbox = false` is
the control: it reads and writes all of it, so every "refused" below is the sandbox's doing.
"""

import shutil
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from config.actors import Actor
from runners.models import Run
from runners.services import run_cancel, run_queue
from sessions_app.models import AgentSession
from tests.client.live import server_roots  # noqa: F401
from tests.factories import TaskFactory, UserFactory
from tests.runners.live_runner import GIT_ENV, Machine, git, wait_for
from tests.runners.test_runner_hosted_repos_live import make_clone, sy_server  # noqa: F401
from workspaces.models import Artifact, Repository

pytestmark = [
    pytest.mark.usefixtures("transactional_db"),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)"),
]

# Each line of probe.txt: "<what> READ|WROTE" when the attempt worked, "<what> refused" when not.
PROBE = r"""
out=probe.txt; : > "$out"
attempt() { if sh -c "$2" >/dev/null 2>&1; then echo "$1 $3" >> "$out"; else echo "$1 refused" >> "$out"; fi; }
key="$KEY_HEAD$KEY_TAIL"  # in halves: the whole key is in no environment of the agent's own
attempt runner-environ "grep -qs '$key' /proc/[0-9]*/environ" READ
attempt runner-config "grep -qs '$key' '$RUNNER_CONFIG'" READ
attempt other-worktree 'cat "$OTHER_WORKTREE/secret.txt"' READ
attempt ssh 'cat "$REAL_HOME/.ssh/id_rsa"' READ
attempt aws 'cat "$REAL_HOME/.aws/credentials"' READ
attempt write-project 'echo pwned > "$PROJECT_DIR/pwned-$SWITCHYARD_RUN"' WROTE
attempt write-clone 'echo pwned >> "$CLONE/README.md"' WROTE
attempt git-config 'git config merge.evil.driver "touch pwned-by-merge"' WROTE
attempt git-hooks 'echo "touch pwned-by-hook" > "$(git rev-parse --git-common-dir)/hooks/post-merge"' WROTE
echo "work of run $SWITCHYARD_RUN" > note.txt
git add note.txt probe.txt && git commit -qm "probe of run $SWITCHYARD_RUN" && echo committed
"$PYTHON" -m switchyard_client.cli put note.txt && echo uploaded
"""

# An agent that, stopped, saves its work through the API before it ends (as Claude Code writes out its
# session): bubblewrap used to die of the same SIGTERM and end the sandbox with the agent mid-save.
SAVES_ON_STOP = r"""
trap 'echo "saved by run $SWITCHYARD_RUN" > saved.txt; "$PYTHON" -m switchyard_client.cli put saved.txt && exit 0; exit 1' TERM
: > started
while :; do sleep 0.1; done
"""


@pytest.fixture
def machine(tmp_path, sy_server):  # noqa: F811
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("aws_secret_access_key = x\n")
    project = Path(settings.BASE_DIR) / "var" / f"sandbox-probe-{uuid.uuid4().hex[:8]}"  # outside /tmp
    project.mkdir(parents=True)
    clone = make_clone(tmp_path / "machine")
    other = clone.parent / "task-999"  # another run's worktree, beside this run's
    other.mkdir()
    (other / "secret.txt").write_text("another run's work\n")
    m = Machine(tmp_path, sy_server.url, "boxed", capacity=2, env={**GIT_ENV, "HOME": str(home)})
    common = {
        "command": ["sh", "-c", PROBE.replace("{", "{{").replace("}", "}}")],  # no placeholders in it
        "output": "text",
        "env": {
            "KEY_HEAD": m.key[:12],
            "KEY_TAIL": m.key[12:],
            "RUNNER_CONFIG": str(m.config),
            "OTHER_WORKTREE": str(other),
            "REAL_HOME": str(home),
            "PROJECT_DIR": str(project),
            "CLONE": str(clone),
            "PYTHON": sys.executable,
        },
    }
    saver = {"command": ["sh", "-c", SAVES_ON_STOP], "output": "text", "env": {"PYTHON": sys.executable}}
    m.providers = {"probe": common, "trusted": {**common, "sandbox": False}, "saver": saver}
    m.repositories = {"shop": {"path": str(clone)}}
    m.runner_table["sandbox"] = True
    m.env["SWITCHYARD_RUNNER_KEY"] = m.key  # as a runner started with its key in its environment
    m.write()
    m.project, m.clone = project, clone
    yield m
    m.cleanup()
    shutil.rmtree(project, ignore_errors=True)


def _probe(run: Run, clone: Path) -> dict[str, str]:
    text = git(clone, "show", f"task-{run.task_id}:probe.txt")
    return dict(line.split(" ", 1) for line in text.splitlines())


def test_a_sandboxed_agent_sees_only_its_own_work_and_the_trusted_control_sees_everything(machine):
    # given a runner holding the clone, with bubblewrap
    machine.start()
    shop = wait_for(lambda: Repository.objects.filter(name="shop").first(), what="the clone", machines=[machine])
    person = Actor(user=UserFactory(username="po", is_staff=True))

    # when the probe runs in the sandbox, and again as a trusted provider
    boxed = run_queue(actor=person, task=TaskFactory(repository=shop), provider="probe")
    trusted = run_queue(actor=person, task=TaskFactory(repository=shop), provider="trusted")

    def ended():
        runs = list(Run.objects.filter(pk__in=[boxed.pk, trusted.pk]))
        return runs if all(r.status in Run.TERMINAL for r in runs) else None

    wait_for(ended, timeout=90, what="both runs to end", machines=[machine])
    boxed.refresh_from_db()
    trusted.refresh_from_db()
    assert (boxed.status, trusted.status) == ("succeeded", "succeeded"), (boxed.error, machine.output())

    # then the sandboxed agent was refused everything that is not its own
    assert boxed.sandboxed is True and trusted.sandboxed is False
    assert _probe(boxed, machine.clone) == {
        "runner-environ": "refused",
        "runner-config": "refused",
        "other-worktree": "refused",
        "ssh": "refused",
        "aws": "refused",
        "write-project": "refused",
        "write-clone": "refused",
        # the repository's git config and hooks run outside the sandbox (the server's merge, a person's git)
        "git-config": "refused",
        "git-hooks": "refused",
    }
    assert not (machine.project / f"pwned-{boxed.pk}").exists()
    # ... while the same probe unsandboxed got all of it (so each check above can fail)
    assert set(_probe(trusted, machine.clone).values()) == {"READ", "WROTE"}
    assert (machine.project / f"pwned-{trusted.pk}").exists()
    assert (machine.clone / "README.md").read_text().count("pwned") == 1  # the trusted run's line only

    # and its own work went through: the commit on its branch, the upload in its session's workspace
    assert git(machine.clone, "log", "-1", "--format=%s", f"task-{boxed.task_id}").strip() == f"probe of run {boxed.pk}"
    session = AgentSession.objects.get(pk=boxed.session_id)
    assert Artifact.objects.filter(workspace=session.workspace, path__endswith="note.txt").exists()
    assert "(sandboxed)" in machine.output()


def test_a_stopped_sandboxed_agent_saves_its_work_before_it_ends(machine):
    # given a sandboxed agent at work, on a runner whose grace outlasts the agent's save
    machine.runner_table["grace_seconds"] = 60
    machine.write()
    machine.start()
    shop = wait_for(lambda: Repository.objects.filter(name="shop").first(), what="the clone", machines=[machine])
    person = Actor(user=UserFactory(username="po", is_staff=True))
    run = run_queue(actor=person, task=TaskFactory(repository=shop), provider="saver")

    def started():
        found = Run.objects.get(pk=run.pk)
        return found if found.workdir and (Path(found.workdir) / "started").exists() else None

    run = wait_for(started, timeout=60, what="the agent to start", machines=[machine])

    # when a person stops it
    run_cancel(actor=person, run=run)

    # then it ended cancelled, and what it saved on the SIGTERM reached its session
    wait_for(lambda: Run.objects.get(pk=run.pk).status in Run.TERMINAL, timeout=60, what="the end", machines=[machine])
    run.refresh_from_db()
    assert (run.status, run.sandboxed) == ("cancelled", True), (run.error, machine.output())
    session = AgentSession.objects.get(pk=run.session_id)
    saved = Artifact.objects.filter(workspace=session.workspace, path__endswith="saved.txt")
    assert saved.exists(), machine.output()
