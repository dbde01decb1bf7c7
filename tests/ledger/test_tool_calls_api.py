import hashlib
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ledger.models import ToolInvocation
from tests.factories import ToolCallFactory

pytestmark = pytest.mark.django_db


def url(session) -> str:
    return f"/api/v1/sessions/{session.pk}/tool-calls/"


def test_record_a_running_call_with_a_redacted_summary_and_full_hash(agent_client, session):
    tool_input = {"command": "deploy --token=abc123secretvalue", "env": {"API_KEY": "k-123"}}

    response = agent_client.post(
        url(session), {"id": "toolu_1", "tool_name": "Bash", "input": tool_input}, format="json"
    )

    assert response.status_code == 201
    call = ToolInvocation.objects.get()
    assert call.status == "running"
    assert call.client_id == "toolu_1"
    assert "abc123secretvalue" not in call.input_summary
    assert "k-123" not in call.input_summary
    assert "[REDACTED]" in call.input_summary
    canonical = json.dumps(tool_input, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert call.input_sha256 == hashlib.sha256(canonical.encode()).hexdigest()


def test_summaries_are_length_capped(agent_client, session, settings):
    settings.TOOL_SUMMARY_MAX_CHARS = 100

    agent_client.post(url(session), {"tool_name": "Read", "input": "z" * 5000}, format="json")

    call = ToolInvocation.objects.get()
    assert len(call.input_summary) <= 100
    assert call.input_summary.endswith("more chars]")


def test_finish_a_running_call_once(agent_client, session):
    call = ToolCallFactory(session=session)
    path = f"/api/v1/tool-calls/{call.pk}/"
    body = {"status": "success", "output": {"stdout": "ok"}}

    finished = agent_client.patch(path, body, format="json")
    retried = agent_client.patch(path, body, format="json")
    rewrite = agent_client.patch(path, {"status": "failure", "error": "no"}, format="json")

    assert (finished.status_code, retried.status_code, rewrite.status_code) == (200, 200, 409)
    call.refresh_from_db()
    assert call.status == "success"
    assert call.output_summary == '{"stdout": "ok"}'
    assert call.duration_ms is not None and call.duration_ms >= 0


@pytest.mark.parametrize("body", [{"status": "running"}, {"status": "done"}, {}, {"status": "success", "oops": 1}])
def test_finish_bad_input_is_400_and_leaves_it_running(agent_client, session, body):
    call = ToolCallFactory(session=session)

    response = agent_client.patch(f"/api/v1/tool-calls/{call.pk}/", body, format="json")

    assert response.status_code == 400
    call.refresh_from_db()
    assert call.status == "running"


def test_another_agent_cannot_finish_or_read_my_call(other_client, session):
    call = ToolCallFactory(session=session)

    patch = other_client.patch(f"/api/v1/tool-calls/{call.pk}/", {"status": "success"}, format="json")
    read = other_client.get(f"/api/v1/tool-calls/{call.pk}/")
    record = other_client.post(url(session), {"tool_name": "Bash"}, format="json")

    assert (patch.status_code, read.status_code, record.status_code) == (403, 403, 403)
    call.refresh_from_db()
    assert call.status == "running"
    assert ToolInvocation.objects.count() == 1


def test_unknown_or_oversized_tool_call_id_is_404(agent_client):
    assert agent_client.patch("/api/v1/tool-calls/999/", {"status": "success"}, format="json").status_code == 404
    assert agent_client.get("/api/v1/tool-calls/99999999999999999999/").status_code == 404


def test_batch_with_a_bad_item_is_207(agent_client, session):
    batch = [
        {"id": "a", "tool_name": "Read", "status": "success", "output": "contents"},
        {"id": "b", "tool_name": ""},
        {"id": "c", "tool_name": "Edit", "finished_at": "2026-01-01T00:00:00Z"},
        {"id": "d", "tool_name": "Grep", "started_at": "2026-01-01T00:00:00Z"},
    ]

    response = agent_client.post(url(session), batch, format="json")

    assert response.status_code == 207
    assert [r["status"] for r in response.json()["results"]] == [201, 400, 400, 201]
    assert sorted(ToolInvocation.objects.values_list("client_id", flat=True)) == ["a", "d"]
    finished = ToolInvocation.objects.get(client_id="a")
    assert finished.status == "success" and finished.finished_at is not None


def test_retrying_a_batch_never_duplicates(agent_client, session):
    batch = [{"id": f"t{i}", "tool_name": "Bash", "input": {"i": i}} for i in range(20)]

    first = agent_client.post(url(session), batch, format="json")
    second = agent_client.post(url(session), batch, format="json")

    assert (first.status_code, second.status_code) == (201, 200)
    assert ToolInvocation.objects.count() == 20


def test_a_batch_is_written_and_answered_in_as_many_queries_whatever_its_size(agent_client, session):
    agent_client.get("/api/v1/agents/me/")
    counts = {}
    for size in (2, 30):
        batch = [{"id": f"n{size}-{i}", "tool_name": "Bash", "input": {"i": i}} for i in range(size)]
        with CaptureQueriesContext(connection) as queries:
            response = agent_client.post(url(session), batch, format="json")
        assert response.status_code == 201
        items = [result["item"] for result in response.json()["results"]]
        assert [item["client_id"] for item in items] == [f"n{size}-{i}" for i in range(size)]
        assert {item["agent"] for item in items} == {session.agent.slug}
        counts[size] = len(queries)
    # no query per row to name its agent in the answer
    assert counts[30] == counts[2], counts


def test_list_tool_calls_with_status_filter_and_constant_queries(agent_client, session, django_assert_num_queries):
    ToolCallFactory.create_batch(3, session=session)
    agent_client.get("/api/v1/agents/me/")
    with django_assert_num_queries(4):  # key, session, count, page
        agent_client.get(url(session))
    ToolCallFactory.create_batch(30, session=session)
    with django_assert_num_queries(4):
        response = agent_client.get(url(session) + "?status=running")
    assert response.json()["count"] == 33
