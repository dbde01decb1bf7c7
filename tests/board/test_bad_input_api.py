"""Every board endpoint refuses bad input with a JSON 4xx and writes nothing."""

import json

import pytest

from board.models import Task
from tests.board.helpers import assert_json_error, board_state, post_json, post_raw
from tests.factories import CampaignFactory, TaskFactory

pytestmark = pytest.mark.django_db

INT64_MAX = 2**63 - 1


@pytest.fixture
def endpoint(request, agent_client, orchestrator_client, held_task, ready_task):
    """(client, url, a body the endpoint accepts, the name of one of its text fields)."""
    name = request.param
    return {
        "create task": (orchestrator_client, "/api/v1/tasks/", {"title": "A task"}, "title"),
        "claim next": (agent_client, "/api/v1/tasks/claim-next/", {}, "session"),
        "claim": (agent_client, f"/api/v1/tasks/{ready_task.pk}/claim/", {}, "session"),
        "release": (agent_client, f"/api/v1/tasks/{held_task.pk}/release/", {}, None),
        "complete": (agent_client, f"/api/v1/tasks/{held_task.pk}/complete/", {"review": True}, None),
        "fail": (agent_client, f"/api/v1/tasks/{held_task.pk}/fail/", {"error": "broke"}, "error"),
        "create campaign": (orchestrator_client, "/api/v1/campaigns/", {"type": "outreach"}, "type"),
    }[name]


ENDPOINTS = ["create task", "claim next", "claim", "release", "complete", "fail", "create campaign"]


def _with(body: dict, field: str | None, value_json: str) -> str:
    """``body`` as JSON text with ``field`` set to the raw JSON ``value_json``."""
    key = field or "review"
    items = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in body.items() if k != key]
    items.append(f"{json.dumps(key)}: {value_json}")
    return "{" + ", ".join(items) + "}"


@pytest.mark.parametrize("endpoint", ENDPOINTS, indirect=True)
def test_the_good_body_is_accepted(endpoint):
    # A control: the bad bodies below fail for their badness, not for something else.
    client, url, body, _ = endpoint

    response = post_json(client, url, body)

    assert response.status_code in (200, 201), response.content


@pytest.mark.parametrize("endpoint", ENDPOINTS, indirect=True)
@pytest.mark.parametrize(
    ("case", "raw"),
    [
        ("truncated JSON", '{"title": '),
        ("not JSON at all", "title=hello"),
        ("a list", '[{"title": "A task"}]'),
        ("an empty list", "[]"),
        ("null", "null"),
        ("a number", "42"),
        ("false", "false"),
        ("a string", '"hello"'),
        ("NaN", '{"x": NaN}'),
        ("Infinity", '{"x": Infinity}'),
        ("duplicate keys", '{"x": 1, "x": 2}'),
        ("NUL in a key", '{"ti\\u0000tle": "x"}'),
        ("NUL in a list item", '{"labels": ["a\\u0000"]}'),
        ("lone surrogate in a key", '{"\\udc00": 1}'),
        ("nesting beyond the recursion limit", "[" * 100_000 + "]" * 100_000),
    ],
)
def test_a_body_that_is_not_one_json_object_is_400_and_nothing_is_written(endpoint, case, raw):
    client, url, _, _ = endpoint
    before = board_state()

    response = post_raw(client, url, raw)

    assert_json_error(response, 400)
    assert board_state() == before


@pytest.mark.parametrize("endpoint", ENDPOINTS, indirect=True)
def test_invalid_utf8_is_400_and_nothing_is_written(endpoint):
    client, url, _, _ = endpoint
    before = board_state()

    response = post_raw(client, url, b'{"title": "\xff\xfe"}')

    assert assert_json_error(response, 400)["message"] == "JSON parse error - the body is not valid UTF-8."
    assert board_state() == before


@pytest.mark.parametrize("endpoint", ENDPOINTS, indirect=True)
@pytest.mark.parametrize(
    ("value_json", "message"),
    [
        ('"a\\u0000b"', "JSON parse error - strings may not contain NUL (\\u0000)."),
        ('"\\u0000"', "JSON parse error - strings may not contain NUL (\\u0000)."),
        ('"\\ud800"', "JSON parse error - strings may not contain lone surrogates."),
        ('"abc\\udfff"', "JSON parse error - strings may not contain lone surrogates."),
    ],
)
def test_nul_and_lone_surrogates_in_a_text_field_are_400_and_nothing_is_written(endpoint, value_json, message):
    # given an otherwise good body whose text field carries a NUL or a lone surrogate
    client, url, body, field = endpoint
    raw = _with(body, field, value_json)
    before = board_state()

    # when it is sent as raw JSON text (a client library would refuse to encode it)
    response = post_raw(client, url, raw)

    # then the parser refuses it before anything reaches the database
    assert assert_json_error(response, 400)["message"] == message
    assert board_state() == before


