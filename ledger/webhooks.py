"""Outbound webhooks: subscriptions, dispatch of events to them, signed delivery with retries.

How an event reaches a receiver:

1. ``event_record`` (ledger/events.py) runs inside the service's transaction. When at least one
   active subscription exists it queues ``webhooks_dispatch_task(event_id)`` after commit.
   Whether one exists is a flag in the cache (``webhooks_enabled``), so the hot path adds no
   query per event; it is cleared when a subscription changes and expires after
   FLAG_TTL_SECONDS, which bounds how stale it can be in a process whose cache is its own.
   Each process also keeps the answer in memory for FLAG_MEMO_SECONDS (1 s): no Redis call
   per event either.
2. ``webhook_deliveries_create`` makes one delivery per matching active subscription. The
   unique (subscription, event) makes a second dispatch of the same event a no-op.
3. ``webhook_deliver`` claims a delivery with a conditional UPDATE (so two workers never send
   it at the same time), POSTs it, and records the answer: 2xx is ``succeeded``; anything else
   is ``failed`` with the next try WEBHOOK_RETRY_BASE_SECONDS * 2**n later (capped, with
   jitter), and ``given_up`` after WEBHOOK_MAX_ATTEMPTS tries.
4. ``webhooks_retry_due`` (beat, every minute) queues deliveries whose time has come, those a
   killed worker left claimed once the claim runs out, and creates deliveries for recent events
   the fast path missed (a stale flag, a broker that was down at commit).

Delivery is at least once, not exactly once: a worker killed after the receiver got the
request but before the answer was recorded leaves the delivery to be sent again, so a
receiver may see the same ``X-Switchyard-Delivery`` twice and should ignore repeats. The
delivery log records one success, since a delivery leaves the open states only once.

A receiver checks ``X-Switchyard-Signature: sha256=<hex>``, the HMAC-SHA256 with the
subscription's secret of ``"<X-Switchyard-Timestamp>.<raw body>"`` (``webhook_signature_verify``),
and refuses old timestamps to stop replays.
"""

import hashlib
import hmac
import json
import logging
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.core.validators import URLValidator
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from config.api.errors import DomainError
from config.cache import shared_cache
from config.side_effects import after_commit, enqueue_task, registered_task
from ledger.models import Event, WebhookDelivery, WebhookSubscription
from ledger.webhook_deadline import DeliveryDeadline, deadline_error
from ledger.webhook_slack import slack_message_body

if TYPE_CHECKING:
    # Imported where a delivery is sent (``webhook_deliver``), not here: the admin loads this module in
    # every Django process (web, Celery worker, command), and httpx's import (its command line's
    # rich and pygments with it, where installed) was a tenth of such a process's start.
    import httpx

logger = logging.getLogger(__name__)

FLAG_KEY = "ledger:webhooks:any-active"
FLAG_TTL_SECONDS = 30
FLAG_MEMO_SECONDS = 1.0  # the flag as this process last read it: [monotonic expiry, value or None]
_flag_memo: list = [0.0, None]
RETRY_CAP_SECONDS = 6 * 3600
RETRY_JITTER = 0.1  # up to 10% added, so receivers coming back are not hit by every retry at once
# A retry due within this long is queued with a countdown; later ones wait for the sweep, so no
# message sits in a worker (or past a Redis visibility timeout) for hours.
COUNTDOWN_MAX_SECONDS = 300
# The sweep leaves a delivery this long to the message queued for it before queuing another.
SWEEP_GRACE = timedelta(seconds=60)
SWEEP_BATCH = 500
CATCH_UP_WINDOW = timedelta(minutes=15)
CATCH_UP_GRACE = timedelta(seconds=10)
EXCERPT_BYTES = 1000
ERROR_CHARS = 1000
SIGNATURE_TOLERANCE_SECONDS = 300
OPEN = (WebhookDelivery.Status.PENDING, WebhookDelivery.Status.FAILED)


# --- Subscriptions --------------------------------------------------------------------------


