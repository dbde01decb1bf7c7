import time

from django.core.management.base import BaseCommand, CommandError

from config.api.errors import DomainError
from workspaces.archive.selectors import workspaces_due_for_archive
from workspaces.archive.services import archive_refusal, workspace_archive
from workspaces.models import Workspace

PROGRESS_EVERY_SECONDS = 2.0


class Command(BaseCommand):
    help = (
        "Archive the workspaces past their retention (ARCHIVE_AFTER_DAYS, or a workspace's own "
        "retention_days), here and now rather than in a worker: tar + manifest through the archive "
        "storage, re-read and verified, and only then the folder deleted. Safe to run again, or "
        "beside the workers: each workspace is claimed before it is touched."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="List what would be archived; change nothing.")
        parser.add_argument(
            "--workspace",
            type=int,
            action="append",
            dest="workspace_ids",
            metavar="ID",
            help="Archive this workspace now, whatever its retention (repeatable).",
        )

    def handle(self, *args, dry_run, workspace_ids, **options):
        ids = workspace_ids or workspaces_due_for_archive()
        if not ids:
            self.stdout.write("No workspace is due for archival.")
            return
        failed = 0
        for number, workspace_id in enumerate(ids, 1):
            workspace = Workspace.objects.filter(pk=workspace_id).first()
            if workspace is None:
                self.stderr.write(f"[{number}/{len(ids)}] no workspace {workspace_id}")
                failed += 1
                continue
            label = f"[{number}/{len(ids)}] workspace {workspace.pk} ({workspace.kind}) {workspace.root_path}"
            if dry_run:
                reason = archive_refusal(workspace=workspace)
                self.stdout.write(f"{label}: " + (f"would be skipped: {reason}" if reason else "would be archived"))
                continue
            failed += not self._archive(workspace, label)
        if failed:
            raise CommandError(f"{failed} of {len(ids)} workspace(s) not archived.")

    def _archive(self, workspace: Workspace, label: str) -> bool:
        self.stdout.write(f"{label}: archiving")
        started = last = time.monotonic()

        def progress(files: int, done_bytes: int) -> None:
            nonlocal last
            if time.monotonic() - last >= PROGRESS_EVERY_SECONDS:
                last = time.monotonic()
                self.stdout.write(f"  … {files} entries, {done_bytes / 1e6:,.1f} MB read")

        try:
            outcome = workspace_archive(
                workspace_id=workspace.pk, actor_label="command:archive_workspaces", progress=progress
            )
        except DomainError as exc:
            self.stderr.write(f"  not archived: {exc.message}")
            return False
        seconds = time.monotonic() - started
        if outcome.outcome == "archived":
            self.stdout.write(
                f"  archived and verified in {seconds:.1f}s: {outcome.files} files, {outcome.bytes / 1e6:,.1f} MB "
                f"-> {outcome.location} ({outcome.size / 1e6:,.1f} MB); folder deleted"
            )
            return True
        self.stdout.write(f"  {outcome.outcome.replace('_', ' ')}" + (f": {outcome.reason}" if outcome.reason else ""))
        return outcome.outcome != "refused"