EXPECTED_FIELDS = {
    "create task": "title, description, status, priority, labels, campaign, suggested_agent, external_id, repository",
    "claim next": "session, campaign",
    "claim": "session",
    "release": None,
    "complete": "review",
    "fail": "error, retry",
    "create campaign": "type, name, priority, deliverables, target_audience, goal, starts_on, ends_on, leads, "
    "repository",
}


@pytest.mark.parametrize("endpoint", ENDPOINTS, indirect=True)
def test_an_unknown_field_is_400_naming_it_and_the_expected_fields_and_nothing_is_written(request, endpoint):
    client, url, body, _ = endpoint
    before = board_state()

    response = post_json(client, url, {**body, "colour": "red"})

    expected = EXPECTED_FIELDS[request.node.callspec.params["endpoint"]]
    error = (
        f'Unknown field "colour"; expected: {expected}.'
        if expected
        else 'Unknown field "colour"; this request takes no fields.'
    )
    assert assert_json_error(response, 400) == {
        "message": f"Invalid input: colour: {error}",
        "errors": {"colour": [error]},
    }
    assert board_state() == before


@pytest.mark.parametrize("endpoint", ENDPOINTS, indirect=True)
@pytest.mark.parametrize("number", ["99999999999999999999", "-99999999999999999999", "9223372036854775808"])
def test_an_integer_beyond_64_bits_anywhere_is_400_and_nothing_is_written(endpoint, number):
    client, url, body, field = endpoint
    before = board_state()

    if field == "type":  # a campaign: the number hides in a lead, two levels down
        raw = '{"type": "outreach", "leads": [{"name": "Ann", "score": ' + number + "}]}"
    else:
        raw = _with(body, "campaign", number)

    response = post_raw(client, url, raw)

    assert (
        assert_json_error(response, 400)["message"] == f"JSON parse error - integer {number} does not fit in 64 bits."
    )
    assert board_state() == before


@pytest.mark.parametrize("endpoint", ENDPOINTS, indirect=True)
def test_a_body_over_the_limit_is_413_and_nothing_is_written(endpoint, settings):
    # given a small body limit
    settings.API_MAX_BODY_BYTES = 2048
    client, url, body, field = endpoint
    raw = json.dumps({**body, field or "review": "x" * 3000})
    before = board_state()

    # when the body is larger
    response = post_raw(client, url, raw)

    # then it is refused as too large, before it is parsed
    assert assert_json_error(response, 413)["message"] == f"Request body is {len(raw)} bytes; the limit is 2048."
    assert board_state() == before


def test_a_body_just_at_the_limit_is_accepted(orchestrator_client, settings):
    settings.API_MAX_BODY_BYTES = 2048
    head = json.dumps({"title": "At the limit", "description": ""})
    description = "d" * (2048 - len(head))
    raw = json.dumps({"title": "At the limit", "description": description})
    assert len(raw) == 2048

    response = post_raw(orchestrator_client, "/api/v1/tasks/", raw)

    assert response.status_code == 201
    assert Task.objects.get().description == description


@pytest.mark.parametrize("endpoint", ENDPOINTS, indirect=True)
def test_a_non_json_content_type_is_415_and_nothing_is_written(endpoint):
    client, url, body, _ = endpoint
    before = board_state()

    response = post_raw(client, url, json.dumps(body), content_type="text/plain")

    assert_json_error(response, 415)
    assert board_state() == before


# --- wrong types, field by field ----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"title": 42}, "title"),
        ({"title": 4.2}, "title"),
        ({"title": True}, "title"),
        ({"title": ["A task"]}, "title"),
        ({"title": {"text": "A task"}}, "title"),
        ({"title": None}, "title"),
        ({"title": ""}, "title"),
        ({"title": "t" * 501}, "title"),
        ({}, "title"),
        ({"title": "A task", "description": 7}, "description"),
        ({"title": "A task", "labels": "urgent"}, "labels"),
        ({"title": "A task", "labels": {"a": 1}}, "labels"),
        ({"title": "A task", "labels": [1, 2]}, "labels"),
        ({"title": "A task", "labels": [["nested"]]}, "labels"),
        ({"title": "A task", "labels": ["l"] * 51}, "labels"),
        ({"title": "A task", "priority": "P9"}, "priority"),
        ({"title": "A task", "priority": "high"}, "priority"),
        ({"title": "A task", "status": "done"}, "status"),
        ({"title": "A task", "campaign": "abc"}, "campaign"),
        ({"title": "A task", "campaign": 0}, "campaign"),
        ({"title": "A task", "campaign": -1}, "campaign"),
        ({"title": "A task", "campaign": 1.5}, "campaign"),
        ({"title": "A task", "campaign": [1]}, "campaign"),
        ({"title": "A task", "suggested_agent": "not a slug!"}, "suggested_agent"),
        ({"title": "A task", "suggested_agent": 12}, "suggested_agent"),
        ({"title": "A task", "external_id": 12}, "external_id"),
    ],
)
def test_creating_a_task_with_a_wrong_type_is_400_naming_the_field(orchestrator_client, body, field):
    before = board_state()

    response = post_json(orchestrator_client, "/api/v1/tasks/", body)

    assert list(assert_json_error(response, 400)["errors"]) == [field]
    assert board_state() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"session": 1}, "session"),
        ({"session": ""}, "session"),
        ({"session": ["sess-1"]}, "session"),
        ({"session": "s" * 129}, "session"),
        ({"campaign": "one"}, "campaign"),
        ({"campaign": 0}, "campaign"),
        ({"agent": "codex-2"}, "agent"),
    ],
)
def test_claim_next_with_a_wrong_type_is_400_naming_the_field(agent_client, body, field):
    TaskFactory()
    before = board_state()

    response = post_json(agent_client, "/api/v1/tasks/claim-next/", body)

    assert list(assert_json_error(response, 400)["errors"]) == [field]
    assert board_state() == before


