"""Celery adapters for the observer's services: ids in, a service call, a JSON-safe result out."""

from celery import shared_task

from workspaces.backups import BackupFailed, artifact_version_backup
from workspaces.models import ArtifactVersion
from workspaces.reconcile import workspace_reconcile
from workspaces.upload_parts import upload_parts_sweep


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
