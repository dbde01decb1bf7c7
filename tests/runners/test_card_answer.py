"""Answering the agent's question from a task's card panel (its run box): shown while the run's
session (or the task's own) waits for input, answered by people of the board through the session
page's service, refused for others; the box's poll stops while an answer is being written."""

import pytest
from django.test import Client

from config.actors import SYSTEM
from config.pages import ENGINEERS, PRODUCT_OWNERS
from runners.models import Run, Runner
from runners.services import run_queue, run_transition
from sessions_app.models import AgentSession, StreamEvent
from tests.factories import SessionFactory, StreamEventFactory, TaskFactory
from tests.page_users import user_in

pytestmark = pytest.mark.django_db

Status = AgentSession.Status
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
HTMX = {"HTTP_HX_REQUEST": "true"}
QUESTION = "Which colour should the checkout button be?"


@pytest.fixture
def owner_client(client):
    client.force_login(user_in(PRODUCT_OWNERS, username="olivia"))
    return client


def _waiting_session(question: str = QUESTION, **kwargs) -> AgentSession:
    session = SessionFactory(status=Status.WAITING_FOR_INPUT, **kwargs)
    StreamEventFactory(session=session, seq=1, type="log", payload={"line": "working"})
    StreamEventFactory(session=session, seq=2, type="input_request", payload={"question": question})
    AgentSession.objects.filter(pk=session.pk).update(last_event_seq=2)
    session.refresh_from_db()
    return session


@pytest.fixture
def asking(person, runner):
    """A task whose running run's session waits for an answer to QUESTION."""
    runner.status = Runner.Status.ONLINE
    runner.save(update_fields=["status"])
    task = TaskFactory(title="Pick the button colour")
    run = run_queue(actor=person, task=task, provider="demo")
    for to in (Run.Status.ASSIGNED, Run.Status.STARTING, Run.Status.RUNNING):
        run = run_transition(actor=SYSTEM, run=run, to=to, **({"runner": runner} if to == Run.Status.ASSIGNED else {}))
    session = _waiting_session()
    Run.objects.filter(pk=run.pk).update(session=session)
    return task, session


def _answer(client, task, session, text: str, question: str = "2", **extra):
    data = {"answer": text, "session": session.pk, "question": question}
    return client.post(f"/runners/tasks/{task.pk}/answer/", data, **extra)


def _answers(session) -> list[StreamEvent]:
    return list(StreamEvent.objects.filter(session=session, type="input_request", payload__has_key="answer"))


def test_the_question_shows_in_the_panel_with_an_answer_form(owner_client, asking):
    task, session = asking

    html = owner_client.get(f"/tasks/{task.pk}/", **HTMX).content.decode()

    assert "The agent is waiting for an answer" in html
    assert f'<blockquote class="question">{QUESTION}</blockquote>' in html
    assert f'action="/runners/tasks/{task.pk}/answer/"' in html
    assert f'<input type="hidden" name="session" value="{session.pk}">' in html
    assert '<input type="hidden" name="question" value="2">' in html
    assert f'<label for="task-answer-{task.pk}">Your answer</label>' in html
    assert 'name="csrfmiddlewaretoken"' in html


def test_the_polled_box_brings_the_question_and_stops_polling_while_an_answer_is_written(owner_client, asking):
    task, _ = asking

    html = owner_client.get(f"/runners/tasks/{task.pk}/run/", **HTMX).content.decode()

    assert html.lstrip().startswith(f'<section id="task-run-{task.pk}"')
    assert QUESTION in html
    # The poll's filter: no swap while the answer field has focus or text (it would wipe it).
    assert (
        "hx-trigger=\"every 2s [!this.querySelector('.run-answer:focus-within') &amp;&amp; "
        "!this.querySelector('.run-answer textarea')?.value]\""
    ) in html


