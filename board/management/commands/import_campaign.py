from django.core.management.base import BaseCommand, CommandError

from board.imports.campaigns import campaign_files, campaign_import
from board.management.commands._listing import input_files_listed
from config.actors import SYSTEM
from config.api.errors import DomainError


class Command(BaseCommand):
    help = (
        "Import a campaign definition from TASK_DEFS_DIR: the campaign, one ready task per deliverable and "
        "its leads. Importing the same file again updates the campaign and adds what is missing; nothing is "
        "duplicated or removed."
    )

    def add_arguments(self, parser):
        parser.add_argument("file_name", nargs="?", help="A .json file directly in TASK_DEFS_DIR, e.g. launch.json.")
        parser.add_argument(
            "--list", dest="list_only", action="store_true", help="List the campaign definitions and exit."
        )

    def handle(self, *args, file_name, list_only, **options):
        if input_files_listed(
            self,
            list_files=campaign_files,
            folder="TASK_DEFS_DIR",
            suffix=".json",
            file_name=file_name,
            list_only=list_only,
        ):
            return
        try:
            result = campaign_import(actor=SYSTEM, file_name=file_name)
        except DomainError as exc:
            raise CommandError(exc.message) from None
        campaign = result.campaign
        if result.created:
            verb = "Created"
        elif result.changed_anything or result.leads_created:
            verb = "Updated"
        else:
            verb = "Unchanged:"
        self.stdout.write(self.style.SUCCESS(f"{verb} campaign #{campaign.pk} {campaign.name!r} ({campaign.priority})"))
        if result.campaign_fields:
            self.stdout.write(f"  fields changed: {', '.join(result.campaign_fields)}")
        self.stdout.write(
            f"  deliverable tasks: {len(result.tasks_created)} created, {len(result.tasks_updated)} updated; "
            f"leads: {result.leads_created} added"
        )
