"""Whether the machine has room for another run: memory (SPEC §8, issue 26 §3).

A run of a provider fits while ``MemAvailable`` (from /proc/meminfo) minus ``[runner]
min_free_memory_mb`` minus what the runs started in the last RESERVE_SECONDS will still take is at
least the provider's ``memory_mb``. Those recent runs are counted whole because an agent reaches its
size over its first seconds: MemAvailable does not show it yet, and without the reservation a
runner would start several at once into the same free memory.

The runner tells the server, with each ask for work and each heartbeat, how many more runs of each
provider fit (``room``), so runs beyond that stay queued on the server instead of being handed out
and refused here. Where memory cannot be read (not Linux) ``room`` is not sent: capacity alone counts.

Test hook: ``SWITCHYARD_RUNNER_MEMINFO`` names a file in /proc/meminfo's format read instead of
/proc/meminfo, so a test can make the machine small and free memory by rewriting it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MEMINFO = "/proc/meminfo"
MEMINFO_ENV = "SWITCHYARD_RUNNER_MEMINFO"
RESERVE_SECONDS = 30.0
ROOM_MAX = 10_000  # what a provider that takes no memory (memory_mb = 0) is said to have room for


@dataclass(frozen=True)
class Memory:
    available_mb: int
    total_mb: int


def meminfo_read(path: str | None = None) -> Memory | None:
    """MemAvailable and MemTotal in MB; None when the file is missing or lacks them."""
    path = path or os.environ.get(MEMINFO_ENV) or MEMINFO
    found: dict[str, int] = {}
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            for line in handle:
                name, _, rest = line.partition(":")
                if name in ("MemAvailable", "MemTotal"):
                    words = rest.split()
                    if words and words[0].isdigit():
                        found[name] = int(words[0]) // 1024  # kB
    except OSError:
        return None
    if "MemAvailable" not in found or "MemTotal" not in found:
        return None
    return Memory(available_mb=found["MemAvailable"], total_mb=found["MemTotal"])


def load_1m() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


@dataclass(frozen=True)
class Room:
    """One look at the machine: how many more runs of each provider its memory takes now."""

    memory: Memory
    min_free_mb: int
    reserved_mb: int
    needs_mb: dict[str, int]
    room: dict[str, int]

    @property
    def spare_mb(self) -> int:
        return self.memory.available_mb - self.min_free_mb - self.reserved_mb

    def short(self) -> list[str]:
        """The providers with no room now."""
        return sorted(name for name, count in self.room.items() if count <= 0)

    def report(self) -> dict[str, Any]:
        """The heartbeat's ``memory``."""
        return {
            "available_mb": self.memory.available_mb,
            "total_mb": self.memory.total_mb,
            "min_free_mb": self.min_free_mb,
            "reserved_mb": self.reserved_mb,
            "needs_mb": dict(self.needs_mb),
        }


class RoomKeeper:
    """The runner's memory admission. ``meminfo`` and ``clock`` are injectable for tests."""

    def __init__(
        self,
        *,
        min_free_mb: int,
        needs_mb: dict[str, int],
        meminfo: Callable[[], Memory | None] = meminfo_read,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.min_free_mb = min_free_mb
        self.needs_mb = dict(needs_mb)
        self.meminfo = meminfo
        self.clock = clock
        self.lock = threading.Lock()
        self.started: dict[int, tuple[float, int]] = {}  # run id -> (when, memory_mb) while reserved

    def reserve(self, run_id: int, provider: str) -> None:
        """A run was handed to this runner: count its memory until the machine shows it."""
        with self.lock:
            self.started[run_id] = (self.clock(), self.needs_mb.get(provider, 0))

    def release(self, run_id: int) -> None:
        """The run ended (or was never ours): what it reserved is free again."""
        with self.lock:
            self.started.pop(run_id, None)

    def reserved_mb(self) -> int:
        now = self.clock()
        with self.lock:
            self.started = {k: v for k, v in self.started.items() if now - v[0] < RESERVE_SECONDS}
            return sum(mb for _, mb in self.started.values())

    def look(self) -> Room | None:
        """How many more runs of each provider fit, each counted alone; None if memory is unknown."""
        memory = self.meminfo()
        if memory is None:
            return None
        reserved = self.reserved_mb()
        spare = memory.available_mb - self.min_free_mb - reserved
        room = {}
        for name, need in self.needs_mb.items():
            room[name] = ROOM_MAX if need <= 0 else max(0, min(ROOM_MAX, spare // need))
        return Room(
            memory=memory, min_free_mb=self.min_free_mb, reserved_mb=reserved, needs_mb=self.needs_mb, room=room
        )
