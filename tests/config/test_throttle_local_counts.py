"""The per-key throttle counts in process memory and settles with Redis in small batches
(config/api/throttling.py): exact for small limits, off by a bounded amount across processes."""

from config.api.throttling import LocalCounts, settle_every


class SharedStore:
    """Stands in for Redis: one counter per key, shared by every 'process' (LocalCounts)."""

    def __init__(self):
        self.counts: dict[str, int] = {}
        self.calls = 0

    def incr_or_start(self, key, timeout, amount=1):
        self.calls += 1
        self.counts[key] = self.counts.get(key, 0) + amount
        return self.counts[key]


def allowed(counts: LocalCounts, store, *, limit: int, n: int, window: int = 1) -> int:
    return sum(counts.hit(store, "k", window=window, limit=limit, period=1) <= limit for _ in range(n))


def test_small_limits_settle_every_request_and_are_exact():
    # given a limit under 200 per window
    store = SharedStore()
    one, two = LocalCounts(), LocalCounts()

    # when two processes take turns with 10 requests each
    granted = sum(allowed(p, store, limit=5, n=1) for _ in range(10) for p in (one, two))

    # then exactly the limit is granted, with one round trip per request
    assert settle_every(5) == 1
    assert (granted, store.calls) == (5, 20)


def test_a_process_settles_once_per_batch_and_counts_every_request():
    store = SharedStore()
    counts = LocalCounts()

    granted = allowed(counts, store, limit=3000, n=161)

    # the first request of the window settles at once, then one round trip per 16
    assert settle_every(3000) == 16
    assert granted == 161
    assert store.calls == 1 + 10
    assert store.counts["throttle:k:1"] == 1 + 160


def test_one_process_alone_is_exact_at_a_high_limit():
    store = SharedStore()

    assert allowed(LocalCounts(), store, limit=3000, n=3500) == 3000


def test_across_processes_the_overshoot_stays_within_the_stated_bound():
    # given four processes sharing the key's window, interleaving their requests
    store = SharedStore()
    processes = [LocalCounts() for _ in range(4)]

    # when they send 1,500 each against a limit of 3,000
    granted = sum(allowed(p, store, limit=3000, n=1) for _ in range(1500) for p in processes)

    # then at most (processes - 1) x (settle_every - 1) more than the limit get through
    assert 3000 <= granted <= 3000 + 3 * 15
    # and Redis has every request but at most settle_every - 1 per process not yet settled
    assert 6000 - 4 * 15 <= store.counts["throttle:k:1"] <= 6000


def test_a_new_window_starts_from_zero():
    store = SharedStore()
    counts = LocalCounts()
    allowed(counts, store, limit=5, n=9, window=1)

    assert allowed(counts, store, limit=5, n=5, window=2) == 5
