"""Webhook delivery: signed POSTs to a real receiver on 127.0.0.1, retries with backoff, giving up."""

import hashlib
import hmac
import json
import socket
import threading
from datetime import timedelta

import httpx
import pytest
from django.db import connection
from django.utils import timezone

from ledger.events import event_record
from ledger.models import WebhookDelivery, WebhookSubscription
from ledger.webhooks import (
    RETRY_CAP_SECONDS,
    webhook_deliver,
    webhook_deliveries_create,
    webhook_retry_delay,
    webhook_sign,
    webhook_signature_verify,
    webhook_subscribe,
)
from tests.ledger.receiver import Answer, Receiver

SECRET = "s3cret-for-tests"


@pytest.fixture(autouse=True)
def _webhook_settings(settings):
    settings.WEBHOOK_MAX_ATTEMPTS = 3
    settings.WEBHOOK_RETRY_BASE_SECONDS = 10
    settings.WEBHOOK_TIMEOUT_SECONDS = 2


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.stop()


@pytest.fixture
def queued(monkeypatch):
    """Deliveries queued after commit, as (delivery id, countdown), instead of sent to a broker."""
    sent = []

    class FakeDeliverTask:
        def delay(self, delivery_id):
            sent.append((delivery_id, None))

        def apply_async(self, args, countdown=None):
            sent.append((args[0], countdown))

    monkeypatch.setattr("ledger.webhooks._deliver_task", FakeDeliverTask)
    monkeypatch.setattr("ledger.events.webhooks_dispatch_task.delay", lambda event_id: None)
    return sent


def _delivery(receiver, *, name="task.claimed", **subscription) -> WebhookDelivery:
    sub = webhook_subscribe(url=receiver.url, secret=SECRET, **subscription)
    event = event_record(
        name=name, subject_type="task", subject_id=7, actor="agent:claude-1", payload={"title": "Fix it"}
    )
    webhook_deliveries_create(event_id=event.pk)
    return WebhookDelivery.objects.get(subscription=sub, event=event)


def _make_due(delivery) -> None:
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))


# --- Signing ----------------------------------------------------------------------------------


def test_the_signature_is_the_hmac_of_timestamp_dot_body():
    signature = webhook_sign(secret="k", timestamp=1700000000, body=b'{"a":1}')

    assert signature == "sha256=" + hmac.new(b"k", b'1700000000.{"a":1}', hashlib.sha256).hexdigest()


def test_verify_accepts_a_fresh_signature_and_refuses_a_changed_body_or_an_old_timestamp():
    body = b'{"id":1}'
    signature = webhook_sign(secret="k", timestamp=1000, body=body)

    assert webhook_signature_verify(secret="k", timestamp="1000", body=body, signature=signature, now=1100)
    assert not webhook_signature_verify(secret="k", timestamp="1000", body=b'{"id":2}', signature=signature, now=1100)
    assert not webhook_signature_verify(secret="other", timestamp="1000", body=body, signature=signature, now=1100)
    assert not webhook_signature_verify(secret="k", timestamp="1000", body=body, signature=signature, now=1000 + 301)
    assert not webhook_signature_verify(secret="k", timestamp="soon", body=body, signature=signature, now=1000)


# --- Backoff ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("attempts", "low", "high"), [(1, 10, 11), (2, 20, 22), (3, 40, 44), (6, 320, 352)])
def test_retry_delay_doubles_from_the_base_with_up_to_ten_percent_jitter(attempts, low, high):
    assert webhook_retry_delay(attempts=attempts, rng=lambda: 0.0) == low
    assert webhook_retry_delay(attempts=attempts, rng=lambda: 1.0) == pytest.approx(high)


def test_retry_delay_is_capped():
    assert webhook_retry_delay(attempts=40, rng=lambda: 1.0) == RETRY_CAP_SECONDS


