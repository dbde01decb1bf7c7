"""The hook's spool: requests it could not send, as JSON lines, sent first and in order next time.

``spool.jsonl`` is rewritten (temp file, rename) only by the process that holds ``spool.lock``
(``fcntl.flock``), so two hook processes never interleave or lose each other's lines. A process
that can't get the lock within its budget drops its records into ``spool.d/<time_ns>-<pid>.jsonl``
instead; the next holder appends those, oldest first, behind the spool. Every record keeps its
request's client id, so a replay the server has already seen is answered with the stored row.
"""

from __future__ import annotations

import fcntl
import os
import time

from switchyard_client.hook.lean_json import dumps, loads

Record = dict  # one request: method, path, body or file, params, on_404


class SpoolBusy(Exception):
    pass


def state_dir() -> str:
    return os.environ.get("SWITCHYARD_STATE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "switchyard")


def default_path() -> str:
    return os.environ.get("SWITCHYARD_SPOOL") or os.path.join(state_dir(), "spool.jsonl")


class _Held:
    """The lock, held from __enter__ to __exit__ (a class: contextlib costs an import)."""

    def __init__(self, lock_path: str, until: float):
        self.lock_path, self.until = lock_path, until

    def __enter__(self) -> None:
        os.makedirs(os.path.dirname(self.lock_path) or ".", exist_ok=True)
        self.fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= self.until:
                    os.close(self.fd)
                    raise SpoolBusy(self.lock_path) from None
                time.sleep(0.005)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


class Spool:
    def __init__(self, path: str | None = None):
        self.path = str(path or default_path())
        self.lock_path = self.path + ".lock"
        self.overflow_dir = self.path + ".d"

    def locked(self, *, until: float) -> _Held:
        """Hold the spool's lock; ``SpoolBusy`` if another process keeps it past ``until`` (monotonic)."""
        return _Held(self.lock_path, until)

    def read(self) -> list[Record]:
        """The spool then the overflow files, in order. Call with the lock held."""
        records = _read_lines(self.path)
        for extra in self._overflow_files():
            records += _read_lines(extra)
        return records

    def replace(self, records: list[Record]) -> None:
        """Make ``records`` the whole spool and drop the overflow files read. Call with the lock held."""
        overflow = self._overflow_files()
        if records:
            tmp = f"{self.path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.writelines(_line(r) for r in records)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        elif os.path.exists(self.path):
            os.unlink(self.path)
        for extra in overflow:
            try:  # noqa: SIM105 - contextlib is one more import in a process that lives for milliseconds
                os.unlink(extra)
            except FileNotFoundError:
                pass

    def overflow(self, records: list[Record]) -> str:
        """Keep records without the lock, for the next holder."""
        os.makedirs(self.overflow_dir, exist_ok=True)
        target = os.path.join(self.overflow_dir, f"{time.time_ns():020d}-{os.getpid()}.jsonl")
        with open(target + ".tmp", "w", encoding="utf-8") as fh:
            fh.writelines(_line(r) for r in records)
        os.replace(target + ".tmp", target)  # whole or absent: a reader never sees half a file
        return target

    def _overflow_files(self) -> list[str]:
        try:
            names = sorted(n for n in os.listdir(self.overflow_dir) if n.endswith(".jsonl"))
        except FileNotFoundError:
            return []
        return [os.path.join(self.overflow_dir, n) for n in names]


def _line(record: Record) -> str:
    return dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n"


def _read_lines(path: str) -> list[Record]:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return []
    records = []
    for line in text.splitlines():
        try:
            records.append(loads(line))
        except ValueError:
            continue  # a torn last line from a crash: the others still count
    return records
