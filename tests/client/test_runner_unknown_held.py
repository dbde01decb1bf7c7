"""A run the server says a runner holds, but the runner knows nothing of (client/.../runner/loop.py,
``Runner._unknown_held``): it is handed back once its assignment is UNKNOWN_GRACE_SECONDS old as the
runner has seen it, however many heartbeats came meanwhile. Under a short lease heartbeats come every
second, and a long poll's answer slowed by a busy machine used to outlive two of them: the run just
handed to the runner was handed back again (tests/runners/test_fleet_seams_live.py saw attempt 3)."""

import io

import pytest

from switchyard_client.runner import loop
from switchyard_client.runner.config import parse_config
from switchyard_client.runner.loop import UNKNOWN_GRACE_SECONDS, Runner


class Answer:
    def __init__(self, body):
        self.body = body

    def json(self):
        return self.body


class FakeApi:
    """The server's side of ``POST runs/{id}/status/``: a run reported failed before it started goes
    back to the queue."""

    def __init__(self):
        self.reports: list[tuple[str, dict]] = []
        self.status_after = "queued"  # what the run is by the time the answer is read

    def request(self, method, path, json=None, **_):
        self.reports.append((path, json))
        return Answer({"run": {"status": self.status_after, "attempt": json["attempt"] + 1}})


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def runner(tmp_path, monkeypatch):
    config = parse_config(
        {"runner": {"url": "http://127.0.0.1:1", "name": "build-1", "root": str(tmp_path)}},
        env={"SWITCHYARD_RUNNER_KEY": "sy_runner"},
    )
    made = Runner(config, {}, out=io.StringIO())
    made.api = FakeApi()
    return made


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(loop.time, "monotonic", clock)
    return clock


def held(run_id: int, attempt: int) -> list[dict]:
    return [{"id": run_id, "attempt": attempt, "status": "assigned", "cancel": False}]


def test_heartbeats_in_quick_succession_do_not_hand_back_a_run_just_assigned(runner, clock):
    # Heartbeats every second (a short lease) while the poll's answer with run 7 is still on its way.
    for _ in range(5):
        runner._unknown_held(held(7, 2))
        clock.now += 1
    assert runner.api.reports == []
    assert runner.console.out.getvalue() == ""


def test_a_run_unknown_for_the_grace_is_handed_back_once_and_its_next_attempt_waits_afresh(runner, clock):
    runner._unknown_held(held(7, 1))
    clock.now += UNKNOWN_GRACE_SECONDS - 0.1
    runner._unknown_held(held(7, 1))
    assert runner.api.reports == []

    clock.now += 0.2
    runner._unknown_held(held(7, 1))
    assert runner.api.reports == [
        (
            "runs/7/status/",
            {
                "attempt": 1,
                "status": "failed",
                "error": "runner build-1 lost track of this run (no local state); queue it again",
            },
        )
    ]
    assert "run 7: this runner had no record of it; handed back, queued again" in runner.console.out.getvalue()

    # Queued again and handed to this runner as attempt 2: its age counts from when it was first seen.
    clock.now += 1
    runner._unknown_held(held(7, 2))
    clock.now += UNKNOWN_GRACE_SECONDS - 0.1
    runner._unknown_held(held(7, 2))
    assert len(runner.api.reports) == 1
    clock.now += 0.2
    runner._unknown_held(held(7, 2))
    assert [body["attempt"] for _, body in runner.api.reports] == [1, 2]


def test_a_hand_back_the_server_did_not_answer_is_tried_again_at_the_next_heartbeat(runner, clock):
    runner._unknown_held(held(7, 1))
    clock.now += UNKNOWN_GRACE_SECONDS
    answers = iter([ValueError("not JSON"), None])

    def flaky(method, path, json=None, **_):
        failure = next(answers)
        if failure is not None:
            raise failure
        return FakeApi.request(runner.api, method, path, json)

    runner.api.request = flaky
    runner._unknown_held(held(7, 1))
    clock.now += 1
    runner._unknown_held(held(7, 1))
    assert [path for path, _ in runner.api.reports] == ["runs/7/status/"]


def test_a_run_the_runner_took_meanwhile_is_left_alone_and_forgotten(runner, clock):
    runner._unknown_held(held(7, 1))
    runner.workers[7] = object()  # the poll's answer arrived: the run is ours now
    clock.now += 2 * UNKNOWN_GRACE_SECONDS
    runner._unknown_held(held(7, 1))
    assert runner.api.reports == []
    assert runner.unknown == {}


def test_a_hand_back_whose_run_a_poll_already_took_again_is_still_said_to_be_queued_again(runner, clock):
    # The answer re-reads the run: this runner's own long poll, woken by the run's queueing, may have
    # taken it already as attempt 2 (seen in CI as "had no record of it; assigned").
    runner.api.status_after = "assigned"
    runner._unknown_held(held(7, 1))
    clock.now += UNKNOWN_GRACE_SECONDS
    runner._unknown_held(held(7, 1))
    assert "run 7: this runner had no record of it; handed back, queued again" in runner.console.out.getvalue()


def test_a_hand_back_refused_past_the_attempts_says_the_run_failed(runner, clock):
    # From RUNNER_UNACKNOWLEDGED_MAX_ATTEMPTS on the failure stands: same attempt, status failed.
    def stands(method, path, json=None, **_):
        runner.api.reports.append((path, json))
        return Answer({"run": {"status": "failed", "attempt": json["attempt"]}})

    runner.api.request = stands
    runner._unknown_held(held(7, 3))
    clock.now += UNKNOWN_GRACE_SECONDS
    runner._unknown_held(held(7, 3))
    assert "run 7: this runner had no record of it; failed" in runner.console.out.getvalue()
