from types import SimpleNamespace

import pytest
import yaml
from django.core.management import call_command

from config.api import throttling

pytestmark = pytest.mark.django_db


def test_a_key_over_its_rate_gets_429_with_retry_after(agent_client, settings, monkeypatch):
    settings.API_KEY_THROTTLE_RATE = "5/min"
    # The counter is per fixed minute: requests that straddled a minute's end started a new count (a CI
    # run at xx:59 got seven 200s). The throttle's clock stands 20 s into a minute.
    monkeypatch.setattr(throttling, "time", SimpleNamespace(time=lambda: 1_800_000_020.0))

    codes = [agent_client.get("/api/v1/agents/me/").status_code for _ in range(7)]

    assert codes == [200] * 5 + [429] * 2
    response = agent_client.get("/api/v1/agents/me/")
    assert int(response["Retry-After"]) == 40  # the rest of that minute
    assert "message" in response.json()


def test_keys_are_throttled_separately(agent_client, other_client, settings):
    settings.API_KEY_THROTTLE_RATE = "2/min"
    for _ in range(3):
        agent_client.get("/api/v1/agents/me/")

    assert other_client.get("/api/v1/agents/me/").status_code == 200


def test_schema_documents_the_spec_paths(client, tmp_path):
    target = tmp_path / "schema.yml"
    call_command("spectacular", "--file", str(target), "--fail-on-warn")

    schema = yaml.safe_load(target.read_text())
    paths = schema["paths"]
    for path, method in [
        ("/api/v1/agents/me/", "get"),
        ("/api/v1/agents/me/heartbeat/", "post"),
        ("/api/v1/sessions/", "post"),
        ("/api/v1/sessions/{session_id}/transition/", "post"),
        ("/api/v1/sessions/{session_id}/resume/", "get"),
        ("/api/v1/sessions/{session_id}/events/", "post"),
        ("/api/v1/sessions/{session_id}/events/", "get"),
        ("/api/v1/sessions/{session_id}/tool-calls/", "post"),
        ("/api/v1/tool-calls/{tool_call_id}/", "patch"),
        ("/api/v1/sessions/{session_id}/checkpoints/", "post"),
        ("/api/v1/sessions/{session_id}/milestones/", "post"),
        ("/api/v1/tasks/", "get"),
        ("/api/v1/tasks/claim-next/", "post"),
        ("/api/v1/tasks/{task_id}/claim/", "post"),
        ("/api/v1/tasks/{task_id}/fail/", "post"),
        ("/api/v1/campaigns/", "post"),
    ]:
        assert method in paths[path], path
    claim_next = paths["/api/v1/tasks/claim-next/"]["post"]
    assert set(claim_next["responses"]) >= {"200", "204"}
    # an agent key is a bearer token (sessions_app/api/schema.py, registered by the API's modules)
    assert schema["components"]["securitySchemes"]["agentKey"]["scheme"] == "bearer"
    assert {"agentKey": []} in claim_next["security"]


def test_schema_and_docs_are_served(client):
    assert client.get("/api/schema/").status_code == 200
    assert client.get("/api/docs/").status_code == 200


def test_docs_load_swagger_ui_from_our_own_static_files(client):
    html = client.get("/api/docs/").content.decode()

    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in html
    assert "cdn.jsdelivr" not in html and "unpkg.com" not in html
