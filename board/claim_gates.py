"""What apps above board refuse to hand out on claim-next, without board importing them (the layers
in pyproject): usage's budgets stop an agent, or a campaign's or a task's work, once exceeded.

An app registers a gate from its ``AppConfig.ready()``. claim-next asks every gate before it picks
(board/services.py: task_claim_next), so the refusal is part of the one pick both claim paths share
(the ORM path and PostgreSQL's one statement, board/claim_sql.py) and costs no extra statement
while the row is locked. A claim by id asks the same gates (task_claim) and is refused, with the
reason, what claim-next would skip.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from config.extension_points import Hooks


@dataclass(frozen=True)
class ClaimRefusal:
    reason: str = ""  # the agent is handed nothing: why ("" when it may claim)
    campaign_ids: frozenset[int] = frozenset()  # tasks of these campaigns are left alone
    task_ids: frozenset[int] = frozenset()  # these tasks are left alone
    # Why each of those is left alone (a claim by id says it); an id without one gets a generic reason.
    campaign_reasons: Mapping[int, str] = field(default_factory=dict, compare=False)
    task_reasons: Mapping[int, str] = field(default_factory=dict, compare=False)

    def task_reason(self, *, task_id: int, campaign_id: int | None) -> str:
        """Why this task may not be claimed ("" when it may): the agent's own stop first, then the
        task's, then its campaign's, as claim-next's pick leaves them alone."""
        if self.reason:
            return self.reason
        if task_id in self.task_ids:
            return self.task_reasons.get(task_id) or f"task {task_id}'s budget is exceeded"
        if campaign_id is not None and campaign_id in self.campaign_ids:
            return self.campaign_reasons.get(campaign_id) or f"campaign {campaign_id}'s budget is exceeded"
        return ""


_gates = Hooks()


def claim_gate_register(*, name: str, gate: Callable) -> None:
    """``gate(agent=...)`` answers a ClaimRefusal (reason, the ids it leaves alone and why) or None.
    Registered by name: ``ready()`` may run more than once."""
    _gates.register(name=name, hook=gate)


def claim_refusal(*, agent) -> ClaimRefusal | None:
    """What the registered gates refuse this agent, together (None: nothing)."""
    found = [answer for answer in _gates.call_each(agent=agent) if answer is not None]
    if not found:
        return None
    return ClaimRefusal(
        reason=next((answer.reason for answer in found if answer.reason), ""),
        campaign_ids=frozenset().union(*(answer.campaign_ids for answer in found)),
        task_ids=frozenset().union(*(answer.task_ids for answer in found)),
        campaign_reasons={k: v for answer in found for k, v in answer.campaign_reasons.items()},
        task_reasons={k: v for answer in found for k, v in answer.task_reasons.items()},
    )
