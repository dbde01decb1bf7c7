"""Key scopes: a runner's key (scope `run` only) reaches only the endpoints that declare they take it
(``allowed_scopes``, config/api/permissions.py); everywhere else it is a JSON 403 naming the scope needed."""

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from config.api.permissions import AGENT_SCOPES, RUNNER_SCOPES, view_allowed_scopes
from sessions_app.models import AgentApiKey, AgentSession
from tests.factories import AgentFactory, SessionFactory, TaskFactory

pytestmark = pytest.mark.django_db

# Endpoints a runner's key must reach (SPEC §8): who it is, and reading runs. The runner's own
# endpoints (/runners/me/..., /runs/{id}/status/, /runs/{id}/log/) are checked when they exist.
RUNNER_REACHES = {"agent-me", "run-list", "run-detail"}
RUNNER_ONLY = {"runner-heartbeat", "runner-next", "runner-repositories", "runner-worktrees", "run-status", "run-log"}
SAMPLE_KWARGS = {"session_id": "sess-1", "path": "work_products/a.md", "client_id": "c1"}


def _api_routes():
    """(url name, path with sample arguments, view class) for every /api/v1/ route."""
    routes = []

    def walk(patterns, prefix):
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + str(entry.pattern))
            elif isinstance(entry, URLPattern):
                view_class = getattr(entry.callback, "view_class", None)
                if view_class is not None:
                    routes.append((entry.name, prefix + str(entry.pattern), view_class))

    walk(get_resolver().url_patterns, "/")
    return [r for r in routes if r[1].startswith("/api/v1/")]


def _sample(route: str) -> str:
    def fill(match) -> str:
        converter, name = match.group(1) or "", match.group(2)
        return SAMPLE_KWARGS.get(name, "1" if converter.startswith("int") else "x")

    return re.sub(r"<(?:(\w+):)?(\w+)>", fill, route)


@pytest.fixture
def runner_client(make_agent_client):
    return make_agent_client(AgentFactory(slug="runner-build-1"), scopes=[AgentApiKey.Scope.RUN])


def test_views_declare_which_scopes_they_take():
    routes = {name: view for name, _, view in _api_routes()}

    for name in RUNNER_REACHES:
        assert view_allowed_scopes(routes[name]()) >= RUNNER_SCOPES, name
    for name in RUNNER_ONLY & routes.keys():
        assert view_allowed_scopes(routes[name]()) >= RUNNER_SCOPES, name
    others = set(routes) - RUNNER_REACHES - RUNNER_ONLY
    assert others
    for name in others:
        assert view_allowed_scopes(routes[name]()) == AGENT_SCOPES, name


def test_a_runner_key_is_refused_everywhere_else_with_a_json_403(runner_client):
    SessionFactory(id="sess-1", agent=runner_client.agent)
    TaskFactory(pk=1)
    before = AgentSession.objects.count()
    checked = 0
    for name, route, view in _api_routes():
        if name in RUNNER_REACHES | RUNNER_ONLY:
            continue
        url = _sample(route)
        for method in ("get", "post", "put", "patch", "delete"):
            if not hasattr(view, method):
                continue
            response = getattr(runner_client, method)(url, {}, format="json")
            assert response.status_code == 403, (method, url, response.status_code)
            message = response.json()["message"]
            assert "agent or orchestrate" in message, message
            checked += 1
    assert checked > 30
    assert AgentSession.objects.count() == before


def test_a_runner_key_reads_runs_and_itself(runner_client):
    assert runner_client.get("/api/v1/agents/me/").status_code == 200
    assert runner_client.get("/api/v1/runs/").status_code == 200
    assert runner_client.get("/api/v1/runs/999/").status_code == 404  # reached the view: no such run


def test_agent_and_orchestrate_keys_keep_their_access(agent_client, orchestrator_client, make_agent_client):
    only_orchestrate = make_agent_client(AgentFactory(slug="orch-only"), scopes=[AgentApiKey.Scope.ORCHESTRATE])

    assert agent_client.get("/api/v1/sessions/").status_code == 200
    assert orchestrator_client.get("/api/v1/tasks/").status_code == 200
    assert only_orchestrate.get("/api/v1/sessions/").status_code == 200
    assert agent_client.get("/api/v1/runs/").status_code == 200


def test_staff_is_not_a_key_and_is_not_asked_for_scopes(staff_client):
    assert staff_client.get("/api/v1/sessions/").status_code == 200
