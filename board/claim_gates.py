"""What apps above board refuse to hand out on claim-next, without board importing them (the layers
in pyproject): usage's budgets stop an agent, or a campaign's or a task's work, once exceeded.

An app registers a gate from its ``AppConfig.ready()``. claim-next asks every gate before it picks
(board/services.py: task_claim_next), so the refusal is part of the one pick both claim paths share
(the ORM path and PostgreSQL's one statement, board/claim_sql.py) and costs no extra statement
while the row is locked.
"""

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ClaimRefusal:
    reason: str = ""  # the agent is handed nothing: why ("" when it may claim)
    campaign_ids: frozenset[int] = frozenset()  # tasks of these campaigns are left alone
    task_ids: frozenset[int] = frozenset()  # these tasks are left alone


_gates: dict[str, Callable] = {}


def claim_gate_register(*, name: str, gate: Callable) -> None:
    """``gate(agent=...)`` answers a ClaimRefusal-like object (reason, campaign_ids, task_ids) or None.
    Registered by name: ``ready()`` may run more than once."""
    _gates[name] = gate


def claim_refusal(*, agent) -> ClaimRefusal | None:
    """What the registered gates refuse this agent, together (None: nothing)."""
    found = [answer for gate in _gates.values() if (answer := gate(agent=agent)) is not None]
    if not found:
        return None
    return ClaimRefusal(
        reason=next((answer.reason for answer in found if answer.reason), ""),
        campaign_ids=frozenset().union(*(answer.campaign_ids for answer in found)),
        task_ids=frozenset().union(*(answer.task_ids for answer in found)),
    )
