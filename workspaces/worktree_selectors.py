"""Reads for repositories and worktrees that views and the admin share."""

from django.db.models import Count, Q, QuerySet

from config.api.errors import DomainError
from workspaces.models import Repository, Worktree


def repository_list() -> QuerySet[Repository]:
    active = Count("worktrees", filter=Q(worktrees__status=Worktree.Status.ACTIVE))
    return Repository.objects.annotate(active_worktrees=active).order_by("name", "id")


def repository_get(*, repository_id: int) -> Repository:
    repository = Repository.objects.filter(pk=repository_id).first()
    if repository is None:
        raise DomainError(f"Repository {repository_id} not found.", code="not_found")
    return repository


def worktree_get(*, worktree_id: int) -> Worktree:
    """Any agent may read a worktree (the monitor page shows them all); writes check the holder."""
    worktree = Worktree.objects.select_related("repository", "holder").filter(pk=worktree_id).first()
    if worktree is None:
        raise DomainError(f"Worktree {worktree_id} not found.", code="not_found")
    return worktree


def worktree_monitor_list() -> list:
    """Active worktrees with their status (``worktree_status``: git is asked once per worktree)."""
    from workspaces.worktree_status import worktree_status

    worktrees = Worktree.objects.filter(status=Worktree.Status.ACTIVE).select_related("repository", "holder")
    return [
        (worktree, worktree_status(worktree=worktree))
        for worktree in worktrees.order_by("repository__name", "type", "name")
    ]
