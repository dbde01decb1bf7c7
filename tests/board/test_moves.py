"""task_move and its view: ranks, columns, claims, refusals, and two movers at once."""

import pytest

from board import services
from board.models import Task, TaskClaim
from board.moves import task_move
from board.services import RANK_STEP
from config.actors import Actor
from config.api.errors import DomainError
from tests.board.board_helpers import product_owner
from tests.board.helpers import board_state, task_events
from tests.factories import TaskFactory
from tests.threads import run_together


@pytest.fixture
def person(db):
    return product_owner()


@pytest.fixture
def po_client(client, person):
    client.force_login(person)
    return client


def _column(status: str) -> list[str]:
    return list(Task.objects.filter(status=status).order_by("rank", "id").values_list("title", flat=True))


def _cards(*titles, status=Task.Status.READY) -> list[Task]:
    return [TaskFactory(title=t, status=status, rank=(i + 1) * RANK_STEP) for i, t in enumerate(titles)]


def test_a_card_moves_between_its_neighbours_and_only_it_changes(person):
    a, b, c = _cards("a", "b", "c")

    result = task_move(actor=Actor(user=person), task_id=c.pk, status="ready", after_id=a.pk, before_id=b.pk)

    assert _column("ready") == ["a", "c", "b"]
    assert result.changed_ids == [c.pk] and not result.renumbered
    assert Task.objects.get(pk=c.pk).rank == (RANK_STEP + 2 * RANK_STEP) // 2
    assert task_events()["task.moved"] == 1


@pytest.mark.parametrize(
    ("after", "before", "expected"),
    [(None, "a", ["x", "a", "b"]), ("b", None, ["a", "b", "x"]), (None, None, ["a", "b", "x"])],
)
def test_top_bottom_and_no_neighbours(person, after, before, expected):
    cards = {t.title: t for t in _cards("a", "b")}
    x = TaskFactory(title="x", status=Task.Status.BACKLOG)

    task_move(
        actor=Actor(user=person),
        task_id=x.pk,
        status="ready",
        after_id=cards[after].pk if after else None,
        before_id=cards[before].pk if before else None,
    )

    assert _column("ready") == expected
    assert _column("backlog") == []


def test_no_gap_left_renumbers_the_column(person):
    a = TaskFactory(title="a", rank=10)
    b = TaskFactory(title="b", rank=11)
    x = TaskFactory(title="x", rank=5000)

    result = task_move(actor=Actor(user=person), task_id=x.pk, status="ready", after_id=a.pk, before_id=b.pk)

    assert result.renumbered
    assert sorted(result.changed_ids) == sorted([a.pk, b.pk, x.pk])
    assert list(Task.objects.filter(status="ready").order_by("rank").values_list("title", "rank")) == [
        ("a", RANK_STEP),
        ("x", 2 * RANK_STEP),
        ("b", 3 * RANK_STEP),
    ]


def test_moving_a_claimed_task_out_of_in_progress_ends_the_claim(person, agent):
    task = TaskFactory(title="held")
    services.task_claim(actor=Actor(agent=agent), agent=agent, task=task)

    task_move(actor=Actor(user=person), task_id=task.pk, status="backlog")

    task.refresh_from_db()
    assert (task.status, task.assignee_id) == ("backlog", None)
    claim = TaskClaim.objects.get(task=task)
    assert claim.outcome == TaskClaim.Outcome.RELEASED and claim.released_at is not None
    assert task_events()["task.released"] == 1


def test_moving_a_claimed_task_to_done_completes_the_claim(person, agent):
    task = TaskFactory(title="held")
    services.task_claim(actor=Actor(agent=agent), agent=agent, task=task)

    task_move(actor=Actor(user=person), task_id=task.pk, status="done")

    task.refresh_from_db()
    assert task.status == "done" and task.finished_at is not None and task.assignee_id == agent.pk
    assert TaskClaim.objects.get(task=task).outcome == TaskClaim.Outcome.COMPLETED


def test_moving_into_in_progress_is_refused_and_nothing_changes(person):
    task = TaskFactory(title="ready one")
    before = board_state()

    with pytest.raises(DomainError) as refused:
        task_move(actor=Actor(user=person), task_id=task.pk, status="in_progress")

    assert refused.value.code == "conflict"
    assert "agent" in refused.value.message
    assert board_state() == before


def test_a_stale_neighbour_is_a_conflict_and_nothing_changes(person):
    a, b = _cards("a", "b")
    elsewhere = TaskFactory(title="gone", status=Task.Status.DONE)
    before = board_state()

    with pytest.raises(DomainError) as refused:
        task_move(actor=Actor(user=person), task_id=a.pk, status="ready", after_id=elsewhere.pk)

    assert refused.value.code == "conflict"
    assert board_state() == before


def test_the_view_moves_and_answers_the_card_and_counts(po_client):
    a, b = _cards("a", "b")

    response = po_client.post(f"/tasks/{b.pk}/move/", {"status": "review"})

    assert response.status_code == 200
    body = response.json()
    assert f'id="task-{b.pk}"' in body["html"] and 'data-status="review"' in body["html"]
    assert 'id="count-review"' in body["html"] and body["removed"] == []
    assert _column("review") == ["b"]


@pytest.mark.parametrize(
    ("data", "status"),
    [
        ({"status": "nowhere"}, 400),
        ({"status": "ready", "after_id": "x1"}, 400),
        ({"status": "in_progress"}, 409),
        ({"status": "ready", "after_id": "999999"}, 409),
    ],
)
def test_the_view_refuses_bad_moves_with_a_message_and_changes_nothing(po_client, data, status):
    (a,) = _cards("a")
    before = board_state()

    response = po_client.post(f"/tasks/{a.pk}/move/", data)

    assert response.status_code == status
    assert response.json()["message"]
    assert board_state() == before


def test_the_view_answers_404_for_a_missing_task_and_403_outside_the_groups(po_client, client):
    assert po_client.post("/tasks/999999/move/", {"status": "ready"}).status_code == 404


def test_people_outside_the_board_groups_cannot_move(client, db):
    from tests.factories import UserFactory

    (a,) = _cards("a")
    client.force_login(UserFactory(username="outsider"))
    before = board_state()
    assert client.post(f"/tasks/{a.pk}/move/", {"status": "done"}).status_code == 403
    assert board_state() == before


@pytest.mark.concurrency
@pytest.mark.django_db(transaction=True)
def test_two_people_moving_at_once_end_with_one_consistent_order():
    """Both put a card right after "a": both land there, one above the other, ranks distinct."""
    person = product_owner()
    a, b = _cards("a", "b")
    x = TaskFactory(title="x", status=Task.Status.BACKLOG)
    y = TaskFactory(title="y", status=Task.Status.BACKLOG)

    def move(task):
        task_move(actor=Actor(user=person), task_id=task.pk, status="ready", after_id=a.pk)

    assert run_together(move, [x, y]) == []

    order = _column("ready")
    assert order[0] == "a" and order[-1] == "b" and sorted(order[1:3]) == ["x", "y"]
    ranks = list(Task.objects.filter(status="ready").values_list("rank", flat=True))
    assert len(set(ranks)) == len(ranks)
