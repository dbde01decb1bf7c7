"""config.cache.RedisCache against a real Redis (skipped when none answers on 127.0.0.1:6379)."""

import uuid

import pytest

from config.cache import RedisCache

LOCATION = "redis://127.0.0.1:6379/12"


@pytest.fixture
def store():
    backend = RedisCache(LOCATION, {"KEY_PREFIX": f"test-{uuid.uuid4().hex}"})
    try:
        backend.get("ping")
    except Exception:
        pytest.skip("no Redis on 127.0.0.1:6379")
    yield backend
    client = backend._cache.get_client(write=True)
    for key in client.scan_iter(f"{backend.key_prefix}:*"):
        client.delete(key)


def test_one_client_serves_every_call(store):
    assert store._cache.get_client("a") is store._cache.get_client("b", write=True)


def test_incr_or_start_counts_from_1_and_sets_the_expiry(store):
    assert [store.incr_or_start("window", 5) for _ in range(3)] == [1, 2, 3]

    client = store._cache.get_client(write=True)
    ttl = client.ttl(store.make_key("window"))
    assert 0 < ttl <= 5
    assert store.get("window") == 3  # the same value Django's incr/get see


def test_incr_or_start_keeps_the_first_expiry(store):
    store.incr_or_start("window", 100)
    store.incr_or_start("window", 5)

    assert store._cache.get_client().ttl(store.make_key("window")) > 5


def test_the_django_cache_api_still_works(store):
    store.set("k", {"a": 1}, 10)
    assert store.get("k") == {"a": 1}
    assert store.add("n", 1, 10) is True
    assert store.incr("n") == 2
    store.delete("k")
    assert store.get("k") is None


def test_incr_or_start_adds_a_settled_batch_in_one_call(store):
    assert [store.incr_or_start("window", 5, amount=16), store.incr_or_start("window", 5)] == [16, 17]
