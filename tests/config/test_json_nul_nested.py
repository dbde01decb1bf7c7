"""NUL is refused in every string of a JSON body, at any depth: before, a string in a list inside a
nested object (``{"state": {"k": ["a\\u0000"]}}``) got through the parser (schemathesis found it)."""

import pytest

from sessions_app.models import Checkpoint, StreamEvent

pytestmark = pytest.mark.django_db

NUL_MESSAGE = "JSON parse error - strings may not contain NUL (\\u0000)."


@pytest.mark.parametrize(
    "state",
    [
        '{"k": ["a\\u0000"]}',
        '{"k": {"deeper": [1, ["\\u0000"]]}}',
        '[{"k": [{"j": ["x", "\\u0000"]}]}]',
        '{"k": [["ok"], [["\\u0000"]]]}',
    ],
)
def test_a_nul_in_a_list_inside_a_nested_object_is_refused(agent_client, session, state):
    response = agent_client.post(
        f"/api/v1/sessions/{session.pk}/checkpoints/", data=f'{{"state": {state}}}', content_type="application/json"
    )

    assert response.status_code == 400
    assert response.json() == {"message": NUL_MESSAGE}
    assert Checkpoint.objects.count() == 0


def test_a_batch_with_a_nul_deep_in_one_payload_is_refused_whole(agent_client, session):
    body = '[{"type": "log"}, {"type": "log", "payload": {"k": {"list": ["\\u0000"]}}}]'

    response = agent_client.post(f"/api/v1/sessions/{session.pk}/events/", data=body, content_type="application/json")

    assert response.status_code == 400
    assert response.json() == {"message": NUL_MESSAGE}
    assert StreamEvent.objects.count() == 0


def test_nested_lists_of_plain_strings_are_taken(agent_client, session):
    response = agent_client.post(
        f"/api/v1/sessions/{session.pk}/checkpoints/", {"state": {"k": {"l": [["a", "b"], []]}}}, format="json"
    )

    assert response.status_code == 201
    assert Checkpoint.objects.get().state == {"k": {"l": [["a", "b"], []]}}
