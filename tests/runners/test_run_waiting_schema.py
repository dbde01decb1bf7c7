"""The answers about a waiting run (issue 26 §2) match the OpenAPI schema: the run with what it waits
for and its answer, the answer and re-queue endpoints, and the runner's assignment carrying the
decision. The conformance test fuzzes these endpoints on runs that do not wait (409s); these check
the 200s it cannot reach there."""

import pytest

from runners.models import Runner
from tests.config.test_api_conformance import schema
from tests.runners.test_run_waiting import waiting  # noqa: F401 (fixture)
from tests.runners.test_task_review_schema import in_process  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


def _call(method: str, path: str, key: str, *, body=None, **path_parameters):
    extra = {"body": body, "media_type": "application/json"} if body is not None else {}
    case = schema[path][method].Case(path_parameters=path_parameters, **extra)
    response = case.call(headers={"Authorization": f"Bearer {key}"})
    case.validate_response(response, headers={"Authorization": f"Bearer {key}"})
    return response


def test_a_waiting_runs_answers_match_the_schema(waiting, orchestrator_client, runner_client, in_process):  # noqa: F811
    # in_process last: the test client's requests in ``waiting`` connect the handler's connection closing again.
    key = orchestrator_client.key

    read = _call("GET", "/api/v1/runs/{run_id}/", key, run_id=waiting.pk)
    answered = _call("POST", "/api/v1/runs/{run_id}/answer/", key, run_id=waiting.pk, body={"decision": "allow"})
    handed = _call("POST", "/api/v1/runners/me/next/", runner_client.key, body={"wait": 0})

    assert read.json()["status"] == "waiting" and read.json()["waiting_for"]["kind"] == "permission"
    assert answered.json()["answer"]["decision"] == "allow"
    assert handed.json()["runs"][0]["deferred"]["decision"] == "allow"


def test_a_requeued_run_matches_the_schema(waiting, orchestrator_client, in_process):  # noqa: F811
    Runner.objects.filter(name="build-1").update(status=Runner.Status.OFFLINE)

    requeued = _call("POST", "/api/v1/runs/{run_id}/requeue/", orchestrator_client.key, run_id=waiting.pk, body={})

    assert requeued.json()["status"] == "queued"
