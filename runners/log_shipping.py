"""A run's output, shipped by its runner in chunks (SPEC §8, ``POST /runs/{id}/log/``).

The bytes land in the run's session log (sessions_app/logs.py: ``LOGS_ROOT/orchestrator-sessions/
session-<id>/<agent slug>.log``), where the log API and the live session page already read.

Idempotent by offset, so a runner resends a chunk whose answer it never got without fear: the
file's size is where the next byte goes; a chunk wholly below it is already there (nothing is
written), one that straddles it adds only its bytes past the size, and one that starts past it
would leave a hole, so it is refused (409 with the size to resend from). The file is locked
(flock) from reading its size to the end of the write, so two requests for one run cannot both
append the same bytes; the bytes are fsynced before the answer says they are stored.

A body is up to RUNNER_LOG_CHUNK_MAX_BYTES (64 MiB) and is read as a stream (config/asgi_stream.py),
each piece appended as it comes and one fsync at the end, so a runner ships a large backlog in one
request; the disk is handed what has come every few MiB meanwhile, so that the fsync waits for the
tail only. A client that goes away mid-body gets no answer: the pieces already appended stay (the
run's own bytes at their own offsets, never acknowledged), and its resend from the offset it
still has skips them and appends the rest. Nothing is ever acknowledged before the fsync.
"""

import fcntl
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings

from config.api.errors import LEASE_LOST, DomainError
from config.safepaths import UnsafePath, parent_descriptor
from runners.models import Run, Runner
from runners.services import run_refuse_stale
from sessions_app.logs import session_log_parts

# A run just ended still takes its last chunk (the runner reports the exit before its final
# flush); a lost one does not: its runner lost the lease, and what it sends is refused.
SHIPPING_STATUSES = frozenset(
    {Run.Status.STARTING, Run.Status.RUNNING, Run.Status.SUCCEEDED, Run.Status.FAILED, Run.Status.CANCELLED}
)
# While a large body arrives, its bytes are handed to the disk in steps of this much (see
# _start_writeback): the fsync at its end then waits for the last step only.
WRITEBACK_EVERY = 4 * 1024 * 1024


def run_log_append(*, runner: Runner, run: Run, attempt: int, offset: int, chunks: Iterable[bytes]) -> int:
    """Append the body ``chunks`` (read lazily, only once the run is known to take them), which start
    at byte ``offset`` of the run's output; returns the log's new size."""
    run_refuse_stale(run, attempt)
    if run.runner_id != runner.pk:
        raise DomainError(f"Run {run.pk} is not held by this runner.", code="forbidden")
    if run.status == Run.Status.LOST:
        raise DomainError(
            f"Run {run.pk} was lost: its lease lapsed, and its log takes nothing more from this attempt.",
            code="conflict",
            extra={"code": LEASE_LOST, "run": run.pk, "attempt": run.attempt},
        )
    if run.status not in SHIPPING_STATUSES or run.session is None:
        raise DomainError(
            f"Run {run.pk} is {run.status} and has no session yet; report it starting first.",
            code="conflict",
            extra={"status": run.status},
        )
    parts = session_log_parts(session=run.session)
    if parts is None:
        raise DomainError(f"Session {run.session_id!r} cannot name a log file.", code="conflict")
    return _append_at(parts=parts, offset=offset, chunks=chunks, max_bytes=settings.RUNNER_LOG_CHUNK_MAX_BYTES)


def _start_writeback(fd: int, start: int, length: int) -> None:
    """Have the kernel start writing these appended bytes to disk now, without waiting for it, so
    that the fsync before the answer waits only for the last few: a large body's writeback overlaps
    its transfer. On Linux POSIX_FADV_DONTNEED starts the writeback of the range's dirty pages and
    evicts only clean ones, which freshly appended bytes are not."""
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, start, length, os.POSIX_FADV_DONTNEED)


def _append_at(*, parts: tuple[str, ...], offset: int, chunks: Iterable[bytes], max_bytes: int) -> int:
    root = Path(settings.LOGS_ROOT)
    root.mkdir(parents=True, exist_ok=True)
    try:
        with parent_descriptor(root, parts, create=True) as dir_fd:
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(parts[-1], flags, 0o644, dir_fd=dir_fd)
    except (UnsafePath, OSError) as exc:
        raise DomainError(f"The run's log file cannot be opened: {exc}", code="conflict") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DomainError("The run's log is not a regular file.", code="conflict")
        fcntl.flock(fd, fcntl.LOCK_EX)  # released when fd is closed
        size = os.fstat(fd).st_size
        if offset > size:
            raise DomainError(
                f"The log has {size} bytes; a chunk at offset {offset} would leave a gap. Resend from {size}.",
                code="conflict",
                extra={"offset": size},
            )
        at = offset  # where the next piece of the body sits in the run's output
        flushed = max(offset, size)  # where the bytes not yet handed to the disk start
        for chunk in chunks:
            if at + len(chunk) - offset > max_bytes:
                # What came before stays, unacknowledged (see the module's docstring).
                raise DomainError(f"A log chunk is at most {max_bytes} bytes.", code="too_large")
            rest = memoryview(chunk)[max(0, size - at) :]  # bytes the file already holds are skipped
            while rest:
                written = os.write(fd, rest)
                rest = rest[written:]
            at += len(chunk)
            if at - flushed >= WRITEBACK_EVERY:
                _start_writeback(fd, flushed, at - flushed)
                flushed = at
        if at > size:
            os.fsync(fd)
        return max(size, at)
    finally:
        os.close(fd)
