"""Celery adapters for outbound webhooks. The rules are in ledger/webhooks.py."""

from celery import shared_task
from django.db import OperationalError

from ledger.webhooks import (
    webhook_claim_seconds,
    webhook_deliver,
    webhook_deliveries_create,
    webhooks_retry_due,
)

# A database hiccup is worth a few quick retries; anything else is a bug to see in the logs.
DB_RETRY = {"autoretry_for": (OperationalError,), "retry_backoff": True, "max_retries": 5}


@shared_task(**DB_RETRY)
def webhooks_dispatch_task(event_id: int) -> int:
    """One delivery per matching subscription. Idempotent: a second run creates none."""
    return webhook_deliveries_create(event_id=event_id)


# Killed before its claim on the delivery runs out, so two tries never overlap. A message no
# worker took within the expiry is dropped: the sweep queues the delivery again when it is due.
@shared_task(
    soft_time_limit=webhook_claim_seconds() - 5,
    time_limit=webhook_claim_seconds() - 2,
    expires=900,
    **DB_RETRY,
)
def webhook_deliver_task(delivery_id: int) -> str:
    """Send one delivery if it is due and not claimed; its retries live on the delivery row."""
    return webhook_deliver(delivery_id=delivery_id)


@shared_task(**DB_RETRY)
def webhooks_retry_due_task() -> int:
    """Beat runs it every minute (config/schedules.py)."""
    return webhooks_retry_due()
