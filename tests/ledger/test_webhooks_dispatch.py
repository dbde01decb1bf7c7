"""How events reach deliveries: the event_record hook and its cached flag, dispatch, the sweep."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from config.api.errors import DomainError
from ledger.events import event_record
from ledger.models import Event, WebhookDelivery, WebhookSubscription
from ledger.tasks import webhooks_dispatch_task
from ledger.webhooks import (
    webhook_deliveries_create,
    webhook_deliveries_retry_now,
    webhook_subscribe,
    webhook_subscription_save,
    webhooks_enabled,
    webhooks_retry_due,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(monkeypatch):
    """Tasks queued after commit, as (task, argument), instead of sent to a broker."""
    sent = []

    class FakeDeliverTask:
        def delay(self, delivery_id):
            sent.append(("deliver", delivery_id))

        def apply_async(self, args, countdown=None):
            sent.append(("deliver", args[0]))

    monkeypatch.setattr("ledger.webhooks._deliver_task", FakeDeliverTask)
    monkeypatch.setattr(webhooks_dispatch_task, "delay", lambda event_id: sent.append(("dispatch", event_id)))
    return sent


def _event(name="task.claimed") -> Event:
    return event_record(name=name, subject_type="task", subject_id=1, payload={"n": 1})


def _subscribe(**kwargs) -> WebhookSubscription:
    return webhook_subscribe(url=kwargs.pop("url", "http://127.0.0.1:9/hook"), **kwargs)


# --- The hook in event_record ---------------------------------------------------------------


def test_event_record_is_one_insert_when_nobody_subscribed(django_assert_num_queries, queued):
    _event()  # the first event of a process (or after FLAG_TTL_SECONDS) asks the database once

    with django_assert_num_queries(1):
        _event()
    assert queued == []


def test_event_record_is_still_one_insert_with_subscribers_and_queues_dispatch_after_commit(
    django_assert_num_queries, django_capture_on_commit_callbacks, queued
):
    _subscribe()
    _event()

    with django_capture_on_commit_callbacks(execute=True), django_assert_num_queries(1):
        event = _event()

    assert queued[-1] == ("dispatch", event.pk)


def test_a_rolled_back_event_is_never_dispatched(django_capture_on_commit_callbacks, queued):
    _subscribe()

    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        _event()
        raise RuntimeError("the service failed")

    assert callbacks == []
    assert queued == []


def test_subscribing_turns_the_flag_on_and_deactivating_the_last_turns_it_off(queued):
    assert webhooks_enabled() is False  # cached now

    subscription = _subscribe()
    assert webhooks_enabled() is True

    subscription.active = False
    webhook_subscription_save(subscription=subscription)
    assert webhooks_enabled() is False


# --- Subscriptions --------------------------------------------------------------------------


def test_subscribe_generates_a_secret_when_none_is_given():
    first, second = _subscribe(), _subscribe()

    assert len(first.secret) >= 40
    assert first.secret != second.secret


@pytest.mark.parametrize(
    ("url", "names"),
    [
        ("ftp://example.com/hook", []),
        ("not a url", []),
        ("http://example.com/hook", "task.claimed"),
        ("http://x.io", [""]),
    ],
)
def test_subscribe_refuses_bad_input_and_writes_nothing(url, names):
    with pytest.raises(DomainError):
        webhook_subscribe(url=url, event_names=names)

    assert WebhookSubscription.objects.count() == 0


@pytest.mark.parametrize(
    ("names", "event", "wanted"),
    [
        ([], "task.claimed", True),
        (["*"], "agent.stale", True),
        (["task.claimed"], "task.claimed", True),
        (["task.claimed"], "task.released", False),
        (["task.*"], "task.released", True),
        (["task.*"], "taskforce.x", False),
        (["session.ended", "agent.stale"], "agent.stale", True),
    ],
)
def test_a_subscription_wants_its_names_prefixes_or_everything(names, event, wanted):
    assert WebhookSubscription(event_names=names).wants(event) is wanted


# --- Dispatch -------------------------------------------------------------------------------


def test_dispatch_makes_one_delivery_per_matching_active_subscription(django_capture_on_commit_callbacks, queued):
    # given
    everything = _subscribe()
    claims = _subscribe(event_names=["task.claimed"])
    _subscribe(event_names=["session.*"])
    _subscribe(active=False)
    event = _event("task.claimed")

    # when
    with django_capture_on_commit_callbacks(execute=True):
        waiting = webhook_deliveries_create(event_id=event.pk)

    # then
    deliveries = WebhookDelivery.objects.filter(event=event).order_by("subscription_id")
    assert [d.subscription_id for d in deliveries] == [everything.pk, claims.pk]
    assert {(d.status, d.attempts) for d in deliveries} == {(WebhookDelivery.Status.PENDING, 0)}
    assert waiting == 2
    assert sorted(arg for kind, arg in queued if kind == "deliver") == [d.pk for d in deliveries]


def test_dispatch_twice_makes_no_second_delivery(queued):
    _subscribe()
    event = _event()
    webhook_deliveries_create(event_id=event.pk)
    first = list(WebhookDelivery.objects.values_list("pk", flat=True))

    webhook_deliveries_create(event_id=event.pk)

    assert list(WebhookDelivery.objects.values_list("pk", flat=True)) == first


def test_dispatch_skips_subscriptions_made_after_the_event_and_missing_events(queued):
    event = _event()
    WebhookSubscription.objects.filter(pk=_subscribe().pk).update(created_at=timezone.now() + timedelta(seconds=1))

    assert webhook_deliveries_create(event_id=event.pk) == 0
    assert webhook_deliveries_create(event_id=event.pk + 1000) == 0
    assert WebhookDelivery.objects.count() == 0


# --- The sweep ------------------------------------------------------------------------------


def _delivery(subscription, *, status=WebhookDelivery.Status.FAILED, due_ago=120, claimed_for=None, attempts=1):
    now = timezone.now()
    event = _event()
    WebhookDelivery.objects.filter(event=event).delete()  # made by no dispatch: tests set the state
    return WebhookDelivery.objects.create(
        subscription=subscription,
        event=event,
        status=status,
        attempts=attempts,
        next_attempt_at=now - timedelta(seconds=due_ago),
        claimed_until=None if claimed_for is None else now + timedelta(seconds=claimed_for),
    )


def test_the_sweep_queues_due_and_abandoned_deliveries_only(django_capture_on_commit_callbacks, queued):
    # given
    subscription = _subscribe()
    due = _delivery(subscription)
    abandoned = _delivery(subscription, claimed_for=-1, due_ago=5)  # its worker died mid-send
    _delivery(subscription, due_ago=-30)  # not yet
    _delivery(subscription, due_ago=5)  # just due: the countdown message queued for it comes first
    _delivery(subscription, claimed_for=30)  # being sent
    _delivery(subscription, status=WebhookDelivery.Status.SUCCEEDED)
    _delivery(subscription, status=WebhookDelivery.Status.GIVEN_UP)
    _delivery(_subscribe(active=False))
    queued.clear()

    # when
    with django_capture_on_commit_callbacks(execute=True):
        webhooks_retry_due()

    # then
    assert sorted(arg for kind, arg in queued if kind == "deliver") == sorted([due.pk, abandoned.pk])


def test_the_sweep_delivers_recent_events_the_fast_path_missed(django_capture_on_commit_callbacks, queued):
    # given events recorded while the flag said "no subscribers" (another process's stale cache)
    subscription = _subscribe(event_names=["task.*"])
    WebhookSubscription.objects.filter(pk=subscription.pk).update(created_at=timezone.now() - timedelta(hours=1))
    missed, other_name, too_old = _event("task.claimed"), _event("session.started"), _event("task.moved")
    Event.objects.filter(pk__in=[missed.pk, other_name.pk]).update(created_at=timezone.now() - timedelta(minutes=2))
    Event.objects.filter(pk=too_old.pk).update(created_at=timezone.now() - timedelta(minutes=30))
    queued.clear()

    # when
    with django_capture_on_commit_callbacks(execute=True):
        webhooks_retry_due()
    webhooks_retry_due()  # twice: nothing more

    # then
    delivery = WebhookDelivery.objects.get()
    assert (delivery.event_id, delivery.subscription_id) == (missed.pk, subscription.pk)
    assert queued == [("deliver", delivery.pk)]


def test_retry_now_sends_failed_and_given_up_ones_again_and_leaves_successes(
    django_capture_on_commit_callbacks, queued
):
    # given
    subscription = _subscribe()
    gave_up = _delivery(subscription, status=WebhookDelivery.Status.GIVEN_UP, attempts=3)
    waiting = _delivery(subscription, due_ago=-3600)
    done = _delivery(subscription, status=WebhookDelivery.Status.SUCCEEDED)
    queued.clear()

    # when
    with django_capture_on_commit_callbacks(execute=True):
        count = webhook_deliveries_retry_now(deliveries=WebhookDelivery.objects.all())

    # then
    assert count == 2
    assert sorted(arg for _, arg in queued) == sorted([gave_up.pk, waiting.pk])
    now = timezone.now()
    for delivery in (gave_up, waiting):
        delivery.refresh_from_db()
        assert delivery.status == WebhookDelivery.Status.FAILED
        assert delivery.next_attempt_at <= now
    done.refresh_from_db()
    assert done.status == WebhookDelivery.Status.SUCCEEDED
