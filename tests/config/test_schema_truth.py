"""The OpenAPI schema states the rules the code enforces, one test per rule schemathesis found
broken (tests/config/test_api_conformance.py fuzzes them all; these say which rule and why)."""

import json

import pytest
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer

from config.api.schema_constraints import NOT_BLANK
from sessions_app.models import AgentSession, StreamEvent

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def spec(django_db_blocker):
    with django_db_blocker.unblock():
        generated = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(generated, renderer_context={}))


def parameter(spec, path: str, name: str, method: str = "get") -> dict:
    return next(p for p in spec["paths"][path][method]["parameters"] if p["name"] == name)


# --- page_size: documented 1..1000, and anything else refused rather than silently the default ---------
def test_the_schema_bounds_page_and_page_size(spec):
    assert parameter(spec, "/api/v1/sessions/", "page_size")["schema"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 1000,
    }
    assert parameter(spec, "/api/v1/tasks/", "page")["schema"] == {"type": "integer", "minimum": 1}


@pytest.mark.parametrize("value", ["null", "0", "1001", "-1", "2.5", "٣"])
def test_a_page_size_out_of_its_range_is_400_naming_it(agent_client, value):
    response = agent_client.get("/api/v1/sessions/", {"page_size": value})

    assert response.status_code == 400
    assert response.json() == {
        "message": "Invalid input: page_size: Must be a whole number from 1 to 1000.",
        "errors": {"page_size": ["Must be a whole number from 1 to 1000."]},
    }


@pytest.mark.parametrize(("value", "shown"), [("", 2), ("1", 1), ("1000", 2)])
def test_a_page_size_in_range_or_empty_is_taken(agent_client, agent, value, shown):
    from tests.factories import SessionFactory

    SessionFactory.create_batch(2, agent=agent)

    response = agent_client.get("/api/v1/sessions/", {"page_size": value})

    assert response.status_code == 200
    assert len(response.json()["results"]) == shown


# --- empty query values ----------------------------------------------------------------------------------
def test_optional_query_parameters_say_an_empty_value_is_taken_except_lists(spec):
    assert parameter(spec, "/api/v1/sessions/", "started_before")["allowEmptyValue"] is True
    assert parameter(spec, "/api/v1/tasks/", "campaign")["allowEmptyValue"] is True
    assert "allowEmptyValue" not in parameter(spec, "/api/v1/tasks/", "status")


def test_the_campaign_filter_is_documented_as_the_id_it_must_be(spec):
    assert parameter(spec, "/api/v1/tasks/", "campaign")["schema"] == {
        "type": "integer",
        "format": "int64",
        "minimum": 1,
        "maximum": 2**63 - 1,
    }


# --- text fields that are trimmed and may not be blank -----------------------------------------------------
def test_a_required_text_field_documents_that_it_needs_a_non_space_character(spec, agent_client, session):
    milestone = spec["components"]["schemas"]["MilestoneInputRequest"]["properties"]["text"]

    response = agent_client.post(f"/api/v1/sessions/{session.pk}/milestones/", {"text": "   "}, format="json")

    assert milestone["pattern"] == NOT_BLANK == r"^[^\x00]*[^\s\x1c-\x1f\x00][^\x00]*$"
    assert response.status_code == 400


# --- pr_url: one pattern, stated in the schema and applied by the code -------------------------------------
def test_pr_url_is_documented_by_the_pattern_the_code_applies(spec):
    pr_url = spec["components"]["schemas"]["SessionCreateInputRequest"]["properties"]["pr_url"]

    # drf-spectacular spells it for ECMA regexes (\u escapes) and adds the blank alternative
    pattern = r"^(?:https?://[^\u0000-\u0020\u007f/?#]+(?:[/?#][^\u0000-\u0020\u007f]*)?)?$"
    assert pr_url["oneOf"][0]["pattern"] == pattern
    assert pr_url["oneOf"][1] == {"type": "string", "maxLength": 0}
    assert "format" not in pr_url["oneOf"][0]


@pytest.mark.parametrize(
    ("pr_url", "status"),
    [
        ("https://github.com/acme/api/pull/7", 201),
        ("", 201),
        # a host name Django's URLValidator refused (a label over 63 characters): the schema allowed it
        ("https://" + "a" * 70 + ".example.com/pull/1", 201),
        ("ftp://example.com/pull/7", 400),
        ("javascript:alert(1)", 400),
        (" https://example.com/pull/7", 400),
    ],
)
def test_pr_url_accepts_exactly_what_the_pattern_says(agent_client, pr_url, status):
    before = AgentSession.objects.count()

    response = agent_client.post("/api/v1/sessions/", {"pr_url": pr_url}, format="json")

    assert response.status_code == status, response.content
    assert AgentSession.objects.count() == before + (1 if status == 201 else 0)


# --- nullable outputs --------------------------------------------------------------------------------------
def test_a_worktree_without_a_holder_is_documented_as_nullable(spec):
    holder = spec["components"]["schemas"]["WorktreeOutput"]["properties"]["holder"]

    assert holder["nullable"] is True


# --- rules across fields -----------------------------------------------------------------------------------
def test_worktree_creation_documents_name_or_pr_number_and_not_both_ref_and_pr_number(spec):
    component = spec["components"]["schemas"]["WorktreeCreateInputRequest"]

    assert {"anyOf": [{"required": ["name"]}, {"required": ["pr_number"]}]} in component["allOf"]
    assert {"not": {"required": ["ref", "pr_number"]}} in component["allOf"]


# --- batch bodies ------------------------------------------------------------------------------------------
def test_a_batch_where_every_item_fails_answers_an_error_body_with_a_message(agent_client, session):
    response = agent_client.post(
        f"/api/v1/sessions/{session.pk}/events/", [{"type": "nope"}, {"type": "log", "x": 1}], format="json"
    )

    assert response.status_code == 400
    body = response.json()
    assert body["message"] == "No item was stored: all 2 failed; see results."
    assert (body["stored"], body["failed"]) == (0, 2)
    assert [r["status"] for r in body["results"]] == [400, 400]
    assert StreamEvent.objects.count() == 0


def test_a_batch_endpoint_documents_the_batch_body_for_201_and_an_error_body_for_400(spec):
    responses = spec["paths"]["/api/v1/sessions/{session_id}/events/"]["post"]["responses"]

    written = responses["201"]["content"]["application/json"]["schema"]
    assert written == {"$ref": "#/components/schemas/StreamEventWritten"}
    assert spec["components"]["schemas"]["StreamEventWritten"]["oneOf"] == [
        {"$ref": "#/components/schemas/StreamEventOutput"},
        {"$ref": "#/components/schemas/BatchOutput"},
    ]
    error = spec["components"]["schemas"]["ErrorOutput"]
    assert error["required"] == ["message"]
    assert set(error["properties"]) >= {"message", "code", "errors"}


# --- maxLength holds for redacted text fields too -----------------------------------------------------------
def test_a_milestone_over_its_max_length_is_refused_not_cut_short(spec, agent_client, session):
    # before: the redacting field capped the text in to_internal_value, so max_length never refused it
    assert spec["components"]["schemas"]["MilestoneInputRequest"]["properties"]["text"]["maxLength"] == 10_000

    response = agent_client.post(f"/api/v1/sessions/{session.pk}/milestones/", {"text": "x" * 10_001}, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == {"text": ["Ensure this field has no more than 10000 characters."]}
    assert session.milestones.count() == 0
