"""Helpers for the runner protocol tests: clients with a runner's or a run's key, and the steps a
runner takes (ask for work, report, ship a chunk) as plain requests."""

from django.db import connection
from rest_framework.test import APIClient

from ledger.models import Event
from runners.models import Run, Runner
from sessions_app.models import AgentApiKey, AgentSession


def client_with_key(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    client.key = key
    return client


def next_runs(client: APIClient, *, wait: float = 0):
    return client.post("/api/v1/runners/me/next/", {"wait": wait}, format="json")


def report(client: APIClient, run_id: int, status: str, *, attempt: int = 1, **fields):
    return client.post(
        f"/api/v1/runs/{run_id}/status/", {"attempt": attempt, "status": status, **fields}, format="json"
    )


def post_log(client: APIClient, run_id: int, data: bytes, *, offset: int, attempt: int = 1):
    return client.generic(
        "POST",
        f"/api/v1/runs/{run_id}/log/?offset={offset}&attempt={attempt}",
        data,
        content_type="application/octet-stream",
    )


def take_and_start(client: APIClient, run: Run) -> dict:
    """Hand ``run`` (the only queued one) to the client's runner and report it starting; the start's body."""
    handed = next_runs(client).json()["runs"]
    assert [r["id"] for r in handed] == [run.pk], handed
    started = report(client, run.pk, "starting")
    assert started.status_code == 200, started.json()
    return started.json()


def world_state() -> tuple:
    """Everything a refused request must leave as it was."""
    return (
        list(Run.objects.order_by("pk").values()),
        list(Runner.objects.order_by("pk").values("pk", "status", "host", "labels", "providers", "capacity")),
        list(AgentSession.objects.order_by("pk").values("pk", "status")),
        list(AgentApiKey.objects.order_by("pk").values("pk", "revoked_at", "session_id")),
        Event.objects.count(),
    )


def is_postgres() -> bool:
    return connection.vendor == "postgresql"
