"""Issue 25 §5: an `orchestrate` key reads what the runs it queues produced (the run's session, its
log, events, tool calls, files and patch, resume packet, the task's runs with their usage), so a
script can queue, watch and review by API alone. Another agent's plain key is refused (403) every
time, with nothing changed; the orchestrate key may read, never write, a run's session."""

from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient

from config.actors import Actor
from ledger.models import ToolInvocation
from runners.models import Run
from runners.run_lifecycle import run_key_mint
from runners.services import runner_key_create
from sessions_app.keys import api_key_create
from sessions_app.logs import session_log_parts
from sessions_app.models import AgentApiKey, AgentSession, StreamEvent
from sessions_app.services import session_open
from tests.factories import AgentFactory, SessionFactory, TaskFactory
from usage.models import UsageRecord

pytestmark = pytest.mark.django_db
LOG = b"[demo-agent] starting\n[demo-agent] done\n"
PATCH = b"diff --git a/a.txt b/a.txt\n+made\n"


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.fixture
def run():
    """A finished run: its session with an event, a tool call, a log, its patch and usage."""
    runner, _, _ = runner_key_create(name="build-1")
    agent = AgentFactory(slug="claude-at-build-1")
    task = TaskFactory(title="Make a")
    session, _ = session_open(actor=Actor(agent=agent), agent=agent, intent="Make a", task=task, labels=["run"])
    made = Run.objects.create(
        task=task, provider="claude", status=Run.Status.RUNNING, runner=runner, agent=agent, session=session
    )
    owner = _client(run_key_mint(run=made))
    path = f"/api/v1/sessions/{session.pk}/files/run-{made.pk}.patch"
    assert owner.put(path, PATCH, content_type="application/octet-stream").status_code == 201
    event = {"type": "log", "payload": {"message": "hi"}}
    assert owner.post(f"/api/v1/sessions/{session.pk}/events/", event, format="json").status_code == 201
    call = {"tool_name": "Bash", "input": {}}
    assert owner.post(f"/api/v1/sessions/{session.pk}/tool-calls/", call, format="json").status_code == 201
    log = Path(settings.LOGS_ROOT, *session_log_parts(session=session))
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(LOG)
    UsageRecord.objects.create(
        agent=agent,
        session=session,
        task=task,
        input_tokens=100,
        output_tokens=7,
        cost_usd="0.0123",
        occurred_at=timezone.now(),
        source="otlp-log",
        idempotency_key="u1",
    )
    return made


@pytest.fixture
def orchestrate_key():
    issued = api_key_create(agent=AgentFactory(slug="script"), scopes=[AgentApiKey.Scope.ORCHESTRATE])
    return _client(issued.key)


@pytest.fixture
def plain_key():
    issued = api_key_create(agent=AgentFactory(slug="someone-else"), scopes=[AgentApiKey.Scope.AGENT])
    return _client(issued.key)


def _reads(run: Run) -> dict[str, str]:
    s = run.session_id
    return {
        "session": f"/api/v1/sessions/{s}/",
        "log": f"/api/v1/sessions/{s}/log/",
        "events": f"/api/v1/sessions/{s}/events/",
        "tool calls": f"/api/v1/sessions/{s}/tool-calls/",
        "files": f"/api/v1/sessions/{s}/files/",
        "patch": f"/api/v1/sessions/{s}/files/run-{run.pk}.patch",
        "resume": f"/api/v1/sessions/{s}/resume/",
        "runs with usage": f"/api/v1/tasks/{run.task_id}/runs/",
        "run": f"/api/v1/runs/{run.pk}/",
    }


def _world():
    return (
        list(AgentSession.objects.order_by("pk").values()),
        list(StreamEvent.objects.order_by("pk").values()),
        list(ToolInvocation.objects.order_by("pk").values()),
        list(Run.objects.order_by("pk").values()),
    )


def test_an_orchestrate_key_reads_everything_a_run_produced(run, orchestrate_key):
    answers = {name: orchestrate_key.get(path) for name, path in _reads(run).items()}

    assert {name: a.status_code for name, a in answers.items()} == dict.fromkeys(answers, 200)
    assert answers["session"].json()["id"] == run.session_id
    assert answers["log"].json()["data"] == LOG.decode()
    assert [e["payload"] for e in answers["events"].json()["results"]] == [{"message": "hi"}]
    assert [c["tool_name"] for c in answers["tool calls"].json()["results"]] == ["Bash"]
    assert [f["path"] for f in answers["files"].json()["results"]] == [f"run-{run.pk}.patch"]
    assert b"".join(answers["patch"].streaming_content) == PATCH
    usage = answers["runs with usage"].json()[0]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["cost_usd"]) == (100, 7, "0.01230000")


@pytest.mark.parametrize(
    "read", ["session", "log", "events", "tool calls", "files", "patch", "resume", "runs with usage"]
)
def test_another_agents_plain_key_reads_none_of_it(run, plain_key, read):
    before = _world()

    answer = plain_key.get(_reads(run)[read])

    assert answer.status_code == 403, answer.content
    assert _world() == before


def test_an_orchestrate_key_reads_but_never_writes_a_runs_session(run, orchestrate_key):
    before = _world()
    s = run.session_id

    writes = [
        orchestrate_key.post(f"/api/v1/sessions/{s}/events/", {"type": "log", "payload": {}}, format="json"),
        orchestrate_key.post(f"/api/v1/sessions/{s}/transition/", {"status": "completed"}, format="json"),
        orchestrate_key.put(f"/api/v1/sessions/{s}/files/x.txt", b"x", content_type="application/octet-stream"),
        orchestrate_key.post(f"/api/v1/sessions/{s}/tool-calls/", {"tool_name": "Bash", "input": {}}, format="json"),
    ]

    assert [w.status_code for w in writes] == [403, 403, 403, 403]
    assert _world() == before


def test_an_orchestrate_key_reads_no_session_that_is_not_a_runs(orchestrate_key):
    other = SessionFactory(agent=AgentFactory(slug="by-hand"), id="by-hand-1")

    assert orchestrate_key.get(f"/api/v1/sessions/{other.pk}/log/").status_code == 403
    assert orchestrate_key.get(f"/api/v1/sessions/{other.pk}/").status_code == 403
