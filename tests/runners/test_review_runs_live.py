"""Request changes and "ask another agent to review" (SPEC §10) with a real runner, real git and the
demo agent: the follow-up run acts on the request on the same branch (the task's diff updates), a
review run reads the change and comments through the API with its run key, and a review run that
commits anyway fails with its commits taken off the branch."""

from pathlib import Path

import pytest

from board.models import Task
from config.actors import Actor
from runners.models import ReviewComment, Run
from runners.review import review_latest, task_review
from runners.services import run_queue
from runners.task_diff import task_change
from tests.client.live import server_roots, sy_server  # noqa: F401
from tests.factories import TaskFactory, UserFactory
from tests.runners.live_runner import GIT_ENV, Machine, git, run_in, wait_for
from workspaces.worktrees.services import repository_register

pytestmark = pytest.mark.usefixtures("transactional_db")

# A "reviewer" that commits: git's hooks refuse the plain commit; --no-verify skips them.
SNEAKY = (
    "echo sneaky > sneaky.txt && git add sneaky.txt && (git commit -qm sneaky || echo REFUSED-BY-HOOK) "
    "&& git commit -qm sneaky --no-verify && echo committed anyway"
)


@pytest.fixture
def machine(tmp_path, sy_server):  # noqa: F811
    providers = {
        "demo": {"env": {"DEMO_AGENT_SPEED": "1000"}},
        "sneaky": {"command": ["sh", "-c", SNEAKY], "output": "text"},
    }
    made = Machine(tmp_path / "machines", sy_server.url, "demo-1", capacity=2, providers=providers, env=GIT_ENV)
    made.start()
    yield made
    made.cleanup()


@pytest.fixture
def task(tmp_path):
    clone = tmp_path / "code" / "shop"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    (clone / "README.md").write_text("# shop\n")
    git(clone, "add", "README.md")
    git(clone, "commit", "-qm", "start")
    repository, _ = repository_register(path=str(clone))
    return TaskFactory(title="Write the notes", description="Keep it short.", repository=repository)


def _ended(run: Run, machine: Machine) -> Run:
    wait_for(lambda: run_in(run, "succeeded", "failed"), timeout=120, what=f"run {run.pk}", machines=[machine])
    return run


def test_request_changes_review_and_a_committing_reviewer(machine, task):
    person = Actor(user=UserFactory(username="po", is_staff=True))
    first = _ended(run_queue(actor=person, task=task, provider="demo"), machine)
    assert first.status == "succeeded", f"{first.error}\n{machine.output()}"
    notes = f"NOTES-task-{task.pk}.md"
    before = task_change(task=task)
    assert [f.path for f in before.files] == [notes]

    # Request changes with a line comment: the demo agent reads its prompt and acts on it, same branch.
    comment = {"path": notes, "line": 1, "body": "Say who it is for."}
    review = task_review(
        actor=person, task=task, decision="request_changes", message="Add a summary.", comments=[comment]
    )
    second = _ended(review.run, machine)
    assert second.status == "succeeded", f"{second.error}\n{machine.output()}"
    assert (second.kind, second.resumes_id) == ("continue", first.pk)
    after = task_change(task=task)
    added = [line["text"] for f in after.files for h in f.hunks for line in h["lines"] if line["kind"] == "added"]
    assert f"## Changes requested (run {second.pk})" in added
    assert any("Add a summary." in text for text in added) and any("Say who it is for." in text for text in added)
    assert after.head_commit != before.head_commit and after.branch == before.branch
    assert len(git(second_tree(second), "log", "--format=%s", "main..HEAD").split("\n")[:-1]) == 2
    assert Task.objects.get(pk=task.pk).status == "review"

    # Ask another agent to review: it reads the change and comments with its run key, never committing.
    asked = task_review(actor=person, task=task, decision="ask_review", provider="demo", message="Check the title.")
    third = _ended(asked.run, machine)
    assert third.status == "succeeded", f"{third.error}\n{machine.output()}"
    assert third.kind == "review" and "git diff main...HEAD" in third.prompt and "Check the title." in third.prompt
    by_agent = ReviewComment.objects.get(run=third)
    assert (by_agent.path, by_agent.agent_id, by_agent.author) == (notes, third.agent_id, f"agent:{third.agent.slug}")
    assert task_change(task=task).head_commit == after.head_commit  # the branch as it was
    assert review_latest(task=task).decision == "request_changes"  # asking is no verdict
    assert Task.objects.get(pk=task.pk).status == "review"

    # A reviewer that commits: git's hook refuses; skipping the hook fails the run and the commit is undone.
    sneaky = _ended(task_review(actor=person, task=task, decision="ask_review", provider="sneaky").run, machine)
    log = (machine.root / sneaky.log_path).read_text()
    assert "this is a review run" in log and "REFUSED-BY-HOOK" in log and "committed anyway" in log
    assert sneaky.status == "failed" and "a review run may not commit: it made 1 commit(s)" in sneaky.error
    assert task_change(task=task).head_commit == after.head_commit
    tree = second_tree(sneaky)
    assert (tree / "sneaky.txt").read_text() == "sneaky\n"  # left uncommitted, nothing lost
    assert "sneaky.txt" in git(tree, "status", "--porcelain")
    assert Task.objects.get(pk=task.pk).status == "review"


def second_tree(run: Run) -> Path:
    return Path(run.workdir)
