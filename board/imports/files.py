"""Reading the import folders (REPORTS_DIR, TASK_DEFS_DIR) safely.

A file name comes from a person or an agent, so it goes through ``config.safepaths``: only a
plain name of a regular file directly in the folder, with the expected extension, is opened, and
it is opened beneath the folder without following symlinks. Nothing here writes.
"""

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from config.api.errors import DomainError
from config.safepaths import UnsafePath, clean_relative, open_file_beneath

MAX_IMPORT_BYTES = 1024 * 1024  # far above any hand-written priority file or campaign definition


@dataclass(frozen=True)
class ImportFile:
    name: str
    size: int
    modified_at: datetime


def import_files_list(*, root: Path, suffix: str) -> list[ImportFile]:
    """The importable files directly in ``root``, by name; symlinks and odd names are left out."""
    try:
        entries = list(os.scandir(root))
    except (FileNotFoundError, NotADirectoryError):
        return []
    files = []
    for entry in entries:
        if not _listable(entry.name, suffix) or not entry.is_file(follow_symlinks=False):
            continue
        info = entry.stat(follow_symlinks=False)
        files.append(ImportFile(entry.name, info.st_size, datetime.fromtimestamp(info.st_mtime, tz=UTC)))
    return sorted(files, key=lambda f: f.name.lower())


def _listable(name: str, suffix: str) -> bool:
    try:
        import_name_check(name, suffix=suffix)
    except DomainError:
        return False
    return True


def import_name_check(name: object, *, suffix: str) -> str:
    """The name if it is a plain ``*<suffix>`` file name; UnsafePath (400) saying why otherwise."""
    parts = clean_relative(name)
    if len(parts) > 1:
        raise UnsafePath("only files directly in the import folder can be imported: give a bare file name")
    if parts[0].startswith("."):
        raise UnsafePath("hidden files are not imported")
    if not parts[0].lower().endswith(suffix) or len(parts[0]) == len(suffix):
        raise UnsafePath(f"the file must be a {suffix} file")
    return parts[0]


def import_file_read(*, root: Path, name: object, suffix: str, folder: str) -> str:
    """The text of ``name`` in ``root``. 400 for a bad name, size or encoding; 404 when missing.

    ``folder`` is the setting's name (REPORTS_DIR), used in messages so people know where to look.
    """
    clean = import_name_check(name, suffix=suffix)
    try:
        fd = open_file_beneath(Path(root), (clean,))
    except FileNotFoundError:
        raise DomainError(f"No file {clean!r} in {folder}.", code="not_found") from None
    try:
        # Read one byte past the cap rather than trust st_size: the file may grow while read.
        raw = _read_at_most(fd, MAX_IMPORT_BYTES + 1)
    finally:
        os.close(fd)
    if len(raw) > MAX_IMPORT_BYTES:
        raise DomainError(f"{clean!r} is larger than {MAX_IMPORT_BYTES // 1024} KiB; split it into smaller files.")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DomainError(f"{clean!r} is not UTF-8 text (bad byte at offset {exc.start}).") from None


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks, total = [], 0
    while total < limit:
        chunk = os.read(fd, min(65536, limit - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)
