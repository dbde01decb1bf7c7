"""Repositories that live on a runner's machine (SPEC §8): the runner registers the clone, makes the
worktrees there and reports their status; the server keeps the rows, the claims and the events,
and runs no git and touches no file of them. ``runner`` is the runners.Runner row (this package
sits below the runners app, so it takes the row without importing its model).
"""

import posixpath
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from config.actors import Actor
from config.api.errors import DomainError
from workspaces.models import Repository, Worktree
from workspaces.worktrees import git
from workspaces.worktrees.services import (
    NAME_MAX_LENGTH,
    REMOVE_FORCE,
    TYPE_MAX_LENGTH,
    event,
    path_controls_refuse,
    slug_check,
)

PATH_MAX_LENGTH = 4096
REPORTED_CHANGES = 200  # uncommitted changes kept per worktree report


def _host_path_check(path: object, *, field: str) -> str:
    """An absolute, already-normalised path on the runner's host: the server cannot resolve links
    there, so it takes the runner's canonical path as given and only refuses ambiguous spellings."""
    if not isinstance(path, str) or not path or len(path) > PATH_MAX_LENGTH:
        raise DomainError(f"{field} must be the absolute path of a folder on the runner's machine.")
    path_controls_refuse(path, field=field)
    if not path.startswith("/") or posixpath.normpath(path) != path or path == "/":
        raise DomainError(
            f"{field} {path!r} must be absolute and canonical (no '..', '.', '//' or trailing '/'): "
            "give the real path of the folder."
        )
    return path


def repository_register_on_runner(*, runner, name: str, path: str, default_branch: str) -> tuple[Repository, bool]:
    """Register (True) or update the runner's clone at ``path`` as ``name``. Idempotent; 409 when
    the name belongs to a repository elsewhere or the folder is registered under another name."""
    name = slug_check(name, field="name", max_length=100)
    path = _host_path_check(path, field="path")
    git.ref_check(default_branch)
    by_name = Repository.objects.filter(name=name).first()
    if by_name is not None and by_name.runner_id != runner.pk:
        where = f"runner {by_name.runner.name}" if by_name.runner_id else "the server"
        raise DomainError(
            f"The name {name!r} is taken by a repository on {where}; choose another name in the runner's config.",
            code="conflict",
        )
    by_path = Repository.objects.filter(runner=runner, path=path).exclude(name=name).first()
    if by_path is not None:
        raise DomainError(f"{path} is already registered by this runner as {by_path.name!r}.", code="conflict")
    if by_name is not None:
        changed = [
            key for key, value in (("path", path), ("default_branch", default_branch)) if getattr(by_name, key) != value
        ]
        for key in changed:
            setattr(by_name, key, path if key == "path" else default_branch)
        if changed:
            by_name.save(update_fields=[*changed, "updated_at"])
        return by_name, False
    try:
        with transaction.atomic():
            repository = Repository.objects.create(
                name=name,
                path=path,
                default_branch=default_branch,
                sync_dir=posixpath.join(posixpath.dirname(path), "sync", name),
                runner=runner,
            )
    except IntegrityError:  # the same registration from a second request at the same moment
        repository = Repository.objects.filter(name=name, runner=runner).first()
        if repository is None:
            raise DomainError(f"The name {name!r} was just taken by another repository.", code="conflict") from None
        return repository, False
    return repository, True


def worktree_register_on_runner(
    *, actor: Actor, runner, repository_id: int, type: str, name: str
) -> tuple[Worktree, bool]:
    """The row for the worktree ``<type>-<name>`` the runner made beside its clone (True when new);
    a removed one is active again. The folder and branch are the runner's to make."""
    repository = Repository.objects.filter(pk=repository_id, runner=runner).first()
    if repository is None:
        raise DomainError(f"Repository {repository_id} is not one this runner holds.", code="not_found")
    type = slug_check(type, field="type", max_length=TYPE_MAX_LENGTH)
    name = slug_check(name, field="name", max_length=NAME_MAX_LENGTH)
    folder = f"{type}-{name}"
    real_path = posixpath.join(posixpath.dirname(repository.path), folder)
    with transaction.atomic():
        # This runner's folders only: its paths are its own namespace, not the server's or another runner's.
        found = Worktree.objects.select_for_update().filter(real_path=real_path, runner=runner).first()
        if found is not None and found.repository_id != repository.pk:
            raise DomainError(
                f"{real_path} is a worktree of another repository (id {found.repository_id}).", code="conflict"
            )
        if found is not None and found.status == Worktree.Status.ACTIVE:
            return found, False
        if found is not None:
            found.status = Worktree.Status.ACTIVE
            found.reported = None
            found.save(update_fields=["status", "reported", "updated_at"])
            event("worktree.created", found, actor, revived=True, runner=runner.name)
            return found, True
        try:
            with transaction.atomic():
                worktree = Worktree.objects.create(
                    repository=repository, type=type, name=name, branch=folder, real_path=real_path, runner=runner
                )
        except IntegrityError:  # the same type and name under another spelling of the folder
            raise DomainError(f"Worktree {folder} of {repository.name} exists under another name.", code="conflict")
        event("worktree.created", worktree, actor, revived=False, runner=runner.name)
    return worktree, True


@dataclass(frozen=True)
class Removal:
    worktree_id: int
    path: str
    force: bool


def _removal(row: Worktree) -> Removal:
    return Removal(row.pk, row.real_path, bool((row.reported or {}).get(REMOVE_FORCE)))


def _removed_but_present(runner):
    """Rows removed here whose folders the runner last said it still has."""
    return Worktree.objects.filter(repository__runner=runner, status=Worktree.Status.REMOVED, reported__present=True)


def worktree_removals_pending(*, runner) -> list[Removal]:
    """What every heartbeat answers: the folders to remove, until a report says they are gone."""
    return [_removal(row) for row in _removed_but_present(runner).only("pk", "real_path", "reported")]


def worktree_reports_store(*, runner, reports: list[dict]) -> list[Removal]:
    """Store what the runner says about the worktrees of its clones (``reports``: one per folder
    it has, keyed by ``path``). Rows it did not mention are noted absent. Returns the folders it
    still has whose rows were removed here: the runner removes them."""
    now = timezone.now()
    by_path = {item["path"]: item for item in reports}
    rows = Worktree.objects.filter(repository__runner=runner, status=Worktree.Status.ACTIVE) | _removed_but_present(
        runner
    )
    removals = []
    for row in rows.distinct().only("pk", "real_path", "status", "reported"):
        item = by_path.get(row.real_path)
        if row.status == Worktree.Status.REMOVED:
            if item is not None:
                removals.append(_removal(row))
            else:  # gone: nothing more to ask
                Worktree.objects.filter(pk=row.pk).update(reported={"present": False}, reported_at=now)
            continue
        reported = {"present": False} if item is None else {"present": True, **_kept(item)}
        # Only while still active: a removal meanwhile keeps its own note (REMOVE_FORCE).
        Worktree.objects.filter(pk=row.pk, status=Worktree.Status.ACTIVE).update(reported=reported, reported_at=now)
    return removals


def _kept(item: dict) -> dict:
    return {
        "head": item.get("head", ""),
        "commits_ahead": item.get("commits_ahead"),
        "uncommitted": item.get("uncommitted", 0),
        "changes": list(item.get("changes", []))[:REPORTED_CHANGES],
        "recent_files": list(item.get("recent_files", [])),
    }
