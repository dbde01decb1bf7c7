"""Reviewing a task's change (SPEC §10): who may read it, comments on its lines, and the decisions
(approve; request changes, which queues a run continuing the same agent session on the same branch,
or a fresh session of another provider; ask another agent to review, which queues a review run that
reads the change and comments through the API, never committing: runners/review_prompts.py says
what each is told).

Readers: people (the API lets in staff and the board's groups), an ``orchestrate`` key, and the
task's own run keys (a review run comments through one). Deciders: people and ``orchestrate`` keys
only; an agent never approves or redirects work, its own or another's.
"""

from django.db import transaction
from django.db.models import QuerySet

from board.live import board_push_tasks
from board.models import Task
from config.actors import Actor
from config.api.errors import DomainError
from ledger.events import event_record
from runners.models import ReviewComment, Run, TaskReview
from runners.review_prompts import follow_up_prompt, handover_prompt, review_prompt
from runners.services import run_queue, run_queue_follow_up
from runners.task_diff import TaskChange, diff_lines, task_branch_name, task_change, task_change_source
from workspaces.models import Worktree

D = TaskReview.Decision
COMMENTS_MAX = 200


def _is_run_key_of(actor: Actor, task: Task) -> bool:
    work = actor.bound_work
    return work is not None and work.task_id == task.pk


def require_change_reader(*, actor: Actor, task: Task) -> None:
    if actor.agent is None or actor.can_orchestrate or _is_run_key_of(actor, task):
        return
    raise DomainError(
        f"Task {task.pk}'s change is for people, an 'orchestrate' key and the task's own runs; "
        f"agent {actor.agent.slug} is none of them.",
        code="forbidden",
    )


def require_reviewer(*, actor: Actor, task: Task) -> None:
    if actor.agent is None or (actor.can_orchestrate and actor.bound_session_id is None):
        return
    raise DomainError(
        f"Reviewing task {task.pk} needs a person or an agent key with the 'orchestrate' scope; "
        "an agent's or a run's key may not approve or request changes.",
        code="forbidden",
    )


def review_latest(*, task: Task) -> TaskReview | None:
    """The task's review state: its newest decision (an approval holds for the head it was made on).
    Asking an agent to review is no decision: it leaves the state as it was."""
    decisions = TaskReview.objects.filter(task=task).exclude(decision=D.ASK_REVIEW)
    return decisions.order_by("-created_at", "-id").first()


def comment_list(*, task: Task) -> QuerySet[ReviewComment]:
    return ReviewComment.objects.filter(task=task).order_by("created_at", "id")


def _check_comments(*, change: TaskChange, comments: list[dict]) -> None:
    """Each comment's path is a file of the change and its line one the diff shows; else 400 naming it."""
    files = {f.path: f for f in change.files}
    for f in change.files:
        if f.old_path:
            files.setdefault(f.old_path, f)
    for number, comment in enumerate(comments):
        path, line = comment["path"], comment.get("line")
        item = files.get(path)
        if item is None:
            raise DomainError(
                f"Comment {number + 1}: {path!r} is not a file of task {change.task_id}'s change.",
                extra={"errors": {"path": [f"{path!r} is not in the diff."]}},
            )
        if line is None:
            continue
        if item.too_large:
            raise DomainError(
                f"Comment {number + 1}: {path!r} is not shown ({item.too_large}); comment on the whole file (no line).",
                extra={"errors": {"line": [f"{path!r} has no lines shown."]}},
            )
        if line not in diff_lines(item):
            raise DomainError(
                f"Comment {number + 1}: line {line} of {path!r} is not in the diff; comment on a line it shows.",
                extra={"errors": {"line": [f"Line {line} of {path!r} is not in the diff."]}},
            )


def _author(actor: Actor) -> dict:
    return {"user": actor.user if actor.agent is None else None, "agent": actor.agent}


def _run_of(actor: Actor, task: Task) -> Run | None:
    if not _is_run_key_of(actor, task):
        return None
    return Run.objects.filter(task=task, session_id=actor.bound_session_id).order_by("-created_at").first()


@transaction.atomic
def comment_create(*, actor: Actor, task: Task, path: str, line: int | None, body: str) -> ReviewComment:
    """A comment on ``path`` (at ``line``, or the whole file) of the task's change as it is now."""
    require_change_reader(actor=actor, task=task)
    comment = {"path": path, "line": line, "body": body}
    _check_comments(change=task_change(task=task), comments=[comment])
    created = ReviewComment.objects.create(
        task=task, author=actor.label, run=_run_of(actor, task), **_author(actor), **comment
    )
    event_record(
        name="task.commented",
        subject_type="task",
        subject_id=task.pk,
        actor=actor.label,
        payload={"comment": created.pk, "path": path, "line": line},
    )
    board_push_tasks(task_ids=[task.pk])
    return created


def _has_branch(task: Task) -> bool:
    """The task's branch exists: in the server's clone (read), or on a runner (its worktree row)."""
    if task.repository is not None and task.repository.runner_id is not None:
        return Worktree.objects.filter(
            repository_id=task.repository_id, name=str(task.pk), status=Worktree.Status.ACTIVE
        ).exists()
    return True  # task_change below refuses a missing one with its own 409


