"""Sync-to-db: mirror ``STATE_DIR/session-*/`` (and failed specialists in the job logs) into
sessions, agents and tasks.

How a run goes:

1. List the files (``scandir`` + ``lstat``) and load, in one query, the signature each had
   when it was last synced. A file whose size and mtime are unchanged is skipped unread.
2. Read the changed files in batches of whole sessions (about ``BATCH_FILES`` files): a file
   whose sha256 is unchanged only gets its new mtime recorded; the others are parsed.
3. Write each batch in one transaction under the sync lock: sessions, agents, tasks, ledger
   events, the SyncedFile signatures of what was applied, and the issues of what was not.
   A run killed between batches leaves whole batches behind; the next run skips what they
   applied and does the rest, so it ends where one clean run would have.
4. Last, one small transaction: job logs marked read, problems found while listing,
   issues of files that are gone resolved, and one ``sync.completed`` event.

A file that can't be used never stops the run and never changes what the database holds;
it becomes a SyncIssue and is read again on every run until it is fixed. One younger than
``SYNC_SETTLE_SECONDS`` that doesn't parse is taken for half-written: left for the next run,
no issue. A run that found nothing to do writes nothing, not even an event (beat runs one
every ``SYNC_INTERVAL_SECONDS``; 1,440 empty events a day would drown the ledger).
"""

import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from itertools import groupby
from pathlib import Path
from typing import NamedTuple

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from board.models import SyncedFile, SyncIssue
from board.sync.files import (
    AGENT_NAME_RE,
    MAX_JOB_LOG_BYTES,
    DiskFile,
    FileUnreadable,
    FileUnstable,
    file_read,
    scan_job_logs,
    scan_state,
    session_key_valid,
)
from board.sync.parse import (
    MAX_SNAPSHOT_BYTES,
    ORCHESTRATOR,
    SnapshotError,
    SpecialistFailure,
    agent_state_parse,
    job_log_failures,
    load_document,
    orchestrator_state_parse,
)
from board.sync.writes import (
    AgentCache,
    BatchResult,
    FileOutcome,
    Seen,
    SessionWork,
    batch_write,
    issues_record,
    issues_resolve,
    sync_lock,
    synced_file_row,
    synced_files_upsert,
)
from config.api.errors import DomainError
from config.side_effects import after_commit, registered_task
from ledger.events import event_record

BATCH_FILES = 500
RACY_NS = 2_000_000_000  # coarser than any filesystem's timestamps we expect (FAT: 2 s)
KEPT_LISTED = 100  # the report lists this many kept fields and counts the rest
KEPT_IN_EVENT = 20
Progress = Callable[[str], None]


@dataclass
class SyncReport:
    session_key: str | None = None  # None: every session
    sessions: int = 0  # session folders in scope
    files: int = 0  # snapshot files found
    unchanged: int = 0  # skipped by size and mtime
    read: int = 0  # changed files read
    synced: int = 0  # files applied and recorded (SyncedFile)
    rechecked: int = 0  # touched but same sha256 as when synced: only the signature refreshed
    deferred: int = 0  # half-written or being written: retried next run, no issue
    job_logs_read: int = 0
    sessions_created: int = 0
    sessions_updated: int = 0
    agents_created: int = 0
    tasks_created: int = 0
    tasks_moved: int = 0
    tasks_updated: int = 0
    tasks_failed_from_logs: int = 0
    issues_opened: int = 0
    issues_seen_again: int = 0
    issues_resolved: int = 0
    fields_kept: int = 0  # fields kept because the file's value was not understood
    kept: list[dict] = field(default_factory=list)  # the first KEPT_LISTED of them, with path and problem
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        """Did the run change anything beyond refreshing signatures and seeing known issues again?"""
        return self.writes > self.issues_seen_again + self.rechecked

    @property
    def writes(self) -> int:
        return sum(
            (
                self.synced,
                self.rechecked,
                self.sessions_created,
                self.sessions_updated,
                self.agents_created,
                self.tasks_created,
                self.tasks_moved,
                self.tasks_updated,
                self.issues_opened,
                self.issues_seen_again,
                self.issues_resolved,
            )
        )

    def add(self, batch: BatchResult) -> None:
        for name in (
            "sessions_created",
            "sessions_updated",
            "agents_created",
            "tasks_created",
            "tasks_moved",
            "tasks_updated",
            "tasks_failed_from_logs",
        ):
            setattr(self, name, getattr(self, name) + getattr(batch, name))
        self.synced += batch.files_synced
        self.rechecked += batch.files_rechecked
        self.fields_kept += len(batch.kept)
        self.kept.extend(batch.kept[: max(0, KEPT_LISTED - len(self.kept))])

    def as_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        return (
            f"{self.files} files in {self.sessions} sessions: {self.unchanged} unchanged, {self.synced} synced, "
            f"{self.rechecked} rechecked, "
            f"{self.deferred} deferred; sessions +{self.sessions_created} ~{self.sessions_updated}; "
            f"tasks +{self.tasks_created} moved {self.tasks_moved} updated {self.tasks_updated} "
            f"(failed from job logs {self.tasks_failed_from_logs}); agents +{self.agents_created}; "
            f"issues +{self.issues_opened} again {self.issues_seen_again} resolved {self.issues_resolved}; "
            f"{self.seconds:.2f}s"
        )


