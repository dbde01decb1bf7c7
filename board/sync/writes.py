"""The database half of sync-to-db: one batch of sessions, written in bulk.

Every function here expects its caller to hold a transaction and the sync lock
(``sync_lock``), so what it reads (existing sessions, tasks, open issues) cannot change
under it and a killed run leaves either the whole batch or none of it.
"""

from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db import connection
from django.db.models import Max

from board.live import board_push_tasks
from board.models import SyncedFile, SyncIssue, Task
from board.sync.files import DiskFile, FileContent
from board.sync.parse import ORCHESTRATOR, AgentState, OrchestratorState, SpecialistFailure
from config.side_effects import enqueue_task
from ledger.models import Event
from ledger.tasks import webhooks_dispatch_task
from ledger.webhooks import webhooks_enabled
from sessions_app.keys import agent_get_or_create
from sessions_app.models import Agent, AgentSession

RANK_STEP = 1024  # as board.services: spaced-out ranks, new cards at the end of their column
SYNC_SOURCE = "state_sync"  # AgentSession.metadata["source"] of the sessions sync owns
SYNC_LOCK_KEY = 0x53594E43  # "SYNC": the PostgreSQL advisory lock all sync runs share
BULK_BATCH = 500


def sync_lock() -> None:
    """Serialise sync runs for the rest of the transaction.

    On PostgreSQL a transaction-level advisory lock; SQLite's IMMEDIATE transactions
    already take the database's write lock at BEGIN.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [SYNC_LOCK_KEY])


def task_external_id(session_key: str, agent: str) -> str:
    return f"task-{session_key}-{agent}"


@dataclass
class FileOutcome:
    """What reading one changed file gave. ``kind``: parsed, same (content as last synced),
    deferred (half-written: retried next run) or broken (an issue)."""

    file: DiskFile
    kind: str
    content: FileContent | None = None
    state: AgentState | OrchestratorState | None = None
    error: str = ""

    @property
    def problems(self) -> list[str]:
        return list(self.state.problems) if self.state is not None else []


@dataclass
class SessionWork:
    session_key: str
    outcomes: list[FileOutcome] = field(default_factory=list)
    failures: list[SpecialistFailure] = field(default_factory=list)


@dataclass
class Seen:
    """A problem seen this run with one file: opens an issue or bumps the open one."""

    path: str
    source: str
    session_key: str
    error: str


@dataclass
class BatchResult:
    sessions_created: int = 0
    sessions_updated: int = 0
    agents_created: int = 0
    tasks_created: int = 0
    tasks_moved: int = 0
    tasks_updated: int = 0
    tasks_failed_from_logs: int = 0
    files_synced: int = 0
    files_rechecked: int = 0
    issues: list[Seen] = field(default_factory=list)
    clean_paths: list[str] = field(default_factory=list)
    kept: list[dict] = field(default_factory=list)


class AgentCache:
    """Agents by slug for one run; unknown agents are created, never skipped."""

    def __init__(self) -> None:
        self.by_slug: dict[str, Agent] = {}

    def ensure(self, slugs: set[str]) -> int:
        """Load or create every slug; returns how many were created."""
        missing = slugs - self.by_slug.keys()
        if not missing:
            return 0
        self.by_slug.update({agent.slug: agent for agent in Agent.objects.filter(slug__in=missing)})
        created = 0
        for slug in sorted(missing - self.by_slug.keys()):
            self.by_slug[slug] = agent_get_or_create(slug=slug)
            created += 1
        return created


def batch_write(*, works: list[SessionWork], agents: AgentCache, now: datetime) -> BatchResult:
    result = BatchResult()
    result.agents_created = agents.ensure(_slugs(works))
    # Row locks (in pk order, so two writers never wait on each other crosswise) keep an API
    # write to the same rows from landing between this read and the bulk UPDATE below.
    existing = AgentSession.objects.select_for_update().order_by("pk").in_bulk([w.session_key for w in works])
    usable = []
    for work in works:
        session = existing.get(work.session_key)
        if session is not None and (session.metadata or {}).get("source") != SYNC_SOURCE:
            # Same id as a session an agent opened through the API: not ours to change.
            for outcome in work.outcomes:
                result.issues.append(
                    _seen(
                        outcome.file,
                        f"session id {work.session_key!r} belongs to a session not made by sync; not synced",
                    )
                )
            continue
        usable.append(work)
    events: list[Event] = []
    _sessions_write(usable, existing, agents, now, result, events)
    _tasks_write(usable, agents, now, result, events)
    _synced_files_write(usable, now, result)
    for work in usable:
        for outcome in work.outcomes:
            if outcome.kind == "broken":
                result.issues.append(_seen(outcome.file, outcome.error))
            elif outcome.problems:
                result.issues.append(_seen(outcome.file, "; ".join(outcome.problems)))
                result.kept.extend({"path": outcome.file.path, "problem": p} for p in outcome.problems)
    events_record(events)
    return result


def _slugs(works: list[SessionWork]) -> set[str]:
    slugs = {ORCHESTRATOR}
    for work in works:
        slugs.update(o.file.agent for o in work.outcomes if o.kind == "parsed")
        slugs.update(f.agent for f in work.failures)
    return slugs


def _seen(file: DiskFile, error: str) -> Seen:
    return Seen(path=file.path, source=file.source, session_key=file.session_key, error=error)


def _event(name: str, subject_type: str, subject_id, payload: dict) -> Event:
    # The same row ledger.events.event_record writes, built for one bulk INSERT.
    return Event(name=name, subject_type=subject_type, subject_id=str(subject_id), actor="system", payload=payload)


def events_record(events: list[Event]) -> None:
    """``ledger.events.event_record`` for many events: one INSERT per BULK_BATCH rows, and the
    same webhook dispatch after commit for each, when a subscription is active."""
    Event.objects.bulk_create(events, batch_size=BULK_BATCH)
    if events and webhooks_enabled():
        for event in events:
            enqueue_task(webhooks_dispatch_task, event.pk)


def _mtime(outcome: FileOutcome) -> datetime:
    return datetime.fromtimestamp(outcome.content.mtime_ns / 1e9, tz=UTC)


# --- Sessions ---------------------------------------------------------------------------------

SESSION_FIELDS = ["status", "repo", "branch", "pr_url", "intent", "metadata", "started_at", "ended_at", "updated_at"]


def _sessions_write(works, existing, agents, now, result: BatchResult, events: list[Event]) -> None:
    created, updated = [], []
    for work in works:
        orchestrator = next((o for o in work.outcomes if o.kind == "parsed" and o.file.agent == ORCHESTRATOR), None)
        session = existing.get(work.session_key)
        if session is None:
            session = AgentSession(
                id=work.session_key,
                agent=agents.by_slug[ORCHESTRATOR],
                status=AgentSession.Status.PLANNING,
                metadata={"source": SYNC_SOURCE},
            )
            if orchestrator is not None:
                _session_apply(session, orchestrator, is_new=True)
            created.append(session)
            events.append(
                _event(
                    "session.started",
                    "session",
                    session.pk,
                    {"agent": ORCHESTRATOR, "intent": session.intent[:500], "status": session.status, "source": "sync"},
                )
            )
        elif orchestrator is not None:
            previous = session.status
            if _session_apply(session, orchestrator, is_new=False):
                session.updated_at = now
                updated.append(session)
                if session.status != previous:
                    name = "session.ended" if session.is_terminal else "session.status_changed"
                    events.append(
                        _event(
                            name,
                            "session",
                            session.pk,
                            {"from": previous, "to": session.status, "reason": "state sync"},
                        )
                    )
    AgentSession.objects.bulk_create(created, batch_size=BULK_BATCH)
    AgentSession.objects.bulk_update(updated, SESSION_FIELDS, batch_size=BULK_BATCH)
    result.sessions_created += len(created)
    result.sessions_updated += len(updated)


def _session_apply(session: AgentSession, outcome: FileOutcome, *, is_new: bool) -> bool:
    """Copy what orchestrator.json says onto ``session``; True if anything changed."""
    state: OrchestratorState = outcome.state
    before = {name: getattr(session, name) for name in SESSION_FIELDS if name != "updated_at"}
    for name, value in (
        ("repo", state.repo),
        ("branch", state.branch),
        ("pr_url", state.pr_url),
        ("intent", state.intent),
        ("started_at", state.started_at),
    ):
        if value is not None:
            setattr(session, name, value)
    metadata = dict(session.metadata or {})
    for key, value in (("team", state.team), ("priority_file", state.priority_file)):
        if value is not None:
            metadata[key] = value
    metadata["source"] = SYNC_SOURCE
    session.metadata = metadata
    if state.status is not None and state.status != session.status:
        if not is_new and session.is_terminal:
            # Terminal states are final (SPEC §3): the file is reported, the session kept.
            state.problems.append(f"the session is {session.status}, which is final; the file's status is not applied")
        else:
            session.status = state.status
    if session.status in AgentSession.TERMINAL:
        session.ended_at = state.ended_at or session.ended_at or _mtime(outcome)
    else:
        session.ended_at = None
    return any(getattr(session, name) != value for name, value in before.items())


# --- Tasks ------------------------------------------------------------------------------------


def _tasks_write(works, agents, now, result: BatchResult, events: list[Event]) -> None:
    wanted: list[tuple[str, str, FileOutcome | None, SpecialistFailure | None]] = []
    for work in works:
        for outcome in work.outcomes:
            if outcome.kind == "parsed" and outcome.file.agent != ORCHESTRATOR:
                wanted.append((work.session_key, outcome.file.agent, outcome, None))
        for failure in work.failures:
            wanted.append((work.session_key, failure.agent, None, failure))
    if not wanted:
        return
    ids = [task_external_id(session_key, agent) for session_key, agent, _, _ in wanted]
    rows = Task.objects.select_for_update().filter(external_id__in=ids).order_by("pk")
    existing = {task.external_id: task for task in rows}
    tops: dict[str, int] | None = None
    created: list[Task] = []
    updated: dict[int, Task] = {}
    update_fields: set[str] = set()
    moves: list[tuple[Task, str]] = []
    for external_id, (session_key, agent, outcome, failure) in zip(ids, wanted, strict=True):
        task = existing.get(external_id)
        is_new = task is None
        if is_new:
            task = Task(
                external_id=external_id,
                title=f"{agent} specialist in {session_key}",
                status=Task.Status.BACKLOG,
                assignee=agents.by_slug[agent],
                session_id=session_key,
                suggested_agent=agent,
            )
        previous_status = task.status
        changed = _task_apply(
            task, outcome, failure, agent=agent, session_key=session_key, agent_pk=agents.by_slug[agent].pk
        )
        if failure is not None:
            result.tasks_failed_from_logs += int(is_new or previous_status != Task.Status.FAILED)
        if is_new:
            if tops is None:
                tops = _rank_tops()
            tops[task.status] = tops.get(task.status, 0) + RANK_STEP
            task.rank = tops[task.status]
            created.append(task)
            existing[external_id] = task
        elif changed:
            task.updated_at = now
            updated[task.pk] = task
            update_fields.update(changed)
            if task.status != previous_status:
                moves.append((task, previous_status))
    Task.objects.bulk_create(created, batch_size=BULK_BATCH)
    if updated:
        Task.objects.bulk_update(list(updated.values()), sorted(update_fields | {"updated_at"}), batch_size=BULK_BATCH)
    board_push_tasks(task_ids=[task.pk for task in created] + list(updated))
    for task in created:
        events.append(_event("task.created", "task", task.pk, _task_payload(task)))
    for task, previous in moves:
        events.append(
            _event("task.moved", "task", task.pk, {**_task_payload(task), "from": previous, "to": task.status})
        )
    result.tasks_created += len(created)
    result.tasks_moved += len(moves)
    result.tasks_updated += len(updated) - len(moves)


def _task_payload(task: Task) -> dict:
    return {"title": task.title[:200], "status": task.status, "external_id": task.external_id, "source": "sync"}


def _rank_tops() -> dict[str, int]:
    return {
        row["status"]: row["top"] or 0 for row in Task.objects.values("status").annotate(top=Max("rank")).order_by()
    }


def _task_apply(task: Task, outcome, failure, *, agent: str, session_key: str, agent_pk: int) -> set[str]:
    """Set what the file (or the job log) says; the names of the fields that changed."""
    values: dict = {"assignee_id": agent_pk, "session_id": session_key, "suggested_agent": agent}
    if outcome is not None:
        state: AgentState = outcome.state
        values["source_file"] = outcome.file.path
        for name, value in (
            ("title", state.title),
            ("description", state.description),
            ("status", state.status),
            ("priority", state.priority),
            ("error", state.error),
            ("started_at", state.started_at),
            ("finished_at", state.completed_at),
            ("retries", state.retries),
        ):
            if value is not None:
                values[name] = value
        if state.llm_used:
            values["labels"] = [label for label in task.labels or [] if not label.startswith("llm:")] + [
                f"llm:{state.llm_used}"
            ]
    else:
        # A specialist the job log saw fail, with no state file of its own.
        if task.status != Task.Status.FAILED:
            values["status"] = Task.Status.FAILED
        if task.status != Task.Status.FAILED or not task.error:
            values["error"] = f"Specialist {failure.pid} failed (exit code: {failure.exit_code})"
    changed = set()
    for name, value in values.items():
        if getattr(task, name) != value:
            setattr(task, name, value)
            changed.add(name.removesuffix("_id") if name in ("assignee_id", "session_id") else name)
    return changed


# --- Synced files and issues ------------------------------------------------------------------


def _synced_files_write(works, now, result: BatchResult) -> None:
    rows = []
    for work in works:
        for outcome in work.outcomes:
            if outcome.kind == "same" or (outcome.kind == "parsed" and not outcome.problems):
                rows.append(synced_file_row(outcome.file, outcome.content, now))
                result.clean_paths.append(outcome.file.path)
    synced_files_upsert(rows)
    rechecked = sum(o.kind == "same" for work in works for o in work.outcomes)
    result.files_rechecked += rechecked
    result.files_synced += len(rows) - rechecked


def synced_file_row(file: DiskFile, content: FileContent, now: datetime) -> SyncedFile:
    return SyncedFile(
        path=file.path,
        source=file.source,
        session_key=file.session_key,
        size=content.size,
        mtime_ns=content.mtime_ns,
        sha256=content.sha256,
        last_synced_at=now,
    )


def synced_files_upsert(rows: list[SyncedFile]) -> None:
    if rows:
        SyncedFile.objects.bulk_create(
            rows,
            batch_size=BULK_BATCH,
            update_conflicts=True,
            unique_fields=["path"],
            update_fields=["source", "session_key", "size", "mtime_ns", "sha256", "last_synced_at"],
        )


def issues_record(seen: list[Seen], now: datetime) -> tuple[int, int]:
    """Open an issue for each file newly seen broken, bump the open ones; (opened, bumped)."""
    if not seen:
        return 0, 0
    latest = {item.path: item for item in seen}
    open_issues = {
        issue.path: issue for issue in SyncIssue.objects.filter(path__in=list(latest), resolved_at__isnull=True)
    }
    new, bumped = [], []
    for path, item in latest.items():
        issue = open_issues.get(path)
        if issue is None:
            new.append(
                SyncIssue(
                    path=path,
                    source=item.source,
                    session_key=item.session_key,
                    error=item.error,
                    first_seen_at=now,
                    last_seen_at=now,
                    occurrences=1,
                )
            )
        else:
            issue.error = item.error
            issue.last_seen_at = now
            issue.occurrences += 1  # safe as a read-modify-write: the caller holds the sync lock
            bumped.append(issue)
    SyncIssue.objects.bulk_create(new, batch_size=BULK_BATCH)
    SyncIssue.objects.bulk_update(bumped, ["error", "last_seen_at", "occurrences"], batch_size=BULK_BATCH)
    events_record(
        [
            _event("sync.issue", "sync_issue", issue.pk, {"path": issue.path, "error": issue.error[:500]})
            for issue in new
        ]
    )
    return len(new), len(bumped)


def issues_resolve(paths: list[str], now: datetime) -> int:
    if not paths:
        return 0
    return SyncIssue.objects.filter(path__in=paths, resolved_at__isnull=True).update(resolved_at=now)
