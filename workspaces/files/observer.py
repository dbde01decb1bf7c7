"""The file observer: watchdog (inotify) events in, artifact versions out.

Thin on purpose. watchdog's thread only sorts each event's path into a key and puts it on a
``SettleQueue``, which holds one entry per path (a burst of events for one file is one piece
of work) and hands it out when due; worker threads take keys and call
``reconcile.artifact_observe``, which waits for the file to settle, records it and backs it up.
A reconcile thread runs a full pass on start, every ``OBSERVER_RECONCILE_SECONDS``, and as soon
as events may have been lost: the kernel's queue overflowed (IN_Q_OVERFLOW), or ours did.

What makes work: a file closed after writing, or moved/renamed into place (never a bare open
or modify, so a file being written is looked at once, after its writer closes it); a folder
created or moved in (scanned, because files can land in it before its watch exists); a new
hard link. A change below ``STATE_DIR/session-*/`` queues sync-to-db for that session folder.
Deletions record nothing: an artifact's history stays.
"""

import heapq
import itertools
import logging
import os
import re
import stat
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import Error as DatabaseError
from django.db import connection
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers.inotify import InotifyObserver

from config.side_effects import enqueue_task, registered_task
from workspaces.files.reconcile import (
    BUSY,
    RECONCILE_QUIET_NS,
    FileMemory,
    Signature,
    Unregistered,
    WorkspaceDirectory,
    artifact_observe,
    candidate_parts,
    files_below,
    workspace_reconcile,
)

logger = logging.getLogger(__name__)

FILE, FOLDER, STATE = "file", "folder", "state"
# Why a file is queued, weakest first; a file queued for several reasons keeps the strongest.
LINKED = 0  # only an IN_CREATE: acted on for a new hard link; a new file waits for its close
FOUND = 1  # a reconcile found it changed but recent: it may still be open, so it must be quiet longer
WRITTEN = 2  # closed after writing, or moved into place
Key = tuple[str, str]
EVENT_FILTER = [
    FileClosedEvent,  # IN_CLOSE_WRITE
    FileMovedEvent,  # IN_MOVED_FROM / IN_MOVED_TO, paired or not
    DirMovedEvent,
    FileCreatedEvent,  # IN_CREATE: only a new hard link is acted on; a new file waits for its close
    DirCreatedEvent,
    FileDeletedEvent,
    DirDeletedEvent,
]
DEFAULT_QUEUE_LIMIT = 100_000
# A workspace folder is made before its row commits: events in a folder that is not (yet)
# registered are looked at again for this long before they are dropped.
UNREGISTERED_GRACE_SECONDS = 10.0
MAX_ATTEMPTS = 20
STATE_SYNC_TASK = "board.tasks.state_sync_task"  # sync-to-db of a session folder's state snapshot
GONE_LOG_PER_WINDOW, GONE_LOG_WINDOW_SECONDS = 20, 10
SESSION_STATE_FOLDER = re.compile(r"session-[A-Za-z0-9_-]+")  # as sync-to-db accepts them


@dataclass
class Pending:
    due: float  # time.monotonic() at which a worker may take it
    first_seen: float
    why: int = WRITTEN  # the strongest reason seen so far (LINKED < FOUND < WRITTEN)
    quiet_since: Signature | None = None  # what the file looked like when last found busy
    attempts: int = 0


