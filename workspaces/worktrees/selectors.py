"""Reads for repositories and worktrees that views and the admin share."""

from django.db.models import Count, Q, QuerySet

from config.actors import Actor
from config.api.errors import DomainError
from config.run_scope import require_worktree
from workspaces.models import Repository, Worktree, WorktreeClaimRequest
from workspaces.worktrees.status import worktree_statuses


def repository_list() -> QuerySet[Repository]:
    active = Count("worktrees", filter=Q(worktrees__status=Worktree.Status.ACTIVE))
    return Repository.objects.select_related("runner").annotate(active_worktrees=active).order_by("name", "id")


def repository_get(*, repository_id: int) -> Repository:
    repository = Repository.objects.filter(pk=repository_id).first()
    if repository is None:
        raise DomainError(f"Repository {repository_id} not found.", code="not_found")
    return repository


def repository_names() -> list[str]:
    return list(Repository.objects.order_by("name").values_list("name", flat=True))


def repository_choices() -> list[Repository]:
    """The registered repositories a task may name, by name (the card panel's select): id and name only."""
    return list(Repository.objects.order_by("name", "id").only("id", "name"))


def repository_find(*, name: str) -> Repository | None:
    return Repository.objects.filter(name=name).first()


def repository_get_by_name(*, name: str) -> Repository:
    """The repository registered under this name; an unknown name is a 400 that lists the known ones,
    so whoever typed it can correct it."""
    repository = repository_find(name=name)
    if repository is None:
        known = repository_names()
        raise DomainError(
            f"Unknown repository {name!r}; known: {', '.join(known) if known else 'none registered'}.",
            code="invalid",
            extra={"errors": {"repository": [f"Unknown repository {name!r}."]}, "known": known},
        )
    return repository


def worktree_get(*, worktree_id: int) -> Worktree:
    """Any agent may read a worktree (the monitor page shows them all); writes check the holder."""
    worktree = Worktree.objects.select_related("repository__runner", "holder").filter(pk=worktree_id).first()
    if worktree is None:
        raise DomainError(f"Worktree {worktree_id} not found.", code="not_found")
    return worktree


def worktree_get_for_actor(*, actor: Actor, worktree_id: int) -> Worktree:
    """The worktree (404), if the actor may read it (403): any, but a per-run key only its run's."""
    worktree = worktree_get(worktree_id=worktree_id)
    require_worktree(actor=actor, worktree_id=worktree.pk, repository_id=worktree.repository_id, name=worktree.name)
    return worktree


def worktree_monitor_list() -> list:
    """Active worktrees with their status, in one query and git asked for each worktree, a few at a
    time (``worktree_status``: three git processes and a walk of the folder each)."""
    waiting = Count("queue", filter=Q(queue__status=WorktreeClaimRequest.Status.WAITING))
    worktrees = list(
        Worktree.objects.filter(status=Worktree.Status.ACTIVE)
        .select_related("repository__runner", "holder")
        .annotate(waiting=waiting)
        .order_by("repository__name", "type", "name")
    )
    return list(zip(worktrees, worktree_statuses(worktrees), strict=True))
