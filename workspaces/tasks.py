"""Celery adapters for the workspaces services: ids in, one service call, a JSON-safe result out.

The app's one tasks module, found by Celery's autodiscovery. Beat runs
``workspace_reconcile_task`` (the observer's periodic pass) and ``workspaces_archive_due_task``
(hourly, config/schedules.py). The archive services queue ``workspace_archive_task`` and
``workspace_restore_task`` by name, so they never import this module. Every task is idempotent:
the archive services claim the workspace with a conditional update and finish what a killed run
left.
"""

import logging

from celery import shared_task

from config.side_effects import enqueue_task
from workspaces.archive.format import ArchiveInvalid, FolderChanged
from workspaces.archive.restore import workspace_restore
from workspaces.archive.selectors import workspaces_due_for_archive
from workspaces.archive.services import workspace_archive
from workspaces.files.backups import BackupFailed, artifact_version_backup
from workspaces.files.reconcile import workspace_reconcile
from workspaces.files.upload_parts import upload_parts_sweep
from workspaces.models import ArtifactVersion


@shared_task
def workspace_reconcile_task() -> dict:
    """Beat's periodic pass (config/schedules.py): files the watcher missed become versions, and
    temporaries of uploads that died are removed."""
    return {**workspace_reconcile().summary(), "stale_parts_removed": upload_parts_sweep()}


@shared_task(autoretry_for=(BackupFailed,), retry_backoff=True, max_retries=5)
def artifact_backup_task(version_id: int) -> str | None:
    """Back up one version (an API upload, a backup that failed); its location, or None when
    the version is gone or the file no longer holds its bytes. Idempotent."""
    version = ArtifactVersion.objects.select_related("artifact__workspace").filter(pk=version_id).first()
    if version is None:
        return None
    return artifact_version_backup(version=version)


logger = logging.getLogger(__name__)

# At most this many archive tasks are queued per pass; the rest wait for the next pass.
DUE_BATCH = 100


@shared_task
def workspace_archive_task(workspace_id: int, actor_label: str = "system") -> dict:
    """Archive one workspace. A folder that changed, or an archive that did not verify, leaves
    the folder in place; the next pass of ``workspaces_archive_due_task`` tries again."""
    try:
        return workspace_archive(workspace_id=workspace_id, actor_label=actor_label).as_dict()
    except (FolderChanged, ArchiveInvalid) as exc:
        logger.warning("workspace %s not archived: %s", workspace_id, exc.message)
        return {"workspace_id": workspace_id, "outcome": "not_archived", "reason": exc.message}


@shared_task
def workspaces_archive_due_task() -> dict:
    """Queue an archive task for each workspace past its retention (beat, hourly)."""
    due = workspaces_due_for_archive()
    for workspace_id in due[:DUE_BATCH]:
        enqueue_task(workspace_archive_task, workspace_id)
    return {"due": len(due), "queued": min(len(due), DUE_BATCH)}


@shared_task
def workspace_restore_task(workspace_id: int, actor_label: str = "system") -> dict:
    """Restore one archived workspace; a no-op when it is active already."""
    return workspace_restore(workspace_id=workspace_id, actor_label=actor_label).as_dict()
