"""Waking the long polls of this process when a run is queued (runners/dispatch.py).

A waiting ``POST /runners/me/next/`` looks at the queue every POLL_SECONDS; a run queued by a
request served in the same process wakes it at once instead (on commit, so the look sees the run).
Polls in other processes still find it at their next look: there is no cross-process notice.
"""

import threading

_changed = threading.Condition()
_generation = 0  # bumped at every wake; a poll waits for it to move past what it saw


def queue_generation() -> int:
    return _generation


def queue_wake() -> None:
    global _generation
    with _changed:
        _generation += 1
        _changed.notify_all()


def queue_wait(seen: int, timeout: float) -> bool:
    """Wait up to ``timeout`` for a wake after ``seen`` (a generation read before the last look);
    True if one came."""
    with _changed:
        return _changed.wait_for(lambda: _generation != seen, timeout)