def state_sync(*, session_key: str | None = None, force: bool = False, progress: Progress | None = None) -> SyncReport:
    """Mirror one session folder (``session-1770537842``) or all of them into the database.

    ``force`` reads and applies every file, changed or not (the files win over any edit made
    in the database since). Idempotent; takes the sync lock per batch (see ``sync_lock``).
    """
    if session_key is not None and not session_key_valid(session_key):
        raise DomainError(f"{session_key[:140]!r} is not a session folder name (session-<letters, digits, '-', '_'>).")
    clock = time.monotonic()
    say = progress or (lambda message: None)
    report = SyncReport(session_key=session_key)
    state_root, logs_root = Path(settings.STATE_DIR), Path(settings.LOGS_ROOT)

    files, problems, sessions = scan_state(state_root, session_key=session_key)
    logs, log_problems = scan_job_logs(logs_root)
    report.sessions, report.files = len(sessions), len(files)
    known = _known_signatures(session_key)
    changed = [f for f in files if force or not _unchanged(f, known)]
    report.unchanged = len(files) - len(changed)
    say(f"{len(files)} snapshot files in {len(sessions)} sessions; {len(changed)} changed")

    failures, log_outcomes = _job_logs_read(logs_root, logs, known, force=force, report=report)
    on_disk = {(f.session_key, f.agent) for f in files}
    failures = [
        f
        for f in failures
        if (session_key is None or f.session_key == session_key) and (f.session_key, f.agent) not in on_disk
    ]
    agents = AgentCache()
    done = 0
    for works in _batches(changed, failures):
        _batch_run(works, state_root, known, agents, force, report)
        done += sum(len(w.outcomes) for w in works)
        say(f"  {done}/{len(changed)} changed files done")

    report.seconds = round(time.monotonic() - clock, 3)
    _finish(
        report,
        session_key=session_key,
        problems=[Seen(p.path, p.source, p.session_key, p.error) for p in (*problems, *log_problems)],
        log_outcomes=log_outcomes,
        present={f.path for f in files} | {f.path for f in logs} | {p.path for p in (*problems, *log_problems)},
    )
    report.seconds = round(time.monotonic() - clock, 3)
    say(report.summary())
    return report


STATE_SYNC_TASK = "board.tasks.state_sync_task"


def state_sync_queue(*, session_key: str | None = None) -> str:
    """Queue ``state_sync_task`` once the caller's transaction commits; the Celery task id."""
    task_id = str(uuid.uuid4())
    # By name: board.tasks imports this module, never the other way round.
    after_commit(lambda: registered_task(STATE_SYNC_TASK).apply_async(args=[session_key], task_id=task_id))
    return task_id


class Known(NamedTuple):
    size: int
    mtime_ns: int
    sha256: str
    synced_ns: int  # when it was recorded


def _known_signatures(session_key: str | None) -> dict[str, Known]:
    rows = SyncedFile.objects.all()
    if session_key is not None:
        rows = rows.filter(Q(session_key=session_key) | Q(source=SyncedFile.Source.JOB_LOG))
    return {
        path: Known(size, mtime_ns, sha, int(synced_at.timestamp()) * 1_000_000_000 + synced_at.microsecond * 1000)
        for path, size, mtime_ns, sha, synced_at in rows.values_list(
            "path", "size", "mtime_ns", "sha256", "last_synced_at"
        )
    }


def _unchanged(file: DiskFile, known: dict[str, Known]) -> bool:
    """Same size and mtime as when synced, and that mtime was already old then.

    A file modified within RACY_NS of being synced may be modified again within the same
    timestamp tick with the same size (git's "racy clean" problem): such a file is read once
    more, and its sha256 decides.
    """
    row = known.get(file.path)
    return (
        row is not None
        and row.size == file.size
        and row.mtime_ns == file.mtime_ns
        and file.mtime_ns < row.synced_ns - RACY_NS
    )