def webhooks_enabled() -> bool:
    """Is any subscription active? Answered from the cache; one query per FLAG_TTL_SECONDS per cache.

    The answer is also kept in process memory for FLAG_MEMO_SECONDS (1 s), because even one
    Redis GET per claim costs more CPU than the rest of recording the event. A subscription
    change made in this process clears it at once (``_flag_clear``); one made in another process
    reaches this one within FLAG_MEMO_SECONDS of the cache flag being cleared, and events
    recorded in between are picked up by the sweep like those of any stale flag.
    """
    expires, memo = _flag_memo
    if memo is not None and expires > time.monotonic():
        return memo
    try:
        flag = shared_cache().get(FLAG_KEY)
    except Exception:  # the cache is an optimisation: when it is down, ask the database
        logger.warning("cache unavailable; asking the database whether webhooks are on", exc_info=True)
        return WebhookSubscription.objects.filter(active=True).exists()
    if flag is None:
        flag = WebhookSubscription.objects.filter(active=True).exists()
        shared_cache().set(FLAG_KEY, flag, FLAG_TTL_SECONDS)
    _flag_memo[:] = [time.monotonic() + FLAG_MEMO_SECONDS, flag]
    return flag


def flag_memo_clear() -> None:
    _flag_memo[:] = [0.0, None]


def _flag_clear() -> None:
    # Now, for this process; and after commit, because another process may have cached the old
    # answer between now and then.
    flag_memo_clear()
    shared_cache().delete(FLAG_KEY)

    def again() -> None:
        flag_memo_clear()
        shared_cache().delete(FLAG_KEY)

    after_commit(again)


def webhook_secret_generate() -> str:
    return secrets.token_urlsafe(32)


def webhook_subscription_check(*, url: str, event_names: list) -> None:
    """Raise DomainError (with field errors) unless url is http(s) and event_names a list of names."""
    try:
        URLValidator(schemes=["http", "https"])(url)
    except ValidationError:
        raise DomainError("url must be an http or https URL.", extra={"errors": {"url": ["Enter a valid URL."]}})
    if not isinstance(event_names, list) or not all(isinstance(n, str) and n.strip() for n in event_names):
        raise DomainError(
            'event_names must be a list of event names ("task.claimed", "task.*" or "*").',
            extra={"errors": {"event_names": ["A list of non-empty names."]}},
        )


@transaction.atomic
def webhook_subscribe(
    *,
    url: str,
    event_names: list[str] | None = None,
    secret: str = "",
    active: bool = True,
    description: str = "",
    format: str = WebhookSubscription.Format.SWITCHYARD,
) -> WebhookSubscription:
    """A new subscription; with no secret given one is generated (read it from the result once)."""
    event_names = event_names or []
    webhook_subscription_check(url=url, event_names=event_names)
    if format not in WebhookSubscription.Format.values:
        raise DomainError(f"format must be one of {', '.join(WebhookSubscription.Format.values)}; got {format!r}.")
    subscription = WebhookSubscription.objects.create(
        url=url,
        secret=secret or webhook_secret_generate(),
        event_names=event_names,
        active=active,
        description=description,
        format=format,
    )
    _flag_clear()
    return subscription


@transaction.atomic
def webhook_subscription_save(*, subscription: WebhookSubscription, new_secret: str = "") -> str | None:
    """Save an edited (or new) subscription. ``new_secret`` replaces the secret; one that has
    none gets a generated secret, which is returned so it can be shown once."""
    webhook_subscription_check(url=subscription.url, event_names=subscription.event_names)
    generated = None
    if new_secret:
        subscription.secret = new_secret
    elif not subscription.secret:
        subscription.secret = generated = webhook_secret_generate()
    subscription.save()
    _flag_clear()
    return generated


@transaction.atomic
def webhook_subscriptions_delete(*, subscriptions: QuerySet[WebhookSubscription]) -> int:
    """Delete subscriptions with their delivery logs."""
    count = subscriptions.count()
    subscriptions.delete()
    _flag_clear()
    return count