@pytest.mark.parametrize(
    ("action", "body", "field"),
    [
        ("complete", {"review": "perhaps"}, "review"),
        ("complete", {"review": [True]}, "review"),
        ("fail", {"error": 500}, "error"),
        ("fail", {"error": ""}, "error"),
        ("fail", {"error": None}, "error"),
        ("fail", {"error": "x", "retry": "again"}, "retry"),
        ("release", {"reason": "done for today"}, "reason"),
    ],
)
def test_ending_a_claim_with_a_wrong_type_is_400_and_the_task_is_unchanged(
    agent_client, held_task, action, body, field
):
    before = board_state()

    response = post_json(agent_client, f"/api/v1/tasks/{held_task.pk}/{action}/", body)

    assert list(assert_json_error(response, 400)["errors"]) == [field]
    assert board_state() == before


def test_a_campaign_id_that_fits_64_bits_but_does_not_exist_is_404(orchestrator_client, agent_client):
    CampaignFactory()
    TaskFactory()
    before = board_state()

    create = post_json(orchestrator_client, "/api/v1/tasks/", {"title": "A task", "campaign": INT64_MAX})
    claim = post_json(agent_client, "/api/v1/tasks/claim-next/", {"campaign": INT64_MAX})

    assert assert_json_error(create, 404)["message"] == f"Campaign {INT64_MAX} not found."
    assert assert_json_error(claim, 404)["message"] == f"Campaign {INT64_MAX} not found."
    assert board_state() == before


# --- ids in the URL -----------------------------------------------------------------------

TASK_URLS = [
    ("get", "/api/v1/tasks/{id}/"),
    ("post", "/api/v1/tasks/{id}/claim/"),
    ("post", "/api/v1/tasks/{id}/release/"),
    ("post", "/api/v1/tasks/{id}/complete/"),
    ("post", "/api/v1/tasks/{id}/fail/"),
    ("get", "/api/v1/campaigns/{id}/"),
]


@pytest.mark.parametrize(("method", "template"), TASK_URLS)
@pytest.mark.parametrize("task_id", ["99999999999999999999", "9223372036854775808", "00000000000000000000001"])
def test_an_id_beyond_64_bits_in_the_url_is_a_json_404_and_nothing_is_written(agent_client, method, template, task_id):
    # given an id the 64-bit URL converter refuses, so no view is reached
    TaskFactory()
    url = template.format(id=task_id)
    before = board_state()

    response = getattr(agent_client, method)(url)

    # then the project's 404 handler still answers JSON, and nothing was written
    assert assert_json_error(response, 404)["message"] == f"Not found: {url}"
    assert board_state() == before


@pytest.mark.parametrize(
    ("method", "template", "message"),
    [
        ("get", "/api/v1/tasks/{id}/", "Task {id} not found."),
        ("post", "/api/v1/tasks/{id}/claim/", "Task {id} not found."),
        ("post", "/api/v1/tasks/{id}/release/", "Task {id} not found."),
        ("post", "/api/v1/tasks/{id}/complete/", "Task {id} not found."),
        ("get", "/api/v1/campaigns/{id}/", "Campaign {id} not found."),
    ],
)
@pytest.mark.parametrize("unknown_id", [0, 424242, INT64_MAX])
def test_an_unknown_id_is_a_json_404_and_nothing_is_written(agent_client, method, template, message, unknown_id):
    TaskFactory()
    CampaignFactory()
    before = board_state()

    response = getattr(agent_client, method)(template.format(id=unknown_id))

    assert assert_json_error(response, 404)["message"] == message.format(id=unknown_id)
    assert board_state() == before


def test_failing_an_unknown_task_is_404(agent_client, db):
    before = board_state()

    response = post_json(agent_client, "/api/v1/tasks/424242/fail/", {"error": "x"})

    assert assert_json_error(response, 404)["message"] == "Task 424242 not found."
    assert board_state() == before
