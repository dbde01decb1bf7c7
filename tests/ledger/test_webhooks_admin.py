"""The webhook admin: subscriptions with a write-only secret, a read-only delivery log, "Retry now"."""

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from ledger.events import event_record
from ledger.models import WebhookDelivery, WebhookSubscription
from ledger.webhooks import webhook_subscribe, webhooks_enabled
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _url(model, view, *args):
    return reverse(f"admin:ledger_{model._meta.model_name}_{view}", args=args)


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch):
    monkeypatch.setattr("ledger.webhooks._deliver_task", lambda: type("T", (), {"delay": lambda self, pk: None})())
    monkeypatch.setattr("ledger.events.webhooks_dispatch_task.delay", lambda event_id: None)


def _form(**overrides):
    data = {"url": "https://hooks.example.com/in", "event_names": '["task.*"]', "active": "on", "description": ""}
    data.update(overrides)
    data["new_secret"] = overrides.get("new_secret", "")
    return data


def test_adding_without_a_secret_generates_one_and_shows_it_once(admin_client):
    response = admin_client.post(_url(WebhookSubscription, "add"), _form(), follow=True)

    subscription = WebhookSubscription.objects.get()
    assert subscription.event_names == ["task.*"]
    assert len(subscription.secret) >= 40
    shown = [str(m) for m in get_messages(response.wsgi_request)]
    assert any(subscription.secret in m for m in shown)
    assert webhooks_enabled() is True
    # and the change page never renders it
    page = admin_client.get(_url(WebhookSubscription, "change", subscription.pk)).content.decode()
    assert subscription.secret not in page


def test_a_blank_secret_on_edit_keeps_it_and_a_new_one_replaces_it(admin_client):
    subscription = webhook_subscribe(url="https://hooks.example.com/in", secret="old-secret")
    change = _url(WebhookSubscription, "change", subscription.pk)

    admin_client.post(change, _form(description="kept"))
    subscription.refresh_from_db()
    assert (subscription.secret, subscription.description) == ("old-secret", "kept")

    admin_client.post(change, _form(new_secret="new-secret"))
    subscription.refresh_from_db()
    assert subscription.secret == "new-secret"


@pytest.mark.parametrize(
    ("field", "value"), [("url", "ftp://example.com/x"), ("event_names", '"task.claimed"'), ("event_names", "[1]")]
)
def test_bad_input_is_a_form_error_and_writes_nothing(admin_client, field, value):
    response = admin_client.post(_url(WebhookSubscription, "add"), _form(**{field: value}))

    assert response.status_code == 200
    assert field in response.context["adminform"].form.errors
    assert WebhookSubscription.objects.count() == 0


def test_deleting_the_last_subscription_turns_dispatch_off(admin_client):
    subscription = webhook_subscribe(url="https://hooks.example.com/in")
    assert webhooks_enabled() is True

    admin_client.post(_url(WebhookSubscription, "delete", subscription.pk), {"post": "yes"})

    assert WebhookSubscription.objects.count() == 0
    assert webhooks_enabled() is False


def _delivery(status=WebhookDelivery.Status.GIVEN_UP) -> WebhookDelivery:
    subscription = WebhookSubscription.objects.first() or webhook_subscribe(url="https://hooks.example.com/in")
    event = event_record(name="task.claimed", subject_type="task", subject_id=1)
    return WebhookDelivery.objects.create(
        subscription=subscription, event=event, status=status, attempts=3, next_attempt_at=timezone.now()
    )


def test_the_delivery_log_is_read_only_and_filterable(admin_client):
    delivery = _delivery()
    _delivery(status=WebhookDelivery.Status.SUCCEEDED)
    before = list(WebhookDelivery.objects.values())

    listing = admin_client.get(_url(WebhookDelivery, "changelist"), {"status__exact": "given_up"})
    assert [d.pk for d in listing.context["cl"].result_list] == [delivery.pk]
    assert admin_client.get(_url(WebhookDelivery, "changelist"), {"q": "task.claimed"}).status_code == 200
    assert admin_client.get(_url(WebhookDelivery, "change", delivery.pk)).status_code == 200
    assert admin_client.get(_url(WebhookDelivery, "add")).status_code == 403
    assert admin_client.post(_url(WebhookDelivery, "change", delivery.pk), {}).status_code == 403
    assert admin_client.post(_url(WebhookDelivery, "delete", delivery.pk), {"post": "yes"}).status_code == 403
    assert list(WebhookDelivery.objects.values()) == before


def test_retry_now_queues_the_selected_deliveries(admin_client):
    given_up, succeeded = _delivery(), _delivery(status=WebhookDelivery.Status.SUCCEEDED)

    response = admin_client.post(
        _url(WebhookDelivery, "changelist"),
        {"action": "retry_now", "_selected_action": [given_up.pk, succeeded.pk]},
        follow=True,
    )

    assert "1 delivery(ies) queued to send now; 1 skipped." in [str(m) for m in get_messages(response.wsgi_request)]
    given_up.refresh_from_db()
    succeeded.refresh_from_db()
    assert (given_up.status, succeeded.status) == (WebhookDelivery.Status.FAILED, WebhookDelivery.Status.SUCCEEDED)


def test_retry_now_is_refused_to_staff_without_the_change_permission(client):
    viewer = UserFactory(is_staff=True)
    viewer.user_permissions.add(*_view_permissions())
    client.force_login(viewer)
    delivery = _delivery()

    response = client.post(
        _url(WebhookDelivery, "changelist"), {"action": "retry_now", "_selected_action": [delivery.pk]}
    )

    assert response.status_code in (200, 302)
    delivery.refresh_from_db()
    assert delivery.status == WebhookDelivery.Status.GIVEN_UP


def _view_permissions():
    from django.contrib.auth.models import Permission

    return Permission.objects.filter(codename="view_webhookdelivery")
