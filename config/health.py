"""/healthz: does the database, the broker and the channel layer answer?"""

import uuid

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET
from kombu import Connection


def _check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def _check_broker() -> None:
    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {})
    with Connection(settings.CELERY_BROKER_URL, transport_options=options, connect_timeout=2) as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, timeout=2)


def _check_channel_layer() -> None:
    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer configured")

    async def roundtrip() -> None:
        channel = await layer.new_channel()
        token = uuid.uuid4().hex
        await layer.send(channel, {"type": "health.ping", "token": token})
        message = await layer.receive(channel)
        if message.get("token") != token:
            raise RuntimeError("channel layer returned the wrong message")

    async_to_sync(roundtrip)()


CHECKS = {"database": _check_database, "broker": _check_broker, "channel_layer": _check_channel_layer}


@require_GET
def healthz(request):
    results = {}
    for name, check in CHECKS.items():
        try:
            check()
        except Exception as exc:  # a health probe reports every failure, whatever its type
            results[name] = f"error: {exc.__class__.__name__}: {exc}"[:300]
        else:
            results[name] = "ok"
    healthy = all(value == "ok" for value in results.values())
    body = {"status": "ok" if healthy else "unavailable", "checks": results}
    if not healthy:
        body["failed"] = [name for name, value in results.items() if value != "ok"]
    body["embedded"] = not settings.REDIS_URL
    return JsonResponse(body, status=200 if healthy else 503)
