from django.core.management.base import BaseCommand, CommandError

from board.imports.priorities import priorities_apply, priorities_files, priorities_preview
from board.management.commands._listing import input_files_listed
from config.actors import SYSTEM
from config.api.errors import DomainError


class Command(BaseCommand):
    help = (
        "Import a priority file from REPORTS_DIR: every checkbox item becomes a task. Shows what is new, "
        "changed and gone; importing the same file again updates tasks and never duplicates them. Tasks "
        "whose item was removed are moved to blocked if nobody started them (nothing is deleted)."
    )

    def add_arguments(self, parser):
        parser.add_argument("file_name", nargs="?", help="A .md file directly in REPORTS_DIR, e.g. q3.md.")
        parser.add_argument("--dry-run", action="store_true", help="Only show what would change; write nothing.")
        parser.add_argument("--list", dest="list_only", action="store_true", help="List the priority files and exit.")

    def handle(self, *args, file_name, dry_run, list_only, **options):
        if input_files_listed(
            self,
            list_files=priorities_files,
            folder="REPORTS_DIR",
            suffix=".md",
            file_name=file_name,
            list_only=list_only,
        ):
            return
        try:
            preview = priorities_preview(file_name=file_name)
            self._show(preview)
            if dry_run:
                self.stdout.write("Dry run: nothing was written.")
                return
            result = priorities_apply(actor=SYSTEM, file_name=file_name)
        except DomainError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Applied {result.file_name}: {len(result.created)} created, {len(result.updated)} updated, "
                f"{len(result.blocked)} blocked, {len(result.kept)} kept, {result.unchanged} unchanged."
            )
        )
        for warning in result.warnings:
            self.stdout.write(self.style.WARNING(f"Warning: {warning}"))

    def _show(self, preview):
        self.stdout.write(
            f"{preview.file_name}: {len(preview.new)} new, {len(preview.changed)} changed, "
            f"{len(preview.unchanged)} unchanged, {len(preview.gone)} gone."
        )
        for item in preview.new:
            done = " (done)" if item.done else ""
            self.stdout.write(f"  + [{item.priority}] {item.title}{done}  labels: {', '.join(item.labels) or '-'}")
        for change in preview.changed:
            fields = ", ".join(
                f"{name}: {before!r} -> {after!r}" if name != "description" else "description"
                for name, (before, after) in change.changes.items()
            )
            self.stdout.write(f"  ~ #{change.task_id} {change.title}  ({fields})")
        for gone in preview.gone:
            what = "will be blocked" if gone.action == "block" else f"kept: it is {gone.status}"
            self.stdout.write(f"  - #{gone.task_id} {gone.title}  ({what})")