class SettleQueue:
    """Keys waiting to be handled, at most one entry per key, handed out when due.

    A key is never handed to two workers at once: an event for a key being worked on is kept
    aside and queued again when the worker is done. Beyond ``limit`` keys, ``put`` refuses
    and sets ``overflowed``; the observer then falls back to a reconcile.
    """

    def __init__(self, *, limit: int = DEFAULT_QUEUE_LIMIT) -> None:
        self.limit = limit
        self.overflowed = False
        self._pending: dict[Key, Pending] = {}
        self._heap: list[tuple[float, int, Key, Pending]] = []
        self._taken: set[Key] = set()
        self._again: dict[Key, Pending] = {}
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._closed = False

    def put(self, key: Key, *, delay: float, why: int = WRITTEN) -> bool:
        now = time.monotonic()
        with self._cond:
            if self._closed:
                return True
            waiting = self._again.get(key) if key in self._taken else self._pending.get(key)
            if waiting is not None:
                # Coalesce, keeping the earlier due time: a file rewritten every few
                # milliseconds must still be looked at, not pushed back for ever.
                if why > waiting.why:
                    waiting.why = why
                    if why == WRITTEN and key not in self._taken and now + delay < waiting.due:
                        # A close for a file a reconcile queued: no need to wait as long.
                        waiting.due = now + delay
                        self._push(key, waiting)
                return True
            if len(self._pending) + len(self._again) >= self.limit:
                self.overflowed = True
                return False
            pending = Pending(due=now + delay, first_seen=now, why=why)
            if key in self._taken:
                self._again[key] = pending
            else:
                self._push(key, pending)
            return True

    def get(self, timeout: float) -> tuple[Key, Pending] | None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                while self._heap and self._stale(self._heap[0]):
                    heapq.heappop(self._heap)
                if self._heap and self._heap[0][0] <= now:
                    _, _, key, pending = heapq.heappop(self._heap)
                    del self._pending[key]
                    self._taken.add(key)
                    return key, pending
                wait = deadline - now
                if wait <= 0:
                    return None
                if self._heap:
                    wait = min(wait, self._heap[0][0] - now)
                self._cond.wait(wait)
        return None

    def retry(self, key: Key, pending: Pending, *, delay: float) -> None:
        with self._cond:
            self._taken.discard(key)
            newer = self._again.pop(key, None)
            if newer is not None:
                pending.why = max(pending.why, newer.why)
            pending.due = time.monotonic() + delay
            pending.attempts += 1
            self._push(key, pending)

    def done(self, key: Key) -> None:
        with self._cond:
            self._taken.discard(key)
            newer = self._again.pop(key, None)
            if newer is not None:
                self._push(key, newer)

    def idle(self) -> bool:
        with self._cond:
            return not (self._pending or self._taken or self._again)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._pending) + len(self._again)

    def _stale(self, entry: tuple[float, int, Key, Pending]) -> bool:
        due, _, key, pending = entry
        return self._pending.get(key) is not pending or pending.due != due

    def _push(self, key: Key, pending: Pending) -> None:
        self._pending[key] = pending
        heapq.heappush(self._heap, (pending.due, next(self._order), key, pending))
        self._cond.notify()


class _Handler(FileSystemEventHandler):
    def __init__(self, observer: "FileObserver") -> None:
        self.observer = observer

    def dispatch(self, event: FileSystemEvent) -> None:
        try:
            self.observer.route(event)
        except Exception:  # an exception here would stop watchdog's thread
            logger.exception("observer could not route %r", event)


class _KernelOverflowHook(logging.Handler):
    """watchdog rebuilds its watches after IN_Q_OVERFLOW but tells handlers nothing; it logs a
    warning, which is the one signal there is. Events were lost, so a reconcile must follow."""

    def __init__(self, callback) -> None:
        super().__init__(level=logging.WARNING)
        self.callback = callback

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" in record.getMessage():
            self.callback("the kernel's inotify queue overflowed")


class _Stopped(Exception):
    pass


