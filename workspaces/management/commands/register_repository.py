from django.core.management.base import BaseCommand, CommandError

from config.api.errors import DomainError
from workspaces.worktrees.services import repository_register


class Command(BaseCommand):
    help = (
        "Register a local git clone so agents can create worktrees of it. Worktrees are made "
        "beside the clone as <type>-<name> folders; every file in the sync folder is linked "
        "into each of them. The path is stored as its canonical real path, so running this "
        "again with another spelling of the same folder (trailing slash, ./, a symlink) "
        "changes nothing; given again, --default-branch and --sync-dir update the entry."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", help="The top folder of the local clone (not a worktree made from it).")
        parser.add_argument(
            "--name",
            help="A slug for the repository. Default: the clone's folder name "
            "(its parent's name when the clone is a trunk-<branch> folder).",
        )
        parser.add_argument(
            "--default-branch",
            help="The branch new worktrees start from and status counts commits against. "
            "Default: origin's HEAD, else the branch checked out.",
        )
        parser.add_argument(
            "--sync-dir",
            help="Absolute path of the folder of shared configuration (.env, ...). "
            "Default: <parent of the clone>/sync/<name>/ (made if missing).",
        )

    def handle(self, *args, path, name, default_branch, sync_dir, **options):
        try:
            repository, created = repository_register(
                path=path, name=name, default_branch=default_branch, sync_dir=sync_dir
            )
        except DomainError as exc:
            raise CommandError(exc.message) from None
        verb = "Registered" if created else "Already registered"
        self.stdout.write(
            f"{verb} {repository.name} (id {repository.pk}): {repository.path}, default branch "
            f"{repository.default_branch}, sync folder {repository.sync_dir}"
        )
