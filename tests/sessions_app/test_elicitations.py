"""An MCP elicitation answered by a person (sessions_app/elicitations.py): the form built from the
requested schema, the typed content of an accept, refusals that write nothing, and the card panel."""

import pytest
from django.test import Client

from config.api.errors import DomainError
from config.pages import PRODUCT_OWNERS
from sessions_app.elicitations import elicitation_content, elicitation_fields
from sessions_app.models import AgentSession, StreamEvent
from tests.factories import SessionFactory, TaskFactory
from tests.page_users import user_in

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "format": "email", "title": "Email"},
        "size": {"type": "string", "enum": ["s", "m"], "enumNames": ["Small"]},
        "age": {"type": "integer", "title": "Age"},
        "ok": {"type": "boolean", "default": True},
    },
    "required": ["email"],
}
URL = "/api/v1/sessions/elic/input-requests/elic-1/"


@pytest.fixture
def asking(agent, agent_client):
    """A session waiting on an MCP server's question, recorded as `switchyard hook` does."""
    SessionFactory(agent=agent, id="elic")
    question = {
        "hook": "Elicitation",
        "mcp_server_name": "shop",
        "question": "Who is the buyer?",
        "requested_schema": SCHEMA,
        "choices": ["accept", "decline", "cancel"],
        "field_order": list(SCHEMA["properties"]),
    }
    body = {"id": "elic-1", "type": "input_request", "payload": question}
    assert agent_client.post("/api/v1/sessions/elic/events/", body, format="json").status_code == 201
    moved = {"status": "waiting_for_input", "reason": "shop asks for input"}
    assert agent_client.post("/api/v1/sessions/elic/transition/", moved, format="json").status_code == 200
    return AgentSession.objects.get(pk="elic")


def test_the_fields_follow_the_schema_in_the_servers_order():
    fields = {f["name"]: f for f in elicitation_fields(SCHEMA)}
    reordered = elicitation_fields(SCHEMA, ["ok", "age", "unknown"])

    assert [f["kind"] for f in fields.values()] == ["text", "choice", "integer", "boolean"]
    assert fields["email"]["required"] and fields["email"]["format"] == "email"
    assert fields["size"]["choices"] == [("s", "Small"), ("m", "m")]
    assert fields["ok"]["default"] is True
    assert elicitation_fields({"type": "object"}) == [] and elicitation_fields("junk") == []
    assert [f["name"] for f in reordered] == ["ok", "age", "email", "size"]


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"field:age": "3"}, "Email is required"),
        ({"field:email": "a@b.c", "field:age": "3.5"}, "Age must be a whole number"),
        ({"field:email": "a@b.c", "field:size": "xl"}, "size must be one of: s, m"),
    ],
)
def test_a_wrong_value_is_refused_with_the_fields_name(form, message):
    with pytest.raises(DomainError, match=message):
        elicitation_content(schema=SCHEMA, form=form)


