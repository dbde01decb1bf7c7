"""The one way to cause a side effect from a service: after the transaction commits.

A browser or a worker must never see a change that was rolled back, so Celery tasks and
channel-layer broadcasts are queued with ``transaction.on_commit``.

A broadcast to a group nobody has joined is skipped. With channels_redis the members of a group
are a sorted set in Redis; one ZCARD on it (one round trip of the sync client, on this thread)
is cheaper than ``group_send`` (two round trips, through the event loop via ``async_to_sync``),
and on the API's hot paths there usually is no page open. A page that has joined is counted, so
it gets every message sent after it joined; one that joins later misses the message either way
(``group_send`` reads the members at the moment it runs too).
"""

from collections.abc import Callable
from functools import cache

from django.db import transaction


def after_commit(func: Callable[[], object]) -> None:
    transaction.on_commit(func, robust=True)


def enqueue_task(task, *args, **kwargs) -> None:
    after_commit(lambda: task.delay(*args, **kwargs))


@cache
def redis_client(url: str):
    """One thread-safe sync client (and connection pool) per Redis URL, per process."""
    import redis

    return redis.Redis.from_url(url)


def group_members_key(layer, group: str) -> tuple[str, bytes] | None:
    """(Redis URL, key) of the sorted set that holds ``group``'s members, or None when the layer
    keeps them elsewhere (in memory, pub/sub, sentinels): then nobody can tell, and we always send."""
    from channels_redis.core import RedisChannelLayer

    if type(layer) is not RedisChannelLayer:
        return None
    host = layer.hosts[layer.consistent_hash(group)]
    if set(host) != {"address"}:
        return None
    return host["address"], layer._group_key(group)


def group_joined(layer, group: str) -> bool:
    """Has anyone joined ``group``? True when the layer can't say."""
    where = group_members_key(layer, group)
    if where is None:
        return True
    url, key = where
    return redis_client(url).zcard(key) > 0


def broadcast(group: str, message: dict) -> None:
    def send() -> None:
        from asgiref.sync import async_to_sync
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        if layer is not None and group_joined(layer, group):
            async_to_sync(layer.group_send)(group, message)

    after_commit(send)
