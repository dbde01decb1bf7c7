"""The shapes the API answers with (see /api/docs/ for every field). TypedDicts: the JSON as sent,
with names and types a checker and an editor know about."""

from __future__ import annotations

from typing import Any, TypedDict


class Agent(TypedDict):
    slug: str
    display_name: str
    emoji: str
    provider: str
    team: str
    status: str
    last_heartbeat_at: str | None
    created_at: str


class Workspace(TypedDict):
    id: int
    kind: str
    path: str
    status: str


class Session(TypedDict):
    id: str
    agent: str
    status: str
    intent: str
    workspace: Workspace | None
    labels: list[str]
    metadata: dict[str, Any]
    repo: str
    branch: str
    pr_url: str
    parent: str | None
    task: int | None
    started_at: str | None
    ended_at: str | None
    last_heartbeat_at: str | None
    last_event_seq: int
    created_at: str
    updated_at: str


class Transition(TypedDict):
    session: Session
    changed: bool


class StreamEvent(TypedDict):
    seq: int
    client_id: str | None
    type: str
    payload: dict[str, Any]
    timestamp: str
    created_at: str


class EventPage(TypedDict):
    results: list[StreamEvent]
    next_after_seq: int
    has_more: bool


class ToolCall(TypedDict):
    id: int
    client_id: str | None
    session: str
    agent: str
    tool_name: str
    input_summary: str
    input_sha256: str
    output_summary: str
    status: str
    error: str
    started_at: str
    finished_at: str | None
    duration_ms: int | None
    created_at: str


class Checkpoint(TypedDict):
    seq: int
    client_id: str | None
    state: Any
    size_bytes: int
    created_at: str


class Milestone(TypedDict):
    id: int
    client_id: str | None
    text: str
    created_at: str


class ArtifactVersion(TypedDict):
    number: int
    size: int
    sha256: str
    source: str
    backup_location: str
    created_at: str


class Artifact(TypedDict):
    id: int
    path: str
    kind: str
    size: int
    sha256: str
    mime_type: str
    source: str
    tool_call: int | None
    versions: list[ArtifactVersion]
    created_at: str
    updated_at: str


class ArtifactWrite(TypedDict):
    artifact: Artifact
    version: ArtifactVersion
    created: bool


class Export(TypedDict):
    destination: str
    sha256: str
    size: int


class Task(TypedDict):
    id: int
    title: str
    description: str
    status: str
    priority: str
    rank: int
    assignee: str | None
    suggested_agent: str
    session: str | None
    campaign: int | None
    labels: list[str]
    source_file: str
    external_id: str
    started_at: str | None
    finished_at: str | None
    retries: int
    error: str
    created_at: str
    updated_at: str


class Campaign(TypedDict, total=False):
    id: int
    name: str
    type: str
    priority: str
    deliverables: list[str]
    status: str
    tasks_total: int
    tasks_done: int


class Repository(TypedDict):
    id: int
    name: str
    path: str
    default_branch: str
    sync_dir: str
    active_worktrees: int
    created_at: str


class Worktree(TypedDict, total=False):
    id: int
    repository: int
    repository_name: str
    type: str
    name: str
    branch: str
    path: str
    pr_number: int | None
    status: str
    holder: str | None
    claimed_at: str | None
    released_at: str | None
    lease_expires_at: str | None
    workspace: int | None
    created_at: str
    monitor: dict[str, Any]


class WorktreeClaim(TypedDict):
    outcome: str  # granted | renewed | queued
    position: int | None
    worktree: Worktree


class Resume(TypedDict):
    session: Session
    status: str
    checkpoint: Checkpoint | None
    open_tool_calls: list[ToolCall]
    milestones: list[Milestone]
    claimed_tasks: list[Task]
    claimed_worktrees: list[Worktree]  # held by the agent on a lease not yet expired
    last_event_seq: int


class LogChunk(TypedDict):
    offset: int
    next_offset: int
    size: int
    data: str
    exists: bool


class ItemResult(TypedDict, total=False):
    index: int
    status: int
    item: dict[str, Any]
    message: str
    errors: dict[str, Any]


class BatchResult(TypedDict):
    """The answer to a list write: 201 all stored, 200 all replays, 207 some refused."""

    results: list[ItemResult]
    stored: int
    failed: int
