"""Reads about sync-to-db that the API, the admin and ``sync_state`` share: issues and drift."""

from dataclasses import asdict, dataclass, field
from pathlib import Path

from django.conf import settings
from django.db.models import Q, QuerySet

from board.models import SyncedFile, SyncIssue, Task
from board.sync.files import FileUnreadable, FileUnstable, file_read, scan_state
from board.sync.parse import (
    MAX_SNAPSHOT_BYTES,
    ORCHESTRATOR,
    SnapshotError,
    agent_state_parse,
    load_document,
    orchestrator_state_parse,
)
from board.sync.writes import task_external_id
from sessions_app.models import AgentSession


def sync_issue_list(*, resolved: bool | None = False, session_key: str | None = None) -> QuerySet[SyncIssue]:
    """Issues, newest seen first: open ones by default, resolved ones, or all (``None``)."""
    issues = SyncIssue.objects.order_by("-last_seen_at", "-id")
    if resolved is not None:
        issues = issues.filter(resolved_at__isnull=not resolved)
    if session_key:
        issues = issues.filter(Q(session_key=session_key) | Q(path=session_key))
    return issues


@dataclass
class SyncDrift:
    """Where the files and the database disagree.

    ``missing_files``: synced files that are gone from disk (their task or session stays).
    ``unsynced_files``: files on disk not applied yet (new, changed, or with an open issue).
    ``status_mismatches``: files applied and unchanged since, whose status the database no
    longer shows (someone moved the card, or a status was kept as final).
    """

    session_key: str | None = None
    files: int = 0
    missing_files: list[dict] = field(default_factory=list)
    unsynced_files: list[dict] = field(default_factory=list)
    status_mismatches: list[dict] = field(default_factory=list)
    open_issues: int = 0

    @property
    def clean(self) -> bool:
        return not (self.missing_files or self.unsynced_files or self.status_mismatches or self.open_issues)

    def as_dict(self) -> dict:
        return asdict(self)


def sync_drift(*, session_key: str | None = None) -> SyncDrift:
    """Compare the snapshot files with the database. Reads every synced file (to compare
    statuses), so it costs about one full read of STATE_DIR: a report, not a hot path."""
    root = Path(settings.STATE_DIR)
    files, _, _ = scan_state(root, session_key=session_key)
    synced = SyncedFile.objects.filter(source=SyncedFile.Source.STATE)
    if session_key is not None:
        synced = synced.filter(session_key=session_key)
    signatures = {row.path: row for row in synced}
    issues = dict(sync_issue_list(session_key=session_key).values_list("path", "error"))
    drift = SyncDrift(session_key=session_key, files=len(files), open_issues=len(issues))

    on_disk = {f.path for f in files}
    gone = [row for path, row in sorted(signatures.items()) if path not in on_disk]
    tasks = _tasks_by_external_id([task_external_id(row.session_key, _agent_of(row.path)) for row in gone])
    sessions = AgentSession.objects.in_bulk([row.session_key for row in gone if _agent_of(row.path) == ORCHESTRATOR])
    for row in gone:
        agent = _agent_of(row.path)
        external_id = "" if agent == ORCHESTRATOR else task_external_id(row.session_key, agent)
        held = sessions.get(row.session_key) if agent == ORCHESTRATOR else tasks.get(external_id)
        drift.missing_files.append(
            {
                "path": row.path,
                "session": row.session_key,
                "external_id": external_id,
                "db_status": held.status if held is not None else "",
                "last_synced_at": row.last_synced_at.isoformat(),
            }
        )

    applied = []
    for file in files:
        row = signatures.get(file.path)
        if row is None or (row.size, row.mtime_ns) != (file.size, file.mtime_ns):
            reason = "new" if row is None else "changed"
            if file.path in issues:
                reason = "issue"
            drift.unsynced_files.append(
                {"path": file.path, "session": file.session_key, "reason": reason, "error": issues.get(file.path, "")}
            )
        else:
            applied.append(file)
    drift.status_mismatches = _status_mismatches(root, applied)
    return drift


def _status_mismatches(root: Path, files) -> list[dict]:
    tasks = _tasks_by_external_id([task_external_id(f.session_key, f.agent) for f in files if f.agent != ORCHESTRATOR])
    sessions = AgentSession.objects.in_bulk([f.session_key for f in files if f.agent == ORCHESTRATOR])
    mismatches = []
    for file in files:
        try:
            document = load_document(file_read(root, file, max_bytes=MAX_SNAPSHOT_BYTES).raw)
            if file.agent == ORCHESTRATOR:
                file_status, row = orchestrator_state_parse(document).status, sessions.get(file.session_key)
            else:
                file_status = agent_state_parse(document).status
                row = tasks.get(task_external_id(file.session_key, file.agent))
        except (FileUnreadable, FileUnstable, SnapshotError):
            continue  # changed since the listing, or broken: the next sync deals with it
        db_status = row.status if row is not None else ""
        if file_status is not None and file_status != db_status:
            mismatches.append(
                {
                    "path": file.path,
                    "session": file.session_key,
                    "external_id": "" if file.agent == ORCHESTRATOR else task_external_id(file.session_key, file.agent),
                    "file_status": file_status,
                    "db_status": db_status,
                }
            )
    return mismatches


def _tasks_by_external_id(ids: list[str]) -> dict[str, Task]:
    return {task.external_id: task for task in Task.objects.filter(external_id__in=ids).only("external_id", "status")}


def _agent_of(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".json").lower()
