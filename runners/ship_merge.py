"""Merging a task's change into its repository's default branch (SPEC §10 "Ship").

Done in the request, as the other git work of the API is (creating a worktree, reading the diff):
the answer has to say what happened (merged as which commit, or which files conflict), and the
merge is computed in the object store (workspaces/worktrees/git_merge.py), as fast as git's own.
A repository on a runner's machine is a 409 for now: the runner would have to take the merge as
work it picks up like a run, which is not built.

Order: the rules are checked under the task's row lock; git then merges under the clone's lock
(one change of its branches at a time); only after git moved the default branch is the task moved
to Done and its worktree's claims ended, so the archive can take it once retention says so. Should
the database write fail after git succeeded, the periodic "done means merged" pass (ship_watch)
finds the branch in the default one and moves the task then.
"""

from contextlib import nullcontext
from dataclasses import dataclass

from django.db import transaction

from board.models import Task
from board.moves import task_move
from config.actors import SYSTEM, Actor
from config.api.errors import DomainError
from ledger.events import event_record
from runners.models import Run, TaskReview
from runners.review import review_latest
from runners.services import run_queue_follow_up
from runners.task_diff import task_change_source
from workspaces.models import Worktree
from workspaces.worktrees.claims import worktree_claims_end
from workspaces.worktrees.git import clone_locked
from workspaces.worktrees.git_merge import git_branch_advance, git_commit_tree, git_is_ancestor, git_merge_tree

STRATEGIES = ("merge", "squash")
RUNNER_HOSTED = "merging on runner-hosted repositories is not built yet"


@dataclass
class MergeResult:
    task: Task
    strategy: str
    branch: str
    default_branch: str
    commit: str  # the default branch's new head
    previous: str  # its head before
    head: str  # the task branch's head that was merged
    forced: bool
    checkout: str | None  # the folder whose files moved with the default branch, if it is checked out

    @property
    def message(self) -> str:
        how = "a merge commit" if self.strategy == "merge" else "one squashed commit"
        return (
            f"Merged {self.branch} into {self.default_branch} as {self.commit[:12]} ({how}); "
            f"task {self.task.pk} is Done."
        )


def require_merger(*, actor: Actor, task: Task) -> None:
    """People and ``orchestrate`` keys; never an agent's or a run's key (its own work least of all)."""
    if actor.agent is None or (actor.can_orchestrate and actor.bound_session_id is None):
        return
    raise DomainError(
        f"Merging task {task.pk} needs a person or an agent key with the 'orchestrate' scope; "
        "an agent's or a run's key may not merge.",
        code="forbidden",
    )


def refuse_unready(task: Task) -> None:
    """409 when there is nothing to merge yet: a repository on a runner, no run, a run still going."""
    repository = task.repository
    if repository is not None and repository.runner_id is not None:
        raise DomainError(
            f"Task {task.pk}'s repository {repository.name} is on runner {repository.runner.name}: "
            f"{RUNNER_HOSTED}. Open a pull request instead, or merge on that machine.",
            code="conflict",
            extra={"runner": repository.runner.name},
        )
    active = Run.objects.filter(task=task, status__in=Run.ACTIVE).values_list("pk", "status").first()
    if active is not None:
        raise DomainError(
            f"Task {task.pk}'s run {active[0]} is still {active[1]}; merge once it has ended.",
            code="conflict",
            extra={"run": active[0]},
        )
    if not Run.objects.filter(task=task).exists():
        raise DomainError(f"Task {task.pk} has no run yet, so there is nothing to merge.", code="conflict")


def _refuse_unapproved(*, task: Task, head: str, force: bool, actor: Actor) -> None:
    latest = review_latest(task=task)
    if latest is not None and latest.decision == TaskReview.Decision.APPROVE and latest.head_commit == head:
        return
    if force:
        if actor.agent is not None:
            raise DomainError("Only a person may merge a change that is not approved (force).", code="forbidden")
        return
    if latest is None or latest.decision != TaskReview.Decision.APPROVE:
        why = "it is not approved" if latest is None else "its latest review asks for changes"
    else:
        why = f"the approval was of {latest.head_commit[:12]} and the branch is now at {head[:12]}"
    raise DomainError(
        f"Task {task.pk}'s change can't be merged: {why}. Approve it first, or confirm the merge anyway "
        '("force": true, people only).',
        code="conflict",
        extra={"approved": False},
    )


def _author(actor: Actor) -> tuple[str, str]:
    user = actor.user
    if actor.agent is None and user is not None:
        name = user.get_full_name() or user.get_username()
        return name, user.email or f"{user.get_username()}@switchyard.invalid"
    return actor.label, f"{actor.label.replace(':', '.')}@switchyard.invalid"


def merge_conflict_error(*, task: Task, branch: str, default: str, files: list[str]) -> DomainError:
    shown = ", ".join(files[:20]) + (f" and {len(files) - 20} more" if len(files) > 20 else "")
    return DomainError(
        f"{branch} conflicts with {default} in {len(files)} file(s): {shown}. Nothing was changed. "
        "Ask the agent to resolve it (a run that merges the default branch into its own), or resolve it by hand.",
        code="conflict",
        extra={"files": files, "resolve": "merge_conflict"},
    )


