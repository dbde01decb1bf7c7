"""Issue 25 §5: `switchyard session start` then `switchyard task claim-next` links the session to the
task, so its tokens and cost reach the task (and its budget); a second session opened on the task
its agent holds becomes the card's (the newest), and its questions reach the card."""

import json

import httpx
import pytest

from board.models import Task
from sessions_app.models import AgentSession
from switchyard_client.cli import main
from tests.usage import payloads as p
from usage.models import UsageRecord

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(sy_server, agent_key, monkeypatch, tmp_path, capsys):
    """Run `switchyard ARGS...` in-process in a fresh folder; (exit code, stdout)."""
    monkeypatch.setenv("SWITCHYARD_URL", sy_server.url)
    monkeypatch.setenv("SWITCHYARD_KEY", agent_key)
    monkeypatch.delenv("SWITCHYARD_SESSION", raising=False)
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> tuple[int, str]:
        code = main(list(args))
        out, _ = capsys.readouterr()
        return code, out

    return run


def _export(url: str, key: str, session_id: str) -> None:
    body = p.as_json(p.logs_json(p.claude_api_request(session_id, input_tokens=1000, output_tokens=50)))
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    assert httpx.post(f"{url}/api/v1/otlp/v1/logs", content=body, headers=headers).status_code == 200


def test_claim_next_after_session_start_links_the_session_and_its_usage_to_the_task(cli, sy, sy_server, agent_key):
    task = sy.task_create("Write docs", priority="P0")
    assert cli("session", "start", "--intent", "docs", "--id", "sess-link")[0] == 0

    claimed = json.loads(cli("--json", "task", "claim-next")[1])
    _export(sy_server.url, agent_key, "sess-link")

    assert claimed["id"] == task["id"]
    assert AgentSession.objects.get(pk="sess-link").task_id == task["id"]
    assert Task.objects.get(pk=task["id"]).session_id == "sess-link"
    usage = UsageRecord.objects.get()
    assert (usage.session_id, usage.task_id, usage.input_tokens) == ("sess-link", task["id"], 1000)


def test_a_second_session_on_the_task_becomes_the_cards(cli, sy):
    task = sy.task_create("Fix the bug", priority="P0")
    cli("session", "start", "--intent", "first", "--id", "sess-one")
    cli("task", "claim-next")

    code, _ = cli("session", "start", "--intent", "again", "--id", "sess-two", "--task", str(task["id"]))
    sy.session_transition("sess-two", "waiting_for_input", reason="a question")

    assert code == 0
    card = Task.objects.select_related("session").get(pk=task["id"])
    assert card.session_id == "sess-two"
    assert card.session.status == "waiting_for_input"  # the card's badge reads the newest session's


def test_a_session_on_a_task_another_agent_holds_moves_no_card(cli, sy, other_key, sy_server):
    task = sy.task_create("Theirs", priority="P0")
    with httpx.Client(base_url=sy_server.url, headers={"Authorization": f"Bearer {other_key}"}) as other:
        other.post("/api/v1/sessions/", json={"id": "theirs-1", "intent": "x"}).raise_for_status()
        other.post("/api/v1/tasks/claim-next/", json={"session": "theirs-1"}).raise_for_status()

    code, _ = cli("session", "start", "--intent", "mine", "--id", "mine-1", "--task", str(task["id"]))

    assert code != 0  # refused: the task is another agent's
    assert Task.objects.get(pk=task["id"]).session_id == "theirs-1"
