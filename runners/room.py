"""Runners that fit their machine (SPEC §8, issue 26 §3): the memory a runner says it has room for.

A runner reports ``room``, how many more runs of each provider its machine's memory takes now, each
counted alone (the client's runner/room.py: MemAvailable minus min_free_memory_mb minus what runs
just started reserve, over the provider's memory_mb). Dispatch hands out no more than that
(RoomBudget), so a run beyond it stays queued here rather than being handed out and refused there;
and a queued run's card says which runner lacks the room and by how much (room_wait).
"""

from dataclasses import dataclass
from fractions import Fraction

from runners.models import Run, Runner


class RoomBudget:
    """One poll's share of the runner's memory. Room of N runs of a provider means one run of it
    takes at most 1/N of what is spare (N = spare // need), so runs of several providers fit together
    while their shares add up to no more than the whole; rounding down makes it err on the safe side.
    ``room`` None: no limit (a runner that does not report memory); a provider left out: no room."""

    def __init__(self, room: dict[str, int] | None):
        self.room = room
        self.used = Fraction(0)

    def has_room(self, provider: str) -> bool:
        return self.room is None or self.room.get(provider, 0) > 0

    def _share(self, provider: str) -> Fraction:
        return Fraction(1, self.room[provider])

    def fits(self, provider: str) -> bool:
        if self.room is None:
            return True
        return self.has_room(provider) and self.used + self._share(provider) <= 1

    def take(self, provider: str) -> None:
        if self.room is not None:
            self.used += self._share(provider)


@dataclass
class RoomWait:
    """Why a queued run waits on memory. ``never``: no online runner offering its provider has a
    machine big enough (total minus what it keeps free) for even one run of it."""

    runner: str
    provider: str
    needs_mb: int
    spare_mb: int  # what the runner has to spare now (or, when never, what its machine allows at most)
    available_mb: int
    min_free_mb: int
    never: bool

    @property
    def text(self) -> str:
        if self.never:
            return (
                f"No runner's machine has room for a {self.provider} run: it needs {self.needs_mb} MB and the "
                f"largest, {self.runner}, allows {self.spare_mb} MB ({self.available_mb} MB in all, "
                f"{self.min_free_mb} MB kept free). It stays queued until a runner with more memory offers "
                f"{self.provider}, or its memory_mb is lowered."
            )
        return (
            f"Waiting for a runner with room: {self.runner} offers {self.provider}, which needs {self.needs_mb} MB; "
            f"it has {max(0, self.spare_mb)} MB to spare ({self.available_mb} MB available, "
            f"{self.min_free_mb} MB kept free)."
        )


def _int(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def room_wait(*, run: Run) -> RoomWait | None:
    """For a queued run: None when some online runner offering its provider has room for it (or
    says nothing of memory), else the runner that comes closest and what it lacks. One query."""
    if run.status != Run.Status.QUEUED:
        return None
    offering = [
        runner
        for runner in Runner.objects.filter(status=Runner.Status.ONLINE).only("name", "providers", "room", "memory")
        if run.provider in (runner.providers or [])
    ]
    if not offering or any(not isinstance(r.room, dict) or _int(r.room.get(run.provider)) > 0 for r in offering):
        return None
    waits = []
    for runner in offering:
        memory = runner.memory if isinstance(runner.memory, dict) else {}
        needs = memory.get("needs_mb") if isinstance(memory.get("needs_mb"), dict) else {}
        need = _int(needs.get(run.provider))
        available, total = _int(memory.get("available_mb")), _int(memory.get("total_mb"))
        min_free, reserved = _int(memory.get("min_free_mb")), _int(memory.get("reserved_mb"))
        allows = total - min_free
        never = need > allows
        waits.append(
            RoomWait(
                runner=runner.name,
                provider=run.provider,
                needs_mb=need,
                spare_mb=allows if never else available - min_free - reserved,
                available_mb=total if never else available,
                min_free_mb=min_free,
                never=never,
            )
        )
    # One that could take it once memory frees before one too small for it; then the most to spare.
    return max(waits, key=lambda wait: (not wait.never, wait.spare_mb))
