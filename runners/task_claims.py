"""A task with an active run is its run's (SPEC §8): nobody else claims it, neither by claim-next nor
by id, from the moment the run is queued until it ends; the run's agent claims it when the run starts
(runners/run_lifecycle.py). Registered with board's claim conditions (board/claim_gates.py), so the
rule is part of the claim's one statement: a NOT EXISTS on the task's active runs, an index lookup
(the partial unique index of active runs per task, ``run_one_active_per_task``, or the task key's).
"""

from board.claim_gates import ClaimCondition, claim_condition_register
from runners.models import Run

_RUNS = Run._meta.db_table
# Literal statuses, as in the partial index's predicate, so the planner can use it.
_ACTIVE = ", ".join(f"'{status}'" for status in sorted(Run.ACTIVE))


def _active_run(table: str) -> str:
    return f"SELECT 1 FROM {_RUNS} r WHERE r.task_id = {table}.id AND r.status IN ({_ACTIVE})"


def _next_sql(table: str) -> str:
    """claim-next leaves every task with an active run alone (its run's agent claims it by id)."""
    return f"NOT EXISTS ({_active_run(table)})"


def _claim_sql(table: str) -> str:
    """A claim by id: only the run's own agent (``%s``: the claimant's id), once the run was handed out."""
    return f"NOT EXISTS ({_active_run(table)} AND (r.agent_id IS NULL OR r.agent_id <> %s))"


def _reason(*, task_id: int, agent) -> str:
    run = (
        Run.objects.filter(task_id=task_id, status__in=Run.ACTIVE)
        .select_related("runner")
        .only("pk", "status", "agent_id", "runner__name")
        .first()
    )
    if run is None or run.agent_id == agent.pk:
        return ""
    where = f" on runner {run.runner.name}" if run.runner_id else ""
    return (
        f"it has an active run, run {run.pk} ({run.status}{where}), which claims it when it starts; "
        "cancel the run first, or let it finish."
    )


def run_claim_condition_register() -> None:
    claim_condition_register(
        name="active_run", condition=ClaimCondition(next_sql=_next_sql, claim_sql=_claim_sql, reason=_reason)
    )
