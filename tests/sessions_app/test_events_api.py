import json
import threading

import pytest
from django.db import connection

from config.idempotency import IncomingItem, canonical_sha256
from sessions_app.models import StreamEvent
from sessions_app.services import stream_events_write
from tests.factories import SessionFactory

pytestmark = pytest.mark.django_db


def url(session) -> str:
    return f"/api/v1/sessions/{session.pk}/events/"


def post_raw(client, path, text: str):
    return client.generic("POST", path, text.encode("utf-8"), content_type="application/json")


def test_single_event_is_stored_with_the_next_seq(agent_client, session):
    first = agent_client.post(url(session), {"type": "log", "payload": {"line": "hello"}}, format="json")
    second = agent_client.post(url(session), {"type": "plan_update", "payload": {"steps": 3}}, format="json")

    assert (first.status_code, second.status_code) == (201, 201)
    assert (first.json()["seq"], second.json()["seq"]) == (1, 2)
    assert list(StreamEvent.objects.values_list("seq", "type")) == [(1, "log"), (2, "plan_update")]


def test_retry_with_the_same_id_returns_the_stored_event(agent_client, session):
    body = {"id": "evt-1", "type": "log", "payload": {"line": "once"}}

    first = agent_client.post(url(session), body, format="json")
    again = agent_client.post(url(session), body, format="json")

    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()
    assert StreamEvent.objects.count() == 1


def test_same_id_with_another_body_is_409(agent_client, session):
    agent_client.post(url(session), {"id": "evt-1", "type": "log", "payload": {"a": 1}}, format="json")

    response = agent_client.post(url(session), {"id": "evt-1", "type": "log", "payload": {"a": 2}}, format="json")

    assert response.status_code == 409
    assert StreamEvent.objects.get().payload == {"a": 1}


def test_batch_all_good_is_201_in_order(agent_client, session):
    batch = [{"id": f"e{i}", "type": "log", "payload": {"i": i}} for i in range(250)]

    response = agent_client.post(url(session), batch, format="json")

    assert response.status_code == 201
    body = response.json()
    assert (body["stored"], body["failed"]) == (250, 0)
    assert [r["item"]["seq"] for r in body["results"]] == list(range(1, 251))
    assert list(StreamEvent.objects.order_by("seq").values_list("payload__i", flat=True)) == list(range(250))


def test_batch_with_bad_items_is_207_and_stores_the_good_ones(agent_client, session, settings):
    settings.EVENT_PAYLOAD_MAX_BYTES = 1024
    batch = [
        {"type": "log", "payload": {"ok": 1}},
        {"type": "nonsense"},
        {"type": "log", "timestamp": "2026-01-01T10:00:00"},
        {"type": "log", "payload": {"big": "x" * 2000}},
        "not an object",
        {"type": "log", "payload": {"ok": 2}},
    ]

    response = agent_client.post(url(session), batch, format="json")

    assert response.status_code == 207
    statuses = [r["status"] for r in response.json()["results"]]
    assert statuses == [201, 400, 400, 413, 400, 201]
    assert list(StreamEvent.objects.order_by("seq").values_list("payload", flat=True)) == [{"ok": 1}, {"ok": 2}]


def test_batch_replayed_whole_is_200_and_writes_nothing_new(agent_client, session):
    batch = [{"id": f"e{i}", "type": "log"} for i in range(5)]
    agent_client.post(url(session), batch, format="json")

    response = agent_client.post(url(session), batch, format="json")

    assert response.status_code == 200
    assert [r["status"] for r in response.json()["results"]] == [200] * 5
    assert StreamEvent.objects.count() == 5


def test_a_client_id_twice_in_one_batch_is_stored_once(agent_client, session):
    batch = [{"id": "dup", "type": "log"}, {"id": "dup", "type": "log"}, {"id": "dup", "type": "diff"}]

    response = agent_client.post(url(session), batch, format="json")

    assert [r["status"] for r in response.json()["results"]] == [201, 200, 409]
    assert response.json()["results"][1]["item"]["seq"] == 1
    assert StreamEvent.objects.count() == 1


def test_batch_over_1000_items_is_413_and_writes_nothing(agent_client, session):
    response = agent_client.post(url(session), [{"type": "log"}] * 1001, format="json")

    assert response.status_code == 413
    assert "1000" in response.json()["message"].replace(",", "")
    assert StreamEvent.objects.count() == 0


def test_batch_where_all_fail_is_400(agent_client, session):
    response = agent_client.post(url(session), [{"type": "x"}, {"nope": 1}], format="json")

    assert response.status_code == 400
    assert StreamEvent.objects.count() == 0