def test_the_card_panel_shows_the_form_and_a_product_owner_accepts(agent_client, asking):
    owner = Client()
    owner.force_login(user_in(PRODUCT_OWNERS, username="olivia"))
    task = TaskFactory(session=asking)
    html = owner.get(f"/tasks/{task.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert f'id="task-answer-{task.pk}-email" name="field:email"' in html and 'value="accept"' in html
    # in the MCP server's order, which PostgreSQL's jsonb would not keep
    assert (
        html.index('"field:email"') < html.index('"field:size"') < html.index('"field:age"') < html.index('"field:ok"')
    )
    seq = StreamEvent.objects.get(session=asking, client_id="elic-1").seq
    form = {"decision": "accept", "answer": "", "session": "elic", "question": str(seq)}

    refused = owner.post(f"/runners/tasks/{task.pk}/answer/", {**form, "field:age": "7"}, HTTP_HX_REQUEST="true")
    written = AgentSession.objects.get(pk="elic").last_event_seq
    response = owner.post(
        f"/runners/tasks/{task.pk}/answer/",
        {**form, "field:email": "b@shop.example", "field:age": "41", "field:size": "m"},
        HTTP_HX_REQUEST="true",
    )

    assert "Email is required" in refused.content.decode(), refused.content.decode()[:1500]
    assert written == seq + 1  # the status change only
    assert response.status_code == 200
    body = agent_client.get(URL).json()
    assert body["decision"] == "accept" and body["answered_by"] == "olivia"
    assert body["content"] == {"email": "b@shop.example", "size": "m", "age": 41, "ok": False}
    assert AgentSession.objects.get(pk="elic").status == AgentSession.Status.RUNNING


def test_an_elicitation_needs_one_of_its_actions(engineer_client, asking):
    before = AgentSession.objects.get(pk="elic").last_event_seq

    seq = StreamEvent.objects.get(session=asking, client_id="elic-1").seq
    response = engineer_client.post("/sessions/elic/answer/", {"question": seq, "decision": "allow", "answer": "sure"})

    assert response.status_code == 400 and "Choose Accept, Decline or Cancel" in response.content.decode()
    assert AgentSession.objects.get(pk="elic").last_event_seq == before
    assert AgentSession.objects.get(pk="elic").status == AgentSession.Status.WAITING_FOR_INPUT


# --- values refused with a message, never stored (NaN and Infinity failed the database's JSON check) ---
BOUNDED = {
    "type": "object",
    "properties": {
        "count": {"type": "number", "title": "Count", "minimum": 0, "maximum": 1000},
        "ratio": {"type": "number", "title": "Ratio"},
        "copies": {"type": "integer", "title": "Copies", "minimum": 0},
        "due": {"type": "string", "format": "date", "title": "Due"},
        "agree": {"type": "boolean", "title": "Agree"},
        "code": {"type": "string", "title": "Code", "minLength": 2, "maxLength": 4},
    },
}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("ratio", "NaN", "Ratio must be a number such as 12, -3.5 or 1.5e3, not 'NaN'."),
        ("ratio", "Infinity", "Ratio must be a number such as 12, -3.5 or 1.5e3, not 'Infinity'."),
        ("ratio", "-inf", "Ratio must be a number"),
        ("ratio", "1e999", "Ratio is out of range: 1e999 is beyond what a number can hold."),
        ("count", "-5", "Count must be at least 0, not -5."),
        ("count", "1e308", "Count must be at most 1000, not 1e+308."),
        ("copies", "-5", "Copies must be at least 0, not -5."),
        ("copies", "1e308", "Copies must be a whole number such as 12 or -3, not '1e308'."),
        ("copies", "99999999999999999999", "Copies is out of range"),
        ("ratio", "1_0", "Ratio must be a number such as 12, -3.5 or 1.5e3, not '1_0'."),
        ("copies", "1_0", "Copies must be a whole number such as 12 or -3, not '1_0'."),
        ("copies", "\u0661\u0662", "Copies must be a whole number"),  # Arabic-Indic 12
        ("ratio", "\u0661.\u0665", "Ratio must be a number"),
        ("due", "2026-02-30", "Due must be a date as YYYY-MM-DD (one that exists), not '2026-02-30'."),
        ("due", "20260301", "Due must be a date as YYYY-MM-DD"),
        ("agree", "maybe", "Agree is true or false (tick the box or not), not 'maybe'."),
        ("code", "x", "Code needs at least 2 characters."),
        ("code", "xxxxx", "Code takes at most 4 characters."),
    ],
)
def test_a_value_the_schema_does_not_allow_is_refused_with_a_message(field, value, message):
    with pytest.raises(DomainError) as refused:
        elicitation_content(schema=BOUNDED, form={f"field:{field}": value})

    assert refused.value.message.startswith(message), refused.value.message
    assert refused.value.code == "invalid"


def test_values_within_the_schema_are_typed():
    form = {
        "field:count": "1000",
        "field:ratio": "1e308",
        "field:copies": "0",
        "field:due": "2026-02-28",
        "field:agree": "on",
        "field:code": "ab",
    }

    content = elicitation_content(schema=BOUNDED, form=form)

    assert content == {"count": 1000, "ratio": 1e308, "copies": 0, "due": "2026-02-28", "agree": True, "code": "ab"}
    assert isinstance(content["ratio"], float)  # not a 309-digit integer
    assert elicitation_content(schema=BOUNDED, form={"field:ratio": "-.5"})["ratio"] == -0.5
    assert elicitation_content(schema=BOUNDED, form={"field:agree": "off"})["agree"] is False


@pytest.mark.parametrize("value", ["NaN", "Infinity", "1e999", "-5", "1_0", "\u0661", "maybe", "2026-02-30"])
def test_the_session_page_answers_a_bad_value_with_400_and_writes_nothing(engineer_client, agent, agent_client, value):
    # given a session waiting on an elicitation whose form has a number, a date and a checkbox
    SessionFactory(agent=agent, id="bounded")
    question = {"question": "Numbers?", "requested_schema": BOUNDED, "choices": ["accept", "decline", "cancel"]}
    body = {"id": "b-1", "type": "input_request", "payload": question}
    assert agent_client.post("/api/v1/sessions/bounded/events/", body, format="json").status_code == 201
    moved = {"status": "waiting_for_input", "reason": "asks"}
    assert agent_client.post("/api/v1/sessions/bounded/transition/", moved, format="json").status_code == 200
    seq = StreamEvent.objects.get(session_id="bounded", client_id="b-1").seq
    field = {"maybe": "agree", "2026-02-30": "due", "-5": "count"}.get(value, "copies" if value == "1_0" else "ratio")

    # when an engineer accepts with the value
    form = {"question": seq, "decision": "accept", "answer": "", f"field:{field}": value}
    response = engineer_client.post("/sessions/bounded/answer/", form)

    # then a 400 says what is wrong, and the session still waits with nothing written
    assert response.status_code == 400
    assert 'role="alert">' in response.content.decode()
    session = AgentSession.objects.get(pk="bounded")
    assert (session.status, session.last_event_seq) == (AgentSession.Status.WAITING_FOR_INPUT, seq + 1)
