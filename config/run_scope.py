"""A run acts only for itself (SPEC §8): the 403s of a per-run key outside its run's task and worktree.

The rule is the Actor's (``may_touch_task``, ``may_touch_worktree``, ``bound_work`` in
config/actors.py); this module words the refusal, so every endpoint says the same thing: what the
key is, what it reaches, and that the thing it named is not it. Kept apart from actors.py, which
config/api imports: the errors live there.
"""

from config.actors import Actor
from config.api.errors import DomainError


def _reach(actor: Actor) -> str:
    work = actor.bound_work
    task = f"task {work.task_id}" if work is not None and work.task_id is not None else "no task"
    return (
        f"This key belongs to the run of session {actor.bound_session_id!r}: it acts on that session, "
        f"its run's task ({task}) and that task's worktree only"
    )


def require_task(*, actor: Actor, task_id: int) -> None:
    """403 unless the actor may act on the task: any, but for a per-run key only its run's."""
    if not actor.may_touch_task(task_id):
        raise DomainError(f"{_reach(actor)}; task {task_id} is not it.", code="forbidden")


def require_no_claims(*, actor: Actor, what: str) -> None:
    """403 for a per-run key: its run's task is claimed for it when the run starts; it claims nothing."""
    if actor.bound_session_id is not None:
        raise DomainError(
            f"{_reach(actor)}; it claims no task ({what}): the run's task was claimed for it when the run started.",
            code="forbidden",
        )


def require_worktree(*, actor: Actor, worktree_id: int | None, repository_id: int, name: str) -> None:
    """403 unless the actor may act on the worktree (``worktree_id`` None: one it asks to make): any,
    but for a per-run key only its run's task's (``<type>-<task id>`` of the task's repository)."""
    if actor.may_touch_worktree(repository_id=repository_id, name=name):
        return
    work = actor.bound_work
    mine = (
        f"its worktree is <type>-{work.task_id} of repository {work.repository_id}"
        if work is not None and work.task_id is not None and work.repository_id is not None
        else "its run has no worktree"
    )
    which = (
        f"worktree {worktree_id}"
        if worktree_id is not None
        else f"a worktree named {name!r} of repository {repository_id}"
    )
    raise DomainError(f"{_reach(actor)}; {mine}, and {which} is not it.", code="forbidden")
