"""The telemetry relay's spool: each OTLP export an agent sent, on disk until the server has it.

One file per export in ``<root>/otlp-spool/``, named so that names sort in arrival order: a first
line of JSON (the signal, the body's content type and encoding, the agent's Authorization header,
the run whose key it was) and then the body as the agent sent it. A file is written under a
temporary name, fsynced, renamed and its folder fsynced before ``add`` returns, so an export the
relay answered survives a kill of the runner or of the machine; a temporary file left by a crash
was never answered and is removed. 0600: the header holds the run's key.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SUFFIX = ".export"
TMP_PREFIX = ".tmp-"


@dataclass(frozen=True)
class Export:
    name: str
    signal: str  # logs, metrics or traces
    content_type: str
    content_encoding: str
    authorization: str
    run: int | None  # the run whose key sent it, when it was one of this runner's runs
    body: bytes


class OtlpSpool:
    def __init__(self, folder: Path, *, clean: bool = True):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.counter = 0
        self.runs: dict[str, int | None] = {}  # name → run, of every export on disk
        self.sizes: dict[str, int] = {}
        for name in os.listdir(self.folder):
            path = self.folder / name
            if name.startswith(TMP_PREFIX):
                if clean:
                    with contextlib.suppress(OSError):
                        path.unlink()  # half written when its writer died: never answered
                continue
            if name.endswith(SUFFIX):
                header = _header(path)
                if header is None:
                    continue
                self.runs[name] = header.get("run")
                with contextlib.suppress(OSError):
                    self.sizes[name] = path.stat().st_size

    def bytes(self) -> int:
        with self.lock:
            return sum(self.sizes.values())

    def add(self, *, signal: str, content_type: str, content_encoding: str, authorization: str, run, body: bytes):
        """Write one export durably (OSError if the disk would not take it); returns its name."""
        header = {
            "signal": signal,
            "content_type": content_type,
            "content_encoding": content_encoding,
            "authorization": authorization,
            "run": run,
        }
        with self.lock:
            self.counter += 1
            name = f"{time.time_ns():020d}-{os.getpid()}-{self.counter:08d}{SUFFIX}"
        tmp = self.folder / (TMP_PREFIX + name)
        data = json.dumps(header, separators=(",", ":")).encode("utf-8") + b"\n" + body
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.folder / name)
            _fsync_folder(self.folder)  # the rename itself is durable, not only the bytes
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        with self.lock:
            self.runs[name] = run
            self.sizes[name] = len(data)
            self.changed.notify_all()
        return name

    def refresh(self) -> None:
        """Take in the exports another process wrote (the relay's keeper, otlp_keeper.py) and forget
        those another removed (the runner's forwarder, for the keeper's size count)."""
        with self.lock:
            known = set(self.runs)  # before the listing: a file added meanwhile is not taken for gone
        try:
            present = {n for n in os.listdir(self.folder) if n.endswith(SUFFIX) and not n.startswith(TMP_PREFIX)}
        except OSError:
            return
        found = {}
        for name in present - known:
            header = _header(self.folder / name)
            with contextlib.suppress(OSError):
                if header is not None:
                    found[name] = (header.get("run"), (self.folder / name).stat().st_size)
        with self.lock:
            gone = [name for name in known - present if name in self.runs]
            for name in gone:
                self.runs.pop(name, None)
                self.sizes.pop(name, None)
            for name, (run, size) in found.items():
                self.runs.setdefault(name, run)
                self.sizes.setdefault(name, size)
            if gone or found:
                self.changed.notify_all()

    def names(self) -> list[str]:
        with self.lock:
            return sorted(self.runs)

    def read(self, name: str) -> Export | None:
        """The export, or None when its file is gone or unreadable (it is then forgotten)."""
        try:
            data = (self.folder / name).read_bytes()
            line, body = data.split(b"\n", 1)
            header = json.loads(line)
            return Export(
                name=name,
                signal=str(header["signal"]),
                content_type=str(header["content_type"]),
                content_encoding=str(header.get("content_encoding") or ""),
                authorization=str(header.get("authorization") or ""),
                run=header.get("run") if isinstance(header.get("run"), int) else None,
                body=body,
            )
        except (OSError, ValueError, KeyError, TypeError):
            self.remove(name)
            return None

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.folder / name).unlink()
        with self.lock:
            self.runs.pop(name, None)
            self.sizes.pop(name, None)
            self.changed.notify_all()

    def wait_run_empty(self, run: int, timeout: float) -> bool:
        """True once no export of ``run`` is left; False if some still are after ``timeout`` seconds."""
        with self.lock:
            return self.changed.wait_for(lambda: run not in self.runs.values(), timeout)

    def wait_any(self, timeout: float) -> None:
        with self.lock:
            self.changed.wait_for(lambda: bool(self.runs), timeout)


def _header(path: Path) -> dict | None:
    try:
        with open(path, "rb") as fh:
            header = json.loads(fh.readline())
        return header if isinstance(header, dict) else None
    except (OSError, ValueError):
        return None


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
