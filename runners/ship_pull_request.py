"""Pushing a task's branch to its repository's remote and opening a GitHub pull request for it
(SPEC §10 "Ship"), in the request as the merge is: the answer says what happened.

The remote is the repository's shipping setting, else ``origin``. With a GitHub token set (and a
github.com remote, or an owner/name in the settings) a pull request is opened, or the one GitHub
already has for the branch is linked. Any failure (the remote refusing, no token accepted, GitHub's
rate limit, GitHub unreachable) is a 409 saying so, and is kept on the task's PullRequest row as
``error`` so the card shows it; the task and the branch stay as they were.
"""

from django.db import transaction
from django.utils import timezone

from board.models import Task
from config.actors import Actor
from config.api.errors import DomainError
from ledger.events import event_record
from runners.models import PullRequest, RepositoryShipping
from runners.ship_github import github_pull_request_open, github_repo_from_url
from runners.ship_merge import refuse_unready, require_merger
from runners.ship_secrets import token_decrypt
from runners.task_diff import task_change_source
from workspaces.worktrees.git import NETWORK_TIMEOUT_SECONDS, git_completed, git_remote_exists, git_run

RUNNER_HOSTED = "pushing from runner-hosted repositories is not built yet"


def shipping_of(repository) -> RepositoryShipping:
    return RepositoryShipping.objects.filter(repository=repository).first() or RepositoryShipping(repository=repository)


def task_pull_request(*, actor: Actor, task: Task) -> tuple[PullRequest, str]:
    """Push the task branch and open (or link) its pull request; (the row, what happened)."""
    require_merger(actor=actor, task=task)
    task = Task.objects.select_related("repository__runner").get(pk=task.pk)
    if task.repository is not None and task.repository.runner_id is not None:
        raise DomainError(
            f"Task {task.pk}'s repository is on runner {task.repository.runner.name}: {RUNNER_HOSTED}.", code="conflict"
        )
    refuse_unready(task)
    clone, branch, head, _ = task_change_source(task=task)
    shipping = shipping_of(task.repository)
    remote = shipping.push_remote or "origin"
    if not git_remote_exists(clone, remote):
        raise DomainError(
            f"{task.repository.name} has no {remote!r} remote to push {branch} to; add one, or name another in "
            "the repository's shipping settings.",
            code="conflict",
        )
    try:
        _push(clone, remote=remote, branch=branch)
        row, message = _open(task=task, shipping=shipping, clone=clone, remote=remote, branch=branch, head=head)
    except DomainError as error:
        _record_failure(task=task, remote=remote, branch=branch, error=error.message)
        raise
    event_record(
        name="task.pull_request",
        subject_type="task",
        subject_id=task.pk,
        actor=actor.label,
        payload={"remote": remote, "branch": branch, "commit": head, "state": row.state, "url": row.url},
    )
    return row, message


def _push(clone: str, *, remote: str, branch: str) -> None:
    ref = f"refs/heads/{branch}"
    done = git_completed(
        clone, "-c", "core.hooksPath=/dev/null", "push", "--porcelain", remote, f"{ref}:{ref}",
        timeout=NETWORK_TIMEOUT_SECONDS,
    )  # fmt: skip
    if done.returncode != 0:
        said = (done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()
        reason = " ".join(line for line in said if not line.startswith(("To ", "Done")))[:500]
        raise DomainError(
            f"{remote} refused the push of {branch}: {reason or f'exit code {done.returncode}'}",
            code="conflict",
            extra={"push": "refused"},
        )


def _github_repo(shipping: RepositoryShipping, clone: str, remote: str) -> str:
    if shipping.github_repo:
        return shipping.github_repo
    return github_repo_from_url(git_run(clone, "remote", "get-url", "--push", remote).strip())


def _open(
    *, task: Task, shipping: RepositoryShipping, clone: str, remote: str, branch: str, head: str
) -> tuple[PullRequest, str]:
    token = token_decrypt(shipping.github_token_encrypted)
    repo = _github_repo(shipping, clone, remote)
    fields = {"remote": remote, "branch": branch, "pushed_commit": head, "error": "", "github_repo": repo}
    pushed = f"Pushed {branch} to {remote} ({head[:12]})"
    if not repo or not token:
        why = "no GitHub token is set for this repository" if repo else f"{remote} is not a GitHub repository"
        row = _save(task, state=PullRequest.State.PUSHED, **fields)
        return row, f"{pushed}; {why}, so no pull request was opened."
    found, opened = github_pull_request_open(
        token=token,
        repo=repo,
        head=branch,
        base=task.repository.default_branch,
        title=task.title,
        body=f"Task {task.pk} of Switchyard.\n\n{task.description}"[:60_000],
    )
    row = _save(task, state=found.state, number=found.number, url=found.url, checked_at=timezone.now(), **fields)
    said = "opened" if opened else "already open on GitHub, linked"
    return row, f"{pushed}; pull request #{found.number} {said}: {found.url}"


@transaction.atomic
def _save(task: Task, **fields) -> PullRequest:
    row, _ = PullRequest.objects.select_for_update().update_or_create(task=task, defaults=fields)
    return row


def _record_failure(*, task: Task, remote: str, branch: str, error: str) -> None:
    """The failure on the card: the row's ``error`` (made with no state when there was none)."""
    with transaction.atomic():
        row = PullRequest.objects.select_for_update().filter(task=task).first()
        if row is None:
            PullRequest.objects.create(task=task, remote=remote, branch=branch, error=error)
        else:
            row.error = error
            row.save(update_fields=["error", "updated_at"])
