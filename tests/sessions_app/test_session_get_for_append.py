"""session_get_for_append: the event endpoint's light session lookup answers as session_get_for_actor does."""

import pytest

from config.actors import SYSTEM, Actor
from config.api.errors import DomainError
from sessions_app.models import AgentSession
from sessions_app.selectors import session_get_for_actor, session_get_for_append
from tests.factories import AgentFactory, SessionFactory

pytestmark = pytest.mark.django_db


def _error(lookup, **kwargs):
    with pytest.raises(DomainError) as caught:
        lookup(**kwargs)
    return caught.value.code, str(caught.value)


@pytest.mark.parametrize("lookup", [session_get_for_actor, session_get_for_append])
def test_it_loads_the_owners_session(lookup, django_assert_num_queries):
    session = SessionFactory(status=AgentSession.Status.RUNNING)

    with django_assert_num_queries(1):
        found = lookup(actor=Actor(agent=session.agent), session_id=session.pk)
        assert (found.pk, found.agent_id, found.status, found.is_terminal) == (
            session.pk,
            session.agent_id,
            "running",
            False,
        )


def test_other_fields_load_when_read():
    session = SessionFactory(intent="ship it")

    found = session_get_for_append(actor=SYSTEM, session_id=session.pk)

    assert found.get_deferred_fields() >= {"intent", "last_event_seq"}
    assert found.intent == "ship it"


def test_missing_and_foreign_sessions_are_refused_the_same_way():
    session = SessionFactory()
    stranger = Actor(agent=AgentFactory(slug="stranger"))

    for session_id, actor in [("nope", Actor(agent=session.agent)), (session.pk, stranger)]:
        expected = _error(session_get_for_actor, actor=actor, session_id=session_id)
        assert _error(session_get_for_append, actor=actor, session_id=session_id) == expected
        assert expected[0] in ("not_found", "forbidden")
