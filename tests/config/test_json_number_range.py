"""JSON numbers a 64-bit float cannot hold (1e999, -1e400) and the NaN/Infinity literals are
refused with a 400 that names the field, on every endpoint that takes JSON; in a batch only
that item fails (207) and the good items are stored.

Before: the parser turned 1e999 into float("inf"), which SQLite's JSON check constraint refused
(a 500) and PostgreSQL's jsonb refused (a 400 for the whole batch, good items lost)."""

import pytest

from board.models import Campaign, Task
from ledger.models import ToolInvocation
from sessions_app.models import AgentSession, Checkpoint, Milestone, StreamEvent

pytestmark = pytest.mark.django_db

BAD_NUMBERS = ["1e999", "-1e400", "NaN", "Infinity", "-Infinity"]


def post_raw(client, url, body: str, method: str = "post"):
    return getattr(client, method)(url, data=body, content_type="application/json")


def assert_refused_naming(response, field: str, number: str):
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["message"].startswith(f"Invalid input: {field}: Number out of range")
    assert number in body["message"]
    assert list(body["errors"]) == [field]


@pytest.mark.parametrize("number", BAD_NUMBERS)
def test_one_event_with_an_out_of_range_number_is_400_naming_payload(agent_client, session, number):
    response = post_raw(
        agent_client, f"/api/v1/sessions/{session.pk}/events/", f'{{"type": "log", "payload": {{"n": {number}}}}}'
    )

    assert_refused_naming(response, "payload", number)
    assert "payload.n" in response.json()["message"]
    assert StreamEvent.objects.count() == 0


def test_an_input_request_event_with_an_out_of_range_number_is_400(agent_client, session):
    body = '{"type": "input_request", "payload": {"question": "Deploy?", "options": [1, 2, 1e999]}}'

    response = post_raw(agent_client, f"/api/v1/sessions/{session.pk}/events/", body)

    assert_refused_naming(response, "payload", "1e999")
    assert "payload.options[2]" in response.json()["message"]
    assert StreamEvent.objects.count() == 0


@pytest.mark.parametrize("client_ids", [False, True], ids=["no-ids", "client-ids"])
def test_an_event_batch_stores_the_good_items_and_fails_only_the_bad_one(agent_client, session, client_ids):
    ids = ['"id": "e1", ', '"id": "e2", ', '"id": "e3", '] if client_ids else ["", "", ""]
    body = (
        f'[{{{ids[0]}"type": "log", "payload": {{"line": "one"}}}},'
        f' {{{ids[1]}"type": "log", "payload": {{"n": -1e400}}}},'
        f' {{{ids[2]}"type": "log", "payload": {{"line": "three"}}}}]'
    )

    response = post_raw(agent_client, f"/api/v1/sessions/{session.pk}/events/", body)

    assert response.status_code == 207, response.content
    result = response.json()
    assert (result["stored"], result["failed"]) == (2, 1)
    assert [r["status"] for r in result["results"]] == [201, 400, 201]
    failed = result["results"][1]
    assert list(failed["errors"]) == ["payload"]
    assert failed["errors"]["payload"][0].startswith("Number out of range")
    assert failed["message"] == "Invalid item."
    assert [e.payload for e in StreamEvent.objects.order_by("seq")] == [{"line": "one"}, {"line": "three"}]


@pytest.mark.parametrize("field", ["input", "output"])
def test_one_tool_call_with_an_out_of_range_number_is_400(agent_client, session, field):
    body = f'{{"tool_name": "Bash", "status": "success", "{field}": {{"timeout": 1e999}}}}'

    response = post_raw(agent_client, f"/api/v1/sessions/{session.pk}/tool-calls/", body)

    assert_refused_naming(response, field, "1e999")
    assert ToolInvocation.objects.count() == 0


def test_a_tool_call_batch_stores_the_good_items(agent_client, session):
    body = '[{"tool_name": "Read", "input": {"n": 1}}, {"tool_name": "Bash", "input": {"n": NaN}}]'

    response = post_raw(agent_client, f"/api/v1/sessions/{session.pk}/tool-calls/", body)

    assert response.status_code == 207, response.content
    assert [r["status"] for r in response.json()["results"]] == [201, 400]
    assert list(ToolInvocation.objects.values_list("tool_name", flat=True)) == ["Read"]


def test_finishing_a_tool_call_with_an_out_of_range_output_is_400_and_changes_nothing(agent_client, session):
    created = agent_client.post(f"/api/v1/sessions/{session.pk}/tool-calls/", {"tool_name": "Bash"}, format="json")
    call_id = created.json()["id"]

    response = post_raw(
        agent_client, f"/api/v1/tool-calls/{call_id}/", '{"status": "success", "output": [1e999]}', method="patch"
    )

    assert_refused_naming(response, "output", "1e999")
    assert ToolInvocation.objects.get(pk=call_id).status == "running"


@pytest.mark.parametrize("state", ["1e999", '{"deep": {"list": [0, -1e400]}}', "[Infinity]"])
def test_a_checkpoint_with_an_out_of_range_number_is_400(agent_client, session, state):
    response = post_raw(agent_client, f"/api/v1/sessions/{session.pk}/checkpoints/", f'{{"state": {state}}}')

    assert response.status_code == 400, response.content
    assert response.json()["message"].startswith("Invalid input: state: Number out of range")
    assert Checkpoint.objects.count() == 0


def test_a_milestone_with_a_number_for_its_text_is_400(agent_client, session):
    response = post_raw(agent_client, f"/api/v1/sessions/{session.pk}/milestones/", '{"text": 1e999}')

    assert response.status_code == 400
    assert response.json()["message"].startswith("Invalid input: text: ")
    assert Milestone.objects.count() == 0


def test_session_metadata_with_an_out_of_range_number_is_400(agent_client):
    before = AgentSession.objects.count()

    response = post_raw(agent_client, "/api/v1/sessions/", '{"id": "s-big", "metadata": {"budget": 1e999}}')

    assert_refused_naming(response, "metadata", "1e999")
    assert AgentSession.objects.count() == before


def test_a_task_with_an_out_of_range_number_is_400(orchestrator_client):
    response = post_raw(orchestrator_client, "/api/v1/tasks/", '{"title": "Ship it", "campaign": 1e999}')

    assert response.status_code == 400
    assert response.json()["message"].startswith("Invalid input: campaign: ")
    assert Task.objects.count() == 0


def test_a_campaign_lead_with_an_out_of_range_score_is_400(orchestrator_client):
    body = '{"type": "outreach", "leads": [{"name": "Ada", "score": -1e400}]}'

    response = post_raw(orchestrator_client, "/api/v1/campaigns/", body)

    assert response.status_code == 400
    assert Campaign.objects.count() == 0


def test_an_unknown_field_holding_an_out_of_range_number_is_still_a_400(agent_client, session):
    response = post_raw(agent_client, f"/api/v1/sessions/{session.pk}/events/", '{"type": "log", "extra": 1e999}')

    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["extra"]
    assert StreamEvent.objects.count() == 0


def test_large_but_finite_numbers_are_stored(agent_client, session):
    body = '{"type": "log", "payload": {"big": 1.7976931348623157e308, "small": -1e-300}}'

    response = agent_client.post(f"/api/v1/sessions/{session.pk}/events/", data=body, content_type="application/json")

    assert response.status_code == 201, response.content
    payload = StreamEvent.objects.get().payload
    # PostgreSQL's jsonb keeps the decimal digits (read back as an int): the same number as a float
    assert (float(payload["big"]), float(payload["small"])) == (1.7976931348623157e308, -1e-300)
