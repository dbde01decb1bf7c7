"""SPEC §10 by API: GET /tasks/{id}/diff/ (and ?format=json), GET /tasks/{id}/runs/, GET and POST
/tasks/{id}/comments/, POST /tasks/{id}/review/. Against a real git clone in a temporary folder."""

import datetime as dt
import os
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from board.models import Task
from config.pages import PRODUCT_OWNERS
from ledger.models import Event
from runners import task_diff
from runners.models import ReviewComment, Run, TaskReview
from runners.services import runner_key_create
from sessions_app.keys import api_key_create
from sessions_app.models import AgentApiKey
from tests.factories import AgentFactory, SessionFactory, TaskFactory
from tests.page_users import user_in
from usage.models import UsageRecord
from workspaces.models import Repository
from workspaces.worktrees.services import repository_register

pytestmark = pytest.mark.django_db
S = Run.Status
APP = "".join(f"line {n}\n" for n in range(1, 21))


def git(folder: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}
    done = subprocess.run(
        ["git", "-C", str(folder), *args], capture_output=True, text=True, check=True, env={**_path_env(), **env}
    )
    return done.stdout


def _path_env() -> dict:
    return {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")}


def commit(folder: Path, files: dict[str, bytes | str | None], message: str) -> str:
    for name, content in files.items():
        target = folder / name
        if content is None:
            git(folder, "rm", "-q", name)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content if isinstance(content, bytes) else content.encode())
        git(folder, "add", name)
    git(folder, "commit", "-q", "-m", message)
    return git(folder, "rev-parse", "HEAD").strip()


@pytest.fixture
def clone(tmp_path) -> Path:
    folder = tmp_path / "code" / "app"
    folder.mkdir(parents=True)
    git(folder, "init", "-q", "-b", "main")
    commit(folder, {"README.md": "# app\n", "src/app.py": APP, "old.txt": "old\n"}, "Initial commit")
    return folder


@pytest.fixture
def task(clone):
    repository, _ = repository_register(path=str(clone))
    return TaskFactory(title="Fix the app", repository=repository, status=Task.Status.REVIEW)


@pytest.fixture
def branch(clone, task) -> str:
    """task-<id>, two runs' commits: line 5 changed, a file added, one deleted, one renamed, a binary
    one; then main moves on (a commit that is not the task's)."""
    name = f"task-{task.pk}"
    git(clone, "checkout", "-q", "-b", name)
    commit(clone, {"src/app.py": APP.replace("line 5\n", "line five\n"), "docs/new.md": "# new\n"}, "Run 1")
    commit(clone, {"old.txt": None, "logo.png": b"\x89PNG\x00\x01\x02" * 50}, "Run 2")
    git(clone, "mv", "README.md", "READ_ME.md")
    git(clone, "commit", "-q", "-m", "Rename")
    git(clone, "checkout", "-q", "main")
    commit(clone, {"later.txt": "not the task's\n"}, "Main moves on")
    return name


@pytest.fixture
def run(task):
    return Run.objects.create(
        task=task,
        provider="claude",
        status=S.SUCCEEDED,
        session=SessionFactory(task=task),
        started_at=timezone.now() - dt.timedelta(seconds=90),
        ended_at=timezone.now(),
    )


@pytest.fixture
def run_key_client(run):
    """The run's own key: scope agent, bound to its session (as run_key_mint makes it)."""
    issued = api_key_create(agent=run.session.agent, scopes=[AgentApiKey.Scope.AGENT])
    AgentApiKey.objects.filter(pk=issued.api_key.pk).update(session=run.session)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.key}")
    return client


@pytest.fixture
def owner_client():
    client = APIClient()
    client.force_login(user_in(PRODUCT_OWNERS, username="owner"))
    return client


def _state():
    return (
        list(Run.objects.order_by("pk").values()),
        list(ReviewComment.objects.values()),
        list(TaskReview.objects.values()),
        list(Task.objects.values()),
        Event.objects.count(),
    )


# --- the diff -------------------------------------------------------------------------------------


def test_the_diff_is_the_branch_against_its_merge_base_with_binary_files_summarised(staff_client, clone, task, branch):
    response = staff_client.get(f"/api/v1/tasks/{task.pk}/diff/")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/x-diff; charset=utf-8"
    text = response.content.decode()
    # Every run's commits together, against where the branch left main: main's later commit is not in it.
    expected = git(clone, "diff", "-M", f"main...{branch}", "--", ":(exclude)logo.png")
    assert text == "# logo.png: binary file, not shown\n" + expected
    assert "later.txt" not in text
    assert "+line five" in text


