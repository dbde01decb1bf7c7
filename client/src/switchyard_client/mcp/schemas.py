"""The output schemas of the MCP tools (tools.py): the fields of the API's objects an agent relies on."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


# Output schemas: the fields an agent relies on, typed. ``extra="allow"``: the API's object goes out
# whole, so a field added to the API reaches clients without a schema change here.
class _ApiObject(BaseModel):
    model_config = ConfigDict(extra="allow")


class TaskOut(_ApiObject):
    id: int
    title: str
    description: str
    status: str
    priority: str
    assignee: str | None
    session: str | None
    campaign: int | None
    labels: list[str]
    retries: int
    error: str


class ClaimOut(BaseModel):
    task: TaskOut | None  # None: no task is ready


class EventOut(_ApiObject):
    seq: int
    type: str
    payload: dict[str, Any]
    timestamp: str


class MilestoneOut(_ApiObject):
    id: int
    text: str
    created_at: str


class CheckpointOut(_ApiObject):
    seq: int
    state: Any
    size_bytes: int
    created_at: str


class SessionOut(_ApiObject):
    id: str
    status: str
    intent: str


class WorktreeOut(_ApiObject):
    id: int
    name: str
    branch: str
    path: str
    status: str
    holder: str | None


class ResumeOut(_ApiObject):
    session: SessionOut
    status: str
    checkpoint: CheckpointOut | None
    open_tool_calls: list[dict[str, Any]]
    milestones: list[MilestoneOut]
    claimed_tasks: list[TaskOut]
    claimed_worktrees: list[WorktreeOut]
    last_event_seq: int


class ArtifactOut(_ApiObject):
    id: int
    path: str
    kind: str
    size: int


class VersionOut(_ApiObject):
    number: int
    size: int


class FileWriteOut(_ApiObject):
    artifact: ArtifactOut
    version: VersionOut
    created: bool


class WorktreeClaimOut(_ApiObject):
    outcome: str  # granted | renewed | queued
    position: int | None
    worktree: WorktreeOut


class AnswerOut(BaseModel):
    question_seq: int | None  # the seq of the open question's event; None when none is open
    answered: bool
    answer: str | None
