from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from config.actors import SYSTEM
from config.api.errors import DomainError
from sessions_app.models import AgentSession
from workspaces.files.adoption import workspace_adopt


class Command(BaseCommand):
    help = (
        "Adopt an existing folder as a workspace and register its files, without moving or "
        "changing them: an old session folder (with work_products/, search_results/, ...) or the "
        "flat Denker layout (files at the top). Safe to run again: only changed files add versions."
    )

    def add_arguments(self, parser):
        parser.add_argument("folder", help="Absolute path of the folder to adopt.")
        parser.add_argument("--session", help="Attach the workspace to this existing session id.")

    def handle(self, *args, folder, session, **options):
        path = Path(folder).expanduser()
        if not path.is_absolute():
            path = Path.cwd() / path
        target_session = None
        if session:
            target_session = AgentSession.objects.filter(pk=session).first()
            if target_session is None:
                raise CommandError(f"No session {session!r}.")

        def progress(count: int) -> None:
            if count % 500 == 0:
                self.stderr.write(f"  … {count} entries looked at")

        try:
            report = workspace_adopt(actor=SYSTEM, folder=path, progress=progress)
        except DomainError as exc:
            raise CommandError(exc.message) from None
        if target_session is not None:
            AgentSession.objects.filter(pk=target_session.pk).update(workspace=report.workspace)
        verb = "Adopted" if report.created else "Re-scanned"
        self.stdout.write(
            f"{verb} {report.workspace.root_path} as a {report.workspace.kind} workspace (id {report.workspace.pk}): "
            f"{report.registered} new version(s), {report.unchanged} unchanged, {len(report.skipped)} skipped."
        )
        for line in report.skipped:
            self.stdout.write(f"  skipped {line}")
