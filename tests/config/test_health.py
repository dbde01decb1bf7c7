import pytest

from config import health

pytestmark = pytest.mark.django_db


def test_healthz_is_200_when_everything_answers(client):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json()["checks"] == {"database": "ok", "broker": "ok", "channel_layer": "ok"}


def test_healthz_is_503_naming_what_failed(client, monkeypatch):
    def broken():
        raise ConnectionError("connection refused")

    monkeypatch.setitem(health.CHECKS, "broker", broken)

    response = client.get("/healthz")

    assert response.status_code == 503
    body = response.json()
    assert body["failed"] == ["broker"]
    assert "connection refused" in body["checks"]["broker"]
    assert body["checks"]["database"] == "ok"


def test_healthz_reports_an_unreachable_broker(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"

    response = client.get("/healthz")

    assert response.status_code == 503
    assert response.json()["failed"] == ["broker"]