def test_a_product_owner_answers_and_the_session_runs_again_with_the_answer_recorded(owner_client, asking):
    task, session = asking

    response = _answer(owner_client, task, session, "  Green, like the logo.  ", **HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith(f'<section id="task-run-{task.pk}"')
    assert "Answer sent; the agent goes on." in html
    assert "The agent is waiting for an answer" not in html
    session.refresh_from_db()
    assert session.status == Status.RUNNING
    [answer] = _answers(session)
    assert answer.payload == {"answer": "Green, like the logo.", "in_reply_to": 2, "answered_by": "olivia"}
    status_change = StreamEvent.objects.get(session=session, type="status_change")
    assert status_change.payload == {"from": "waiting_for_input", "to": "running", "reason": "answered by user:olivia"}


def test_without_htmx_the_answer_redirects_to_the_task_with_a_message(owner_client, asking):
    task, session = asking

    response = _answer(owner_client, task, session, "Blue", follow=True)

    assert response.redirect_chain == [(f"/tasks/{task.pk}/", 302)]
    assert "Answer sent; the agent goes on." in response.content.decode()
    session.refresh_from_db()
    assert session.status == Status.RUNNING


def test_the_tasks_own_waiting_session_is_answered_when_no_run_goes(owner_client):
    session = _waiting_session(question="Deploy to prod?")
    task = TaskFactory(session=session)

    assert "Deploy to prod?" in owner_client.get(f"/tasks/{task.pk}/", **HTMX).content.decode()
    _answer(owner_client, task, session, "Yes, after 6 pm.", **HTMX)

    session.refresh_from_db()
    assert session.status == Status.RUNNING
    assert [event.payload["answer"] for event in _answers(session)] == ["Yes, after 6 pm."]


@pytest.mark.parametrize("groups", [(), ("visitors",)])
def test_a_person_outside_the_board_groups_is_refused_and_nothing_changes(client, asking, groups):
    task, session = asking
    client.force_login(user_in(*groups, username="visitor"))

    response = _answer(client, task, session, "Red", **HTMX)

    assert response.status_code == 403
    session.refresh_from_db()
    assert session.status == Status.WAITING_FOR_INPUT
    assert _answers(session) == []


def test_anonymous_and_a_post_without_csrf_are_refused(client, asking):
    task, session = asking
    assert _answer(client, task, session, "Red").status_code == 302  # to the login page
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(user_in(ENGINEERS, username="erin"))

    assert _answer(csrf_client, task, session, "Red", **HTMX).status_code == 403
    session.refresh_from_db()
    assert session.status == Status.WAITING_FOR_INPUT and _answers(session) == []


def test_an_empty_answer_is_refused_in_the_box(owner_client, asking):
    task, session = asking

    html = _answer(owner_client, task, session, "   ", **HTMX).content.decode()

    assert 'role="alert">Write an answer first: an empty answer is not sent.</p>' in html
    assert QUESTION in html  # the form is still there to write in
    session.refresh_from_db()
    assert session.status == Status.WAITING_FOR_INPUT and _answers(session) == []


def test_an_answer_to_a_question_already_answered_is_refused_with_a_clear_message(owner_client, asking):
    task, session = asking
    _answer(owner_client, task, session, "Green", **HTMX)

    html = _answer(owner_client, task, session, "Red", **HTMX).content.decode()

    assert "The agent is not waiting for an answer any more" in html
    assert [event.payload["answer"] for event in _answers(session)] == ["Green"]


def test_a_newer_question_keeps_the_answer_and_asks_to_read_it_first(owner_client, asking):
    task, session = asking
    StreamEventFactory(session=session, seq=3, type="input_request", payload={"question": "And the hover colour?"})

    html = _answer(owner_client, task, session, "Green", question="2", **HTMX).content.decode()

    assert "The agent asked another question meanwhile" in html
    assert "And the hover colour?" in html
    assert ">Green</textarea>" in html  # what the person wrote is kept
    session.refresh_from_db()
    assert session.status == Status.WAITING_FOR_INPUT and _answers(session) == []


def test_another_tasks_session_cannot_be_answered_through_this_task(owner_client, asking):
    task, _ = asking
    other = _waiting_session(question="Other?")

    html = _answer(owner_client, task, other, "Sneaky", **HTMX).content.decode()

    assert "The agent is not waiting for an answer any more" in html
    other.refresh_from_db()
    assert other.status == Status.WAITING_FOR_INPUT and _answers(other) == []


def test_a_missing_task_is_404(owner_client, db):
    assert owner_client.post("/runners/tasks/987654/answer/", {"answer": "x"}, **HTMX).status_code == 404


def test_a_hostile_question_and_answer_are_escaped(owner_client, person, runner):
    session = _waiting_session(question=HOSTILE)
    task = TaskFactory(session=session)

    html = owner_client.get(f"/tasks/{task.pk}/", **HTMX).content.decode()
    assert HOSTILE not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in html

    StreamEventFactory(session=session, seq=3, type="input_request", payload={"question": "Again?"})
    kept = _answer(owner_client, task, session, HOSTILE, **HTMX).content.decode()  # refused: kept in the box
    assert HOSTILE not in kept
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in kept


def test_no_question_box_while_the_session_runs(owner_client, asking):
    task, session = asking
    AgentSession.objects.filter(pk=session.pk).update(status=Status.RUNNING)

    html = owner_client.get(f"/tasks/{task.pk}/", **HTMX).content.decode()

    assert "The agent is waiting for an answer" not in html
    assert 'class="run-answer"' not in html
