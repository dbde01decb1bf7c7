"""The retention policy: which workspaces are due for archival.

N is the workspace's ``retention_days`` when set, else ``ARCHIVE_AFTER_DAYS``. Due are:

- a **session** workspace with at least one session, every one of them ended, the last more
  than N days ago;
- a **worktree** workspace whose worktree is active, unheld and has nobody queued for it, with
  no open session linked to it, and whose work the apps above say is over: board's rule (board/
  retention.py) wants at least one task linked to it, every one done, the last finished more than
  N days ago. A task is linked through its session: a session opened in the worktree's workspace,
  or one that named the worktree's branch and its repository (name or path) when it was opened.
  With no rule registered no worktree is due;
- any workspace a killed run left verified but not yet deleted (``archive_verified_at`` set
  while active): the next run finishes it.

In both rules the workspace row must also be unchanged for N days, so a restored workspace is
kept for another N days. Never the shared workspace, never one with an open session (attached
to it) or a held worktree: ``archival.archivable()`` applies to every candidate.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Exists, Max, OuterRef, Q
from django.utils import timezone

from sessions_app.models import AgentSession
from workspaces.archive.services import archivable
from workspaces.archive.worktree_rules import worktree_retention_conditions
from workspaces.models import Workspace, Worktree, WorktreeClaimRequest


def workspaces_due_for_archive(*, now: datetime | None = None) -> list[int]:
    """Ids of the workspaces due for archival, oldest first."""
    now = now or timezone.now()
    due = set(
        Workspace.objects.filter(archivable(), status=Workspace.Status.ACTIVE, archive_verified_at__isnull=False)
        .values_list("pk", flat=True)
        .iterator()
    )
    for retention, cutoff in _cutoffs(now):
        due.update(_session_workspaces_due(retention, cutoff))
        due.update(_worktree_workspaces_due(retention, cutoff))
    return sorted(due)


def _cutoffs(now: datetime) -> list[tuple[Q, datetime]]:
    """One (which workspaces, cutoff) pair per retention in use: few distinct values, few queries."""
    pairs = [(Q(retention_days__isnull=True), now - timedelta(days=settings.ARCHIVE_AFTER_DAYS))]
    overrides = (
        Workspace.objects.filter(retention_days__isnull=False, status=Workspace.Status.ACTIVE)
        .values_list("retention_days", flat=True)
        .distinct()
    )
    pairs += [(Q(retention_days=days), now - timedelta(days=days)) for days in overrides]
    return pairs


def _candidates(retention: Q, cutoff: datetime):
    return Workspace.objects.filter(retention, archivable(), status=Workspace.Status.ACTIVE, updated_at__lt=cutoff)


def _session_workspaces_due(retention: Q, cutoff: datetime) -> list[int]:
    return list(
        _candidates(retention, cutoff)
        .filter(kind=Workspace.Kind.SESSION)
        .annotate(
            sessions_total=Count("sessions"),
            sessions_open=Count("sessions", filter=Q(sessions__ended_at__isnull=True)),
            last_ended=Max("sessions__ended_at"),
        )
        .filter(sessions_total__gt=0, sessions_open=0, last_ended__lt=cutoff)
        .values_list("pk", flat=True)
    )


def _worktree_workspaces_due(retention: Q, cutoff: datetime) -> list[int]:
    conditions = worktree_retention_conditions(cutoff=cutoff)
    if not conditions:
        return []
    linked_sessions = AgentSession.objects.filter(works_on_the_worktree())
    waiting = WorktreeClaimRequest.objects.filter(worktree=OuterRef("pk"), status=WorktreeClaimRequest.Status.WAITING)
    worktrees = (
        Worktree.objects.filter(
            status=Worktree.Status.ACTIVE,
            holder__isnull=True,
            workspace__in=_candidates(retention, cutoff).filter(kind=Workspace.Kind.WORKTREE),
        )
        .filter(*conditions, ~Exists(waiting))
        .filter(~Exists(linked_sessions.filter(ended_at__isnull=True)))
        .values_list("workspace_id", flat=True)
    )
    return [pk for pk in worktrees if pk is not None]


def works_on_the_worktree(session: str = "") -> Q:
    """A session in the worktree's workspace, or on its branch of its repository (by name or path),
    as a filter inside a query on Worktree (``OuterRef``); ``session`` prefixes the lookups for a
    query that reaches sessions through a relation (board/retention.py's tasks)."""
    branch = Q(**{f"{session}branch": OuterRef("branch")})
    return (
        Q(**{f"{session}workspace": OuterRef("workspace")})
        | (branch & Q(**{f"{session}repo": OuterRef("repository__name")}))
        | (branch & Q(**{f"{session}repo": OuterRef("repository__path")}))
    )