class FileObserver:
    """Watches WORKSPACE_ROOT and STATE_DIR; ``start()``, then ``stop()``."""

    def __init__(
        self,
        *,
        workers: int | None = None,
        settle_ms: int | None = None,
        reconcile_seconds: float | None = None,
        queue_limit: int = DEFAULT_QUEUE_LIMIT,
        reconcile_on_start: bool = True,
    ) -> None:
        self.workspace_root = Path(settings.WORKSPACE_ROOT)
        self.state_dir = Path(settings.STATE_DIR)
        settle_ms = settings.OBSERVER_SETTLE_MS if settle_ms is None else settle_ms
        self.settle = settle_ms / 1000
        self.settle_ns = settle_ms * 1_000_000
        self.reconcile_seconds = reconcile_seconds or settings.OBSERVER_RECONCILE_SECONDS
        postgres = "postgresql" in settings.DATABASES["default"]["ENGINE"]
        # SQLite takes one writer at a time, so more threads would only wait on its lock.
        self.workers = workers or (4 if postgres else 2)
        self.reconcile_on_start = reconcile_on_start
        self.queue = SettleQueue(limit=queue_limit)
        self.directory = WorkspaceDirectory(self.workspace_root)
        self.memory = FileMemory()
        self.counts: Counter = Counter()
        self.last_reconcile = None
        self._counts_lock = threading.Lock()
        self._closing = threading.Event()
        self._stopping = threading.Event()
        self._reconcile_wanted = threading.Event()
        self._reconciling = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watchdog: InotifyObserver | None = None
        self._overflow_hook = _KernelOverflowHook(self.request_reconcile)
        self._state_task_missing_logged = False
        self._gone_window_started = 0.0
        self._gone_logged = 0

    # --- lifecycle

    def start(self) -> "FileObserver":
        self.workspace_root.mkdir(parents=True, exist_ok=True)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        logging.getLogger("watchdog.observers.inotify_c").addHandler(self._overflow_hook)
        self._watchdog = InotifyObserver(generate_full_events=True)
        handler = _Handler(self)
        for root in (self.workspace_root, self.state_dir):
            self._watchdog.schedule(handler, str(root), recursive=True, event_filter=EVENT_FILTER)
        self._watchdog.start()  # the watches exist when this returns
        for number in range(self.workers):
            self._spawn(self._work, f"observer-worker-{number}")
        self._spawn(self._reconcile_loop, "observer-reconcile")
        if self.reconcile_on_start:
            self.request_reconcile("start")
        logger.info(
            "observing %s and %s (%d workers, settle %d ms, reconcile every %d s)",
            self.workspace_root,
            self.state_dir,
            self.workers,
            self.settle * 1000,
            self.reconcile_seconds,
        )
        return self

    def stop(self, *, drain_seconds: float = 2.0) -> None:
        """Stop watching; give the workers ``drain_seconds`` to finish what is queued."""
        self._stopping.set()
        self._reconcile_wanted.set()
        if self._watchdog is not None:
            self._watchdog.stop()
            self._watchdog.join(timeout=10)
        deadline = time.monotonic() + drain_seconds
        while not self.queue.idle() and time.monotonic() < deadline:
            time.sleep(0.01)
        self._closing.set()
        self.queue.close()
        for thread in self._threads:
            thread.join(timeout=30)
        logging.getLogger("watchdog.observers.inotify_c").removeHandler(self._overflow_hook)
        if left := len(self.queue):
            logger.info("%d paths were still queued; the reconcile on the next start picks them up", left)

    def alive(self) -> bool:
        watching = self._watchdog is not None and self._watchdog.is_alive()
        return watching and all(thread.is_alive() for thread in self._threads)

    def idle(self) -> bool:
        """Nothing queued, being worked on or being reconciled (for tests and the bench)."""
        busy = self._reconcile_wanted.is_set() or self._reconciling.is_set()
        return not busy and self.queue.idle()

    def request_reconcile(self, reason: str) -> None:
        if not self._reconcile_wanted.is_set():
            logger.info("reconcile requested: %s", reason)
        self._reconcile_wanted.set()

    def _spawn(self, target, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    # --- events (watchdog's thread: no database, no file reads)

    def route(self, event: FileSystemEvent) -> None:
        kind = event.event_type
        src = os.fsdecode(event.src_path)
        dest = os.fsdecode(event.dest_path)
        if kind == "closed":
            self._changed(src)
        elif kind == "moved":
            if src:
                self._gone(src, folder=event.is_directory)
            if dest:
                self._changed(dest, folder=event.is_directory)
        elif kind == "created":
            self._changed(src, folder=event.is_directory, why=LINKED)
        elif kind == "deleted":
            self._gone(src, folder=event.is_directory)

    def _changed(self, path: str, *, folder: bool = False, why: int = WRITTEN) -> None:
        state = self._state_folder(path)
        if state is not None:
            self._put((STATE, state))
            return
        relative = self._relative(path)
        if relative is None:
            return
        if folder:
            if not any(part.startswith(".") for part in relative.split("/")):
                self._put((FOLDER, path))
        elif candidate_parts(relative) is not None:
            self._put((FILE, path), why=why)

    def _gone(self, path: str, *, folder: bool) -> None:
        state = self._state_folder(path)
        if state is not None:
            self._put((STATE, state))
            return
        relative = self._relative(path)
        if relative is not None and (folder or candidate_parts(relative) is not None):
            self._log_gone(path)

    def _log_gone(self, path: str) -> None:
        """One line per deletion, but not 20,000 when a folder is archived and removed."""
        now = time.monotonic()
        with self._counts_lock:
            self.counts["deleted"] += 1
            if now - self._gone_window_started >= GONE_LOG_WINDOW_SECONDS:
                self._gone_window_started, self._gone_logged = now, 0
            self._gone_logged += 1
            logged = self._gone_logged
        if logged <= GONE_LOG_PER_WINDOW:
            logger.info("%s was deleted or moved away; its artifact history is kept", path)
        elif logged == GONE_LOG_PER_WINDOW + 1:
            logger.info(
                "more deletions; the rest of them in the next %d s are counted, not logged", GONE_LOG_WINDOW_SECONDS
            )

    def _put(self, key: Key, *, why: int = WRITTEN) -> None:
        if not self.queue.put(key, delay=self.settle, why=why):
            self.request_reconcile(f"more than {self.queue.limit} paths queued")

    def _relative(self, path: str) -> str | None:
        root = str(self.workspace_root)
        return path[len(root) + 1 :] if path.startswith(root + os.sep) else None

    def _state_folder(self, path: str) -> str | None:
        """``session-<id>`` for a path below STATE_DIR/session-<id>/ that is not a dot-temporary."""
        root = str(self.state_dir)
        if not path.startswith(root + os.sep):
            return None
        parts = path[len(root) + 1 :].split("/")
        if not SESSION_STATE_FOLDER.fullmatch(parts[0]) or any(part.startswith(".") for part in parts):
            return None
        return parts[0]

    # --- workers

    def _work(self) -> None:
        try:
            while not self._closing.is_set():
                taken = self.queue.get(timeout=0.25)
                if taken is None:
                    continue
                key, pending = taken
                try:
                    again = self._handle(key, pending)
                except DatabaseError:
                    logger.exception("database error on %s; trying again", key[1])
                    connection.close()
                    again = 1.0
                except Exception:
                    logger.exception("observer failed on %s", key[1])
                    again = None
                if again is not None and pending.attempts < MAX_ATTEMPTS:
                    self.queue.retry(key, pending, delay=again)
                else:
                    self.queue.done(key)
        finally:
            connection.close()

    def _handle(self, key: Key, pending: Pending) -> float | None:
        """Handle one key; a number means: look again after that many seconds."""
        kind, value = key
        if kind == FILE:
            return self._file(value, pending)
        if kind == FOLDER:
            self._scan(value)
            return None
        return self._sync_state(value)

    def _file(self, path: str, pending: Pending) -> float | None:
        where = self.directory.locate(path)
        if where is None:
            return None
        if isinstance(where, Unregistered):
            if time.monotonic() - pending.first_seen < UNREGISTERED_GRACE_SECONDS:
                pending.attempts = 0  # bounded by the grace period instead
                return 0.5
            self.directory.warn_unregistered(where.folder)
            return None
        if pending.why == LINKED and not _is_extra_link(path):
            return None  # a new file: its close event will come
        observed = artifact_observe(
            workspace=where.workspace,
            parts=where.parts,
            settle_ns=max(self.settle_ns, RECONCILE_QUIET_NS) if pending.why == FOUND else self.settle_ns,
            memory=self.memory,
            quiet_since=pending.quiet_since,
        )
        if observed.outcome == BUSY:
            pending.quiet_since = observed.signature
            pending.attempts = 0  # still being written is not a failure
            return observed.retry_in
        self._count(observed.outcome, backed_up=observed.backed_up)
        return None

    def _scan(self, folder: str) -> None:
        relative = self._relative(folder)
        if relative is None or os.path.islink(folder):
            return
        for name in files_below(Path(folder), recursive=True):
            if not self.queue.put((FILE, os.path.join(folder, name)), delay=self.settle):
                self.request_reconcile(f"more than {self.queue.limit} paths queued")
                return

    def _sync_state(self, folder: str) -> float | None:
        # By name: the sync belongs to the board, above this layer; the observer only says
        # "this folder's snapshot changed" to whichever worker serves that task.
        try:
            registered_task(STATE_SYNC_TASK)
        except (ImportError, KeyError) as exc:
            if not self._state_task_missing_logged:
                self._state_task_missing_logged = True
                logger.warning("snapshot change in %s not synced: no task %s (%s)", folder, STATE_SYNC_TASK, exc)
            return None
        try:
            enqueue_task(STATE_SYNC_TASK, folder)
        except Exception:
            logger.exception("could not queue sync-to-db for %s; trying again", folder)
            return 5.0
        self._count("state_synced")
        return None

    def _count(self, outcome: str, *, backed_up: bool = False) -> None:
        with self._counts_lock:
            self.counts[outcome] += 1
            if backed_up:
                self.counts["backed_up"] += 1

    # --- reconcile

    def _reconcile_loop(self) -> None:
        next_pass = time.monotonic() + self.reconcile_seconds
        try:
            while not self._stopping.is_set():
                wanted = self._reconcile_wanted.wait(timeout=min(1.0, max(0.0, next_pass - time.monotonic())))
                if self._stopping.is_set():
                    return
                if not wanted and time.monotonic() < next_pass:
                    continue
                self._reconciling.set()
                self._reconcile_wanted.clear()
                try:
                    self._reconcile()
                finally:
                    self._reconciling.clear()
                next_pass = time.monotonic() + self.reconcile_seconds
        finally:
            connection.close()

    def _reconcile(self) -> None:
        # Cleared before the walk: an event after this point is queued again, and anything
        # before it is on disk for the walk to find.
        self.queue.overflowed = False
        try:
            report = workspace_reconcile(
                settle_ns=max(self.settle_ns, RECONCILE_QUIET_NS),
                memory=self.memory,
                defer=self._defer,
                progress=self._check_stop,
            )
        except _Stopped:
            return
        except DatabaseError:
            logger.exception("reconcile stopped by a database error; trying again")
            connection.close()
            self._reconcile_wanted.set()
            time.sleep(1.0)
            return
        self.last_reconcile = report
        with self._counts_lock:
            self.counts["reconciles"] += 1
        logger.info(
            "reconciled %d workspaces in %.1fs: %d files, %d recorded, %d backed up, %d still being written",
            report.workspaces,
            report.seconds,
            report.files,
            report.recorded,
            report.backed_up,
            report.busy,
        )

    def _defer(self, path: str) -> None:
        self._put((FILE, path), why=FOUND)

    def _check_stop(self, _count: int) -> None:
        if self._stopping.is_set():
            raise _Stopped


def _is_extra_link(path: str) -> bool:
    """A regular file with more than one name: a hard link made to existing bytes."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_nlink > 1
