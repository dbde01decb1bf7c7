"""A real worker killed with SIGKILL in the middle of a sync: the next run ends where one
clean run would have (SPEC §7, "work is idempotent")."""

import json
import os
import re
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from django.conf import settings

from board.models import SyncedFile, SyncIssue, Task
from board.sync import state_sync
from board.tasks import state_sync_task
from ledger.models import Event
from sessions_app.models import Agent, AgentSession
from tests.worker import WorkerProcess, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

SESSIONS = 600
AGENTS = ("backend", "frontend", "infrastructure", "qa", "security", "docs", "data", "design", "mobile")
WORDS = ("running", "completed", "failed", "pending", "blocked", "success", "error", "waiting", "in_progress")
REDELIVERY_GRACE_SECONDS = 3


def make_state_dir() -> int:
    """SESSIONS folders of an orchestrator and nine specialists, two broken files, one job log."""
    root = Path(settings.STATE_DIR)
    old = time.time() - 600
    total = 0
    for n in range(SESSIONS):
        folder = root / f"session-{1770000000 + n}"
        folder.mkdir()
        documents = {"orchestrator": {"team": "eng", "targetRepo": "acme/api", "status": "running"}}
        for i, agent in enumerate(AGENTS):
            documents[agent] = {
                "task": f"{agent} work for {n}",
                "status": WORDS[(n + i) % len(WORDS)],
                "priority": "P1",
            }
        for name, document in documents.items():
            (folder / f"{name}.json").write_text(json.dumps(document))
            total += 1
    for broken in (root / "session-1770000003" / "qa.json", root / "session-1770000500" / "docs.json"):
        broken.write_text('{"task": "half')
        os.utime(broken, (old, old))
    log = Path(settings.LOGS_ROOT) / "running-jobs" / "job-1.log"
    log.parent.mkdir(parents=True)
    log.write_text(
        "session-1770000042\nSpawning reviewer specialist...\nspawned (PID: 9)\nSpecialist 9 failed (exit code: 1)\n"
    )
    return total


def database_state() -> dict:
    return {
        "tasks": set(
            Task.objects.values_list(
                "external_id", "status", "priority", "title", "error", "assignee__slug", "session_id", "source_file"
            )
        ),
        "sessions": set(AgentSession.objects.values_list("id", "status", "repo", "agent__slug")),
        "agents": set(Agent.objects.values_list("slug", flat=True)),
        "synced": set(SyncedFile.objects.values_list("path", "sha256")),
        "open_issues": set(SyncIssue.objects.filter(resolved_at__isnull=True).values_list("path", flat=True)),
        "task_events": Counter(
            (name, payload["external_id"])
            for name, payload in Event.objects.filter(subject_type="task").values_list("name", "payload")
        ),
        "sessions_started": Event.objects.filter(name="session.started").count(),
    }


def test_a_sync_killed_mid_run_ends_like_one_clean_run(celery_worker_process, tmp_path):
    # given a state dir big enough to take several batches
    total = make_state_dir()
    started = time.monotonic()

    # when the worker is killed once some batches are committed and others are not
    result = state_sync_task.delay(None)
    wait_for(lambda: SyncedFile.objects.exists(), timeout=30, interval=0.005, message="the first batch")
    celery_worker_process.kill(signal.SIGKILL)
    committed = SyncedFile.objects.count()
    assert 0 < committed < total - 2, f"{committed} of {total}: the run was not caught in the middle"
    assert not Event.objects.filter(name="sync.completed").exists()

    # and another worker takes over
    replacement = WorkerProcess(tmp_path / "worker2.log").start()
    try:
        # acks_late + reject_on_worker_lost bring the message back where the broker can: with
        # kombu's filesystem transport a message is deleted from the queue when it is fetched,
        # so a SIGKILLed worker's message is gone; with Redis it comes back only after the
        # visibility timeout (longer than the longest task, far beyond this test). Either way
        # the sync is re-queued here, as beat would on its next tick.
        redelivered = _received(replacement, result.id, within=REDELIVERY_GRACE_SECONDS)
        if not redelivered:
            state_sync_task.delay(None)
        wait_for(
            lambda: Event.objects.filter(name="sync.completed").exists(),
            timeout=45,
            message="the sync to finish on the new worker",
        )
    finally:
        replacement.stop()
    after_kill = database_state()
    assert time.monotonic() - started < 60

    # then the database is what one clean run makes
    for model in (Task, SyncedFile, SyncIssue, Event, AgentSession, Agent):
        model.objects.all().delete()
    state_sync()
    clean = database_state()
    assert after_kill == clean
    assert len(clean["tasks"]) == SESSIONS * len(AGENTS) - 2 + 1  # two broken files, one failed from the log
    assert clean["open_issues"] == {"session-1770000003/qa.json", "session-1770000500/docs.json"}
    assert set(clean["task_events"].values()) == {1}  # every task.created exactly once


def _received(worker: WorkerProcess, task_id: str, *, within: float) -> bool:
    pattern = re.compile(rf"Received task: board\.tasks\.state_sync_task\[{re.escape(task_id)}\]")
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if pattern.search(worker.output()):
            return True
        time.sleep(0.1)
    return False
