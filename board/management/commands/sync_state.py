import json

from django.core.management.base import BaseCommand, CommandError

from board.sync import state_sync
from board.sync.files import session_key_valid
from board.sync.selectors import sync_drift
from config.api.errors import DomainError


class Command(BaseCommand):
    help = (
        "Sync the agent-service's state snapshots (STATE_DIR/session-*/*.json) and the failed specialists "
        "in its job logs (LOGS_ROOT/running-jobs/job-*.log) into sessions, agents and tasks. "
        "Files unchanged since the last run are skipped; broken files become sync issues and never stop the run. "
        "Safe to run twice or after an interrupted run. With --drift, only report where files and database disagree."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "session", nargs="?", help="One session folder to sync, e.g. session-1770537842. Default: all of them."
        )
        parser.add_argument(
            "--drift",
            action="store_true",
            help="Write nothing; list files gone from disk, files not yet synced, and status mismatches.",
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="Read and apply every file, changed or not (files win over edits made in the database since).",
        )
        parser.add_argument("--json", action="store_true", help="Print the report as JSON instead of text.")

    def handle(self, *args, session, drift, force, **options):
        as_json = options["json"]
        if session is not None and not session_key_valid(session):
            raise CommandError(f"{session!r} is not a session folder name (session-<letters, digits, '-', '_'>).")
        if drift:
            self._drift(session, as_json=as_json)
            return
        progress = None if as_json else (lambda message: self.stdout.write(message))
        try:
            report = state_sync(session_key=session, force=force, progress=progress)
        except DomainError as exc:
            raise CommandError(exc.message) from None
        if as_json:
            self.stdout.write(_dumps(report.as_dict()))
            return
        for kept in report.kept:
            self.stdout.write(self.style.WARNING(f"kept: {kept['path']}: {kept['problem']}"))
        if report.issues_opened or report.issues_seen_again:
            self.stdout.write(
                self.style.WARNING(
                    f"{report.issues_opened + report.issues_seen_again} file(s) with sync issues; "
                    "see the admin (Board › Sync issues) or GET /api/v1/sync/issues/."
                )
            )
        self.stdout.write(self.style.SUCCESS("Sync done."))

    def _drift(self, session, *, as_json: bool) -> None:
        report = sync_drift(session_key=session)
        if as_json:
            self.stdout.write(_dumps(report.as_dict()))
            return
        self.stdout.write(f"{report.files} snapshot files; {report.open_issues} open sync issues.")
        for row in report.missing_files:
            shown = f" (task {row['external_id']} is {row['db_status']})" if row["external_id"] else ""
            self.stdout.write(f"gone from disk: {row['path']}{shown}")
        for row in report.unsynced_files:
            error = f": {row['error']}" if row["error"] else ""
            self.stdout.write(f"not synced ({row['reason']}): {row['path']}{error}")
        for row in report.status_mismatches:
            self.stdout.write(
                f"status differs: {row['path']}: file says {row['file_status']}, database has {row['db_status'] or 'nothing'}"
            )
        if report.clean:
            self.stdout.write(self.style.SUCCESS("No drift: the database matches the files."))


def _dumps(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)
