"""Repositories and git worktrees: register, create, claim with a lease, release, remove, status.

A worktree is the folder ``<type>-<name>`` beside its repository's clone, on the branch of
the same name. One folder is one row: the canonical real path is unique in the database,
so every spelling of a path (trailing slash, ``./``, a symlink) lands on the same worktree.

A claim is a lease held by one agent. Every write to a worktree's claim state first locks
its row (``SELECT ... FOR UPDATE``; on SQLite the IMMEDIATE transaction already holds the
database's write lock), so claims, the FIFO queue and releases happen in one order; the
claim itself is a conditional UPDATE that only succeeds on a free or expired worktree.
"""

import heapq
import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.text import slugify

from config.api.errors import DomainError
from ledger.events import event_record
from sessions_app.actors import Actor
from sessions_app.models import Agent
from workspaces import git
from workspaces.models import Repository, Workspace, Worktree, WorktreeClaimRequest
from workspaces.worktree_sync import (
    ConfigSyncReport,
    sync_links_expected,
    sync_links_unlink,
    worktree_config_sync,
)

# Suggested types; any slug works.
KNOWN_TYPES = ("feat", "fix", "review", "trunk", "chore", "docs", "exp")
_SLUG = re.compile(r"[a-z0-9][a-z0-9-]*")
TYPE_MAX_LENGTH = 32  # the width of Worktree.type
NAME_MAX_LENGTH = 64
RECENT_FILES = 10


# --- Repositories ---------------------------------------------------------------------------


def repository_path_check(*, path: str) -> str:
    """The canonical real path of the clone at ``path``; 400 unless it is the top of a main clone."""
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        raise DomainError("Give the path of a local git clone.")
    real = os.path.realpath(os.path.expanduser(path.strip()))
    top = git.git_toplevel(real)
    if top != real:
        raise DomainError(f"{path} is inside the clone at {top}; register the clone's top folder.")
    if git.git_is_linked_worktree(real):
        raise DomainError(f"{path} was made by `git worktree add`; register the main clone instead.")
    return real


def repository_default_name(*, real_path: str) -> str:
    """The clone's folder name as a slug; for the ``<repo>/trunk-<branch>`` layout, the parent's name."""
    folder = Path(real_path)
    base = folder.parent.name if folder.name.startswith("trunk-") and folder.parent.name else folder.name
    return slugify(base)[:100] or "repository"


def repository_register(
    *, path: str, name: str | None = None, default_branch: str | None = None, sync_dir: str | None = None
) -> tuple[Repository, bool]:
    """Register the clone at ``path`` (True when new). Idempotent on its real path.

    Registering again updates the default branch or sync folder when they are given; the
    name stays. The sync folder defaults to ``<parent of the clone>/sync/<name>/`` and is
    made if missing.
    """
    real = repository_path_check(path=path)
    if default_branch is not None:
        git.ref_check(default_branch)
    if sync_dir is not None:
        sync_dir = _sync_dir_check(sync_dir)
    existing = Repository.objects.filter(path=real).first()
    if existing is not None:
        return _repository_update(existing, name=name, default_branch=default_branch, sync_dir=sync_dir), False
    name = _slug_check(name, field="name", max_length=100) if name else repository_default_name(real_path=real)
    sync_dir = sync_dir or os.path.join(os.path.dirname(real), "sync", name)
    try:
        with transaction.atomic():
            repository = Repository.objects.create(
                name=name,
                path=real,
                default_branch=default_branch or git.git_default_branch(real),
                sync_dir=sync_dir,
            )
    except IntegrityError:
        repository = Repository.objects.filter(path=real).first()
        if repository is None:
            raise DomainError(f"The name {name!r} is taken by another repository.", code="conflict") from None
        return repository, False
    os.makedirs(sync_dir, exist_ok=True)
    return repository, True


def _sync_dir_check(sync_dir: str) -> str:
    if not isinstance(sync_dir, str) or not os.path.isabs(os.path.expanduser(sync_dir)) or "\x00" in sync_dir:
        raise DomainError("The sync folder must be an absolute path.")
    return os.path.realpath(os.path.expanduser(sync_dir))


