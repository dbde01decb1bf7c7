"""What the two import commands share: `--list`, and a missing file name."""

from django.core.management.base import BaseCommand, CommandError


def input_files_listed(
    command: BaseCommand, *, list_files, folder: str, suffix: str, file_name, list_only: bool
) -> bool:
    """List the files (``list_files()``) when asked, or when no file was named (then fail); True when
    the command is done."""
    if file_name and not list_only:
        return False
    files = list_files()
    if not files:
        command.stdout.write(f"No {suffix} files in {folder} yet.")
    for info in files:
        command.stdout.write(f"{info.name}  ({info.size} bytes)")
    if not file_name and not list_only:
        raise CommandError("Give the name of a file to import (see the list above).")
    return True
