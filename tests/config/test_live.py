"""The live-page mechanism (config/live.py): what a writer publishes goes out after commit, one
message per transaction for ids, under each topic's own numbers."""

import pytest
from django.db import transaction

from config import live

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sent(monkeypatch):
    sent = []
    monkeypatch.setattr(live, "_send", lambda topic, payload: sent.append((topic, payload)))
    return sent


def test_ids_published_in_one_transaction_go_out_once_after_commit(sent):
    with transaction.atomic():
        live.publish_ids("t", ids=[3, 1], field="ids")
        with transaction.atomic():
            live.publish_ids("t", ids=[2, 3], field="ids")
        live.publish_ids("u", ids=[9], field="ids")
        assert sent == []

    assert sent == [("t", {"ids": [1, 2, 3]}), ("u", {"ids": [9]})]


def test_a_rolled_back_transaction_sends_nothing_and_leaves_nothing_for_the_next(sent):
    with pytest.raises(RuntimeError), transaction.atomic():
        live.publish_ids("t", ids=[1], field="ids")
        raise RuntimeError

    with transaction.atomic():
        live.publish_ids("t", ids=[2], field="ids")

    assert sent == [("t", {"ids": [2]})]


def test_a_rolled_back_savepoint_that_started_the_batch_takes_its_ids_along(sent):
    with transaction.atomic():
        with pytest.raises(RuntimeError), transaction.atomic():
            live.publish_ids("t", ids=[1], field="ids")
            raise RuntimeError
        live.publish_ids("t", ids=[2], field="ids")

    assert sent == [("t", {"ids": [2]})]


def test_outside_a_transaction_ids_and_messages_go_out_at_once(sent):
    live.publish_ids("t", ids=[1], field="ids")
    live.publish_ids("t", ids=[2], field="ids")
    live.publish("u", {"n": 1})

    assert sent == [("t", {"ids": [1]}), ("t", {"ids": [2]}), ("u", {"n": 1})]


def test_messages_are_sent_one_by_one_after_commit_and_never_for_a_rollback(sent):
    with pytest.raises(RuntimeError), transaction.atomic():
        live.publish("u", {"n": 0})
        raise RuntimeError
    with transaction.atomic():
        live.publish("u", {"n": 1})
        live.publish("u", {"n": 2})
        assert sent == []

    assert sent == [("u", {"n": 1}), ("u", {"n": 2})]


def test_each_topic_counts_on_its_own_and_the_count_moves_with_nobody_listening():
    before_a, before_b = live.live_seq_current("test.a"), live.live_seq_current("test.b")

    live.publish("test.a", {})
    live.publish("test.a", {})
    live.publish("test.b", {})

    assert live.live_seq_current("test.a") == before_a + 2
    assert live.live_seq_current("test.b") == before_b + 1
