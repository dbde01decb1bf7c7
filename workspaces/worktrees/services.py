"""Repositories and git worktrees: register, create, revive, remove.

A worktree is the folder ``<type>-<name>`` beside its repository's clone, on the branch of
the same name. One folder is one row: the canonical real path is unique in the database,
so every spelling of a path (trailing slash, ``./``, a symlink) lands on the same worktree.

Claims, leases and the queue are in ``worktree_claims``; the monitor page's status is in
``worktree_status``. Both build on the row lock, the events and the holder check kept here.
"""

import os
import re
import unicodedata
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from config.actors import Actor
from config.api.errors import LEASE_LOST, DomainError
from config.run_scope import require_worktree
from ledger.events import event_record
from ledger.models import Event
from sessions_app.models import Agent
from workspaces.models import Repository, Workspace, Worktree, WorktreeClaimRequest
from workspaces.worktrees import git
from workspaces.worktrees.sync import ConfigSyncReport, sync_links_expected, sync_links_unlink, worktree_config_sync

# Suggested types; any slug works.
KNOWN_TYPES = ("feat", "fix", "review", "trunk", "chore", "docs", "exp")
_SLUG = re.compile(r"[a-z0-9][a-z0-9-]*")
TYPE_MAX_LENGTH = 32  # the width of Worktree.type
NAME_MAX_LENGTH = 64
REMOVE_FORCE = "remove_force"  # in ``Worktree.reported``: a forced removal its runner still has to do


# --- Repositories ---------------------------------------------------------------------------


# Bidirectional overrides and isolates: they make a path read as another on a page or in a terminal.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def path_controls_refuse(path: str, *, field: str) -> None:
    """400 for a path holding a control character (C0, DEL, C1) or a bidirectional control: no real
    clone needs one, and each lets a path pass for another in a log line, a page or a terminal."""
    found = next((c for c in path if unicodedata.category(c) == "Cc" or c in _BIDI_CONTROLS), None)
    if found is not None:
        raise DomainError(
            f"{field} holds the control character U+{ord(found):04X}; give the folder's path without control characters.",
            extra={"errors": {field: [f"Control character U+{ord(found):04X}."]}},
        )


def repository_path_check(*, path: str) -> str:
    """The canonical real path of the clone at ``path``; 400 unless it is the top of a main clone."""
    if not isinstance(path, str) or not path.strip():
        raise DomainError("Give the path of a local git clone.")
    path_controls_refuse(path, field="path")
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
    existing = Repository.objects.filter(path=real, runner__isnull=True).first()
    if existing is not None:
        return _repository_update(existing, name=name, default_branch=default_branch, sync_dir=sync_dir), False
    name = slug_check(name, field="name", max_length=100) if name else repository_default_name(real_path=real)
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
        repository = Repository.objects.filter(path=real, runner__isnull=True).first()
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


def slug_check(value: object, *, field: str, max_length: int) -> str:
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
    found = Worktree.objects.filter(real_path=real_path, runner__isnull=True).first()  # the server's folders
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
    type = slug_check(type, field="type", max_length=TYPE_MAX_LENGTH)
    name = slug_check(name, field="name", max_length=NAME_MAX_LENGTH)
    require_worktree(actor=actor, worktree_id=None, repository_id=repository.pk, name=name)
    if ref is not None and pr_number is not None:
        raise DomainError("Give a ref or a pr_number, not both.")
    if ref is not None:
        git.ref_check(ref)
    if pr_number is not None and (isinstance(pr_number, bool) or not isinstance(pr_number, int) or pr_number < 1):
        raise DomainError("pr_number must be a positive integer.")
    if type == "review" and ref is None and pr_number is None:
        raise DomainError("A review worktree needs the ref or the pr_number to check out.")
    refuse_on_runner(repository, doing="make a worktree")
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
        event("worktree.created", worktree, actor, revived=False)
    return worktree, True


def _worktree_revive(*, actor: Actor, worktree: Worktree, ref, pr_number) -> tuple[Worktree, bool]:
    with transaction.atomic():
        row = worktree_locked(worktree.pk)
        if row.status == Worktree.Status.ACTIVE:
            return row, False  # revived by someone else meanwhile
        _checkout(repository=row.repository, real_path=row.real_path, branch=row.branch, ref=ref, pr_number=pr_number)
        row.status = Worktree.Status.ACTIVE
        row.pr_number = pr_number if pr_number is not None else row.pr_number
        row.workspace = _workspace_for(row.real_path)
        row.save(update_fields=["status", "pr_number", "workspace", "updated_at"])
        event("worktree.created", row, actor, revived=True)
    return row, True