# --- Delivering -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_delivery_posts_the_event_signed_and_succeeds_on_2xx(receiver, queued):
    # given
    delivery = _delivery(receiver)

    # when
    outcome = webhook_deliver(delivery_id=delivery.pk)

    # then the receiver got one request it can verify with the secret
    assert outcome == "succeeded"
    assert receiver.count() == 1
    request = receiver.received[0]
    assert request.signature_valid(SECRET)
    assert not request.signature_valid("another secret")
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-switchyard-event"] == "task.claimed"
    assert request.headers["x-switchyard-delivery"] == str(delivery.pk)
    assert abs(int(request.headers["x-switchyard-timestamp"]) - timezone.now().timestamp()) < 5
    assert json.loads(request.body) == {
        "id": delivery.event_id,
        "name": "task.claimed",
        "subject": {"type": "task", "id": "7"},
        "actor": "agent:claude-1",
        "payload": {"title": "Fix it"},
        "created_at": delivery.event.created_at.isoformat(),
    }
    delivery.refresh_from_db()
    assert delivery.status == WebhookDelivery.Status.SUCCEEDED
    assert (delivery.attempts, delivery.last_status_code, delivery.last_error) == (1, 200, "")
    assert delivery.response_excerpt == "ok"
    assert delivery.delivered_at is not None and delivery.claimed_until is None


@pytest.mark.django_db
def test_a_delivered_one_is_never_sent_again(receiver, queued):
    delivery = _delivery(receiver)
    webhook_deliver(delivery_id=delivery.pk)

    assert webhook_deliver(delivery_id=delivery.pk) == "skipped"
    assert receiver.count() == 1


@pytest.mark.django_db
def test_a_non_2xx_answer_fails_and_is_retried_later_with_backoff(receiver, queued, django_capture_on_commit_callbacks):
    # given a receiver that answers 500, then 503, then 200
    receiver.answers = [Answer(500, b"boom"), Answer(503, b"busy"), Answer(200, b"fine")]
    delivery = _delivery(receiver)

    # when the first try fails
    before = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        assert webhook_deliver(delivery_id=delivery.pk) == "failed"

    # then the next try is 10-11 s later, queued with that countdown
    delivery.refresh_from_db()
    assert delivery.status == WebhookDelivery.Status.FAILED
    assert (delivery.attempts, delivery.last_status_code, delivery.last_error) == (1, 500, "HTTP 500")
    assert delivery.response_excerpt == "boom"
    assert delivery.claimed_until is None
    wait = (delivery.next_attempt_at - before).total_seconds()
    assert 10 <= wait <= 11 + 1
    assert len(queued) == 1 and queued[0][0] == delivery.pk and 10 <= queued[0][1] <= 11

    # and a try before that time sends nothing
    assert webhook_deliver(delivery_id=delivery.pk) == "skipped"
    assert receiver.count() == 1

    # when the second try fails, the wait doubles
    _make_due(delivery)
    before = timezone.now()
    assert webhook_deliver(delivery_id=delivery.pk) == "failed"
    delivery.refresh_from_db()
    assert 20 <= (delivery.next_attempt_at - before).total_seconds() <= 22 + 1
    assert (delivery.attempts, delivery.last_status_code) == (2, 503)

    # and the third succeeds
    _make_due(delivery)
    assert webhook_deliver(delivery_id=delivery.pk) == "succeeded"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code, delivery.last_error) == (
        WebhookDelivery.Status.SUCCEEDED,
        3,
        200,
        "",
    )
    assert receiver.count() == 3
    assert len({r.headers["x-switchyard-delivery"] for r in receiver.received}) == 1


@pytest.mark.django_db
def test_it_gives_up_after_max_attempts(receiver, queued, django_capture_on_commit_callbacks):
    receiver.answers = [Answer(500)]
    delivery = _delivery(receiver)

    outcomes = []
    for _ in range(4):
        with django_capture_on_commit_callbacks(execute=True):
            outcomes.append(webhook_deliver(delivery_id=delivery.pk))
        _make_due(delivery)

    assert outcomes == ["failed", "failed", "given_up", "skipped"]
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (WebhookDelivery.Status.GIVEN_UP, 3)
    assert receiver.count() == 3
    assert len(queued) == 2  # countdowns for tries 2 and 3, none after giving up


