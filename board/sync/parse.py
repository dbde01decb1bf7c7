"""Reading the agent-service's state snapshots and job logs (SPEC §5) into plain values.

Nothing here touches the database. A document that cannot be used at all raises
``SnapshotError`` (the file becomes a sync issue and nothing of it is applied); a field that
is readable but not understood (an unknown status word or priority) is a *problem*: the rest
of the document is applied, that field keeps its previous value, and the file gets an issue.
Absent and ``null`` fields never overwrite what the database holds.
"""

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from board.models import Task
from board.services import priority_normalise
from config.api.errors import DomainError
from config.redaction import redact_text
from sessions_app.models import AgentSession

ORCHESTRATOR = "orchestrator"
MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024
TITLE_MAX = 500

# Status words of the agent-service, normalised (lower case, '-' and ' ' read as '_').
TASK_STATUS_WORDS: dict[str, str] = {
    "in_progress": Task.Status.IN_PROGRESS,
    "running": Task.Status.IN_PROGRESS,
    "completed": Task.Status.DONE,
    "success": Task.Status.DONE,
    "failed": Task.Status.FAILED,
    "error": Task.Status.FAILED,
    "blocked": Task.Status.BLOCKED,
    "pending": Task.Status.READY,
    "waiting": Task.Status.READY,
}
# The same words for the orchestrator's own status, read as a session status.
SESSION_STATUS_OF_TASK_STATUS: dict[str, str] = {
    Task.Status.READY: AgentSession.Status.PLANNING,
    Task.Status.IN_PROGRESS: AgentSession.Status.RUNNING,
    Task.Status.DONE: AgentSession.Status.COMPLETED,
    Task.Status.FAILED: AgentSession.Status.FAILED,
    Task.Status.BLOCKED: AgentSession.Status.WAITING_FOR_INPUT,
}


class SnapshotError(Exception):
    """The document cannot be used: not JSON, not an object, or a field of the wrong type."""


@dataclass
class AgentState:
    """What one ``<agent>.json`` says about its task. None means "not said": keep the old value."""

    title: str | None = None
    description: str | None = None
    status: str | None = None  # a Task.Status, or None when absent or not understood
    priority: str | None = None
    llm_used: str | None = None
    error: str | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    retries: int | None = None
    problems: list[str] = field(default_factory=list)


@dataclass
class OrchestratorState:
    team: str | None = None
    repo: str | None = None
    branch: str | None = None
    priority_file: str | None = None
    pr_url: str | None = None
    intent: str | None = None
    status: str | None = None  # an AgentSession.Status
    started_at: datetime | None = None
    ended_at: datetime | None = None
    problems: list[str] = field(default_factory=list)


def status_word_normalise(word: str) -> str:
    return word.strip().lower().replace("-", "_").replace(" ", "_")


def task_status_of(word: str) -> str | None:
    """The board column a status word maps to, or None for a word outside SPEC §5."""
    return TASK_STATUS_WORDS.get(status_word_normalise(word))


