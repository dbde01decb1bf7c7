"""A receiver that drips its answer cannot hold a delivery past WEBHOOK_DEADLINE_SECONDS.

httpx's timeouts are per read: a receiver sending one header line every few seconds never tripped
them, held the worker until Celery's time limit, and left the delivery ``pending`` with no error.
"""

import socket
import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from ledger.events import event_record
from ledger.models import WebhookDelivery
from ledger.webhooks import webhook_deliver, webhook_deliveries_create, webhook_subscribe

LINES = 40  # the drip's whole answer; 0.25 s apart it lasts 10 s, ten times the deadline


class DripReceiver:
    """A real TCP server on a free port that reads a request, then sends its answer's status line
    and one header line every 0.25 s (well inside the per-read timeout), never ending the headers."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lines_sent = 0
        self.cut_off = threading.Event()  # the sender closed the connection before the drip ended
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def _serve(self):
        conn, _ = self.listener.accept()
        with conn:
            conn.recv(65536)
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                for number in range(LINES):
                    if self.stop.wait(0.25):
                        return
                    conn.sendall(f"X-Drip-{number}: x\r\n".encode())
                    self.lines_sent += 1
            except OSError:
                self.cut_off.set()

    def close(self):
        self.stop.set()
        self.thread.join(timeout=15)
        self.listener.close()


@pytest.fixture
def drip():
    receiver = DripReceiver()
    yield receiver
    receiver.close()


@pytest.fixture
def queued(monkeypatch):
    sent = []

    class FakeDeliverTask:
        def apply_async(self, args, countdown=None):
            sent.append((args[0], countdown))

    monkeypatch.setattr("ledger.webhooks._deliver_task", FakeDeliverTask)
    monkeypatch.setattr("ledger.events.webhooks_dispatch_task.delay", lambda event_id: None)
    return sent


@pytest.mark.django_db
def test_a_dripping_receiver_is_cut_off_at_the_deadline_and_the_retry_is_scheduled(
    drip, queued, settings, django_capture_on_commit_callbacks
):
    # given a per-read timeout the drip never trips, and a deadline of 1 s for the whole delivery
    settings.WEBHOOK_TIMEOUT_SECONDS = 5
    settings.WEBHOOK_DEADLINE_SECONDS = 1
    settings.WEBHOOK_RETRY_BASE_SECONDS = 10
    settings.WEBHOOK_MAX_ATTEMPTS = 3
    subscription = webhook_subscribe(url=drip.url, secret="s")
    event = event_record(name="task.created", subject_type="task", subject_id=1)
    webhook_deliveries_create(event_id=event.pk)
    delivery = WebhookDelivery.objects.get(subscription=subscription)
    before = timezone.now()

    # when the worker delivers it
    with django_capture_on_commit_callbacks(execute=True):
        outcome = webhook_deliver(delivery_id=delivery.pk)

    # then it failed with the deadline as its reason, and the receiver saw the connection close mid-drip
    assert outcome == "failed"
    delivery.refresh_from_db()
    assert delivery.status == WebhookDelivery.Status.FAILED
    assert delivery.last_error == "DeadlineExceeded: no complete answer within 1 s (WEBHOOK_DEADLINE_SECONDS)"
    assert (delivery.attempts, delivery.last_status_code, delivery.claimed_until) == (1, None, None)
    assert drip.cut_off.wait(timeout=10)
    assert drip.lines_sent < LINES
    # and the retry schedule goes on: the next try 10-11 s later, queued with that countdown
    assert before + timedelta(seconds=10) <= delivery.next_attempt_at <= timezone.now() + timedelta(seconds=11)
    assert len(queued) == 1
    assert queued[0][0] == delivery.pk and 10 <= queued[0][1] <= 11