def _batches(changed: list[DiskFile], failures: list[SpecialistFailure]):
    """Whole sessions, in name order, about BATCH_FILES files a batch."""
    by_session: dict[str, SessionWork] = {}
    for key, group in groupby(changed, key=lambda f: f.session_key):
        by_session[key] = SessionWork(key, outcomes=[FileOutcome(file=f, kind="pending") for f in group])
    for failure in failures:
        by_session.setdefault(failure.session_key, SessionWork(failure.session_key)).failures.append(failure)
    batch, size = [], 0
    for key in sorted(by_session):
        batch.append(by_session[key])
        size += max(1, len(by_session[key].outcomes))
        if size >= BATCH_FILES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _batch_run(works, state_root: Path, known, agents: AgentCache, force: bool, report: SyncReport) -> None:
    # Reading and parsing happen before the transaction, so the lock is held only for writes.
    for work in works:
        for outcome in work.outcomes:
            _state_file_read(state_root, outcome, known, force=force)
            report.read += 1
            report.deferred += outcome.kind == "deferred"
    now = timezone.now()
    with transaction.atomic():
        sync_lock()
        result = batch_write(works=works, agents=agents, now=now)
        opened, bumped = issues_record(result.issues, now)
        resolved = issues_resolve(result.clean_paths, now)
    report.add(result)
    report.issues_opened += opened
    report.issues_seen_again += bumped
    report.issues_resolved += resolved


def _state_file_read(root: Path, outcome: FileOutcome, known, *, force: bool) -> None:
    file = outcome.file
    try:
        outcome.content = file_read(root, file, max_bytes=MAX_SNAPSHOT_BYTES)
    except FileUnstable:
        outcome.kind = "deferred"
        return
    except FileUnreadable as exc:
        outcome.kind, outcome.error = "broken", str(exc)
        return
    previous = known.get(file.path)
    if not force and previous is not None and previous.sha256 == outcome.content.sha256:
        outcome.kind = "same"  # touched, not changed: record the new mtime only
        return
    try:
        document = load_document(outcome.content.raw)
    except SnapshotError as exc:
        age_ns = time.time_ns() - outcome.content.mtime_ns
        if age_ns < settings.SYNC_SETTLE_SECONDS * 1_000_000_000:
            outcome.kind = "deferred"  # still being written, most likely: look again next run
        else:
            outcome.kind, outcome.error = "broken", str(exc)
        return
    try:
        parse = orchestrator_state_parse if file.agent == ORCHESTRATOR else agent_state_parse
        outcome.state, outcome.kind = parse(document), "parsed"
    except SnapshotError as exc:
        outcome.kind, outcome.error = "broken", str(exc)


def _job_logs_read(root: Path, logs: list[DiskFile], known, *, force: bool, report: SyncReport):
    """Failures recorded in the changed job logs, and what reading each log gave."""
    failures: list[SpecialistFailure] = []
    outcomes: list[FileOutcome] = []
    for log in logs:
        if not force and _unchanged(log, known):
            continue
        outcome = FileOutcome(file=log, kind="parsed")
        outcomes.append(outcome)
        report.job_logs_read += 1
        try:
            outcome.content = file_read(root, log, max_bytes=MAX_JOB_LOG_BYTES, append_only=True)
        except FileUnstable:
            outcome.kind = "deferred"  # appended to while read: read it all again next run
            continue
        except FileUnreadable as exc:
            outcome.kind, outcome.error = "broken", str(exc)
            continue
        found = job_log_failures(outcome.content.raw.decode("utf-8", "replace"))
        bad = sorted({f.agent for f in found if not AGENT_NAME_RE.match(f.agent)})
        if bad:
            outcome.kind = "broken"
            outcome.error = "specialists with names that are not agent names: " + ", ".join(repr(b[:64]) for b in bad)
        failures.extend(f for f in found if AGENT_NAME_RE.match(f.agent))
    return failures, outcomes


def _finish(report: SyncReport, *, session_key, problems: list[Seen], log_outcomes, present: set[str]) -> None:
    now = timezone.now()
    seen = list(problems)
    clean_logs = []
    for outcome in log_outcomes:
        if outcome.kind == "broken":
            seen.append(Seen(outcome.file.path, outcome.file.source, "", outcome.error))
        elif outcome.kind == "parsed":
            clean_logs.append(outcome)
    open_issues = SyncIssue.objects.filter(resolved_at__isnull=True)
    if session_key is not None:
        open_issues = open_issues.filter(Q(session_key=session_key) | Q(path=session_key))
    gone = [path for path in open_issues.values_list("path", flat=True) if path not in present]
    if session_key is not None:
        clean_logs = []  # only a full run applied every session a log names: read them again next time
    if not (seen or clean_logs or gone or report.writes):
        return
    with transaction.atomic():
        sync_lock()
        if clean_logs:
            synced_files_upsert([synced_file_row(o.file, o.content, now) for o in clean_logs])
            report.issues_resolved += issues_resolve([o.file.path for o in clean_logs], now)
        opened, bumped = issues_record(seen, now)
        report.issues_opened += opened
        report.issues_seen_again += bumped
        report.issues_resolved += issues_resolve(gone, now)
        if report.changed:
            event_record(
                name="sync.completed",
                subject_type="sync",
                subject_id=session_key or "all",
                payload={
                    **{k: v for k, v in report.as_dict().items() if k != "kept"},
                    "kept": report.kept[:KEPT_IN_EVENT],
                },
            )