def test_the_json_diff_lists_files_with_status_counts_and_hunks(orchestrator_client, clone, task, branch):
    response = orchestrator_client.get(f"/api/v1/tasks/{task.pk}/diff/?format=json")

    assert response.status_code == 200
    body = response.json()
    assert body["branch"] == branch
    assert body["base"] == {
        "branch": "main",
        "commit": git(clone, "merge-base", "main", branch).strip(),
        "how": "merge-base",
    }
    assert body["head"] == git(clone, "rev-parse", branch).strip()
    files = {f["path"]: f for f in body["files"]}
    assert {p: (f["status"], f["additions"], f["deletions"], f["old_path"]) for p, f in files.items()} == {
        "src/app.py": ("modified", 1, 1, None),
        "docs/new.md": ("added", 1, 0, None),
        "old.txt": ("deleted", 0, 1, None),
        "logo.png": ("binary", 0, 0, None),
        "READ_ME.md": ("renamed", 0, 0, "README.md"),
    }
    assert files["logo.png"]["binary"] is True and files["logo.png"]["hunks"] == []
    assert files["logo.png"]["too_large"] == "binary file, not shown"
    [hunk] = files["src/app.py"]["hunks"]
    changed = [(x["kind"], x["old"], x["new"], x["text"]) for x in hunk["lines"] if x["kind"] != "context"]
    assert changed == [("removed", 5, None, "line 5"), ("added", None, 5, "line five")]
    assert body["totals"] == {"files": 5, "additions": 2, "deletions": 2, "summarised": 1}


def test_a_file_past_the_size_limit_is_summarised_not_sent(staff_client, clone, task, monkeypatch):
    git(clone, "checkout", "-q", "-b", f"task-{task.pk}")
    commit(clone, {"generated.js": "x = 1;\n" * 5000, "small.txt": "small\n"}, "Generated")
    monkeypatch.setattr(task_diff, "DIFF_MAX_FILE_BYTES", 1000)

    body = staff_client.get(f"/api/v1/tasks/{task.pk}/diff/?format=json").json()
    text = staff_client.get(f"/api/v1/tasks/{task.pk}/diff/").content.decode()

    files = {f["path"]: f for f in body["files"]}
    assert files["generated.js"]["too_large"] == "too large to show: 35000 bytes (the limit is 1000 per file)"
    assert files["generated.js"]["hunks"] == [] and files["generated.js"]["additions"] == 5000
    assert files["small.txt"]["hunks"][0]["lines"] == [{"kind": "added", "old": None, "new": 1, "text": "small"}]
    assert "x = 1;" not in text and "+small" in text


def test_the_files_past_the_file_limit_are_summarised(staff_client, clone, task, monkeypatch):
    git(clone, "checkout", "-q", "-b", f"task-{task.pk}")
    commit(clone, {f"f{n}.txt": f"{n}\n" for n in range(5)}, "Five files")
    monkeypatch.setattr(task_diff, "DIFF_MAX_FILES", 3)

    files = staff_client.get(f"/api/v1/tasks/{task.pk}/diff/?format=json").json()["files"]

    assert [bool(f["hunks"]) for f in files] == [True, True, True, False, False]
    assert files[4]["too_large"] == "too large to show: the change has more than 3 files"


def test_a_task_with_no_branch_is_409(staff_client, task):
    response = staff_client.get(f"/api/v1/tasks/{task.pk}/diff/")

    assert response.status_code == 409
    assert response.json()["message"] == (
        f"Task {task.pk} has no branch yet (task-{task.pk} is not in app): no run has worked on it."
    )


def test_a_runner_hosted_repository_is_409_naming_the_runner(staff_client):
    runner, _, _ = runner_key_create(name="build-1")
    repository = Repository.objects.create(name="shop", path="/srv/shop", runner=runner)
    task = TaskFactory(repository=repository)

    response = staff_client.get(f"/api/v1/tasks/{task.pk}/diff/?format=json")

    assert response.status_code == 409
    assert "lives on runner build-1 (its clone of shop)" in response.json()["message"]


def test_an_unknown_format_is_400(staff_client, task, branch):
    response = staff_client.get(f"/api/v1/tasks/{task.pk}/diff/?format=html")

    assert response.status_code == 400
    assert response.json()["message"] == "format must be 'diff' or 'json', not 'html'."


