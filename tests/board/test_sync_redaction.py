"""State files are agent-written text too: what state_sync stores from them is redacted."""

import json
from pathlib import Path

import pytest
from django.conf import settings

from board.models import Task
from board.sync import state_sync
from config.redaction import REDACTED
from sessions_app.models import AgentSession
from tests.ledger.secret_corpus import CORPUS

pytestmark = pytest.mark.django_db

SESSION = "session-1770537842"


def test_task_texts_session_intent_and_urls_from_state_files_are_redacted():
    # given an orchestrator and an agent whose state files leak secrets of every shape
    leaks = "\n".join(text for _, text, _ in CORPUS)
    folder = Path(settings.STATE_DIR) / SESSION
    folder.mkdir(parents=True)
    (folder / "orchestrator.json").write_text(
        json.dumps(
            {
                "status": "running",
                "intent": leaks,
                "targetRepo": "https://ci:Bu1ldT0k3n77@git.example.com/acme/api.git",
            }
        )
    )
    (folder / "backend.json").write_text(
        json.dumps({"task": "Deploy the API", "description": leaks, "status": "failed", "error": leaks})
    )

    # when
    state_sync()

    # then
    session = AgentSession.objects.get(pk=SESSION)
    task = Task.objects.get(external_id=f"task-{SESSION}-backend")
    stored = "\n".join([session.intent, session.repo, task.title, task.description, task.error])
    for name, _, secret in CORPUS:
        assert secret not in stored, name
    assert "Bu1ldT0k3n77" not in stored
    assert session.repo == f"https://ci:{REDACTED}@git.example.com/acme/api.git"
    assert task.title == "Deploy the API"
