"""What keeps `manage.py serve`'s children from outliving it, and two serves off one var/ folder.

A supervisor killed with SIGKILL runs no cleanup: its web server, worker, beat and observer went on
as orphans, and the next `make run` looped on "address already in use" beside a second beat and a
second observer. Two kernel mechanisms close that, neither of which needs the supervisor to run:

- every child asks for a parent-death signal (Linux ``prctl(PR_SET_PDEATHSIG)``): the kernel sends
  it SIGTERM the moment the supervisor's thread that started it dies, however it dies;
- the supervisor holds an ``flock`` on ``var/serve.lock`` while it runs. The kernel drops it when
  the process dies, so a second serve refuses while the first lives and starts once it is gone.
"""

import ctypes
import errno
import fcntl
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

PR_SET_PDEATHSIG = 1  # from <sys/prctl.h>
LOCK_NAME = "serve.lock"


class ServeAlreadyRunning(Exception):
    """Another serve holds the lock; ``holder`` is what it wrote there (pid, host, port)."""

    def __init__(self, lock_path: Path, holder: dict):
        self.lock_path = lock_path
        self.holder = holder
        pid, url = holder.get("pid", "?"), f"http://{holder.get('host', '?')}:{holder.get('port', '?')}/"
        super().__init__(
            f"another `manage.py serve` is already running over {lock_path.parent} (pid {pid}, web on {url}). "
            f"Stop it first (Ctrl-C in its terminal, or `kill {pid}`), or give this one its own SWITCHYARD_VAR_DIR."
        )


class ServeLock:
    """An exclusive, non-blocking flock on ``<var>/serve.lock``, held for the life of the process.

    The file's descriptor is not inheritable (Python's default), so the children never hold it: a
    dead supervisor frees the lock even while a child is still shutting down.
    """

    def __init__(self, var_dir: Path):
        self.path = Path(var_dir) / LOCK_NAME
        self._file = None

    def acquire(self, *, host: str, port: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held until release()
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            handle.seek(0)
            holder = _parse(handle.read())
            handle.close()
            raise ServeAlreadyRunning(self.path, holder) from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "host": host, "port": port}))
        handle.flush()
        self._file = handle

    def check(self) -> None:
        """Raise ServeAlreadyRunning if a serve holds the lock now; else nothing (the lock is taken and
        dropped at once, the file left as it was). For what runs before serve (setup_demo under `make
        run`): a second `make run` must refuse before it rewrites the files the running one reads."""
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                raise ServeAlreadyRunning(self.path, _parse(handle.read())) from None
            fcntl.flock(handle, fcntl.LOCK_UN)

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing the last descriptor drops the flock
            self._file = None


def _parse(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` for Popen: the child gets ``sig`` when the calling process dies.

    libc is loaded here, in the parent, so the forked child only makes two system calls before exec.
    If the parent died between the fork and the prctl, the signal would never come: the child
    checks its parent is still the one that forked it, and ends itself if not. None where Linux's
    prctl is not available (the lock above still refuses a second serve there).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), sig)

    return preexec
