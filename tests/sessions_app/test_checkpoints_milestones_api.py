import pytest

from sessions_app.models import Checkpoint, Milestone, StreamEvent

pytestmark = pytest.mark.django_db


def test_checkpoints_get_increasing_seqs_and_the_latest_is_readable(agent_client, session):
    url = f"/api/v1/sessions/{session.pk}/checkpoints/"

    first = agent_client.post(url, {"state": {"step": 1}}, format="json")
    second = agent_client.post(url, {"state": {"step": 2, "files": ["a.py"]}}, format="json")
    latest = agent_client.get(url)

    assert (first.status_code, second.status_code) == (201, 201)
    assert (first.json()["seq"], second.json()["seq"]) == (1, 2)
    assert latest.json()["state"] == {"step": 2, "files": ["a.py"]}


def test_no_checkpoint_yet_is_404(agent_client, session):
    assert agent_client.get(f"/api/v1/sessions/{session.pk}/checkpoints/").status_code == 404


def test_checkpoint_retry_is_idempotent(agent_client, session):
    url = f"/api/v1/sessions/{session.pk}/checkpoints/"
    body = {"id": "cp-7", "state": {"step": 7}}

    responses = [agent_client.post(url, body, format="json") for _ in range(3)]

    assert [r.status_code for r in responses] == [201, 200, 200]
    assert Checkpoint.objects.count() == 1


def test_checkpoint_over_the_size_cap_is_413_and_not_stored(agent_client, session, settings):
    settings.CHECKPOINT_MAX_BYTES = 1024

    response = agent_client.post(
        f"/api/v1/sessions/{session.pk}/checkpoints/", {"state": {"blob": "x" * 2000}}, format="json"
    )

    assert response.status_code == 413
    assert "1024" in response.json()["message"]
    assert Checkpoint.objects.count() == 0


@pytest.mark.parametrize("body", [{}, {"state": {"a": 1}, "extra": True}, [{"state": {}}]])
def test_checkpoint_bad_input_is_400(agent_client, session, body):
    response = agent_client.post(f"/api/v1/sessions/{session.pk}/checkpoints/", body, format="json")

    assert response.status_code == 400
    assert Checkpoint.objects.count() == 0


def test_checkpoint_of_another_agents_session_is_403(other_client, session):
    response = other_client.post(f"/api/v1/sessions/{session.pk}/checkpoints/", {"state": {}}, format="json")

    assert response.status_code == 403
    assert Checkpoint.objects.count() == 0


def test_milestone_is_recorded_and_streamed(agent_client, session):
    url = f"/api/v1/sessions/{session.pk}/milestones/"

    response = agent_client.post(url, {"text": "Reproduced the bug", "id": "m1"}, format="json")
    replay = agent_client.post(url, {"text": "Reproduced the bug", "id": "m1"}, format="json")
    listed = agent_client.get(url)

    assert (response.status_code, replay.status_code) == (201, 200)
    assert [m["text"] for m in listed.json()] == ["Reproduced the bug"]
    assert Milestone.objects.count() == 1
    assert list(StreamEvent.objects.values_list("type", "payload__text")) == [("milestone", "Reproduced the bug")]


@pytest.mark.parametrize("body", [{}, {"text": ""}, {"text": 12}, {"text": "ok", "when": "now"}])
def test_milestone_bad_input_is_400(agent_client, session, body):
    response = agent_client.post(f"/api/v1/sessions/{session.pk}/milestones/", body, format="json")

    assert response.status_code == 400
    assert Milestone.objects.count() == 0


def test_milestone_on_another_agents_session_is_403(other_client, session):
    response = other_client.post(f"/api/v1/sessions/{session.pk}/milestones/", {"text": "mine now"}, format="json")

    assert response.status_code == 403
    assert Milestone.objects.count() == 0
    assert StreamEvent.objects.count() == 0


def test_another_agent_cannot_read_my_checkpoints_or_milestones(other_client, session):
    Checkpoint.objects.create(session=session, seq=1, state={"secret": "plan"})
    Milestone.objects.create(session=session, text="private")

    checkpoints = other_client.get(f"/api/v1/sessions/{session.pk}/checkpoints/")
    milestones = other_client.get(f"/api/v1/sessions/{session.pk}/milestones/")

    assert (checkpoints.status_code, milestones.status_code) == (403, 403)
    assert "plan" not in checkpoints.content.decode() and "private" not in milestones.content.decode()


def test_a_milestone_sent_with_title_is_400_naming_the_fields_it_takes(agent_client, session):
    # given a client that guessed the milestone's field ("title"; it is "text")
    response = agent_client.post(f"/api/v1/sessions/{session.pk}/milestones/", {"title": "Tests pass"}, format="json")

    # then the error says which fields would have been taken, the required one first
    assert response.status_code == 400
    assert response.json() == {
        "message": 'Invalid input: title: Unknown field "title"; expected: text, id.',
        "errors": {"title": ['Unknown field "title"; expected: text, id.']},
    }
    assert Milestone.objects.count() == 0
