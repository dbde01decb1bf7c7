"""What apps above board refuse to hand out on claim-next, without board importing them (the layers
in pyproject): usage's budgets stop an agent, or a campaign's or a task's work, once exceeded.

An app registers a gate from its ``AppConfig.ready()``. claim-next asks every gate before it picks
(board/services.py: task_claim_next), so the refusal is part of the one pick both claim paths share
(the ORM path and PostgreSQL's one statement, board/claim_sql.py) and costs no extra statement
while the row is locked. A claim by id asks the same gates (task_claim) and is refused, with the
reason, what claim-next would skip.

A claim condition (ClaimCondition) is the other kind: a rule over an app's own tables in SQL, added
to the claim's statement itself (runners/task_claims.py: a task with an active run is its run's).
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


@dataclass(frozen=True)
class ClaimCondition:
    """A rule of an app above board over its own tables that a claim must meet, as SQL on the task's
    row, so it is part of the claim's one statement (no query of its own per claim). The SQL names
    the task table as the claim's statement does (``table``, quoted) and reads the other app's tables
    by their names, which board does not import.

    - ``next_sql(table)``: what claim-next's pick adds (no parameters);
    - ``claim_sql(table)``: what a claim by id adds, with one ``%s``: the claimant agent's id;
    - ``reason(task_id=, agent=)``: why this task is not the agent's to claim ("" when it is), asked
      only when a claim by id was refused.
    """

    next_sql: Callable[[str], str]
    claim_sql: Callable[[str], str]
    reason: Callable[..., str]


_conditions: dict[str, ClaimCondition] = {}


def claim_condition_register(*, name: str, condition: ClaimCondition) -> None:
    """Registered by name from ``AppConfig.ready()`` (which may run more than once)."""
    _conditions[name] = condition


def claim_conditions_sql(*, table: str, by_id: bool) -> tuple[str, int]:
    """`` AND ...`` for every registered condition (or ""), and how many claimant ids it takes."""
    if by_id:
        parts = [condition.claim_sql(table) for condition in _conditions.values()]
    else:
        parts = [condition.next_sql(table) for condition in _conditions.values()]
    return "".join(f" AND {part}" for part in parts), len(parts) if by_id else 0


def claim_condition_reason(*, task_id: int, agent) -> str:
    """Why a registered condition keeps this task from the agent ("" when none does)."""
    for condition in _conditions.values():
        why = condition.reason(task_id=task_id, agent=agent)
        if why:
            return why
    return ""
