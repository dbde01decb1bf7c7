"""The kernel's port to the domain event log (config/domain_events.py): apps below ledger record
events through it, and ledger's ``ready()`` plugs its writer in."""

import pytest

from config import domain_events
from config.domain_events import domain_event_record, domain_event_writer_register
from ledger.events import event_record
from ledger.models import Event


@pytest.fixture
def no_writer(monkeypatch):
    # The module's one writer, put back as it was after the test (ledger's, in the running app).
    monkeypatch.setattr(domain_events._writer, "_registered", None)


def test_in_the_running_app_the_writer_is_ledgers_event_record():
    assert domain_events._writer.get() is event_record


@pytest.mark.django_db
def test_recording_through_the_port_stores_a_ledger_event():
    # when
    event = domain_event_record(name="session.started", subject_type="session", subject_id="s-1", payload={"a": 1})

    # then: ledger's writer stored it, and the caller gets the row back
    assert isinstance(event, Event)
    stored = Event.objects.get()
    assert (stored.pk, stored.name, stored.subject_type, stored.subject_id, stored.actor, stored.payload) == (
        event.pk,
        "session.started",
        "session",
        "s-1",
        "system",
        {"a": 1},
    )


def test_the_port_calls_the_registered_writer_with_every_field_and_returns_its_answer(no_writer):
    # given
    calls = []

    def writer(**fields):
        calls.append(fields)
        return "written"

    domain_event_writer_register(writer=writer)

    # when
    answer = domain_event_record(name="x.y", subject_type="thing", subject_id=7, actor="agent:a", payload={"k": "v"})

    # then
    assert answer == "written"
    assert calls == [
        {"name": "x.y", "subject_type": "thing", "subject_id": 7, "actor": "agent:a", "payload": {"k": "v"}}
    ]


def test_registering_again_replaces_the_writer(no_writer):
    # given: ready() ran twice
    domain_event_writer_register(writer=lambda **fields: "first")
    domain_event_writer_register(writer=lambda **fields: "second")

    # then
    assert domain_event_record(name="x.y", subject_type="thing", subject_id=1) == "second"


def test_without_a_writer_recording_is_an_error_naming_the_ledger_app(no_writer):
    with pytest.raises(RuntimeError, match="the ledger app must be installed"):
        domain_event_record(name="x.y", subject_type="thing", subject_id=1)
