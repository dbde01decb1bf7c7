# ruff: noqa: F811 (the fixtures imported from test_task_review_api are parameters here)
"""The ship endpoints' real answers (a merge, a conflict's 409 with its files, the resolving run, a
push) match the OpenAPI schema: the conformance test fuzzes them on a task with no branch (409s),
these check the answers it cannot reach there."""

import pytest

from tests.runners.test_task_review_api import APP, branch, clone, commit, git, run, task  # noqa: F401
from tests.runners.test_task_review_schema import _call, in_process  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.mark.usefixtures("in_process", "run")
def test_every_ship_answer_matches_the_schema(orchestrator_client, tmp_path, clone, task, branch):
    key, pk = orchestrator_client.key, task.pk
    bare = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(clone, "remote", "add", "origin", str(bare))
    git(clone, "checkout", "-q", branch)
    commit(clone, {"later.txt": "the task's own\n"}, "Conflicts with main")
    git(clone, "checkout", "-q", "main")

    pushed = _call("POST", "/api/v1/tasks/{task_id}/pull-request/", key, task_id=pk)
    _call("POST", "/api/v1/tasks/{task_id}/review/", key, task_id=pk, body={"decision": "approve"})
    conflict = _call("POST", "/api/v1/tasks/{task_id}/merge/", key, task_id=pk, body={"strategy": "merge"})
    resolving = _call("POST", "/api/v1/tasks/{task_id}/merge/resolve/", key, task_id=pk)
    git(clone, "branch", "-f", branch, f"{branch}~1")  # the conflicting commit gone again
    resolving_run = resolving.json()["id"]
    from runners.models import Run

    Run.objects.filter(pk=resolving_run).update(
        status="cancelled", ended_at=Run.objects.get(pk=resolving_run).created_at
    )
    _call("POST", "/api/v1/tasks/{task_id}/review/", key, task_id=pk, body={"decision": "approve"})
    merged = _call("POST", "/api/v1/tasks/{task_id}/merge/", key, task_id=pk, body={"strategy": "squash"})

    assert [r.status_code for r in (pushed, conflict, resolving, merged)] == [200, 409, 201, 200]
    assert conflict.json()["files"] == ["later.txt"]
    assert merged.json()["status"] == "done"
