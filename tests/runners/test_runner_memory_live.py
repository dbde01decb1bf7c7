"""A runner that fits its machine (issue 26 §3), end to end: a real `switchyard runner` on a machine
made small for the test (its meminfo read from a file, the SWITCHYARD_RUNNER_MEMINFO test hook), with
a provider whose agent takes memory while it works. The runner takes the first run, holds the second
back (it stays queued on the server, its card says why), and starts it once the first has ended and
its memory is free again.
"""

import sys

import pytest
from django.utils import timezone

from config.actors import Actor
from runners.models import Run, Runner
from runners.page_selectors import task_run_box
from runners.services import run_queue
from tests.client.live import server_roots  # noqa: F401
from tests.factories import TaskFactory, UserFactory
from tests.runners.live_runner import GIT_ENV, Machine, run_in, wait_for
from tests.runners.test_runner_hosted_repos_live import sy_server  # noqa: F401

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc-style meminfo"),
    pytest.mark.usefixtures("transactional_db"),
]

TOTAL_MB, AVAILABLE_MB, MIN_FREE_MB, HOG_MB = 4000, 1700, 1000, 500


def meminfo(available_mb: int) -> str:
    return (
        f"MemTotal:       {TOTAL_MB * 1024} kB\nMemFree:          10240 kB\nMemAvailable:   {available_mb * 1024} kB\n"
    )


# The agent takes memory for real (64 MB touched), shows the machine 600 MB fewer available while it
# holds them (a machine's MemAvailable is what the runner reads), waits to be let go, and gives them back.
HOG = f"""
import os, pathlib, time
hold = bytearray(64 << 20)
for i in range(0, len(hold), 4096):
    hold[i] = 1
info = pathlib.Path(os.environ["MEMINFO"])
info.write_text({meminfo(AVAILABLE_MB - 600)!r})
print("holding memory", flush=True)
go = pathlib.Path(os.environ["GO"])
while not go.exists():
    time.sleep(0.05)
del hold
info.write_text({meminfo(AVAILABLE_MB)!r})
print("memory given back", flush=True)
"""


@pytest.fixture
def person():
    return Actor(user=UserFactory(username="po", is_staff=True))


@pytest.fixture
def small_machine(tmp_path, sy_server):  # noqa: F811
    info = tmp_path / "meminfo"
    info.write_text(meminfo(AVAILABLE_MB))
    go = tmp_path / "go"
    hog = {
        "command": ["{python}", "-c", HOG],
        "output": "text",
        "memory_mb": HOG_MB,
        # It writes the machine's meminfo, outside its worktree: not for a sandboxed agent.
        "sandbox": False,
        "env": {"MEMINFO": str(info), "GO": str(go)},
    }
    machine = Machine(
        tmp_path,
        sy_server.url,
        "small-box",
        capacity=3,
        providers={"hog": hog},
        env={**GIT_ENV, "SWITCHYARD_RUNNER_MEMINFO": str(info)},
    )
    machine.runner_table["min_free_memory_mb"] = MIN_FREE_MB
    machine.write()
    machine.info, machine.go = info, go
    yield machine
    go.touch()
    machine.cleanup()


def test_a_runner_holds_a_run_back_until_memory_frees(person, small_machine):
    machine = small_machine
    # given two runs of a provider that takes 500 MB, on a machine with 700 MB to spare beyond the
    # 1000 MB it keeps free: room for one, though its capacity is 3
    first = run_queue(actor=person, task=TaskFactory(title="First"), provider="hog")
    second = run_queue(actor=person, task=TaskFactory(title="Second"), provider="hog")

    # when the runner starts
    machine.start()

    # then it takes the first, whose agent takes its memory
    wait_for(lambda: run_in(first, "running"), what="the first run to run", machines=[machine])
    wait_for(lambda: "holding memory" in machine.output() or _log(machine, first), what="the agent to hold memory")

    # and the machine, as the runner reports it, has no room for another hog run ...
    def reported_short():
        runner = Runner.objects.get(name="small-box")
        memory = runner.memory or {}
        return (runner.room or {}).get("hog") == 0 and memory.get("available_mb") == AVAILABLE_MB - 600

    wait_for(reported_short, what="the runner to report no room", machines=[machine])
    # ... so after it has asked for work again, the second run is still queued, with that on its card
    seen = Runner.objects.get(name="small-box").last_seen_at
    wait_for(lambda: Runner.objects.get(name="small-box").last_seen_at > seen, what="another ask or heartbeat")
    assert run_in(second, "queued"), second.status
    box = task_run_box(task=second.task)
    assert box.room is not None and box.room.runner == "small-box" and not box.room.never
    assert "Waiting for a runner with room: small-box offers hog, which needs 500 MB" in box.room.text
    wait_for(lambda: "no memory for another hog run" in machine.output(), what="the runner to say so")

    # when the first run ends and gives its memory back
    let_go = timezone.now()
    machine.go.touch()
    wait_for(lambda: run_in(first, "succeeded"), what="the first run to end", machines=[machine])

    # then the runner starts the second, which runs to its end on the memory freed
    wait_for(lambda: run_in(second, "running", "succeeded"), what="the second run to start", machines=[machine])
    wait_for(lambda: run_in(second, "succeeded"), what="the second run to end", machines=[machine])
    second.refresh_from_db()
    assert second.runner.name == "small-box" and second.attempt == 1
    assert second.started_at > let_go


def _log(machine: Machine, run: Run) -> bool:
    run.refresh_from_db()
    path = machine.root / run.log_path if run.log_path else None
    return bool(path and path.exists() and "holding memory" in path.read_text(errors="replace"))