# --- Signing ----------------------------------------------------------------------------------


def webhook_sign(*, secret: str, timestamp: int | str, body: bytes) -> str:
    """The X-Switchyard-Signature value: ``sha256=`` and the hex HMAC of ``"<timestamp>.<body>"``."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def webhook_signature_verify(
    *,
    secret: str,
    timestamp: str,
    body: bytes,
    signature: str,
    now: float | None = None,
    tolerance_seconds: int = SIGNATURE_TOLERANCE_SECONDS,
) -> bool:
    """What a receiver does: the signature matches and the timestamp is recent (no replays)."""
    try:
        age = abs((time.time() if now is None else now) - int(timestamp))
    except (TypeError, ValueError):
        return False
    expected = webhook_sign(secret=secret, timestamp=timestamp, body=body)
    return age <= tolerance_seconds and hmac.compare_digest(expected, signature or "")


def webhook_event_body(event: Event) -> bytes:
    document = {
        "id": event.pk,
        "name": event.name,
        "subject": {"type": event.subject_type, "id": event.subject_id},
        "actor": event.actor,
        "payload": event.payload,
        "created_at": event.created_at.isoformat(),
    }
    return json.dumps(document, cls=DjangoJSONEncoder, separators=(",", ":"), sort_keys=True).encode()


# --- Dispatch -------------------------------------------------------------------------------


@transaction.atomic
def webhook_deliveries_create(*, event_id: int) -> int:
    """One delivery per active subscription that wants this event; each queued after commit.

    Idempotent: the unique (subscription, event) skips those that exist. Returns how many
    deliveries of the event are waiting for their first try.
    """
    event = Event.objects.filter(pk=event_id).first()
    if event is None:
        return 0
    subscriptions = [
        s
        for s in WebhookSubscription.objects.filter(active=True, created_at__lte=event.created_at)
        if s.wants(event.name)
    ]
    now = timezone.now()
    WebhookDelivery.objects.bulk_create(
        [WebhookDelivery(subscription=s, event=event, next_attempt_at=now) for s in subscriptions],
        ignore_conflicts=True,
    )
    return _queue_untried(WebhookDelivery.objects.filter(event=event))


def _queue_untried(deliveries: QuerySet[WebhookDelivery]) -> int:
    untried = deliveries.filter(status=WebhookDelivery.Status.PENDING, attempts=0, claimed_until__isnull=True)
    ids = list(untried.order_by("pk").values_list("pk", flat=True))
    for delivery_id in ids:
        enqueue_task(_deliver_task(), delivery_id)
    return len(ids)


def _deliver_task():
    # By name: ledger.tasks imports this module, never the other way round.
    return registered_task("ledger.tasks.webhook_deliver_task")


# --- Delivery -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    ok: bool
    status_code: int | None
    error: str
    excerpt: str


def webhook_claim_seconds() -> int:
    """How long a worker's claim on a delivery lasts: past the delivery's total deadline."""
    return settings.WEBHOOK_DEADLINE_SECONDS + 10


def webhook_retry_delay(*, attempts: int, rng: Callable[[], float] = random.random) -> float:
    """Seconds before the next try after ``attempts`` failed ones: base * 2**(attempts-1), jittered, capped."""
    delay = settings.WEBHOOK_RETRY_BASE_SECONDS * 2 ** max(attempts - 1, 0)
    return min(delay * (1 + RETRY_JITTER * rng()), RETRY_CAP_SECONDS)


def webhook_deliver(*, delivery_id: int, client: "httpx.Client | None" = None) -> str:
    """Send one delivery if it is due and nobody else is sending it. Returns what happened:
    ``succeeded``, ``failed``, ``given_up``, or ``skipped`` (not due, done, or claimed)."""
    now = timezone.now()
    # Every condition is on the delivery row itself, not through a join: PostgreSQL rechecks
    # those against the row's newest version when two workers race for it, so one loses.
    claimable = WebhookDelivery.objects.filter(
        Q(claimed_until__isnull=True) | Q(claimed_until__lt=now),
        pk=delivery_id,
        status__in=OPEN,
        next_attempt_at__lte=now,
        subscription_id__in=WebhookSubscription.objects.filter(active=True).values("pk"),
    )
    # The claim commits at once (autocommit): other workers see it, and no transaction stays
    # open while we wait for the receiver.
    claimed = claimable.update(
        claimed_until=now + timedelta(seconds=webhook_claim_seconds()),
        attempts=F("attempts") + 1,
        last_attempt_at=now,
        updated_at=now,
    )
    if claimed != 1:
        return "skipped"
    delivery = WebhookDelivery.objects.select_related("subscription", "event").get(pk=delivery_id)
    # The whole exchange has WEBHOOK_DEADLINE_SECONDS, however slowly the receiver drips its answer.
    with DeliveryDeadline(
        settings.WEBHOOK_DEADLINE_SECONDS, per_operation=settings.WEBHOOK_TIMEOUT_SECONDS
    ) as deadline:
        if client is None:
            import httpx

            with httpx.Client(timeout=deadline.timeout(), follow_redirects=False) as own_client:
                attempt = _post(delivery, own_client, deadline)
        else:
            attempt = _post(delivery, client, deadline)
    return _record(delivery, attempt)


def _post(delivery: WebhookDelivery, client: "httpx.Client", deadline: DeliveryDeadline) -> Attempt:
    import httpx

    if delivery.subscription.format == WebhookSubscription.Format.SLACK:
        body = slack_message_body(delivery.event)  # the message Slack's incoming webhooks accept
    else:
        body = webhook_event_body(delivery.event)
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Switchyard-Webhooks/1.0",
        "X-Switchyard-Event": delivery.event.name,
        "X-Switchyard-Delivery": str(delivery.pk),
        "X-Switchyard-Timestamp": timestamp,
        "X-Switchyard-Signature": webhook_sign(secret=delivery.subscription.secret, timestamp=timestamp, body=body),
    }
    try:
        with client.stream(
            "POST", delivery.subscription.url, content=body, headers=headers, extensions=deadline.extensions()
        ) as response:
            excerpt = _excerpt(response)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        error = deadline_error(deadline.seconds) if deadline.passed else f"{type(exc).__name__}: {exc}"
        return Attempt(ok=False, status_code=None, error=error[:ERROR_CHARS], excerpt="")
    ok = 200 <= response.status_code < 300
    error = "" if ok else f"HTTP {response.status_code}"
    return Attempt(ok=ok, status_code=response.status_code, error=error, excerpt=excerpt)


def _excerpt(response: "httpx.Response") -> str:
    """The start of the answer, without reading a huge body into memory."""
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= EXCERPT_BYTES:
            break
    return b"".join(chunks)[:EXCERPT_BYTES].decode("utf-8", errors="replace")


def _record(delivery: WebhookDelivery, attempt: Attempt) -> str:
    now = timezone.now()
    fields = {
        "claimed_until": None,
        "last_status_code": attempt.status_code,
        "last_error": attempt.error,
        "response_excerpt": attempt.excerpt,
        "updated_at": now,
    }
    delay = None
    if attempt.ok:
        fields.update(status=WebhookDelivery.Status.SUCCEEDED, delivered_at=now)
    elif delivery.attempts >= settings.WEBHOOK_MAX_ATTEMPTS:
        fields.update(status=WebhookDelivery.Status.GIVEN_UP)
    else:
        delay = webhook_retry_delay(attempts=delivery.attempts)
        fields.update(status=WebhookDelivery.Status.FAILED, next_attempt_at=now + timedelta(seconds=delay))
    # Only while our claim is the latest: if it ran out and another worker took the delivery,
    # that worker's answer is the one to keep.
    mine = WebhookDelivery.objects.filter(pk=delivery.pk, attempts=delivery.attempts, status__in=OPEN)
    if mine.update(**fields) != 1:
        logger.warning("delivery %s: claim ran out before the answer; a later try owns it", delivery.pk)
        return "skipped"
    if delay is not None and delay <= COUNTDOWN_MAX_SECONDS:
        task = _deliver_task()
        after_commit(lambda: task.apply_async((delivery.pk,), countdown=delay))
    return str(fields["status"])


# --- Sweep and repair -----------------------------------------------------------------------


def webhooks_retry_due(*, now: datetime | None = None, limit: int = SWEEP_BATCH) -> int:
    """Queue deliveries that are due and that no queued message is looking after. Returns how many.

    Due means: an open delivery of an active subscription whose retry time passed more than
    SWEEP_GRACE ago, or whose worker's claim ran out (the worker died mid-send).
    """
    now = now or timezone.now()
    created = _catch_up(now=now, limit=limit)
    due = WebhookDelivery.objects.filter(
        Q(claimed_until__isnull=True, next_attempt_at__lte=now - SWEEP_GRACE) | Q(claimed_until__lt=now),
        status__in=OPEN,
        next_attempt_at__lte=now,
        subscription__active=True,
    )
    ids = list(due.order_by("next_attempt_at", "pk").values_list("pk", flat=True)[:limit])
    for delivery_id in ids:
        enqueue_task(_deliver_task(), delivery_id)
    return created + len(ids)


def _catch_up(*, now: datetime, limit: int) -> int:
    """Deliveries for recent events that got none (the fast path missed them); queued at once."""
    created = 0
    for subscription in WebhookSubscription.objects.filter(active=True).order_by("pk"):
        events = Event.objects.filter(
            created_at__gte=max(now - CATCH_UP_WINDOW, subscription.created_at),
            created_at__lt=now - CATCH_UP_GRACE,
        ).exclude(webhook_deliveries__subscription=subscription)
        wanted = _names_filter(subscription.event_names)
        if wanted is not None:
            events = events.filter(wanted)
        event_ids = list(events.order_by("pk").values_list("pk", flat=True)[:limit])
        if not event_ids:
            continue
        with transaction.atomic():
            WebhookDelivery.objects.bulk_create(
                [WebhookDelivery(subscription=subscription, event_id=e, next_attempt_at=now) for e in event_ids],
                ignore_conflicts=True,
            )
            created += _queue_untried(WebhookDelivery.objects.filter(subscription=subscription, event_id__in=event_ids))
    return created


def _names_filter(names: list[str]) -> Q | None:
    """The SQL twin of WebhookSubscription.wants; None when it wants everything."""
    if not names or "*" in names:
        return None
    query = Q(name__in=[n for n in names if not n.endswith(".*")])
    for prefix in (n[:-1] for n in names if n.endswith(".*")):
        query |= Q(name__startswith=prefix)
    return query


@transaction.atomic
def webhook_deliveries_retry_now(*, deliveries: QuerySet[WebhookDelivery]) -> int:
    """Send these again now (the admin's "Retry now"): failed and given-up ones, and pending ones
    that wait. A given-up delivery gets one more try. Succeeded ones are left alone."""
    now = timezone.now()
    not_in_flight = Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
    retry = WebhookDelivery.objects.filter(
        not_in_flight,
        pk__in=list(deliveries.values_list("pk", flat=True)),
        status__in=[*OPEN, WebhookDelivery.Status.GIVEN_UP],
    )
    ids = list(retry.values_list("pk", flat=True))
    WebhookDelivery.objects.filter(not_in_flight, pk__in=ids, status=WebhookDelivery.Status.GIVEN_UP).update(
        status=WebhookDelivery.Status.FAILED
    )
    WebhookDelivery.objects.filter(not_in_flight, pk__in=ids).update(
        next_attempt_at=now, claimed_until=None, updated_at=now
    )
    for delivery_id in ids:
        enqueue_task(_deliver_task(), delivery_id)
    return len(ids)
