"""What the card's Ship box shows (SPEC §10): the task branch, whether its change is approved on
its head, its pull request, and the outcome of the last button pressed. One git call (the refs)."""

from dataclasses import dataclass, field

from board.models import Task
from config.api.errors import DomainError
from runners.models import PullRequest, Run, TaskReview
from runners.review import review_latest
from runners.task_diff import task_change_source


@dataclass
class ShipBox:
    task: Task
    branch: str = ""
    head: str = ""
    default_branch: str = ""
    unavailable: str = ""  # why nothing can be shipped now (no repository, no branch, a run going, a runner's)
    approved: bool = False
    approval: str = ""  # what the review says, in a few words
    pull: PullRequest | None = None
    error: str = ""
    conflict_files: list[str] = field(default_factory=list)
    done: str = ""  # what the last action did


def task_ship_box(*, task: Task, error: str = "", conflict_files: list[str] | None = None, done: str = "") -> ShipBox:
    task = Task.objects.select_related("repository__runner").get(pk=task.pk)
    box = ShipBox(task=task, error=error, conflict_files=conflict_files or [], done=done)
    box.pull = PullRequest.objects.filter(task=task).first()
    repository = task.repository
    if repository is None:
        box.unavailable = "This task has no repository: set one for its runs to make a branch to ship."
        return box
    box.default_branch = repository.default_branch
    if repository.runner_id is not None:
        box.unavailable = (
            f"{repository.name} is on runner {repository.runner.name}: merging and pushing from a runner's "
            "repository are not built yet."
        )
        return box
    going = Run.objects.filter(task=task, status__in=Run.ACTIVE).values_list("pk", flat=True).first()
    try:
        _, box.branch, box.head, _ = task_change_source(task=task)
    except DomainError as exc:
        box.unavailable = exc.message
        return box
    if going is not None:
        box.unavailable = f"Run {going} is still going: ship once it has ended."
    latest = review_latest(task=task)
    box.approved = bool(latest and latest.decision == TaskReview.Decision.APPROVE and latest.head_commit == box.head)
    if box.approved:
        box.approval = f"Approved by {latest.reviewer}."
    elif latest is not None and latest.decision == TaskReview.Decision.APPROVE:
        box.approval = "Approved on an older head: the branch changed since."
    elif latest is not None:
        box.approval = "Changes were requested."
    else:
        box.approval = "Not approved yet."
    return box
