"""Webhooks through a real Celery worker process, to a real receiver on 127.0.0.1.

Delivery is at least once: a worker killed after the receiver got a request but before the
answer was recorded cannot know whether it arrived, so the delivery is sent again once the
dead worker's claim runs out. The receiver may see it twice (same X-Switchyard-Delivery id,
which it uses to drop repeats); the delivery log records exactly one success.
"""

import signal
import threading

import pytest
from django.db import transaction
from django.utils import timezone

from ledger.events import event_record
from ledger.models import WebhookDelivery
from ledger.tasks import webhooks_retry_due_task
from ledger.webhooks import webhook_claim_seconds, webhook_subscribe
from tests.ledger.receiver import Answer, Receiver
from tests.worker import WorkerProcess, wait_for

pytestmark = pytest.mark.worker

SECRET = "integration-secret"
TIMEOUT_SECONDS = 2  # the worker's WEBHOOK_TIMEOUT_SECONDS and _DEADLINE_SECONDS: its claim lasts 2 + 10 s


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.stop()


def _record_event_in_a_service_transaction():
    with transaction.atomic():
        return event_record(
            name="task.claimed", subject_type="task", subject_id=42, actor="agent:claude-1", payload={"title": "Ship"}
        )


def _delivery_done():
    return WebhookDelivery.objects.filter(status=WebhookDelivery.Status.SUCCEEDED).first()


def test_an_event_is_delivered_signed_by_the_worker(celery_worker_process, receiver):
    # given
    subscription = webhook_subscribe(url=receiver.url, secret=SECRET, event_names=["task.*"])

    # when a service records an event and commits
    event = _record_event_in_a_service_transaction()

    # then the worker dispatches it and the receiver gets one signed request
    delivery = wait_for(_delivery_done, timeout=60, message="a succeeded delivery")
    assert (delivery.subscription_id, delivery.event_id, delivery.attempts) == (subscription.pk, event.pk, 1)
    assert receiver.count() == 1
    request = receiver.received[0]
    assert request.signature_valid(SECRET)
    assert request.headers["x-switchyard-event"] == "task.claimed"
    assert request.headers["x-switchyard-delivery"] == str(delivery.pk)


def test_a_worker_killed_mid_delivery_leaves_one_success_after_a_new_worker_takes_over(
    transactional_db, tmp_path, receiver, settings
):
    # given a receiver that holds its first answer, and a worker sending to it
    # the same as the worker's, for the claim length
    settings.WEBHOOK_TIMEOUT_SECONDS = settings.WEBHOOK_DEADLINE_SECONDS = TIMEOUT_SECONDS
    env = {"WEBHOOK_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS), "WEBHOOK_DEADLINE_SECONDS": str(TIMEOUT_SECONDS)}
    receiver.answers = [Answer(200, hold=threading.Event()), Answer(200)]
    webhook_subscribe(url=receiver.url, secret=SECRET)
    first = WorkerProcess(tmp_path / "first.log", extra_env=env).start()
    second = None
    try:
        _record_event_in_a_service_transaction()
        wait_for(lambda: receiver.count() == 1, timeout=60, message="the first request")

        # when the worker dies mid-request
        first.kill(signal.SIGKILL)

        # then the delivery is still open, claimed by the dead worker
        delivery = WebhookDelivery.objects.get()
        assert (delivery.status, delivery.attempts) == (WebhookDelivery.Status.PENDING, 1)
        assert delivery.claimed_until > timezone.now()

        # when a new worker starts and the sweep runs (beat does every minute) after the claim ran out
        second = WorkerProcess(tmp_path / "second.log", extra_env=env).start()
        wait_for(
            lambda: WebhookDelivery.objects.get().claimed_until < timezone.now(),
            timeout=webhook_claim_seconds() + 5,
            interval=0.5,
            message="the dead worker's claim to run out",
        )
        webhooks_retry_due_task.delay()

        # then it is sent again and recorded once as a success
        delivery = wait_for(_delivery_done, timeout=60, message="a succeeded delivery")
        assert delivery.attempts == 2
        assert WebhookDelivery.objects.count() == 1
        assert receiver.count() == 2  # at least once: the receiver saw it twice ...
        assert {r.headers["x-switchyard-delivery"] for r in receiver.received} == {str(delivery.pk)}  # ... as one id
        assert all(r.signature_valid(SECRET) for r in receiver.received)
    finally:
        first.stop()
        if second is not None:
            second.stop()
