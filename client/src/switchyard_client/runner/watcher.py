"""The Watcher: one thread that looks at every idle run, instead of a thread each."""

from __future__ import annotations

import threading
from typing import Protocol

# A run whose log has not grown for IDLE_TICKS ticks is handed to the Watcher, which looks at all such
# runs every IDLE_TICK, until one grows again (a cancel or drop still wakes it at once): 100 quiet runs
# cost ~1 % of a core, not 8 %, and no thread each.
IDLE_TICKS = 5
IDLE_TICK = 1.0


class IdleRun(Protocol):
    """What the Watcher asks of a run it holds (worker.py's RunWorker, which imports this module)."""

    cancelled: bool
    dropped: bool

    def needs_thread(self) -> bool: ...

    def resume(self) -> None: ...


class Watcher(threading.Thread):
    """Watches the idle runs (agent alive, log not growing, nothing to send) in one thread instead
    of a thread each, which cost ~4 MB of a runner's memory at 100 runs (stacks, malloc arenas, frames;
    bench/README.md "Runner memory"). A run
    that has something to do again (its log grew, its agent exited, a cancel, a drop, its timeout,
    the runner stopping) gets its own thread back at once: a run's slow work (shipping a big log,
    stopping an agent) never holds up another's."""

    def __init__(self, runner_stop: threading.Event):
        super().__init__(name="runner-watch", daemon=True)
        self.runner_stop = runner_stop
        self.lock = threading.Lock()
        self.idle: set[IdleRun] = set()
        self.closed = False
        self.wake = threading.Event()

    def park(self, worker: IdleRun) -> bool:
        """Take an idle run; False once the runner stops (the run's thread keeps it)."""
        with self.lock:
            if self.closed:
                return False
            self.idle.add(worker)
        if worker.cancelled or worker.dropped:
            self.wake.set()  # came in while the run's thread was deciding it was idle
        return True

    def run(self) -> None:
        while True:
            stopping = self.runner_stop.is_set()
            with self.lock:
                self.closed = stopping
                idle = list(self.idle)
            for worker in idle:
                if stopping or self._needs_thread(worker):
                    with self.lock:
                        self.idle.discard(worker)
                    worker.resume()
            if stopping:
                return
            self.wake.wait(IDLE_TICK)
            self.wake.clear()

    @staticmethod
    def _needs_thread(worker: IdleRun) -> bool:
        try:
            return worker.needs_thread()
        except Exception:  # the run's own thread meets it again and reports it
            return True
