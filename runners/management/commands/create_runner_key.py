from django.core.management.base import BaseCommand, CommandError

from config.api.errors import DomainError
from runners.services import runner_key_create


class Command(BaseCommand):
    help = (
        "Create a key of scope 'run' for a runner (SPEC §8), creating the runner and its agent "
        "'runner-<name>' if they do not exist; for an existing runner it adds another key. "
        "The key is printed alone on the last line; it is shown only this once. "
        "Example: manage.py create_runner_key build-1 --label linux --label gpu --capacity 4"
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="The runner's name, e.g. build-1 (letters, digits, '-' or '_').")
        parser.add_argument(
            "--label",
            action="append",
            help="A label runs can ask for, e.g. linux, gpu or repo:shop; repeat for several. "
            "Given for an existing runner, replaces its labels.",
        )
        parser.add_argument(
            "--capacity",
            type=int,
            help="How many runs it may hold at once (default 1). Given for an existing runner, replaces it.",
        )

    def handle(self, *args, name, label, capacity, **options):
        try:
            runner, issued, created = runner_key_create(name=name, labels=label, capacity=capacity)
        except DomainError as exc:
            raise CommandError(exc.message) from None
        self.stderr.write(
            f"{'Created runner' if created else 'Runner'} {runner.name!r} (agent {runner.agent.slug!r}, "
            f"labels: {', '.join(runner.labels) or 'none'}, capacity {runner.capacity}); "
            f"new key {issued.api_key.prefix}… (scope: run). Store it now: it is not shown again."
        )
        self.stdout.write(issued.key)