def _repository_update(repository: Repository, *, name, default_branch, sync_dir) -> Repository:
    if name and name != repository.name:
        raise DomainError(
            f"{repository.path} is already registered as {repository.name!r}; its name does not change.",
            code="conflict",
        )
    changes = {"default_branch": default_branch, "sync_dir": sync_dir}
    update = [key for key, value in changes.items() if value is not None and getattr(repository, key) != value]
    for key in update:
        setattr(repository, key, changes[key])
    if update:
        repository.save(update_fields=[*update, "updated_at"])
        if sync_dir:
            os.makedirs(sync_dir, exist_ok=True)
    return repository


# --- Creating worktrees ---------------------------------------------------------------------


def _slug_check(value: object, *, field: str, max_length: int) -> str:
    if not isinstance(value, str) or not _SLUG.fullmatch(value) or len(value) > max_length:
        raise DomainError(
            f"{field} must be 1-{max_length} lowercase letters, digits and '-', starting with a letter or digit.",
            extra={"errors": {field: ["Not a valid slug."]}},
        )
    return value


def worktree_folder_path(*, repository: Repository, folder: str) -> str:
    """The real path of ``folder`` beside the clone; 409 if it is the clone or a symlink leading elsewhere."""
    parent = os.path.dirname(repository.path)
    real = os.path.realpath(os.path.join(parent, folder))
    if real == repository.path:
        raise DomainError(f"{folder} is the repository's own clone, not a worktree.", code="conflict")
    if os.path.dirname(real) != parent:
        raise DomainError(
            f"{os.path.join(parent, folder)} is a symbolic link to {real}, which is not beside the clone.",
            code="conflict",
        )
    return real


def _worktree_existing(*, repository: Repository, type: str, name: str, real_path: str) -> Worktree | None:
    """The row for this folder, else the row for this type and name; 409 if the folder is
    another repository's worktree (two clones that share a parent folder)."""
    found = Worktree.objects.filter(real_path=real_path).first()
    if found is not None and found.repository_id != repository.pk:
        raise DomainError(
            f"{real_path} is a worktree of another repository (id {found.repository_id}).", code="conflict"
        )
    return found or Worktree.objects.filter(repository=repository, type=type, name=name).first()


def worktree_create(
    *,
    actor: Actor,
    repository: Repository,
    type: str,
    name: str,
    ref: str | None = None,
    pr_number: int | None = None,
) -> tuple[Worktree, bool]:
    """Create branch and folder ``<type>-<name>`` beside the clone; True when made now.

    Asking again returns the row already there; a removed one is made again on its branch.
    ``ref`` is the commit a new branch starts from (default: the repository's default
    branch); ``pr_number`` fetches ``refs/pull/<n>/head`` from origin into the branch. A
    ``review`` worktree needs one of them. An existing branch is checked out as it is.
    """
    if actor.agent is None and not actor.is_staff:
        raise DomainError("Only agents and staff create worktrees.", code="forbidden")
    type = _slug_check(type, field="type", max_length=TYPE_MAX_LENGTH)
    name = _slug_check(name, field="name", max_length=NAME_MAX_LENGTH)
    if ref is not None and pr_number is not None:
        raise DomainError("Give a ref or a pr_number, not both.")
    if ref is not None:
        git.ref_check(ref)
    if pr_number is not None and (isinstance(pr_number, bool) or not isinstance(pr_number, int) or pr_number < 1):
        raise DomainError("pr_number must be a positive integer.")
    if type == "review" and ref is None and pr_number is None:
        raise DomainError("A review worktree needs the ref or the pr_number to check out.")
    folder = f"{type}-{name}"
    real = worktree_folder_path(repository=repository, folder=folder)
    existing = _worktree_existing(repository=repository, type=type, name=name, real_path=real)
    if existing is not None and existing.status == Worktree.Status.ACTIVE:
        return existing, False
    if existing is not None:
        worktree, created = _worktree_revive(actor=actor, worktree=existing, ref=ref, pr_number=pr_number)
    else:
        try:
            worktree, created = _worktree_insert(
                actor=actor, repository=repository, type=type, name=name, real_path=real, ref=ref, pr_number=pr_number
            )
        except IntegrityError:
            # Another request made this folder's row first (or the same folder under another
            # type/name split: `feat` + `a-b` and `feat-a` + `b` are one folder).
            existing = _worktree_existing(repository=repository, type=type, name=name, real_path=real)
            if existing is None:
                raise
            return existing, False
    if created:
        worktree_config_sync(worktree=worktree, repair=True)
    return worktree, created


