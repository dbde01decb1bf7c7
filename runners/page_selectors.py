"""Reads for the runner pages: the Runners page, the run box on a task's panel and on a session page,
and the providers the Run and "run with" forms offer."""

import json
from dataclasses import dataclass

from django.db.models import Prefetch, QuerySet

from board.models import Task
from config.api.errors import DomainError
from runners.models import Run, Runner
from runners.room import RoomWait, room_wait
from runners.selectors import runner_list
from sessions_app.models import Agent, AgentSession, StreamEvent
from sessions_app.selectors import session_question
from workspaces.models import Repository

RECENT_RUNS = 50
QUESTION_MAX = 4000
WAITING = AgentSession.Status.WAITING_FOR_INPUT
DEMO = "demo"
# Provider names a task's suggested_agent may carry that some runner is expected to offer (the
# built-ins of `switchyard runner`); a suggested agent's own slug (``claude-1``) is not a provider.
BUILT_IN_PROVIDERS = frozenset({*Agent.Provider.values, DEMO, "shell"}) - {Agent.Provider.CUSTOM}


def runner_page_list() -> list[Runner]:
    """Every runner with ``runs_now``; online first, then draining, then offline, by name."""
    order = {Runner.Status.ONLINE: 0, Runner.Status.DRAINING: 1, Runner.Status.OFFLINE: 2}
    runners = runner_list().prefetch_related(Prefetch("repositories", queryset=Repository.objects.order_by("name")))
    return sorted(runners, key=lambda runner: (order.get(runner.status, 3), runner.name))


def recent_runs(*, limit: int = RECENT_RUNS) -> QuerySet[Run]:
    return Run.objects.select_related("task", "runner").order_by("-created_at", "-id")[:limit]


def _provider_order(names: set[str]) -> list[str]:
    """``demo`` first (the one a new user has), then by name."""
    return sorted(names, key=lambda name: (name != DEMO, name))


@dataclass
class ProviderChoices:
    names: list[str]
    online: bool  # whether any runner is online: if not, a queued run waits
    suggested: str = ""  # the task's suggested provider, preselected


def provider_choices(*, task: Task | None = None) -> ProviderChoices:
    """What the Run form offers: the providers of the online runners, plus the task's suggested
    agent when it names a provider. With no runner online, those the known runners (or ``demo``)
    offer, so a run can still be queued to wait for one. One query."""
    by_status: dict[str, set[str]] = {}
    for status, providers in Runner.objects.values_list("status", "providers"):
        names = {name for name in providers or () if isinstance(name, str) and name}
        by_status.setdefault(status, set()).update(names)
    online = bool(Runner.Status.ONLINE in by_status)
    names = set(by_status.get(Runner.Status.ONLINE, set()))
    if not names:
        names = set().union(*by_status.values()) if by_status else set()
        names = names or {DEMO}
    suggested = ""
    if task is not None and task.suggested_agent:
        candidate = task.suggested_agent.strip().lstrip("@")
        if candidate in names or candidate in BUILT_IN_PROVIDERS:
            names.add(candidate)
            suggested = candidate
    return ProviderChoices(names=_provider_order(names), online=online, suggested=suggested)


@dataclass
class RunBox:
    """What a task's run box shows: its active run, else its last one, and the Run form's choices;
    and the agent's open question when its session waits for a person's answer."""

    task: Task
    active: Run | None
    last: Run | None
    choices: ProviderChoices | None = None
    error: str = ""
    waiting: AgentSession | None = None  # the session waiting for input, if any
    question: StreamEvent | None = None  # its open question (None: it asked without recording one)
    answer: str = ""  # an answer sent back with an error, kept for the person to correct
    answered: bool = False
    room: RoomWait | None = None  # the active run is queued for lack of a runner's memory

    @property
    def question_text(self) -> str:
        """The question as the agent wrote it (the session page cuts it at 300 characters; here the
        person answers from it, so it is whole up to QUESTION_MAX)."""
        payload = self.question.payload if self.question is not None else None
        if not isinstance(payload, dict):
            return ""
        text = payload.get("question")
        if not isinstance(text, str) or not text.strip():
            text = json.dumps(payload, ensure_ascii=False, default=str)
        return text if len(text) <= QUESTION_MAX else text[: QUESTION_MAX - 1] + "…"


def _runs_of(queryset) -> QuerySet[Run]:
    return queryset.select_related("runner", "session", "task").order_by("-created_at", "-id")


def _waiting_session(*, task: Task, active: Run | None) -> AgentSession | None:
    """The session a person should answer: the active run's, else the task's own (an agent started
    by hand). The task's session is read only when the run's does not wait."""
    if active is not None and active.session is not None and active.session.status == WAITING:
        return active.session
    if task.session_id is not None and (active is None or active.session_id != task.session_id):
        session = task.session
        if session is not None and session.status == WAITING:
            return session
    return None


def task_run_box(*, task: Task, error: str = "", answer: str = "", answered: bool = False) -> RunBox:
    """Two queries (the task's latest run, and the providers); one for the task's session when it
    has one not loaded with it, and one for the question while a session waits for input."""
    latest = _runs_of(Run.objects.filter(task=task)).first()
    active = latest if latest is not None and latest.is_active else None
    choices = None if active is not None else provider_choices(task=task)
    waiting = _waiting_session(task=task, active=active)
    return RunBox(
        task=task,
        active=active,
        last=latest if active is None else None,
        choices=choices,
        error=error,
        waiting=waiting,
        question=session_question(session=waiting) if waiting is not None else None,
        answer=answer,
        answered=answered,
        room=room_wait(run=active) if active is not None and not active.cancel_requested_at else None,
    )


def session_run(*, session_id: str) -> Run | None:
    """The run a session belongs to (a restarted run keeps its session: the latest attempt)."""
    return _runs_of(Run.objects.filter(session_id=session_id)).first()


def task_get(*, task_id: int) -> Task:
    task = Task.objects.filter(pk=task_id).first()
    if task is None:
        raise DomainError(f"Task {task_id} not found.", code="not_found")
    return task