def test_empty_batch_is_400(agent_client, session):
    response = agent_client.post(url(session), [], format="json")

    assert response.status_code == 400


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{not json", "JSON parse error"),
        ('{"type": "log", "payload": {"x": "a\\u0000b"}}', "NUL"),
        ('{"type": "log", "payload": {"x": "\\ud800"}}', "surrogate"),
        ('{"type": "log", "payload": {"n": 123456789012345678901234567890}}', "64 bits"),
        ('{"type": "log", "payload": {"n": NaN}}', "NaN"),
        ('{"type": "log", "type": "diff"}', "duplicate key"),
        ('"just a string"', "Expected a JSON object"),
        ('{"type": "log", "colour": "red"}', "colour"),
        ('{"type": 5}', "type"),
        ('{"type": "log", "payload": [1, 2]}', "payload"),
        ('{"type": "log", "timestamp": "yesterday"}', "timestamp"),
        ('{"type": "log", "timestamp": "2026-01-01T10:00:00"}', "UTC offset"),
    ],
)
def test_bad_input_is_400_with_a_message_and_writes_nothing(agent_client, session, text, fragment):
    response = post_raw(agent_client, url(session), text)

    assert response.status_code == 400
    assert fragment in json.dumps(response.json())
    assert StreamEvent.objects.count() == 0


def test_body_over_the_limit_is_413(agent_client, session, settings):
    settings.API_MAX_BODY_BYTES = 2048

    response = post_raw(agent_client, url(session), json.dumps({"type": "log", "payload": {"x": "y" * 4000}}))

    assert response.status_code == 413
    assert StreamEvent.objects.count() == 0


def test_another_agents_session_is_403_and_nothing_is_written(other_client, session):
    response = other_client.post(url(session), {"type": "log"}, format="json")
    read = other_client.get(url(session))

    assert (response.status_code, read.status_code) == (403, 403)
    assert StreamEvent.objects.count() == 0


def test_a_finished_session_takes_no_new_events_but_answers_replays(agent_client, agent):
    session = SessionFactory(agent=agent)
    agent_client.post(url(session), {"id": "last", "type": "log"}, format="json")
    agent_client.post(f"/api/v1/sessions/{session.pk}/transition/", {"status": "completed"}, format="json")

    replay = agent_client.post(url(session), {"id": "last", "type": "log"}, format="json")
    late = agent_client.post(url(session), {"type": "log"}, format="json")

    assert (replay.status_code, late.status_code) == (200, 409)
    assert StreamEvent.objects.filter(type="log").count() == 1


def test_read_events_after_a_cursor(agent_client, session):
    agent_client.post(url(session), [{"type": "log", "payload": {"i": i}} for i in range(7)], format="json")

    page1 = agent_client.get(url(session) + "?after_seq=0&limit=3").json()
    page2 = agent_client.get(url(session) + f"?after_seq={page1['next_after_seq']}&limit=3").json()
    page3 = agent_client.get(url(session) + f"?after_seq={page2['next_after_seq']}&limit=3").json()

    assert [e["seq"] for e in page1["results"]] == [1, 2, 3]
    assert [e["seq"] for e in page2["results"]] == [4, 5, 6]
    assert [e["seq"] for e in page3["results"]] == [7]
    assert (page1["has_more"], page3["has_more"]) == (True, False)


@pytest.mark.parametrize(
    "query", ["after_seq=abc", "after_seq=-1", "limit=0", "limit=5000", "after_seq=99999999999999999999"]
)
def test_bad_cursor_parameters_are_400(agent_client, session, query):
    assert agent_client.get(url(session) + "?" + query).status_code == 400


def test_event_list_query_count_is_constant(agent_client, session, django_assert_num_queries):
    agent_client.post(url(session), [{"type": "log"}] * 3, format="json")
    with django_assert_num_queries(3):  # key, session, events
        agent_client.get(url(session))
    agent_client.post(url(session), [{"type": "log"}] * 60, format="json")
    with django_assert_num_queries(3):
        agent_client.get(url(session))


@pytest.mark.concurrency
@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_to_one_session_get_distinct_increasing_seqs():
    session = SessionFactory()
    barrier = threading.Barrier(8)
    errors = []

    def writer(n: int) -> None:
        try:
            barrier.wait()
            for i in range(10):
                items = [
                    IncomingItem(
                        index=0,
                        data={"type": "log", "payload": {"w": n, "i": i}},
                        body_sha256=canonical_sha256(i),
                        client_id=f"{n}-{i}",
                    )
                ]
                stream_events_write(session=session, items=items)
        except Exception as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    seqs = sorted(StreamEvent.objects.filter(session=session).values_list("seq", flat=True))
    assert seqs == list(range(1, 81))
    session.refresh_from_db()
    assert session.last_event_seq == 80
