"""Finding and reading the files sync-to-db mirrors: ``STATE_DIR/session-*/*.json`` and
``LOGS_ROOT/running-jobs/job-*.log``.

Listing uses ``os.scandir`` and ``lstat`` only, so a run over 10,000 unchanged files costs
one stat each. Every name read from disk goes through ``clean_relative`` and every file is
opened with ``open_file_beneath`` (no symlink is followed, anywhere on the way).
"""

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from board.models import SyncedFile
from config.safepaths import UnsafePath, clean_relative, open_file_beneath

SESSION_DIR_RE = re.compile(r"^session-[A-Za-z0-9][A-Za-z0-9_-]{0,119}$")
AGENT_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
JOB_LOG_RE = re.compile(r"^job-[A-Za-z0-9][A-Za-z0-9._-]*\.log$")
JOB_LOGS_FOLDER = "running-jobs"
SKIPPED_STATE_FILES = frozenset({"session.json"})
MAX_JOB_LOG_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class DiskFile:
    path: str  # relative to its root; the key of SyncedFile and SyncIssue
    parts: tuple[str, ...]
    source: str  # SyncedFile.Source
    session_key: str  # "" for job logs
    agent: str  # the file's agent slug ("orchestrator" for orchestrator.json); "" for job logs
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class DiskProblem:
    """Something on disk that can't be synced at all: a symlink, a name that is not safe."""

    path: str
    source: str
    session_key: str
    error: str


def _problem(path: str, source: str, session_key: str, error: str) -> DiskProblem:
    return DiskProblem(_printable(path), source, session_key, error)


@dataclass(frozen=True)
class FileContent:
    raw: bytes
    sha256: str
    size: int
    mtime_ns: int


class FileUnstable(Exception):
    """The file changed while it was read (a writer is busy with it): try again next run."""


class FileUnreadable(Exception):
    """The file can't be opened or read safely; the message says why."""


def session_key_valid(name: str) -> bool:
    return bool(SESSION_DIR_RE.match(name))


def scan_state(root: Path, *, session_key: str | None = None) -> tuple[list[DiskFile], list[DiskProblem], set[str]]:
    """The snapshot files under ``root`` (of one session, or all), problems, and the session
    folders seen. Entries not named ``session-*`` (``agent-service.db``…) are not ours: skipped."""
    files: list[DiskFile] = []
    problems: list[DiskProblem] = []
    sessions: set[str] = set()
    if session_key is not None:
        candidates = [session_key]
    else:
        candidates = sorted(name for name in _names(root) if name.startswith("session-"))
    for name in candidates:
        folder = root / name
        try:
            info = folder.lstat()
        except FileNotFoundError:
            continue
        except OSError as exc:
            problems.append(_problem(name, SyncedFile.Source.STATE, "", f"cannot read the folder: {exc.strerror}"))
            continue
        if stat.S_ISLNK(info.st_mode):
            problems.append(
                _problem(name, SyncedFile.Source.STATE, "", "the session folder is a symbolic link; not followed")
            )
            continue
        if not stat.S_ISDIR(info.st_mode):
            continue
        if not session_key_valid(name) or _unsafe(name):
            problems.append(
                _problem(
                    name,
                    SyncedFile.Source.STATE,
                    "",
                    "not a valid session folder name (session-<letters, digits, '-', '_'>)",
                )
            )
            continue
        sessions.add(name)
        _scan_session(root, name, files, problems)
    return files, problems, sessions


def _scan_session(root: Path, session_key: str, files: list[DiskFile], problems: list[DiskProblem]) -> None:
    try:
        entries = sorted(os.scandir(root / session_key), key=lambda e: e.name)
    except OSError as exc:
        problems.append(
            _problem(session_key, SyncedFile.Source.STATE, session_key, f"cannot list the folder: {exc.strerror}")
        )
        return
    for entry in entries:
        name = entry.name
        if not name.endswith(".json") or name.startswith(".") or name in SKIPPED_STATE_FILES:
            continue  # temporary names of atomic writers, hidden files, session.json
        path = f"{session_key}/{name}"
        if entry.is_symlink():
            problems.append(_problem(path, SyncedFile.Source.STATE, session_key, "a symbolic link; not followed"))
            continue
        try:
            parts = clean_relative(path)
        except UnsafePath as exc:
            problems.append(_problem(path, SyncedFile.Source.STATE, session_key, exc.message))
            continue
        agent = name[: -len(".json")].lower()
        if not AGENT_NAME_RE.match(agent):
            problems.append(
                _problem(
                    path,
                    SyncedFile.Source.STATE,
                    session_key,
                    "the file name is not an agent name (letters, digits, '-', '_', at most 64)",
                )
            )
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue  # removed since the listing
        if not stat.S_ISREG(info.st_mode):
            continue
        files.append(DiskFile(path, parts, SyncedFile.Source.STATE, session_key, agent, info.st_size, info.st_mtime_ns))


def scan_job_logs(root: Path) -> tuple[list[DiskFile], list[DiskProblem]]:
    files: list[DiskFile] = []
    problems: list[DiskProblem] = []
    folder = root / JOB_LOGS_FOLDER
    for name in sorted(_names(folder)):
        if not JOB_LOG_RE.match(name):
            continue  # job-*.json metadata and anything else
        path = f"{JOB_LOGS_FOLDER}/{name}"
        try:
            info = (folder / name).lstat()
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(info.st_mode):
            problems.append(_problem(path, SyncedFile.Source.JOB_LOG, "", "a symbolic link; not followed"))
            continue
        if not stat.S_ISREG(info.st_mode):
            continue
        parts = clean_relative(path)  # the pattern above already admits only safe names
        files.append(DiskFile(path, parts, SyncedFile.Source.JOB_LOG, "", "", info.st_size, info.st_mtime_ns))
    return files, problems


def file_read(root: Path, file: DiskFile, *, max_bytes: int, append_only: bool = False) -> FileContent:
    """The file's bytes and the signature they had, read without following any symlink.

    A file that changes while it is read raises FileUnstable, except an ``append_only`` one
    (a log): its first ``st_size`` bytes, as stat'ed before the read, are still good.
    """
    try:
        fd = open_file_beneath(root, file.parts)
    except FileNotFoundError:
        raise FileUnstable("removed while the sync ran") from None
    except UnsafePath as exc:
        raise FileUnreadable(exc.message) from None
    except OSError as exc:
        raise FileUnreadable(f"cannot open: {exc.strerror}") from None
    try:
        before = os.fstat(fd)
        if before.st_size > max_bytes:
            raise FileUnreadable(f"larger than {max_bytes} bytes")
        chunks, left = [], before.st_size if append_only else max_bytes + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1024 * 1024))):
            chunks.append(chunk)
            left -= len(chunk)
        after = before if append_only else os.fstat(fd)
    except OSError as exc:
        raise FileUnreadable(f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    if (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns) or len(raw) != after.st_size:
        raise FileUnstable("changed while it was read")
    return FileContent(raw=raw, sha256=hashlib.sha256(raw).hexdigest(), size=after.st_size, mtime_ns=after.st_mtime_ns)


def _names(folder: Path) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return [entry.name for entry in entries]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _unsafe(name: str) -> bool:
    try:
        clean_relative(name)
    except UnsafePath:
        return True
    return False


def _printable(path: str) -> str:
    """A path that can be stored and shown even when it is not valid Unicode."""
    return path.encode("utf-8", "backslashreplace").decode("utf-8")[:500]
