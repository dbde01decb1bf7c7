"""File primitives for workspaces: stage an upload beside its destination, publish it
with an atomic rename, and stream a byte range back out. All of them go through
``safepaths`` descriptors, so nothing is read or written through a symlink."""

import asyncio
import hashlib
import os
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from django.core.handlers.asgi import ASGIRequest

from config.api.errors import DomainError
from config.safepaths import UnsafePath, parent_descriptor

CHUNK_BYTES = 1024 * 1024


@dataclass
class StagedFile:
    """An upload written to a temporary name next to its destination, fsynced, not yet visible."""

    size: int
    sha256: str
    _dir_fd: int = field(repr=False)
    _tmp_name: str = field(repr=False)
    _final_name: str = field(repr=False)
    published: bool = False

    def publish(self, *, replace: bool = True) -> None:
        """Make it visible under its name. ``replace=False`` refuses to overwrite (409)."""
        try:
            if replace:
                os.rename(self._tmp_name, self._final_name, src_dir_fd=self._dir_fd, dst_dir_fd=self._dir_fd)
            else:
                # link() fails if the name exists: an atomic "create, never overwrite".
                os.link(
                    self._tmp_name,
                    self._final_name,
                    src_dir_fd=self._dir_fd,
                    dst_dir_fd=self._dir_fd,
                    follow_symlinks=False,
                )
                os.unlink(self._tmp_name, dir_fd=self._dir_fd)
        except IsADirectoryError:
            raise DomainError(f"{self._final_name!r} is a folder.", code="conflict") from None
        except FileExistsError:
            raise DomainError(f"{self._final_name!r} already exists; ask to overwrite it.", code="conflict") from None
        except FileNotFoundError:
            # The folder was removed or replaced while the bytes were written.
            raise DomainError("The folder changed while the file was written; retry.", code="conflict") from None
        os.fsync(self._dir_fd)
        self.published = True

    def open_for_read(self) -> int:
        """A read-only descriptor of the staged bytes (before ``publish``); the caller closes it."""
        try:
            return os.open(self._tmp_name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self._dir_fd)
        except FileNotFoundError:
            # As in publish(): the folder was removed or replaced while the bytes were written.
            raise DomainError("The folder changed while the file was written; retry.", code="conflict") from None


@contextmanager
def staged_file(*, root: Path, parts: tuple[str, ...], chunks: Iterable[bytes], max_bytes: int) -> Iterator[StagedFile]:
    """Write ``chunks`` to a temporary file beside ``root/parts``; removed unless published."""
    with parent_descriptor(root, parts, create=True) as dir_fd:
        final_name = parts[-1]
        tmp_name = f".{final_name[:200]}.{uuid.uuid4().hex}.part"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(tmp_name, flags, 0o644, dir_fd=dir_fd)
        except FileNotFoundError:
            raise DomainError("The folder was removed while the file was written; retry.", code="conflict") from None
        staged = None
        try:
            digest = hashlib.sha256()
            size = 0
            with os.fdopen(fd, "wb", closefd=True) as out:
                for chunk in chunks:
                    size += len(chunk)
                    if size > max_bytes:
                        raise DomainError(f"The file is over the limit of {max_bytes} bytes.", code="too_large")
                    digest.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            staged = StagedFile(
                size=size, sha256=digest.hexdigest(), _dir_fd=dir_fd, _tmp_name=tmp_name, _final_name=final_name
            )
            yield staged
        finally:
            if staged is None or not staged.published:
                with suppress(FileNotFoundError):
                    os.unlink(tmp_name, dir_fd=dir_fd)


def read_chunks(stream, *, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    while True:
        chunk = stream.read(chunk_bytes)
        if not chunk:
            return
        yield chunk


def iter_fd_range(fd: int, start: int, length: int) -> Iterator[bytes]:
    """Yield ``length`` bytes from ``start``, then close ``fd``."""
    try:
        offset = start
        remaining = length
        while remaining > 0:
            chunk = os.pread(fd, min(CHUNK_BYTES, remaining), offset)
            if not chunk:
                return
            offset += len(chunk)
            remaining -= len(chunk)
            yield chunk
    finally:
        os.close(fd)


async def aiter_fd_range(fd: int, start: int, length: int) -> AsyncIterator[bytes]:
    """``iter_fd_range`` for a response served under ASGI: each read in a worker thread, so the
    file goes out chunk by chunk. Given a sync iterator there, Django reads it whole into a list
    before sending the first byte (StreamingHttpResponse.__aiter__): a file's size in memory."""
    chunks = iter_fd_range(fd, start, length)
    try:
        while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
            yield chunk
    finally:
        chunks.close()  # its ``finally`` closes fd (the first read has begun by the time we get here)


def fd_range_content(request, fd: int, start: int, length: int) -> Iterator[bytes] | AsyncIterator[bytes]:
    """What a StreamingHttpResponse for this Django request should stream: async under ASGI (the
    server's path), sync under WSGI and the test client."""
    if isinstance(request, ASGIRequest):
        return aiter_fd_range(fd, start, length)
    return iter_fd_range(fd, start, length)


def hash_fd(fd: int) -> tuple[int, str]:
    """Size and sha256 of an open file, read from the start."""
    digest = hashlib.sha256()
    size = 0
    offset = 0
    while True:
        chunk = os.pread(fd, CHUNK_BYTES, offset)
        if not chunk:
            return size, digest.hexdigest()
        digest.update(chunk)
        size += len(chunk)
        offset += len(chunk)


__all__ = ["StagedFile", "UnsafePath", "hash_fd", "iter_fd_range", "read_chunks", "staged_file"]
