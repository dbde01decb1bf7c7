"""Write the periodic schedules of config/schedules.py into django-celery-beat's tables."""

from django.core.management.base import BaseCommand

from config.schedules import schedules_install


class Command(BaseCommand):
    help = (
        "Create or update the periodic tasks defined in config/schedules.py, by name. Safe to run on "
        "every start and deployment: a schedule a person paused in the admin stays paused."
    )

    def handle(self, *args, **options):
        for written in schedules_install():
            state = "" if written.enabled else " (paused in the admin; left paused)"
            details = f": {'; '.join(written.changes)}" if written.changes else ""
            self.stdout.write(f"{written.action:>9}  {written.name}{state}{details}")