def _comments_carried(*, task: Task, decision: str, ids: list[int]) -> list[ReviewComment]:
    """The task's comments ``ids`` not yet sent with a request for changes; 400 naming any other."""
    if not ids:
        return []
    if decision != D.REQUEST_CHANGES:
        raise DomainError(
            "Only a request for changes carries comments; an approval takes none.",
            extra={"errors": {"comment_ids": ["Not with approve."]}},
        )
    found = list(ReviewComment.objects.filter(task=task, pk__in=ids, review__isnull=True).order_by("created_at", "id"))
    missing = sorted(set(ids) - {c.pk for c in found})
    if missing:
        raise DomainError(
            f"Comments {', '.join(map(str, missing))} are not comments of task {task.pk} waiting to be sent "
            "(already sent with a request for changes, or another task's).",
            extra={"errors": {"comment_ids": [f"Not comments of task {task.pk} waiting to be sent."]}},
        )
    return found


@transaction.atomic
def task_review(
    *,
    actor: Actor,
    task: Task,
    decision: str,
    message: str = "",
    comments: list[dict] | None = None,
    provider: str | None = None,
    comment_ids: list[int] | None = None,
) -> TaskReview:
    """Approve the task's change; request changes: a run continuing the latest run's session
    (``provider`` given: a fresh session of that provider, told of the task and the branch) with the
    message and comments as its prompt; ask_review: a review run of ``provider`` that reads the
    change and comments on it (``message``: what to look at). ``comment_ids``: comments already
    written on the change (a person's, a review run's) that go with a request for changes too, not
    copied. 409 when the task has no run, a run still going, or no branch; nothing is written then."""
    require_reviewer(actor=actor, task=task)
    task = Task.objects.select_for_update(of=("self",)).select_related("repository__runner").get(pk=task.pk)
    carried = _comments_carried(task=task, decision=decision, ids=comment_ids or [])
    new_comments = comments or []
    comments = new_comments + [{"path": c.path, "line": c.line, "body": c.body} for c in carried]
    active = Run.objects.filter(task=task, status__in=Run.ACTIVE).values_list("pk", "status").first()
    if active is not None:
        raise DomainError(
            f"Task {task.pk}'s run {active[0]} is still {active[1]}; review its change once it has ended.",
            code="conflict",
            extra={"run": active[0]},
        )
    runs = Run.objects.filter(task=task).order_by("-created_at", "-id")
    latest = runs.filter(session__isnull=False).first() or runs.first()
    if latest is None:
        raise DomainError(f"Task {task.pk} has no run yet, so there is no change to review.", code="conflict")
    if not _has_branch(task):
        raise DomainError(f"Task {task.pk} has no branch yet: its runs made no worktree.", code="conflict")
    head = ""
    change = None
    branch = ""
    if (task.repository is None or task.repository.runner_id is None) and (comments or decision == D.ASK_REVIEW):
        change = task_change(task=task)
        head, branch = change.head_commit, change.branch
        _check_comments(change=change, comments=comments)
    elif task.repository is None or task.repository.runner_id is None:
        # Nothing to check against the diff: the branch's head is enough (one git call, not a diff).
        _, branch, head, _ = task_change_source(task=task)
    elif comments:
        raise DomainError(
            f"Task {task.pk}'s change lives on runner {task.repository.runner.name}; line comments need a diff the "
            "server can read. Put them in the message.",
            code="conflict",
        )
    if decision == D.REQUEST_CHANGES and not (message.strip() or comments):
        raise DomainError(
            "Requesting changes needs a message or comments: they are the agent's prompt.",
            extra={"errors": {"message": ["Say what to change."]}},
        )
    review = TaskReview.objects.create(
        task=task,
        decision=decision,
        reviewer=actor.label,
        user=actor.user if actor.agent is None else None,
        message=message,
        head_commit=head,
    )
    if decision == D.ASK_REVIEW:
        branch = branch or task_branch_name(task=task)
        base = change.base_branch if change is not None else task.repository.default_branch
        prompt = review_prompt(task=task, branch=branch, base=base, change=change, focus=message)
        reviewer = provider or latest.provider  # none named: the kind of agent that did the work
        review.run = run_queue(actor=actor, task=task, provider=reviewer, prompt=prompt, kind=Run.Kind.REVIEW)
        review.save(update_fields=["run", "updated_at"])
    if decision == D.REQUEST_CHANGES:
        prompt = follow_up_prompt(message=message, comments=comments)
        if provider:
            prompt = handover_prompt(task=task, branch=branch or task_branch_name(task=task), request=prompt)
            review.run = run_queue(actor=actor, task=task, provider=provider, prompt=prompt, resumes=latest)
        else:
            review.run = run_queue_follow_up(actor=actor, previous=latest, prompt=prompt)
        review.save(update_fields=["run", "updated_at"])
        ReviewComment.objects.bulk_create(
            ReviewComment(task=task, author=actor.label, review=review, **_author(actor), **c) for c in new_comments
        )
        ReviewComment.objects.filter(pk__in=[c.pk for c in carried]).update(review=review)
    event_record(
        name="task.reviewed",
        subject_type="task",
        subject_id=task.pk,
        actor=actor.label,
        payload={"decision": decision, "run": review.run_id, "head": head, "comments": len(comments)},
    )
    board_push_tasks(task_ids=[task.pk])
    return review