def test_a_product_owner_and_the_tasks_own_run_key_read_the_diff(owner_client, run_key_client, task, branch, run):
    assert owner_client.get(f"/api/v1/tasks/{task.pk}/diff/").status_code == 200
    assert run_key_client.get(f"/api/v1/tasks/{task.pk}/diff/?format=json").status_code == 200


def test_another_agent_reads_nothing_and_changes_nothing(other_client, task, branch, run):
    before = _state()

    answers = [
        other_client.get(f"/api/v1/tasks/{task.pk}/diff/"),
        other_client.get(f"/api/v1/tasks/{task.pk}/runs/"),
        other_client.get(f"/api/v1/tasks/{task.pk}/comments/"),
        other_client.post(
            f"/api/v1/tasks/{task.pk}/comments/", {"path": "src/app.py", "line": 5, "body": "x"}, format="json"
        ),
        other_client.post(f"/api/v1/tasks/{task.pk}/review/", {"decision": "approve"}, format="json"),
    ]

    assert [a.status_code for a in answers] == [403] * 5
    assert "agent codex-2 is none of them" in answers[0].json()["message"]
    assert _state() == before


def test_another_tasks_run_key_is_refused(run_key_client, branch):
    other = TaskFactory()

    response = run_key_client.get(f"/api/v1/tasks/{other.pk}/diff/")

    assert response.status_code == 403


# --- runs -----------------------------------------------------------------------------------------


def test_the_runs_list_every_attempt_with_duration_tokens_and_cost(owner_client, task, run):
    later = Run.objects.create(task=task, provider="codex", status=S.QUEUED, resumes=run)
    for n, cost in enumerate((Decimal("0.25"), Decimal("0.5"))):
        UsageRecord.objects.create(
            agent=run.session.agent,
            session=run.session,
            task=task,
            input_tokens=100,
            output_tokens=10 * (n + 1),
            cost_usd=cost,
            occurred_at=timezone.now(),
            source="otlp-log",
            idempotency_key=f"k{n}",
        )

    response = owner_client.get(f"/api/v1/tasks/{task.pk}/runs/")

    assert response.status_code == 200
    first, second = response.json()
    assert (first["id"], first["provider"], first["status"], first["duration_seconds"], first["usage"]) == (
        later.pk,
        "codex",
        "queued",
        None,
        None,
    )
    assert (second["id"], second["resumes"], second["session"]) == (run.pk, None, run.session_id)
    assert 89 <= second["duration_seconds"] <= 91
    assert second["usage"] == {
        "input_tokens": 200,
        "output_tokens": 30,
        "cache_read_tokens": 0,
        "cache_creation_tokens": 0,
        "cost_usd": "0.75000000",
    }


def test_queueing_a_run_still_works_on_the_same_path(orchestrator_client):
    task = TaskFactory()

    response = orchestrator_client.post(f"/api/v1/tasks/{task.pk}/runs/", {"provider": "claude"}, format="json")

    assert response.status_code == 201
    assert Run.objects.get().provider == "claude"


# --- comments -------------------------------------------------------------------------------------


def test_a_review_runs_key_comments_on_a_line_and_people_read_it(run_key_client, owner_client, task, branch, run):
    response = run_key_client.post(
        f"/api/v1/tasks/{task.pk}/comments/", {"path": "src/app.py", "line": 5, "body": "Why five?"}, format="json"
    )

    assert response.status_code == 201, response.json()
    listed = owner_client.get(f"/api/v1/tasks/{task.pk}/comments/").json()
    assert [(c["path"], c["line"], c["body"], c["author"], c["run"]) for c in listed] == [
        ("src/app.py", 5, "Why five?", f"agent:{run.session.agent.slug}", run.pk)
    ]


def test_a_comment_on_a_path_or_line_not_in_the_diff_is_400_and_nothing_written(owner_client, task, branch, run):
    before = _state()

    not_a_file = owner_client.post(
        f"/api/v1/tasks/{task.pk}/comments/", {"path": "later.txt", "body": "?"}, format="json"
    )
    not_a_line = owner_client.post(
        f"/api/v1/tasks/{task.pk}/comments/", {"path": "src/app.py", "line": 15, "body": "?"}, format="json"
    )
    binary_line = owner_client.post(
        f"/api/v1/tasks/{task.pk}/comments/", {"path": "logo.png", "line": 1, "body": "?"}, format="json"
    )

    assert not_a_file.status_code == 400
    assert not_a_file.json()["message"] == f"Comment 1: 'later.txt' is not a file of task {task.pk}'s change."
    assert not_a_line.status_code == 400
    assert not_a_line.json()["message"] == (
        "Comment 1: line 15 of 'src/app.py' is not in the diff; comment on a line it shows."
    )
    assert binary_line.status_code == 400
    assert _state() == before


