"""Celery adapters for archival and restore: ids in, one service call, a JSON-safe result out.

config/celery_app.py autodiscovers this module (``related_name="archive_tasks"``) and beat runs
``workspaces_archive_due_task`` hourly (config/schedules.py). Every task is idempotent: the
services claim the workspace with a conditional update and finish what a killed run left.
"""

import logging

from celery import shared_task

from config.side_effects import enqueue_task
from workspaces.archival import workspace_archive
from workspaces.archive_format import ArchiveInvalid, FolderChanged
from workspaces.archive_retention import workspaces_due_for_archive
from workspaces.restore import workspace_restore

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