def load_document(raw: bytes) -> dict:
    if not raw.strip():
        raise SnapshotError("the file is empty")
    try:
        document = json.loads(raw)
    except UnicodeDecodeError:
        raise SnapshotError("the file is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise SnapshotError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise SnapshotError("not valid JSON: nested too deeply") from None
    if not isinstance(document, dict):
        raise SnapshotError(f"expected a JSON object, got {_json_type(document)}")
    return document


def agent_state_parse(document: dict) -> AgentState:
    state = AgentState()
    task = _text(document, "task")
    description = _text(document, "description")
    if task is not None and task.strip():
        state.title = _title(task)
        # A one-line task is all title; a longer one is its own description unless one is given.
        state.description = description if description is not None else (task if task.strip() != state.title else None)
    elif description is not None and description.strip():
        state.title = _title(description)
        state.description = description
    word = _text(document, "status")
    if word is not None:
        state.status = task_status_of(word)
        if state.status is None:
            state.problems.append(f"unknown status {word!r}; the task keeps its previous status")
    state.priority = _priority(document, state.problems)
    state.llm_used = _text(document, "llm_used", max_length=90)
    state.error = _text(document, "error")
    state.started_at = _timestamp(document, "startedAt")
    state.completed_at = _timestamp(document, "completedAt")
    retries = document.get("retries")
    if retries is not None:
        if not isinstance(retries, int) or isinstance(retries, bool) or not 0 <= retries < 2**31:
            raise SnapshotError(f"'retries' must be a non-negative integer, got {_json_type(retries)}")
        state.retries = retries
    return state


def orchestrator_state_parse(document: dict) -> OrchestratorState:
    state = OrchestratorState(
        team=_text(document, "team", max_length=100),
        repo=_text(document, "targetRepo", max_length=500),
        branch=_text(document, "branchName", max_length=255),
        priority_file=_text(document, "priorityFile", max_length=500),
        intent=_text(document, "intent") or _text(document, "task") or _text(document, "description"),
        started_at=_timestamp(document, "startedAt"),
        ended_at=_timestamp(document, "completedAt") or _timestamp(document, "endedAt"),
    )
    pr_url = _text(document, "prUrl", max_length=500) or _text(document, "pr_url", max_length=500)
    if pr_url:
        try:
            URLValidator(schemes=["http", "https"])(pr_url)
        except ValidationError:
            raise SnapshotError(f"'prUrl' is not an http(s) URL: {pr_url[:100]!r}") from None
        state.pr_url = pr_url
    word = _text(document, "status")
    if word is not None:
        task_status = task_status_of(word)
        if task_status is None:
            state.problems.append(f"unknown status {word!r}; the session keeps its previous status")
        else:
            state.status = SESSION_STATUS_OF_TASK_STATUS[task_status]
    return state


# --- Job logs -------------------------------------------------------------------------------

SESSION_KEY_RE = re.compile(r"session-[A-Za-z0-9][A-Za-z0-9_-]{0,119}")
_SPAWNING = re.compile(r"Spawning (\S+?) specialist")
_SPAWNED = re.compile(r"spawned \(PID: (\d+)\)")
_FAILED = re.compile(r"Specialist (\d+) failed \(exit code: (-?\d+)\)")


@dataclass(frozen=True)
class SpecialistFailure:
    session_key: str
    agent: str  # as the log spells it, lower-cased; the caller checks it is a valid slug
    pid: int
    exit_code: int
    line: int


def job_log_failures(text: str) -> list[SpecialistFailure]:
    """Failed specialists a job log records, latest per (session, agent).

    A log names its session somewhere before it spawns (``.compound-state/session-…``,
    ``Session: session-…``); a spawn belongs to the session named last before it.
    ``Spawning <agent> specialist...`` is followed by a line with ``spawned (PID: <pid>)``;
    ``Specialist <pid> failed (exit code: <n>)`` then names the failure by pid.
    """
    session: str | None = None
    pending_agent: tuple[str, str] | None = None  # (session, agent) waiting for its pid
    spawned: dict[int, tuple[str, str]] = {}
    failures: dict[tuple[str, str], SpecialistFailure] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        named = SESSION_KEY_RE.findall(line)
        if named:
            session = named[-1]
        spawning = _SPAWNING.search(line)
        if spawning and session is not None:
            pending_agent = (session, spawning.group(1).lower())
        pid_match = _SPAWNED.search(line)
        if pid_match and pending_agent is not None:
            spawned[int(pid_match.group(1))] = pending_agent
            pending_agent = None
        failed = _FAILED.search(line)
        if failed and int(failed.group(1)) in spawned:
            pid = int(failed.group(1))
            session_key, agent = spawned[pid]
            failures[(session_key, agent)] = SpecialistFailure(
                session_key=session_key, agent=agent, pid=pid, exit_code=int(failed.group(2)), line=number
            )
    return sorted(failures.values(), key=lambda f: (f.session_key, f.agent))


# --- Field readers ----------------------------------------------------------------------------


def _json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _text(document: dict, key: str, *, max_length: int | None = None) -> str | None:
    """A string field, or None when absent or null. Refuses what a database column can't hold."""
    value = document.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise SnapshotError(f"{key!r} must be a string, got {_json_type(value)}")
    if "\x00" in value:
        raise SnapshotError(f"{key!r} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise SnapshotError(f"{key!r} contains an unpaired surrogate (\\ud800-\\udfff)") from None
    if max_length is not None and len(value) > max_length:
        raise SnapshotError(f"{key!r} is longer than {max_length} characters")
    # Agents write these files: secrets in them are redacted like in what they send the API.
    value = redact_text(value)
    return value if max_length is None else value[:max_length]


def _title(text: str) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first if len(first) <= TITLE_MAX else first[: TITLE_MAX - 1] + "…"


def _priority(document: dict, problems: list[str]) -> str | None:
    value = document.get("priority")
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 3:
        return f"P{value}"
    if not isinstance(value, str):
        raise SnapshotError(
            f"'priority' must be a string (P0-P3, critical, high, medium, low), got {_json_type(value)}"
        )
    try:
        return priority_normalise(value, default=None)
    except DomainError:
        problems.append(f"unknown priority {value[:50]!r}; the task keeps its previous priority")
        return None


def _timestamp(document: dict, key: str) -> datetime | None:
    value = _text(document, key, max_length=64)
    if value is None or not value.strip():
        return None
    try:
        parsed = parse_datetime(value.strip())
    except ValueError:
        parsed = None
    if parsed is None:
        raise SnapshotError(f"{key!r} is not an ISO 8601 timestamp: {value[:64]!r}")
    if timezone.is_naive(parsed):
        parsed = parsed.replace(tzinfo=UTC)  # the agent-service writes UTC (toISOString)
    return parsed