def _worktree_insert(
    *, actor: Actor, repository: Repository, type: str, name: str, real_path: str, ref, pr_number
) -> tuple[Worktree, bool]:
    """Insert the row first, then run git in the same transaction: a second request for this
    folder waits on the unique index and then gets IntegrityError, so git runs once."""
    folder = f"{type}-{name}"
    with transaction.atomic():
        worktree = Worktree.objects.create(
            repository=repository, type=type, name=name, branch=folder, real_path=real_path, pr_number=pr_number
        )
        _checkout(repository=repository, real_path=real_path, branch=folder, ref=ref, pr_number=pr_number)
        worktree.workspace = _workspace_for(real_path)
        worktree.save(update_fields=["workspace", "updated_at"])
        _event("worktree.created", worktree, actor, revived=False)
    return worktree, True


def _worktree_revive(*, actor: Actor, worktree: Worktree, ref, pr_number) -> tuple[Worktree, bool]:
    with transaction.atomic():
        row = _worktree_locked(worktree.pk)
        if row.status == Worktree.Status.ACTIVE:
            return row, False  # revived by someone else meanwhile
        _checkout(repository=row.repository, real_path=row.real_path, branch=row.branch, ref=ref, pr_number=pr_number)
        row.status = Worktree.Status.ACTIVE
        row.pr_number = pr_number if pr_number is not None else row.pr_number
        row.workspace = _workspace_for(row.real_path)
        row.save(update_fields=["status", "pr_number", "workspace", "updated_at"])
        _event("worktree.created", row, actor, revived=True)
    return row, True


def _checkout(*, repository: Repository, real_path: str, branch: str, ref: str | None, pr_number: int | None) -> None:
    """Make the folder with ``git worktree add``, or adopt it if git already has it on this branch
    (a crash between git and the commit leaves exactly that)."""
    clone = repository.path
    known = git.git_worktree_branches(clone)
    if real_path in known:
        if os.path.isdir(real_path):
            if known[real_path] != branch:
                raise DomainError(
                    f"{real_path} is already a worktree on {known[real_path] or 'a detached HEAD'}, not {branch}.",
                    code="conflict",
                )
            return
        git.git_worktree_prune(clone)  # git remembers a folder that is gone
    if pr_number is not None:
        git.git_fetch_pull_request(clone, number=pr_number, branch=branch)
        git.git_worktree_add(clone, path=real_path, branch=branch)
    elif git.git_branch_exists(clone, branch):
        git.git_worktree_add(clone, path=real_path, branch=branch)
    else:
        git.git_worktree_add(clone, path=real_path, branch=branch, base=_base_commit(repository, ref))


def _base_commit(repository: Repository, ref: str | None) -> str:
    wanted = ref or repository.default_branch
    sha = git.git_resolve(repository.path, wanted)
    if sha is None and git.git_remote_exists(repository.path):
        sha = git.git_fetch_ref(repository.path, wanted)
    if sha is None:
        raise DomainError(f"{wanted!r} names no commit in {repository.name}.", code="conflict")
    return sha


def _workspace_for(real_path: str) -> Workspace:
    workspace, created = Workspace.objects.get_or_create(
        root_path=real_path, defaults={"kind": Workspace.Kind.WORKTREE}
    )
    if not created and workspace.kind != Workspace.Kind.WORKTREE:
        raise DomainError(f"{real_path} is already a {workspace.kind} workspace.", code="conflict")
    if workspace.status != Workspace.Status.ACTIVE:
        workspace.status = Workspace.Status.ACTIVE
        workspace.save(update_fields=["status", "updated_at"])
    return workspace