def task_merge(*, actor: Actor, task: Task, strategy: str, force: bool = False) -> MergeResult:
    """Merge the task branch into the default branch (a merge commit, or one squashed commit) and
    move the task to Done. 409 with nothing changed: a conflict (naming the files), not approved
    (without ``force``), no branch, no run, a run still going, already merged, a dirty checkout."""
    require_merger(actor=actor, task=task)
    if strategy not in STRATEGIES:
        raise DomainError(
            f"strategy must be 'merge' or 'squash', not {strategy!r}.",
            extra={"errors": {"strategy": ["merge or squash."]}},
        )
    with transaction.atomic():
        task = Task.objects.select_for_update(of=("self",)).select_related("repository__runner").get(pk=task.pk)
        refuse_unready(task)
        with clone_locked(task.repository.path) if task.repository is not None else nullcontext():
            # Read under the clone's lock: the branch and the default branch as git will merge them.
            clone, branch, head, tip = task_change_source(task=task)
            _refuse_unapproved(task=task, head=head, force=force, actor=actor)
            result = _merge_in_git(
                actor=actor, task=task, clone=clone, branch=branch, head=head, tip=tip, strategy=strategy
            )
        result.forced = force
        _after_merge(actor=actor, result=result)
    return result


def _merge_in_git(
    *, actor: Actor, task: Task, clone: str, branch: str, head: str, tip: str | None, strategy: str
) -> MergeResult:
    default = task.repository.default_branch
    if tip is None:
        raise DomainError(f"{task.repository.name} has no local {default!r} branch to merge into.", code="conflict")
    if git_is_ancestor(clone, commit=head, of=tip):
        raise DomainError(
            f"{branch} is already in {default} ({head[:12]}): nothing to merge.",
            code="conflict",
            extra={"merged": True},
        )
    merged = git_merge_tree(clone, ours=tip, theirs=head)
    if merged.conflicts:
        raise merge_conflict_error(task=task, branch=branch, default=default, files=merged.conflicts)
    title = f"{task.title} (task {task.pk})"
    if strategy == "merge":
        message, parents = f"Merge branch '{branch}': {title}", [tip, head]
    else:
        message, parents = f"{title}\n\nSquashed from {branch} ({head[:12]}).", [tip]
    commit = git_commit_tree(clone, tree=merged.tree, parents=parents, message=message, author=_author(actor))
    checkout = git_branch_advance(clone, branch=default, old=tip, new=commit, reason=f"switchyard: merge {branch}")
    return MergeResult(
        task=task,
        strategy=strategy,
        branch=branch,
        default_branch=default,
        commit=commit,
        previous=tip,
        head=head,
        forced=False,
        checkout=checkout,
    )


def _after_merge(*, actor: Actor, result: MergeResult) -> None:
    task = result.task
    event_record(
        name="task.merged",
        subject_type="task",
        subject_id=task.pk,
        actor=actor.label,
        payload={
            "strategy": result.strategy,
            "branch": result.branch,
            "into": result.default_branch,
            "commit": result.commit,
            "head": result.head,
            "forced": result.forced,
        },
    )
    result.task = task_done_after_merge(actor=actor, task=task)


def task_done_after_merge(*, actor: Actor, task: Task) -> Task:
    """The task to Done and its worktree's claims ended (the archive's retention takes it from there)."""
    if task.status != Task.Status.DONE:
        task = task_move(actor=actor, task_id=task.pk, status=Task.Status.DONE).task
    trees = Worktree.objects.filter(repository_id=task.repository_id, name=str(task.pk), holder__isnull=False)
    for tree in trees.select_related("holder"):
        worktree_claims_end(
            actor=SYSTEM, agent=tree.holder, worktrees=Worktree.objects.filter(pk=tree.pk), reason="task merged"
        )
    return task


@transaction.atomic
def task_merge_resolve_run(*, actor: Actor, task: Task) -> Run:
    """ "Ask the agent to resolve it": a run continuing the latest run's session whose prompt names the
    files that conflict now. 409 when there is no conflict (any more) or no run to continue."""
    require_merger(actor=actor, task=task)
    task = Task.objects.select_for_update(of=("self",)).select_related("repository__runner").get(pk=task.pk)
    refuse_unready(task)
    clone, branch, head, tip = task_change_source(task=task)
    default = task.repository.default_branch
    if tip is None:
        raise DomainError(f"{task.repository.name} has no local {default!r} branch.", code="conflict")
    files = git_merge_tree(clone, ours=tip, theirs=head).conflicts
    if not files:
        raise DomainError(f"{branch} merges into {default} without a conflict now: merge it.", code="conflict")
    runs = Run.objects.filter(task=task).order_by("-created_at", "-id")
    latest = runs.filter(session__isnull=False).first() or runs.first()
    listed = "\n".join(f"- {name}" for name in files)
    prompt = (
        f"Merging your branch {branch} into {default} conflicts in these files:\n{listed}\n\n"
        f"Merge {default} into {branch} (git merge {default}), resolve each conflict keeping both changes' intent, "
        "run the tests, and commit the merge."
    )
    return run_queue_follow_up(actor=actor, previous=latest, prompt=prompt)