def _checkout(*, repository: Repository, real_path: str, branch: str, ref: str | None, pr_number: int | None) -> None:
    """Make the folder with ``git worktree add``, or adopt it if git already has it on this branch
    (a crash between git and the commit leaves exactly that)."""
    clone = repository.path
    with git.clone_locked(clone):
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


# --- Row lock, events and who may change a worktree -----------------------------------------


def worktree_locked(worktree_id: int) -> Worktree:
    """The row, locked until the caller's transaction ends. Caller holds a transaction."""
    return Worktree.objects.select_for_update().get(pk=worktree_id)


def event(name: str, worktree: Worktree, actor: Actor, **payload) -> None:
    event_record(
        name=name,
        subject_type="worktree",
        subject_id=worktree.pk,
        actor=actor.label,
        payload=event_payload(worktree, **payload),
    )


def event_payload(worktree: Worktree, **payload) -> dict:
    """What every worktree event carries, then its own fields."""
    return {"repository": worktree.repository_id, "branch": worktree.branch, "path": worktree.real_path, **payload}


def holder_label(worktree: Worktree) -> str:
    if worktree.holder_id is None:
        return "nobody"
    if Worktree.holder.is_cached(worktree):  # loaded with the row: no query
        return worktree.holder.slug if worktree.holder is not None else "nobody"
    return Agent.objects.filter(pk=worktree.holder_id).values_list("slug", flat=True).first() or "nobody"


def require_run_scope(*, actor: Actor, worktree: Worktree) -> None:
    """403 for a per-run key on any worktree but its run's (SPEC §8; the rule is the Actor's). Its
    agent row is shared by every run of the provider on the runner: holding is not enough."""
    require_worktree(actor=actor, worktree_id=worktree.pk, repository_id=worktree.repository_id, name=worktree.name)


def check_may_change(*, actor: Actor, worktree: Worktree, now: datetime, verb: str) -> None:
    """Staff may change any worktree; an agent only one it holds on a lease that has not expired
    (and a per-run key only its run's)."""
    require_run_scope(actor=actor, worktree=worktree)
    if actor.is_staff:
        return
    if actor.agent is None:
        raise DomainError(f"Only the holder or staff may {verb} a worktree.", code="forbidden")
    if worktree.holder_id != actor.agent.pk:
        refuse_if_lease_lost(actor=actor, worktree=worktree)
    if worktree.holder_id is None:
        raise DomainError(f"Worktree {worktree.pk} is not claimed; claim it before you {verb} it.", code="forbidden")
    if worktree.holder_id != actor.agent.pk:
        raise DomainError(
            f"Worktree {worktree.pk} is held by another agent ({holder_label(worktree)}).", code="forbidden"
        )
    if worktree.lease_expires_at < now:
        raise DomainError(
            f"Your lease on worktree {worktree.pk} expired at {worktree.lease_expires_at.isoformat()}; "
            "claim it again first.",
            code="conflict",
            extra={"code": LEASE_LOST, "lease_expires_at": worktree.lease_expires_at.isoformat()},
        )


# The reasons of a release that took a lease from a holder who did not give it up: its lease ran
# out (worktree_claims.py), or the reaper found the agent silent ("holder <slug> stale", reaper.py).
LEASE_EXPIRED = "lease expired"
STALE_SUFFIX = " stale"


def refuse_if_lease_lost(*, actor: Actor, worktree: Worktree) -> None:
    """A 409 ``lease_lost`` when the agent's last lease on this worktree was taken from it: it ran
    out (no renewal in WORKTREE_LEASE_TTL_SECONDS) or the reaper found the agent silent."""
    if actor.agent is None:
        return
    last = (
        Event.objects.filter(
            name="worktree.released",
            subject_type="worktree",
            subject_id=str(worktree.pk),
            payload__holder=actor.agent.pk,
        )
        .order_by("-id")
        .only("payload", "created_at")
        .first()
    )
    reason = str(last.payload.get("reason", "")) if last is not None else ""
    if reason != LEASE_EXPIRED and not reason.endswith(STALE_SUFFIX):
        return
    raise DomainError(
        f"Your lease on worktree {worktree.pk} was lost at {last.created_at.isoformat()} ({reason}): no heartbeat "
        f"in time (leases last {settings.WORKTREE_LEASE_TTL_SECONDS} s, agents are stale after "
        f"{settings.HEARTBEAT_TTL_SECONDS} s). Claim it again.",
        code="conflict",
        extra={"code": LEASE_LOST, "worktree": worktree.pk, "lost_at": last.created_at.isoformat(), "reason": reason},
    )


