"""Where archives live: Django's ``storages["archives"]`` (STORAGES in settings).

Reads always go through the storage API (``open``, ``exists``, ``size``, ``delete``), so an
S3-compatible backend can replace the local folder. Writes need "complete and durable under
its name, or not there at all", which the API does not promise, so:

- a storage with local paths (FileSystemStorage) gets a temporary name in the same folder,
  an fsync, ``os.replace`` onto the final name and an fsync of the folder;
- any other storage gets the stream spooled to a local temporary file and then one
  ``storage.save`` under the final name (an S3 PUT is atomic: the object is whole or absent).
  Limits there: the old object is deleted before the new one is saved, so replacing an
  archive is not atomic (only a restored workspace, whose folder exists, is ever re-archived),
  and the spool needs local disk as large as the archive.
"""

import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from django.core.files import File
from django.core.files.storage import Storage, storages

from config.api.errors import DomainError

PART_SUFFIX = ".part"


def archive_storage() -> Storage:
    return storages["archives"]


def _local_path(storage: Storage, name: str) -> Path | None:
    try:
        return Path(storage.path(name))
    except NotImplementedError:
        return None


@contextmanager
def stored_atomically(name: str) -> Iterator[BinaryIO]:
    """A file to write ``name`` through; it appears under its name only once complete and synced."""
    storage = archive_storage()
    local = _local_path(storage, name)
    if local is None:
        with tempfile.TemporaryFile() as spool:
            yield spool
            spool.flush()
            spool.seek(0)
            if storage.exists(name):
                storage.delete(name)
            saved = storage.save(name, File(spool, name=name))
        if saved != name:
            raise DomainError(f"The archive storage saved {name!r} as {saved!r}.", code="conflict")
        return
    local.parent.mkdir(parents=True, exist_ok=True)
    part = local.with_name(f".{local.name}.{uuid.uuid4().hex}{PART_SUFFIX}")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o640)
    try:
        with open(fd, "wb", buffering=0) as out:
            yield out
            os.fsync(out.fileno())
        os.replace(part, local)
        fsync_folder(local.parent)
    except BaseException:
        with suppress(FileNotFoundError):
            part.unlink()
        raise


def stored_parts_remove(name: str) -> int:
    """Remove temporary files a killed writer of ``name`` left behind; how many went."""
    local = _local_path(archive_storage(), name)
    if local is None or not local.parent.is_dir():
        return 0
    removed = 0
    for part in local.parent.glob(f".{glob_escape(local.name)}.*{PART_SUFFIX}"):
        with suppress(FileNotFoundError):
            part.unlink()
            removed += 1
    return removed


def glob_escape(text: str) -> str:
    """``text`` as a literal inside a glob pattern."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def stored_open(name: str) -> BinaryIO:
    storage = archive_storage()
    if not storage.exists(name):
        raise DomainError(f"The archive storage has no {name!r}.", code="conflict")
    return storage.open(name, "rb")


def stored_read(name: str, *, max_bytes: int) -> bytes:
    with stored_open(name) as source:
        data = source.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise DomainError(f"{name!r} is larger than {max_bytes} bytes.", code="conflict")
    return data


def stored_exists(name: str) -> bool:
    return archive_storage().exists(name)


def fsync_folder(path: Path) -> None:
    """Make a rename or unlink in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