def test_a_whole_file_comment_needs_no_line(owner_client, task, branch, run):
    response = owner_client.post(
        f"/api/v1/tasks/{task.pk}/comments/", {"path": "logo.png", "body": "Too big."}, format="json"
    )

    assert response.status_code == 201
    assert ReviewComment.objects.values_list("path", "line", "author").get() == ("logo.png", None, "user:owner")


# --- review ---------------------------------------------------------------------------------------


def test_approve_records_who_and_on_which_head(owner_client, clone, task, branch, run):
    response = owner_client.post(f"/api/v1/tasks/{task.pk}/review/", {"decision": "approve"}, format="json")

    assert response.status_code == 201
    review = TaskReview.objects.get()
    assert (review.decision, review.reviewer, review.head_commit, review.run) == (
        "approve",
        "user:owner",
        git(clone, "rev-parse", branch).strip(),
        None,
    )
    assert Run.objects.count() == 1


def test_request_changes_queues_a_run_resuming_the_same_session_with_the_comments(
    orchestrator_client, task, branch, run
):
    body = {
        "decision": "request_changes",
        "message": "Spell it as a digit.",
        "comments": [{"path": "src/app.py", "line": 5, "body": "Use 5."}],
    }

    response = orchestrator_client.post(f"/api/v1/tasks/{task.pk}/review/", body, format="json")

    assert response.status_code == 201, response.json()
    queued = Run.objects.exclude(pk=run.pk).get()
    assert (queued.provider, queued.status, queued.resumes_id) == ("claude", "queued", run.pk)
    assert queued.prompt == "Spell it as a digit.\n\nReview comments:\n- src/app.py:5: Use 5."
    assert response.json()["run"]["id"] == queued.pk
    review = TaskReview.objects.get()
    assert (review.decision, review.run_id) == ("request_changes", queued.pk)
    assert list(ReviewComment.objects.values_list("path", "line", "review")) == [("src/app.py", 5, review.pk)]
    assert Task.objects.get(pk=task.pk).status == Task.Status.READY  # where its runner claims it


def test_request_changes_with_a_provider_is_a_fresh_session_of_it(staff_client, task, branch, run):
    body = {"decision": "request_changes", "message": "Try it your way.", "provider": "codex"}

    response = staff_client.post(f"/api/v1/tasks/{task.pk}/review/", body, format="json")

    assert response.status_code == 201
    queued = Run.objects.exclude(pk=run.pk).get()
    # A fresh session (kind work, not continue), told of the earlier run's session and of the branch.
    assert (queued.provider, queued.kind, queued.resumes_id) == ("codex", "work", run.pk)
    assert queued.prompt.startswith("Fix the app\n\n---\nEarlier runs worked on this task on the branch " + branch)
    assert queued.prompt.endswith("asks for this:\n\nTry it your way.")


@pytest.mark.parametrize("status", [S.QUEUED, S.RUNNING])
def test_review_while_a_run_is_going_is_409_and_nothing_changes(staff_client, task, branch, run, status):
    runner, _, _ = runner_key_create(name="build-1")
    going = Run.objects.create(task=task, provider="claude", status=status, runner=runner)
    before = _state()

    response = staff_client.post(
        f"/api/v1/tasks/{task.pk}/review/", {"decision": "request_changes", "message": "More."}, format="json"
    )

    assert response.status_code == 409
    assert response.json()["message"] == (
        f"Task {task.pk}'s run {going.pk} is still {status}; review its change once it has ended."
    )
    assert _state() == before


def test_review_without_a_run_or_a_branch_is_409(staff_client, task):
    no_run = staff_client.post(f"/api/v1/tasks/{task.pk}/review/", {"decision": "approve"}, format="json")
    Run.objects.create(task=task, provider="claude", status=S.FAILED)
    no_branch = staff_client.post(f"/api/v1/tasks/{task.pk}/review/", {"decision": "approve"}, format="json")

    assert (no_run.status_code, no_branch.status_code) == (409, 409)
    assert no_run.json()["message"] == f"Task {task.pk} has no run yet, so there is no change to review."
    assert "has no branch yet" in no_branch.json()["message"]
    assert not TaskReview.objects.exists()