# --- Claims ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimResult:
    worktree: Worktree
    outcome: str  # "granted": the agent holds it now; "renewed": it already did; "queued": it waits
    position: int | None = None  # 1 = next in line


def _lease_end(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.WORKTREE_LEASE_TTL_SECONDS)


def _worktree_locked(worktree_id: int) -> Worktree:
    """The row, locked until the caller's transaction ends. Caller holds a transaction."""
    return Worktree.objects.select_for_update().get(pk=worktree_id)


def _event(name: str, worktree: Worktree, actor: Actor, **payload) -> None:
    event_record(
        name=name,
        subject_type="worktree",
        subject_id=worktree.pk,
        actor=actor.label,
        payload={
            "repository": worktree.repository_id,
            "branch": worktree.branch,
            "path": worktree.real_path,
            **payload,
        },
    )


def _holder_label(worktree: Worktree) -> str:
    return Agent.objects.filter(pk=worktree.holder_id).values_list("slug", flat=True).first() or "nobody"


def worktree_claim(*, actor: Actor, agent: Agent, worktree: Worktree, wait: bool = False) -> ClaimResult:
    """Claim the worktree for ``agent`` with a lease of WORKTREE_LEASE_TTL_SECONDS.

    The holder claiming again renews its lease. A worktree held by another agent is a 409
    naming the holder, or with ``wait`` a place in its FIFO queue. An expired lease goes to
    the first agent in the queue before any newcomer.
    """
    if actor.agent is None or actor.agent.pk != agent.pk:
        raise DomainError("Only agents claim worktrees, each for itself.", code="forbidden")
    if agent.status == Agent.Status.PAUSED:
        raise DomainError(f"Agent {agent.slug!r} is paused and takes no work.", code="conflict")
    refusal = None
    with transaction.atomic():
        row = _worktree_locked(worktree.pk)
        if row.status != Worktree.Status.ACTIVE:
            raise DomainError(f"Worktree {row.pk} is {row.status}.", code="conflict")
        now = timezone.now()
        if row.holder_id == agent.pk and row.lease_expires_at >= now:
            Worktree.objects.filter(pk=row.pk).update(lease_expires_at=_lease_end(now), updated_at=now)
            result = ClaimResult(worktree=row, outcome="renewed")
        elif _queue_grant_if_free(actor=actor, worktree=row, now=now) and row.holder_id == agent.pk:
            result = ClaimResult(worktree=row, outcome="granted")  # it was first in the queue
        elif _take(actor=actor, agent=agent, worktree=row, now=now):
            result = ClaimResult(worktree=row, outcome="granted")
        elif wait:
            result = ClaimResult(worktree=row, outcome="queued", position=_enqueue(worktree=row, agent=agent))
        else:
            # Raised after the commit: a queued agent granted an expired lease above keeps it.
            refusal = DomainError(
                f"Worktree {row.pk} is held by {_holder_label(row)} until {row.lease_expires_at.isoformat()}; "
                'claim with "wait": true to queue for it.',
                code="conflict",
                extra={
                    "holder": _holder_label(row),
                    "lease_expires_at": row.lease_expires_at.isoformat(),
                    "waiting": row.queue.filter(status=WorktreeClaimRequest.Status.WAITING).count(),
                },
            )
    if refusal is not None:
        raise refusal
    result.worktree.refresh_from_db()
    return result


def _take(*, actor: Actor, agent: Agent, worktree: Worktree, now: datetime) -> bool:
    """The claim: one conditional UPDATE on a free or expired worktree. Caller holds the row lock."""
    previous = worktree.holder_id
    changed = (
        Worktree.objects.filter(pk=worktree.pk, status=Worktree.Status.ACTIVE)
        .filter(Q(holder__isnull=True) | Q(lease_expires_at__lt=now))
        .update(holder=agent, claimed_at=now, lease_expires_at=_lease_end(now), updated_at=now)
    )
    if changed != 1:
        return False
    if previous is not None:
        _event("worktree.released", worktree, actor, holder=previous, reason="lease expired")
    worktree.holder_id = agent.pk
    _event("worktree.claimed", worktree, actor, agent=agent.slug, holder=agent.pk, from_queue=False)
    return True


