"""The review endpoints' real answers (a diff with hunks, a renamed and a binary file, comments, runs
with usage, a queued follow-up run) match the OpenAPI schema: the conformance test fuzzes them on a
task with no branch (409s), these check the 200s and 201s schemathesis cannot reach there."""

import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from tests.config.test_api_conformance import schema
from tests.runners.test_task_review_api import branch, clone, run, task  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


@pytest.fixture
def in_process():
    # As in the conformance test: the WSGI handler would close the test transaction's connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _call(method: str, path: str, key: str, *, task_id: int, query=None, body=None):
    extra = {"body": body, "media_type": "application/json"} if body is not None else {}
    case = schema[path][method].Case(path_parameters={"task_id": task_id}, query=query, **extra)
    response = case.call(headers={"Authorization": f"Bearer {key}"})
    case.validate_response(response, headers={"Authorization": f"Bearer {key}"})
    return response


@pytest.mark.usefixtures("in_process", "branch", "run")
def test_every_review_answer_matches_the_schema(orchestrator_client, task):  # noqa: F811
    key = orchestrator_client.key
    pk = task.pk

    diff_json = _call("GET", "/api/v1/tasks/{task_id}/diff/", key, task_id=pk, query={"format": "json"})
    diff_text = _call("GET", "/api/v1/tasks/{task_id}/diff/", key, task_id=pk)
    comment = _call(
        "POST",
        "/api/v1/tasks/{task_id}/comments/",
        key,
        task_id=pk,
        body={"path": "src/app.py", "line": 5, "body": "?"},
    )
    comments = _call("GET", "/api/v1/tasks/{task_id}/comments/", key, task_id=pk)
    review = _call(
        "POST",
        "/api/v1/tasks/{task_id}/review/",
        key,
        task_id=pk,
        body={"decision": "request_changes", "message": "Again.", "comments": [{"path": "old.txt", "body": "Keep"}]},
    )
    runs = _call("GET", "/api/v1/tasks/{task_id}/runs/", key, task_id=pk)

    assert [r.status_code for r in (diff_json, diff_text, comment, comments, review, runs)] == [
        200,
        200,
        201,
        200,
        201,
        200,
    ]
    assert {f["status"] for f in diff_json.json()["files"]} == {"modified", "added", "deleted", "renamed", "binary"}
    assert len(runs.json()) == 2
