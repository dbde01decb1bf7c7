"""Has anybody joined a channel-layer group? One ZCARD where channels_redis keeps the members.

Mirrors, in channels_redis/core.py of channels_redis 4.3.0: ``RedisChannelLayer.group_add`` and
``group_send`` keep a group's members in a sorted set at ``_group_key(group)`` on the host
``hosts[consistent_hash(group)]``. ``_group_key`` is private and channels_redis has no public way
to count a group's members, so it is called here (not copied) and pinned by
tests/config/test_speed_mirrors.py. ``group_send`` would take two round trips through the event
loop (``async_to_sync``) to find a group empty; this takes one of the sync client, on this thread.
Serves the events figure: on the API's hot paths there usually is no page open.
"""

from functools import cache


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
