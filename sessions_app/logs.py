"""A session's log, read by byte offset: for the log API and the live tail on the session page.

Which file: ``LOGS_ROOT/orchestrator-sessions/session-<id>/<agent slug>.log`` (SPEC §4), the
append-only log the session's own agent writes. A session id that already starts with
``session-`` (the folder name sync-to-db uses as the id) is the folder name itself. The job logs
under ``running-jobs/`` are not per session (one names many sessions, and they are read by
sync-to-db), and the workspace's ``workbench_activity/`` files are artifacts with their own
download; neither is "the session's log".

Logs can be large and keep growing, so nothing here reads more than one capped chunk: the file
is opened once (through ``config.safepaths``, never following a symlink), its size taken
from the descriptor, and at most ``limit`` bytes read with ``pread`` from the offset.
"""

import os
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from config.api.errors import DomainError
from config.safepaths import UnsafePath, clean_relative, open_file_beneath
from sessions_app.models import AgentSession

LOG_FOLDER = "orchestrator-sessions"
DEFAULT_CHUNK = 64 * 1024
MAX_CHUNK = 1024 * 1024
MAX_OFFSET = 2**63 - 1


@dataclass(frozen=True)
class LogChunk:
    offset: int  # where this chunk starts
    next_offset: int  # where the next read should start
    size: int  # the file's size when read; 0 when there is no log yet
    data: str  # the bytes decoded as UTF-8, undecodable bytes replaced
    exists: bool  # whether the log file exists yet


def session_log_parts(*, session: AgentSession) -> tuple[str, ...] | None:
    """The log's path under LOGS_ROOT, or None when the session id or agent slug can't name a file."""
    folder = session.pk if session.pk.startswith("session-") else f"session-{session.pk}"
    try:
        return clean_relative(f"{LOG_FOLDER}/{folder}/{session.agent.slug}.log")
    except UnsafePath:
        return None  # ids may hold ':', which is not a portable file name: such a session has no log file


def session_log_read(*, session: AgentSession, offset: int, limit: int = DEFAULT_CHUNK) -> LogChunk:
    """At most ``limit`` bytes of the session's log from byte ``offset``.

    An offset past the end (the log was truncated or rotated) answers an empty chunk whose
    ``next_offset`` is the current size, so a tailer carries on from the new end.
    """
    if not 0 <= offset <= MAX_OFFSET:
        raise DomainError(f"offset must be between 0 and {MAX_OFFSET}.")
    if not 1 <= limit <= MAX_CHUNK:
        raise DomainError(f"limit must be between 1 and {MAX_CHUNK}.")
    fd = _open_log(session)
    if fd is None:
        return LogChunk(offset=offset, next_offset=offset, size=0, data="", exists=False)
    try:
        size = os.fstat(fd).st_size
        if offset >= size:
            return LogChunk(offset=offset, next_offset=size, size=size, data="", exists=True)
        raw = os.pread(fd, min(limit, size - offset), offset)
    finally:
        os.close(fd)
    raw = _trim_partial_character(raw)
    return LogChunk(
        offset=offset,
        next_offset=offset + len(raw),
        size=size,
        data=raw.decode("utf-8", errors="replace"),
        exists=True,
    )


def session_log_tail_offset(*, session: AgentSession, window: int = DEFAULT_CHUNK) -> int:
    """Where to start reading to show the last ``window`` bytes (the page opens on the tail)."""
    fd = _open_log(session)
    if fd is None:
        return 0
    try:
        return max(0, os.fstat(fd).st_size - window)
    finally:
        os.close(fd)


def _open_log(session: AgentSession) -> int | None:
    parts = session_log_parts(session=session)
    if parts is None:
        return None
    try:
        return open_file_beneath(Path(settings.LOGS_ROOT), parts)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _trim_partial_character(raw: bytes) -> bytes:
    """Stop before a UTF-8 character cut by the chunk's end, so the next chunk starts with it whole
    (at the end of the file too: the writer may be appending its last bytes). A chunk that holds
    nothing but the cut character is kept, decoded with a replacement, so a read always advances."""
    for back in range(1, min(4, len(raw)) + 1):
        byte = raw[-back]
        if byte < 0x80:
            return raw  # ASCII: nothing cut
        if byte >= 0xC0:  # the lead byte of the last character
            needed = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            if needed > back and len(raw) > back:
                return raw[:-back]
            return raw
    return raw