def worktree_config_sync_for_actor(*, actor: Actor, worktree: Worktree, repair: bool) -> ConfigSyncReport:
    """Config sync on behalf of staff or the worktree's holder; a repair that changed links is recorded."""
    check_may_change(actor=actor, worktree=worktree, now=timezone.now(), verb="sync the config links of")
    if worktree.status != Worktree.Status.ACTIVE:
        raise DomainError(f"Worktree {worktree.pk} is {worktree.status}.", code="conflict")
    refuse_on_runner(worktree.repository, doing="link the sync folder's files")
    report = worktree_config_sync(worktree=worktree, repair=repair)
    if report.repaired:
        event("worktree.config_synced", worktree, actor, repaired=report.repaired, blocked=len(report.blocked))
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


# --- Repositories on a runner's machine (the rest is in runner_hosted) ---------------------------


def worktree_remove_on_runner(*, worktree: Worktree, force: bool) -> None:
    """Before a runner-hosted worktree is marked removed: refuse (409) while its last report shows
    uncommitted changes unless ``force``; a forced removal is noted for the runner to do."""
    reported = worktree.reported or {}
    changes = int(reported.get("uncommitted") or 0)
    if changes and not force:
        shown = ", ".join(str(c.get("path")) for c in reported.get("changes", [])[:5])
        raise DomainError(
            f"Worktree {worktree.pk} has {changes} uncommitted change(s) ({shown}), by its runner's last report; "
            "commit them, or remove with force=true to lose them.",
            code="conflict",
            extra={"uncommitted": changes},
        )
    if force:
        Worktree.objects.filter(pk=worktree.pk).update(reported={**reported, REMOVE_FORCE: True})


def host_label(repository: Repository) -> str:
    """Where the clone is, for pages: ``server`` or the runner's name."""
    return repository.runner.name if repository.runner_id else "server"


def refuse_on_runner(repository: Repository, *, doing: str) -> None:
    """409 for what only the host of the clone can do."""
    if repository.runner_id is None:
        return
    raise DomainError(
        f"{repository.name} lives on runner {repository.runner.name} (at {repository.path}); "
        f"the server cannot {doing} there: its runner makes and reports its worktrees.",
        code="conflict",
    )


def worktree_remove(*, actor: Actor, worktree: Worktree, force: bool = False) -> tuple[Worktree, bool]:
    """``git worktree remove`` the folder, end its claim and queue, and mark it removed (True if removed now).

    Refused (409) while the folder has uncommitted changes unless ``force``. Only a folder git
    lists as a linked worktree of this repository is removed: never the main clone.
    """
    worktree = Worktree.objects.select_related("repository").get(pk=worktree.pk)
    require_run_scope(actor=actor, worktree=worktree)  # before the retry's answer too
    if worktree.status == Worktree.Status.REMOVED:
        return worktree, False  # a retry: the holder's claim ended with the first call
    check_may_change(actor=actor, worktree=worktree, now=timezone.now(), verb="remove")
    if worktree.repository.runner_id is not None:
        worktree_remove_on_runner(worktree=worktree, force=force)
        return _worktree_mark_removed(actor=actor, worktree=worktree, force=force), True
    clone = worktree.repository.path
    if worktree.real_path == clone or clone.startswith(worktree.real_path.rstrip("/") + "/"):
        raise DomainError(f"{worktree.real_path} is the repository's clone; it is never removed.", code="conflict")
    with git.clone_locked(clone):
        known = git.git_worktree_branches(clone)
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
        row = worktree_locked(worktree.pk)
        now = timezone.now()
        if row.holder_id is not None:
            event("worktree.released", row, actor, holder=row.holder_id, reason="worktree removed")
        cancelled = row.queue.filter(status=WorktreeClaimRequest.Status.WAITING).update(
            status=WorktreeClaimRequest.Status.CANCELLED, resolved_at=now
        )
        row.released_at = now if row.holder_id is not None else row.released_at
        row.holder = None
        row.lease_expires_at = None
        row.status = Worktree.Status.REMOVED
        row.save(update_fields=["holder", "lease_expires_at", "released_at", "status", "updated_at"])
        Workspace.objects.filter(pk=row.workspace_id).update(status=Workspace.Status.REMOVED, updated_at=now)
        event("worktree.removed", row, actor, force=force, cancelled_requests=cancelled)
    return row
