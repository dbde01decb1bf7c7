""" "Needs you" at the top of every page (issue 25, part 5): the sessions waiting for a person that the
person may answer, counted, with a link to the one waiting longest (its card when it has one)."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from composition.needs_you import needs_you
from config.pages import PRODUCT_OWNERS
from runners.models import Run
from runners.services import runner_key_create
from sessions_app.models import AgentSession, StreamEvent
from tests.factories import SessionFactory, StreamEventFactory, TaskFactory
from tests.page_users import user_in

pytestmark = pytest.mark.django_db

Status = AgentSession.Status
WAITING = Status.WAITING_FOR_INPUT


def _waiting(session_id: str, *, asked_minutes_ago: int, **fields) -> AgentSession:
    session = SessionFactory(id=session_id, status=WAITING, last_event_seq=1, **fields)
    question = StreamEventFactory(
        session=session, seq=1, type=StreamEvent.Type.INPUT_REQUEST, payload={"question": "?"}
    )
    StreamEvent.objects.filter(pk=question.pk).update(created_at=timezone.now() - timedelta(minutes=asked_minutes_ago))
    return session


@pytest.fixture
def owner():
    return user_in(PRODUCT_OWNERS, username="olivia")


@pytest.fixture
def world():
    """Waiting: one on a task's card (asked 5 min ago), one of a run (20 min), one on no card (60 min).
    Not waiting: running, completed."""
    card = TaskFactory(title="On the card")
    on_card = _waiting("on-card", asked_minutes_ago=5)
    card.session = on_card
    card.save(update_fields=["session"])
    of_run = _waiting("of-run", asked_minutes_ago=20)
    run_task = TaskFactory(title="Run's task")
    runner = runner_key_create(name="build-1", labels=[], capacity=1)[0]
    Run.objects.create(task=run_task, session=of_run, provider="demo", status=Run.Status.RUNNING, runner=runner)
    _waiting("no-card", asked_minutes_ago=60, intent="Refactor <b>auth</b>")
    SessionFactory(id="busy", status=Status.RUNNING)
    SessionFactory(id="over", status=Status.COMPLETED, ended_at=timezone.now())
    return {"card": card, "run_task": run_task}


def test_an_engineer_counts_every_waiting_session_and_goes_to_the_oldest(engineer, world):
    needs = needs_you(user=engineer)

    # the oldest has no card: its session page
    assert (needs.count, needs.oldest_url) == (3, "/sessions/no-card/")


def test_the_oldest_on_a_card_links_to_the_card(engineer, world):
    AgentSession.objects.filter(pk="no-card").update(status=Status.RUNNING)

    needs = needs_you(user=engineer)

    assert (needs.count, needs.oldest_url) == (2, f"/tasks/{world['run_task'].pk}/#task-run-{world['run_task'].pk}")


def test_a_product_owner_counts_only_the_sessions_a_card_shows(owner, world):
    needs = needs_you(user=owner)

    assert (needs.count, needs.oldest_url) == (2, f"/tasks/{world['run_task'].pk}/#task-run-{world['run_task'].pk}")


def test_somebody_in_no_group_sees_none(world):
    assert needs_you(user=user_in(username="nobody")).count == 0


def test_nothing_waiting_is_a_zero_without_a_link(engineer):
    SessionFactory(id="busy", status=Status.RUNNING)

    needs = needs_you(user=engineer)

    assert (needs.count, needs.oldest_url) == (0, "")


def test_the_fragment_shows_the_count_and_the_link_escaped(engineer_client, world):
    response = engineer_client.get("/needs-you/")

    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-count="3" href="/sessions/no-card/"' in html and ">3</span> need you</a>" in html
    assert 'title="Waiting longest: Refactor &lt;b&gt;auth&lt;/b&gt;"' in html
    assert response.headers["Cache-Control"].startswith("max-age=0")


def test_one_waiting_session_needs_you_in_the_singular(engineer_client):
    _waiting("only", asked_minutes_ago=1)

    assert ">1</span> needs you</a>" in engineer_client.get("/needs-you/").content.decode()


def test_the_fragment_for_nothing_waiting_is_an_empty_marker(engineer_client):
    html = engineer_client.get("/needs-you/").content.decode()

    assert '<span class="needs-you-count" data-count="0"></span>' in html and "href" not in html


def test_the_fragment_needs_a_login():
    response = Client().get("/needs-you/")

    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


@pytest.mark.parametrize("n", [2, 20])
def test_the_count_costs_the_same_queries_however_many_wait(engineer_client, django_assert_num_queries, n):
    for i in range(n):
        _waiting(f"w-{i}", asked_minutes_ago=i)

    # session, user, groups (page access), the count, the oldest
    with django_assert_num_queries(5):
        engineer_client.get("/needs-you/")


def test_every_page_fetches_the_count_after_it_loads(engineer_client, owner):
    owner_client = Client()
    owner_client.force_login(owner)
    for client, url in ((engineer_client, "/sessions/"), (owner_client, "/"), (owner_client, "/priorities/")):
        html = client.get(url).content.decode()
        assert '<div id="needs-you" class="needs-you" role="status" hx-get="/needs-you/"' in html, url
        assert 'hx-trigger="load,' in html

    assert 'id="needs-you"' not in Client().get("/accounts/login/").content.decode()
