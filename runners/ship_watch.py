"""Following shipped work (SPEC §10): "done means merged", and the state of open pull requests.
Beat runs ``ship_watch_task`` every SHIP_WATCH_SECONDS (config/schedules.py).

A task whose branch head is reachable from the default branch (as the clone has it, or as its remote
has it after a fetch) was merged, here or anywhere else, and moves to Done with its worktree's claims
ended. A branch with no commits of its own (its head still where it was made, by its reflog) is not
taken for merged: a run that has not committed yet is not finished work. A pull request GitHub says
is merged moves its task to Done too (a squash merge on GitHub leaves the head unreachable).

Idempotent: a task already Done is not looked at again; a failure of one repository or one pull
request is kept on its row (or logged) and never stops the rest.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef
from django.utils import timezone

from board.models import Task
from config.actors import SYSTEM
from config.api.errors import DomainError
from ledger.events import event_record
from runners.models import PullRequest, Run
from runners.ship_github import github_pull_request_state
from runners.ship_merge import task_done_after_merge
from runners.ship_pull_request import shipping_of
from runners.ship_secrets import token_decrypt
from runners.task_diff import refs_resolve, task_branch_name
from workspaces.models import Repository
from workspaces.worktrees.git import NETWORK_TIMEOUT_SECONDS, git_completed, git_remote_exists
from workspaces.worktrees.git_merge import git_is_ancestor

logger = logging.getLogger(__name__)


def _candidates(repository: Repository):
    going = Run.objects.filter(task=OuterRef("pk"), status__in=Run.ACTIVE)
    ran = Run.objects.filter(task=OuterRef("pk"))
    return (
        Task.objects.filter(repository=repository)
        .exclude(status=Task.Status.DONE)
        .filter(Exists(ran))
        .exclude(Exists(going))
        .order_by("pk")
    )


def _made_at(clone: str, branch: str) -> str | None:
    """The commit the branch was made at (the oldest entry of its reflog), or None without one."""
    done = git_completed(clone, "reflog", "show", "--format=%H", f"refs/heads/{branch}", "--")
    lines = done.stdout.decode().split() if done.returncode == 0 else []
    return lines[-1] if lines else None


def tasks_done_when_merged(*, fetch: bool = True) -> list[int]:
    """Move every task whose branch is in its default branch to Done; the ids moved."""
    moved: list[int] = []
    for repository in Repository.objects.filter(runner__isnull=True).order_by("pk"):
        tasks = list(_candidates(repository))
        if not tasks:
            continue
        try:
            moved += _repository_pass(repository, tasks, fetch=fetch)
        except DomainError as error:
            logger.warning("done-means-merged: %s skipped: %s", repository.name, error.message)
    return moved


def _repository_pass(repository: Repository, tasks: list[Task], *, fetch: bool) -> list[int]:
    clone = repository.path
    remote = shipping_of(repository).push_remote or "origin"
    default = repository.default_branch
    has_remote = git_remote_exists(clone, remote)
    if fetch and has_remote:
        done = git_completed(clone, "fetch", "--no-tags", "--quiet", remote, timeout=NETWORK_TIMEOUT_SECONDS)
        if done.returncode != 0:
            logger.warning("done-means-merged: fetch of %s failed: %s", repository.name, done.stderr.decode()[:300])
    branches = {task.pk: task_branch_name(task=task) for task in tasks}
    names = [f"refs/heads/{default}", f"refs/remotes/{remote}/{default}"]
    refs = refs_resolve(clone, names + [f"refs/heads/{b}" for b in branches.values()])
    tips = [refs[name] for name in names if name in refs]
    moved = []
    for task in tasks:
        branch = branches[task.pk]
        head = refs.get(f"refs/heads/{branch}")
        if head is None or head == _made_at(clone, branch):
            continue
        if any(git_is_ancestor(clone, commit=head, of=tip) for tip in tips):
            _done(task=task, how="reachable", branch=branch, head=head, into=default)
            moved.append(task.pk)
    return moved


def _done(*, task: Task, how: str, **payload) -> None:
    event_record(
        name="task.merged",
        subject_type="task",
        subject_id=task.pk,
        actor=SYSTEM.label,
        payload={"seen": how, **payload},
    )
    task_done_after_merge(actor=SYSTEM, task=task)


def pull_requests_refresh(*, now=None) -> int:
    """Ask GitHub the state of every open pull request not asked within half the interval."""
    now = now or timezone.now()
    due = now - timedelta(seconds=settings.SHIP_WATCH_SECONDS / 2)
    rows = PullRequest.objects.filter(state=PullRequest.State.OPEN, number__isnull=False).exclude(checked_at__gt=due)
    asked = 0
    for row in rows.select_related("task__repository").order_by("checked_at", "pk")[:200]:
        asked += 1
        token = token_decrypt(shipping_of(row.task.repository).github_token_encrypted)
        fields = {"checked_at": now}
        try:
            found = github_pull_request_state(token=token, repo=row.github_repo, number=row.number)
            fields.update(state=found.state, url=found.url, error="")
        except DomainError as error:
            fields["error"] = error.message
        PullRequest.objects.filter(pk=row.pk).update(updated_at=now, **fields)
        if fields.get("state") == PullRequest.State.MERGED and row.task.status != Task.Status.DONE:
            _done(task=row.task, how="pull_request", number=row.number, url=row.url)
    return asked