def _queue_head(worktree: Worktree) -> WorktreeClaimRequest | None:
    # By id: inserts into one worktree's queue are serialised by the row lock, so ids follow
    # arrival, and no clock skew between web servers can reorder them.
    waiting = worktree.queue.filter(status=WorktreeClaimRequest.Status.WAITING)
    return waiting.select_related("agent").order_by("id").first()


def _queue_grant_if_free(*, actor: Actor, worktree: Worktree, now: datetime) -> bool:
    """Give a free or expired worktree to the first waiting agent; True if one got it. Caller holds the row lock."""
    if worktree.holder_id is not None and worktree.lease_expires_at >= now:
        return False
    head = _queue_head(worktree)
    if head is None:
        return False
    if worktree.holder_id is not None:
        _event("worktree.released", worktree, actor, holder=worktree.holder_id, reason="lease expired")
    _grant(actor=actor, worktree=worktree, request=head, now=now)
    return True


def _grant(*, actor: Actor, worktree: Worktree, request: WorktreeClaimRequest, now: datetime) -> None:
    """Hand the worktree to a waiting request. Caller holds the row lock."""
    changed = Worktree.objects.filter(pk=worktree.pk, holder_id=worktree.holder_id).update(
        holder_id=request.agent_id, claimed_at=now, lease_expires_at=_lease_end(now), updated_at=now
    )
    if changed != 1:
        raise RuntimeError(f"worktree {worktree.pk} changed holder under its row lock")
    WorktreeClaimRequest.objects.filter(pk=request.pk).update(
        status=WorktreeClaimRequest.Status.GRANTED, resolved_at=now
    )
    worktree.holder_id = request.agent_id
    worktree.lease_expires_at = _lease_end(now)
    _event(
        "worktree.claimed",
        worktree,
        actor,
        agent=request.agent.slug,
        holder=request.agent_id,
        from_queue=True,
        request=request.pk,
    )


def _enqueue(*, worktree: Worktree, agent: Agent) -> int:
    """The agent's place in the queue (1 = next), joining it if it is not waiting yet. Caller holds the row lock."""
    waiting = worktree.queue.filter(status=WorktreeClaimRequest.Status.WAITING)
    request = waiting.filter(agent=agent).first() or WorktreeClaimRequest.objects.create(worktree=worktree, agent=agent)
    return waiting.filter(id__lte=request.pk).count()


def _check_may_change(*, actor: Actor, worktree: Worktree, now: datetime, verb: str) -> None:
    """Staff may change any worktree; an agent only one it holds on a lease that has not expired."""
    if actor.is_staff:
        return
    if actor.agent is None:
        raise DomainError(f"Only the holder or staff may {verb} a worktree.", code="forbidden")
    if worktree.holder_id is None:
        raise DomainError(f"Worktree {worktree.pk} is not claimed; claim it before you {verb} it.", code="forbidden")
    if worktree.holder_id != actor.agent.pk:
        raise DomainError(
            f"Worktree {worktree.pk} is held by another agent ({_holder_label(worktree)}).", code="forbidden"
        )
    if worktree.lease_expires_at < now:
        raise DomainError(
            f"Your lease on worktree {worktree.pk} expired at {worktree.lease_expires_at.isoformat()}; "
            "claim it again first.",
            code="conflict",
            extra={"lease_expires_at": worktree.lease_expires_at.isoformat()},
        )