@pytest.mark.django_db
def test_an_unreachable_receiver_is_a_failed_try_with_the_error(queued):
    sub = webhook_subscribe(url=_closed_port_url(), secret=SECRET)
    event = event_record(name="task.created", subject_type="task", subject_id=1)
    webhook_deliveries_create(event_id=event.pk)
    delivery = WebhookDelivery.objects.get(subscription=sub)

    assert webhook_deliver(delivery_id=delivery.pk) == "failed"

    delivery.refresh_from_db()
    assert delivery.last_status_code is None
    assert delivery.last_error.startswith("ConnectError")


@pytest.mark.django_db
def test_a_receiver_slower_than_the_timeout_is_a_failed_try(receiver, queued, settings):
    settings.WEBHOOK_TIMEOUT_SECONDS = 1
    hold = threading.Event()
    receiver.answers = [Answer(200, hold=hold)]
    delivery = _delivery(receiver)

    try:
        assert webhook_deliver(delivery_id=delivery.pk) == "failed"
    finally:
        hold.set()

    delivery.refresh_from_db()
    assert delivery.last_error.startswith("ReadTimeout")


@pytest.mark.django_db
def test_only_the_start_of_a_big_answer_is_kept(receiver, queued):
    receiver.answers = [Answer(200, b"x" * 50_000)]
    delivery = _delivery(receiver)

    webhook_deliver(delivery_id=delivery.pk)

    delivery.refresh_from_db()
    assert delivery.response_excerpt == "x" * 1000


@pytest.mark.django_db
def test_a_delivery_of_an_inactive_subscription_waits(receiver, queued):
    delivery = _delivery(receiver)
    WebhookSubscription.objects.update(active=False)

    assert webhook_deliver(delivery_id=delivery.pk) == "skipped"
    assert receiver.count() == 0
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (WebhookDelivery.Status.PENDING, 0)


@pytest.mark.django_db
def test_a_claimed_delivery_is_not_sent_by_another_worker(receiver, queued):
    delivery = _delivery(receiver)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(claimed_until=timezone.now() + timedelta(seconds=30))

    assert webhook_deliver(delivery_id=delivery.pk) == "skipped"
    assert receiver.count() == 0


@pytest.mark.django_db
def test_an_answer_that_comes_after_the_claim_ran_out_does_not_overwrite_a_later_try(receiver, queued):
    # given a try whose claim ran out while it waited, and a second worker that took the delivery
    delivery = _delivery(receiver)
    original_stream = httpx.Client.stream
    takeover = {}

    def slow_stream(client, *args, **kwargs):
        # while this worker "waits", its claim expires and another worker claims the delivery
        WebhookDelivery.objects.filter(pk=delivery.pk).update(claimed_until=timezone.now() - timedelta(seconds=1))
        if not takeover:
            takeover["outcome"] = "taken"
            WebhookDelivery.objects.filter(pk=delivery.pk).update(attempts=2, claimed_until=timezone.now())
        return original_stream(client, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(httpx.Client, "stream", slow_stream)
        outcome = webhook_deliver(delivery_id=delivery.pk)

    # then its answer is dropped: the later try owns the row
    assert outcome == "skipped"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (WebhookDelivery.Status.PENDING, 2)


@pytest.mark.concurrency
@pytest.mark.django_db(transaction=True)
def test_two_workers_at_once_send_a_delivery_once(receiver, queued):
    # given a receiver that holds its answer, so both workers overlap
    hold = threading.Event()
    receiver.answers = [Answer(200, hold=hold)]
    delivery = _delivery(receiver)
    outcomes, start = [], threading.Barrier(2)

    def worker():
        start.wait()
        try:
            outcomes.append(webhook_deliver(delivery_id=delivery.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    # one of them is skipped at once; then let the other's answer through
    deadline = timezone.now() + timedelta(seconds=10)
    while "skipped" not in outcomes and timezone.now() < deadline:
        threading.Event().wait(0.02)
    hold.set()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(outcomes) == ["skipped", "succeeded"]
    assert receiver.count() == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (WebhookDelivery.Status.SUCCEEDED, 1)


def _closed_port_url() -> str:
    """A loopback URL nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"
