"""Syncs that overlap (beat, the observer and a person at once) make every row once.

Real threads on their own connections: on SQLite IMMEDIATE transactions serialise the
batches; on PostgreSQL the sync's advisory lock does.
"""

import threading
from collections import Counter

import pytest
from django.db import connection

from board.models import SyncIssue, Task
from board.sync import service, state_sync
from ledger.models import Event
from sessions_app.models import AgentSession
from tests.board.test_sync_service import ORCHESTRATOR, snapshot, write_file

pytestmark = [pytest.mark.concurrency, pytest.mark.django_db(transaction=True)]
RUNS = 4


def test_overlapping_syncs_create_each_task_session_and_issue_once(monkeypatch):
    # given 40 sessions, synced in small batches so the runs interleave
    for n in range(40):
        snapshot("orchestrator", ORCHESTRATOR, session=f"session-{n:02d}")
        snapshot("backend", {"task": f"API {n}", "status": "running"}, session=f"session-{n:02d}")
        snapshot("qa", {"task": f"QA {n}", "status": "failed"}, session=f"session-{n:02d}")
    write_file("session-07/broken.json", "{")
    monkeypatch.setattr(service, "BATCH_FILES", 10)
    barrier = threading.Barrier(RUNS)
    errors = []

    def run(session_key):
        try:
            barrier.wait(timeout=30)
            state_sync(session_key=session_key)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    # when four runs start together, two of them for one session only
    threads = [threading.Thread(target=run, args=(key,)) for key in (None, None, "session-07", "session-07")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    # then
    assert errors == []
    assert Task.objects.count() == 80
    assert AgentSession.objects.count() == 40
    created = Counter(Event.objects.filter(name="task.created").values_list("subject_id", flat=True))
    assert len(created) == 80 and set(created.values()) == {1}
    assert Event.objects.filter(name="session.started").count() == 40
    issue = SyncIssue.objects.get()
    assert issue.path == "session-07/broken.json"
    assert Event.objects.filter(name="sync.issue").count() == 1