def worktree_release(*, actor: Actor, worktree: Worktree) -> Worktree:
    """Give the worktree up: to the first agent in its queue if there is one, else free.

    Only its holder with a lease that has not expired, or staff. A release after the lease
    expired is refused (409): another agent may have the worktree by then.
    """
    with transaction.atomic():
        row = _worktree_locked(worktree.pk)
        if row.holder_id is None:
            raise DomainError(f"Worktree {row.pk} is not claimed; nothing to release.", code="conflict")
        now = timezone.now()
        _check_may_change(actor=actor, worktree=row, now=now, verb="release")
        previous = row.holder_id
        Worktree.objects.filter(pk=row.pk, holder_id=previous).update(
            holder=None, lease_expires_at=None, released_at=now, updated_at=now
        )
        reason = "released" if actor.agent is not None else f"released by staff ({actor.label})"
        _event("worktree.released", row, actor, holder=previous, reason=reason)
        row.holder_id = None
        head = _queue_head(row)
        if head is not None:
            _grant(actor=actor, worktree=row, request=head, now=now)
    row.refresh_from_db()
    return row


def worktree_leases_renew(*, agent: Agent) -> int:
    """Extend every lease the agent still validly holds (its heartbeat); an expired one stays expired."""
    now = timezone.now()
    return Worktree.objects.filter(holder=agent, status=Worktree.Status.ACTIVE, lease_expires_at__gte=now).update(
        lease_expires_at=_lease_end(now), updated_at=now
    )


def worktree_config_sync_for_actor(*, actor: Actor, worktree: Worktree, repair: bool) -> ConfigSyncReport:
    """Config sync on behalf of staff or the worktree's holder; a repair that changed links is recorded."""
    _check_may_change(actor=actor, worktree=worktree, now=timezone.now(), verb="sync the config links of")
    if worktree.status != Worktree.Status.ACTIVE:
        raise DomainError(f"Worktree {worktree.pk} is {worktree.status}.", code="conflict")
    report = worktree_config_sync(worktree=worktree, repair=repair)
    if report.repaired:
        _event("worktree.config_synced", worktree, actor, repaired=report.repaired, blocked=len(report.blocked))
    return report


# --- Removing -------------------------------------------------------------------------------


def worktree_changes(*, worktree: Worktree) -> list[git.StatusEntry]:
    """Uncommitted changes, leaving out the config links this server made."""
    links = sync_links_expected(worktree=worktree)
    entries = git.git_status(worktree.real_path)
    return [entry for entry in entries if not _is_sync_link(worktree, entry, links)]


def _is_sync_link(worktree: Worktree, entry: git.StatusEntry, links: dict[str, str]) -> bool:
    if entry.code != "??" or entry.path not in links:
        return False
    try:
        return os.readlink(os.path.join(worktree.real_path, entry.path)) == links[entry.path]
    except OSError:
        return False


def worktree_remove(*, actor: Actor, worktree: Worktree, force: bool = False) -> tuple[Worktree, bool]:
    """``git worktree remove`` the folder, end its claim and queue, and mark it removed (True if removed now).

    Refused (409) while the folder has uncommitted changes unless ``force``. Only a folder git
    lists as a linked worktree of this repository is removed: never the main clone.
    """
    worktree = Worktree.objects.select_related("repository").get(pk=worktree.pk)
    if worktree.status == Worktree.Status.REMOVED:
        return worktree, False  # a retry: the holder's claim ended with the first call
    _check_may_change(actor=actor, worktree=worktree, now=timezone.now(), verb="remove")
    clone = worktree.repository.path
    known = git.git_worktree_branches(clone)
    if worktree.real_path == clone or clone.startswith(worktree.real_path.rstrip("/") + "/"):
        raise DomainError(f"{worktree.real_path} is the repository's clone; it is never removed.", code="conflict")
    if os.path.isdir(worktree.real_path):
        if worktree.real_path not in known:
            raise DomainError(
                f"{worktree.real_path} is not a worktree of {worktree.repository.name}; it was left alone.",
                code="conflict",
            )
        _remove_folder(worktree=worktree, force=force)
    elif worktree.real_path in known:
        git.git_worktree_prune(clone)
    return _worktree_mark_removed(actor=actor, worktree=worktree, force=force), True


