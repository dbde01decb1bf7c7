"""Reads for runners and runs, shared by the admin and (later) the API and pages."""

from django.db.models import Count, Q, QuerySet

from board.models import Task
from config.api.errors import DomainError
from runners.models import Run, Runner


def runner_list() -> QuerySet[Runner]:
    """Runners with ``runs_now``: how many active runs each holds (one query for the page); a run
    waiting for a person holds no process and takes none of its capacity, so it is not counted."""
    return Runner.objects.select_related("agent").annotate(
        runs_now=Count("runs", filter=Q(runs__status__in=Run.ACTIVE - {Run.Status.WAITING}))
    )


def run_get(*, run_id: int) -> Run:
    """Runs are visible to every agent and staff, like the tasks they run."""
    run = Run.objects.select_related("task", "runner", "session", "agent").filter(pk=run_id).first()
    if run is None:
        raise DomainError(f"Run {run_id} not found.", code="not_found")
    return run


def run_list(*, status: str | None = None, task_id: int | None = None, runner_id: int | None = None) -> QuerySet[Run]:
    runs = Run.objects.select_related("task", "runner", "session", "agent")
    if status is not None:
        runs = runs.filter(status=status)
    if task_id is not None:
        runs = runs.filter(task_id=task_id)
    if runner_id is not None:
        runs = runs.filter(runner_id=runner_id)
    return runs


def run_task_for_assignment(*, task_id: int) -> Task:
    return Task.objects.select_related("repository__runner").get(pk=task_id)


TYPE_LABEL_PREFIX = "type:"


def task_type(*, task: Task) -> str:
    """A task's type (the worktree name's ``<type>-<task>``): its ``type:<slug>`` label, or ''."""
    for label in task.labels or []:
        if isinstance(label, str) and label.startswith(TYPE_LABEL_PREFIX):
            return label[len(TYPE_LABEL_PREFIX) :]
    return ""


def run_active_for_task(*, task_id: int) -> Run | None:
    return Run.objects.filter(task_id=task_id, status__in=Run.ACTIVE).first()


CONTINUE_CHAIN_MAX = 20  # runs looked back through for the agent session a continuation resumes


def run_agent_session_to_continue(*, run: Run) -> str:
    """The provider's session id a ``continue`` run resumes: its ``resumes``' own, else (that run
    never said which, lost before it did) the one that run itself continued, further back."""
    earlier = run.resumes
    for _ in range(CONTINUE_CHAIN_MAX):
        if earlier is None:
            return ""
        if earlier.agent_session:
            return earlier.agent_session
        if earlier.kind != Run.Kind.CONTINUE:
            return ""
        earlier = earlier.resumes
    return ""