def test_agent_and_run_keys_may_not_review(agent_client, run_key_client, task, branch, run):
    before = _state()
    body = {"decision": "request_changes", "message": "Do it again."}

    answers = [
        agent_client.post(f"/api/v1/tasks/{task.pk}/review/", body, format="json"),
        run_key_client.post(f"/api/v1/tasks/{task.pk}/review/", {"decision": "approve"}, format="json"),
    ]

    assert [a.status_code for a in answers] == [403, 403]
    assert _state() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"decision": "merge"}, "decision"),
        ({"decision": "request_changes"}, "message"),
        ({"decision": "approve", "message": "ok"}, "decision"),
        ({"decision": "request_changes", "message": "x", "provider": "no spaces"}, "provider"),
        ({"decision": "request_changes", "comments": [{"path": "src/app.py", "line": 0, "body": "x"}]}, "comments"),
    ],
)
def test_bad_review_bodies_are_400_and_nothing_changes(staff_client, task, branch, run, body, field):
    before = _state()

    response = staff_client.post(f"/api/v1/tasks/{task.pk}/review/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert _state() == before


def test_request_changes_naming_a_line_not_in_the_diff_is_400_and_queues_nothing(staff_client, task, branch, run):
    before = _state()
    body = {"decision": "request_changes", "comments": [{"path": "nope.py", "line": 1, "body": "x"}]}

    response = staff_client.post(f"/api/v1/tasks/{task.pk}/review/", body, format="json")

    assert response.status_code == 400
    assert "'nope.py' is not a file" in response.json()["message"]
    assert _state() == before


def test_an_orchestrators_other_agent_reviewing_is_its_own_label(make_agent_client, task, branch, run):
    client = make_agent_client(AgentFactory(slug="boss"), [AgentApiKey.Scope.AGENT, AgentApiKey.Scope.ORCHESTRATE])

    response = client.post(f"/api/v1/tasks/{task.pk}/review/", {"decision": "approve"}, format="json")

    assert response.status_code == 201
    assert response.json()["reviewer"] == "agent:boss"


def test_the_json_diff_says_whether_the_newest_approval_is_on_the_head(staff_client, clone, task, branch, run):
    assert staff_client.get(f"/api/v1/tasks/{task.pk}/diff/?format=json").json()["review"] is None
    staff_client.post(f"/api/v1/tasks/{task.pk}/review/", {"decision": "approve"}, format="json")
    approved = staff_client.get(f"/api/v1/tasks/{task.pk}/diff/?format=json").json()["review"]
    git(clone, "checkout", "-q", branch)
    commit(clone, {"docs/new.md": "# newer\n"}, "Run 3")

    moved_on = staff_client.get(f"/api/v1/tasks/{task.pk}/diff/?format=json").json()["review"]

    assert (approved["decision"], approved["reviewer"], approved["current"]) == ("approve", "user:engineer", True)
    assert moved_on["current"] is False


def test_a_summarised_files_name_cannot_start_a_line_of_the_unified_diff(staff_client, clone, task):
    git(clone, "checkout", "-q", "-b", f"task-{task.pk}")
    commit(clone, {"x\ndiff --git a/evil b/evil\n.bin": b"\x00\x01binary"}, "A hostile name")

    text = staff_client.get(f"/api/v1/tasks/{task.pk}/diff/").content.decode()

    assert text == "# x\\ndiff --git a/evil b/evil\\n.bin: binary file, not shown\n"


def test_a_product_owner_requests_changes_in_their_own_name(owner_client, task, branch, run):
    body = {"decision": "request_changes", "comments": [{"path": "docs/new.md", "line": 1, "body": "A better title."}]}

    response = owner_client.post(f"/api/v1/tasks/{task.pk}/review/", body, format="json")

    assert response.status_code == 201, response.json()
    assert response.json()["reviewer"] == "user:owner"
    assert response.json()["run"]["prompt"] == "Review comments:\n- docs/new.md:1: A better title."
    assert list(Event.objects.filter(name="run.queued").values_list("actor", "payload__resumes")) == [
        ("user:owner", run.pk)
    ]