def _remove_folder(*, worktree: Worktree, force: bool) -> None:
    changes = worktree_changes(worktree=worktree)
    if changes and not force:
        shown = ", ".join(entry.path for entry in changes[:5]) + (", ..." if len(changes) > 5 else "")
        raise DomainError(
            f"Worktree {worktree.pk} has {len(changes)} uncommitted change(s) ({shown}); "
            "commit them, or remove with force=true to lose them.",
            code="conflict",
            extra={"uncommitted": len(changes)},
        )
    links = sync_links_expected(worktree=worktree)
    # Our own links are untracked files to git, which would refuse to remove the folder.
    sync_links_unlink(worktree=worktree, links=links)
    try:
        git.git_worktree_remove(worktree.repository.path, path=worktree.real_path, force=force)
    except DomainError:
        worktree_config_sync(worktree=worktree, repair=True)  # put the links back
        raise


def _worktree_mark_removed(*, actor: Actor, worktree: Worktree, force: bool) -> Worktree:
    with transaction.atomic():
        row = _worktree_locked(worktree.pk)
        now = timezone.now()
        if row.holder_id is not None:
            _event("worktree.released", row, actor, holder=row.holder_id, reason="worktree removed")
        cancelled = row.queue.filter(status=WorktreeClaimRequest.Status.WAITING).update(
            status=WorktreeClaimRequest.Status.CANCELLED, resolved_at=now
        )
        row.released_at = now if row.holder_id is not None else row.released_at
        row.holder = None
        row.lease_expires_at = None
        row.status = Worktree.Status.REMOVED
        row.save(update_fields=["holder", "lease_expires_at", "released_at", "status", "updated_at"])
        Workspace.objects.filter(pk=row.workspace_id).update(status=Workspace.Status.REMOVED, updated_at=now)
        _event("worktree.removed", row, actor, force=force, cancelled_requests=cancelled)
    return row


# --- Status for the monitor page ------------------------------------------------------------


@dataclass(frozen=True)
class RecentFile:
    path: str
    age_seconds: int


@dataclass
class WorktreeStatus:
    present: bool  # the folder exists
    base: str
    commits_ahead: int | None = None  # None when the base is unknown or the folder is gone
    uncommitted: int = 0
    changes: list[git.StatusEntry] = field(default_factory=list)
    recent_files: list[RecentFile] = field(default_factory=list)
    holder: str | None = None
    lease_expires_at: datetime | None = None
    lease_valid: bool = False
    waiting: int = 0


def worktree_status(*, worktree: Worktree) -> WorktreeStatus:
    """Commits ahead of the base, uncommitted changes, the files changed last, and the holder."""
    now = timezone.now()
    status = WorktreeStatus(
        present=worktree.status == Worktree.Status.ACTIVE and os.path.isdir(worktree.real_path),
        base=worktree.repository.default_branch,
        holder=worktree.holder.slug if worktree.holder_id else None,
        lease_expires_at=worktree.lease_expires_at,
        lease_valid=bool(worktree.holder_id and worktree.lease_expires_at and worktree.lease_expires_at >= now),
        waiting=worktree.queue.filter(status=WorktreeClaimRequest.Status.WAITING).count(),
    )
    if not status.present:
        return status
    status.commits_ahead = git.git_commits_ahead(worktree.real_path, status.base)
    status.changes = worktree_changes(worktree=worktree)
    status.uncommitted = len(status.changes)
    status.recent_files = recent_files(root=worktree.real_path)
    return status


def recent_files(*, root: str, limit: int = RECENT_FILES) -> list[RecentFile]:
    """The ``limit`` most recently modified files under ``root``, outside ``.git``, newest first."""
    found: list[tuple[float, str]] = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [d for d in subfolders if d != ".git"]
        for name in files:
            if name == ".git":
                continue  # a linked worktree's pointer to its repository
            full = os.path.join(folder, name)
            try:
                found.append((os.lstat(full).st_mtime, os.path.relpath(full, root)))
            except FileNotFoundError:
                continue  # deleted while we looked
    now = time.time()
    newest = heapq.nlargest(limit, found)
    return [RecentFile(path=path, age_seconds=max(0, int(now - mtime))) for mtime, path in newest]
