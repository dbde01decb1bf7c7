"""Under /api/ every answer is JSON, with DEBUG on (the embedded default of `make run`) and off:
a path without its trailing slash is a JSON 404 naming the right path (never a 500 debug page,
never a redirect that drops a POST body), unknown paths and uncaught errors are JSON too.

Before: POST /api/v1/sessions under DEBUG was a 500 with Django's HTML debug page (APPEND_SLASH
refuses to redirect a POST), a 301 without DEBUG; unknown API paths under DEBUG were HTML 404s."""

import pytest
from django.test import Client

from sessions_app.api import views as session_views
from sessions_app.models import AgentSession

pytestmark = pytest.mark.django_db

DEBUG_MODES = pytest.mark.parametrize("debug", [True, False], ids=["debug", "no-debug"])


@pytest.fixture
def raw_client(agent_client):
    """A plain Django client with the agent's key that answers errors instead of raising them."""
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {agent_client.key}")
    return client


def assert_json(response, status: int) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json"
    return response.json()


@DEBUG_MODES
def test_posting_a_session_without_the_trailing_slash_is_a_json_404_naming_the_right_path(settings, raw_client, debug):
    settings.DEBUG = debug
    before = AgentSession.objects.count()

    response = raw_client.post("/api/v1/sessions", {"intent": "fix it"}, content_type="application/json")

    assert assert_json(response, 404) == {
        "message": "Not found: /api/v1/sessions. Did you mean /api/v1/sessions/? API paths end with a slash."
    }
    assert AgentSession.objects.count() == before


@DEBUG_MODES
@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
def test_every_method_on_a_path_without_its_slash_gets_the_hint_not_a_redirect(settings, raw_client, debug, method):
    settings.DEBUG = debug

    response = getattr(raw_client, method)("/api/v1/sessions/sess-1/events")

    body = assert_json(response, 404)
    assert body["message"].endswith("Did you mean /api/v1/sessions/sess-1/events/? API paths end with a slash.")


@DEBUG_MODES
@pytest.mark.parametrize("path", ["/api/v1/nowhere/", "/api/v1/nowhere", "/api/v2/sessions/", "/api/"])
def test_an_unknown_api_path_is_a_json_404(settings, raw_client, debug, path):
    settings.DEBUG = debug

    response = raw_client.post(path, {}, content_type="application/json")

    assert assert_json(response, 404) == {"message": f"Not found: {path}"}


@DEBUG_MODES
def test_a_method_the_endpoint_lacks_is_a_json_405(settings, raw_client, debug):
    settings.DEBUG = debug

    response = raw_client.delete("/api/v1/sessions/")

    assert assert_json(response, 405) == {"message": 'Method "DELETE" not allowed.'}
    assert response["Allow"]


@DEBUG_MODES
def test_an_uncaught_error_in_an_api_view_is_json_not_a_traceback_page(settings, raw_client, monkeypatch, debug):
    settings.DEBUG = debug

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(session_views, "actor_from_request", broken)

    response = raw_client.get("/api/v1/agents/me/")

    assert assert_json(response, 500) == {"message": "Internal server error; it has been logged."}


@DEBUG_MODES
def test_pages_keep_djangos_append_slash_redirect(settings, debug):
    settings.DEBUG = debug

    response = Client().get("/accounts/login")

    assert response.status_code == 301
    assert response["Location"] == "/accounts/login/"


@pytest.mark.parametrize(
    ("query", "name", "problem"),
    [
        ("parent=a%00b", "parent", "May not contain NUL (%00)."),
        ("agent=a&agent=b", "agent", "Give it once: it takes one value."),
        ("page_size=5&page_size=", "page_size", "Give it once: it takes one value."),
    ],
)
def test_a_query_parameter_with_nul_or_given_twice_is_a_400_naming_it(raw_client, query, name, problem):
    response = raw_client.get(f"/api/v1/sessions/?{query}")

    assert assert_json(response, 400) == {"message": f"Invalid input: {name}: {problem}", "errors": {name: [problem]}}


def test_a_list_parameter_may_be_given_twice(raw_client, agent):
    from tests.factories import SessionFactory

    SessionFactory(agent=agent, status="running")
    SessionFactory(agent=agent, status="failed")
    SessionFactory(agent=agent, status="completed")

    response = raw_client.get("/api/v1/sessions/?status=running&status=failed")

    assert sorted(s["status"] for s in assert_json(response, 200)["results"]) == ["failed", "running"]
