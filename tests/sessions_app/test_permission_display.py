"""A permission request read and answered on a phone (issue 25, part 5): the command or file path
first and whole, the full input folded below, Claude Code's ``permission_suggestions`` offered as
"Always allow ..." buttons whose answer names the suggestion the hook applies; agent text escaped;
a suggestion the request does not offer refused with nothing written."""

import re

import pytest
from django.test import Client

from config.pages import PRODUCT_OWNERS
from sessions_app.models import AgentSession, StreamEvent
from sessions_app.permission_display import permission_subject, suggestion_label
from tests.browser.phone_pages import LONG_COMMAND, SUGGESTIONS
from tests.factories import SessionFactory, TaskFactory
from tests.page_users import user_in

pytestmark = pytest.mark.django_db

Status = AgentSession.Status
URL = "/api/v1/sessions/asks/input-requests/perm-1/"
HOSTILE = '<script>alert("x")</script>'


def _ask(agent_client, agent, **fields) -> AgentSession:
    """A session waiting on a permission request, recorded through the API as `switchyard hook` does."""
    SessionFactory(agent=agent, id="asks", status=Status.RUNNING)
    question = {
        "hook": "PermissionRequest",
        "tool_name": "Bash",
        "tool_input": {"command": LONG_COMMAND, "description": "Force-push the branch"},
        "permission_suggestions": SUGGESTIONS,
        "question": "Allow Bash?",
        "choices": ["allow", "deny"],
        **fields,
    }
    body = {"id": "perm-1", "type": "input_request", "payload": question}
    assert agent_client.post("/api/v1/sessions/asks/events/", body, format="json").status_code == 201
    moved = agent_client.post(
        "/api/v1/sessions/asks/transition/", {"status": "waiting_for_input", "reason": "asks"}, format="json"
    )
    assert moved.status_code == 200
    return AgentSession.objects.get(pk="asks")


@pytest.fixture
def asking(agent, agent_client):
    return _ask(agent_client, agent)


def _written(session) -> int:
    return AgentSession.objects.get(pk=session.pk).last_event_seq


def test_the_command_comes_first_whole_and_the_full_input_is_folded_below(engineer_client, asking):
    html = engineer_client.get("/sessions/asks/").content.decode()

    subject = re.search(r'<pre class="permission-subject">(.*?)</pre>', html, re.S).group(1)
    assert subject == LONG_COMMAND.replace("&", "&amp;")  # whole: no "…"
    assert html.index("permission-subject") < html.index('<details class="permission-full">')
    assert html.index('<details class="permission-full">') < html.index('class="permission-input"')
    assert "Force-push the branch" in html


def test_the_suggestions_are_buttons_in_words(engineer_client, asking):
    html = engineer_client.get("/sessions/asks/").content.decode()

    buttons = re.findall(
        r'<button type="submit" name="suggestion" value="(\d)" class="permission-always">(.*?)</button>', html
    )
    assert buttons == [
        ("0", "Always allow Bash(git push:*) in this project (your local settings)"),
        ("1", "Allow, and switch to accept edits mode for this session"),
    ]


def test_always_allow_stores_the_suggestion_the_agent_reads_back(engineer_client, agent_client, asking):
    response = engineer_client.post("/sessions/asks/answer/", {"question": "1", "suggestion": "0", "answer": ""})

    assert response.status_code == 302
    body = agent_client.get(URL).json()
    assert (body["answered"], body["decision"], body["suggestion"]) == (True, "allow", 0)
    assert AgentSession.objects.get(pk="asks").status == Status.RUNNING
    change = StreamEvent.objects.filter(session=asking, type="status_change").order_by("-seq").first()
    assert change.payload["reason"] == "always allowed by user:eng"


def test_a_plain_allow_names_no_suggestion(engineer_client, agent_client, asking):
    engineer_client.post("/sessions/asks/answer/", {"question": "1", "decision": "allow", "answer": ""})

    assert agent_client.get(URL).json()["suggestion"] is None


@pytest.mark.parametrize(
    ("form", "says"),
    [
        ({"suggestion": "2"}, "Suggestion '2' is not one this permission request offers: it offers 2 (0 to 1)."),
        ({"suggestion": "-1"}, "Suggestion '-1' is not one this permission request offers"),
        ({"suggestion": "one"}, "Suggestion 'one' is not one this permission request offers"),
        ({"suggestion": "0", "decision": "deny"}, "A suggestion is applied with Allow, not with Deny"),
    ],
    ids=["out-of-range", "negative", "not-a-number", "with-deny"],
)
def test_a_suggestion_not_offered_is_refused_and_nothing_is_written(engineer_client, asking, form, says):
    before = _written(asking)

    response = engineer_client.post("/sessions/asks/answer/", {"question": "1", "answer": "", **form})

    assert response.status_code == 400
    assert says in response.content.decode().replace("&#x27;", "'")
    assert _written(asking) == before
    assert AgentSession.objects.get(pk="asks").status == Status.WAITING_FOR_INPUT


def test_a_request_without_suggestions_offers_no_button_and_refuses_one(agent, agent_client, engineer_client):
    session = _ask(agent_client, agent, permission_suggestions=None)
    html = engineer_client.get("/sessions/asks/").content.decode()
    assert 'name="suggestion"' not in html
    before = _written(session)

    response = engineer_client.post("/sessions/asks/answer/", {"question": "1", "suggestion": "0", "answer": ""})

    assert response.status_code == 400 and "it offers none" in response.content.decode()
    assert _written(session) == before


def test_a_text_question_refuses_a_suggestion(engineer_client, agent, agent_client):
    SessionFactory(agent=agent, id="text", status=Status.RUNNING)
    agent_client.post(
        "/api/v1/sessions/text/events/", {"type": "input_request", "payload": {"question": "Which?"}}, format="json"
    )
    agent_client.post(
        "/api/v1/sessions/text/transition/", {"status": "waiting_for_input", "reason": "asks"}, format="json"
    )

    response = engineer_client.post("/sessions/text/answer/", {"question": "1", "suggestion": "0", "answer": "A"})

    assert response.status_code == 400
    assert AgentSession.objects.get(pk="text").status == Status.WAITING_FOR_INPUT


def test_a_product_owner_always_allows_from_the_card(agent_client, asking):
    owner = Client()
    owner.force_login(user_in(PRODUCT_OWNERS, username="olivia"))
    task = TaskFactory(session=asking)
    html = owner.get(f"/tasks/{task.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert 'name="suggestion" value="0"' in html and '<pre class="permission-subject">' in html

    response = owner.post(
        f"/runners/tasks/{task.pk}/answer/",
        {"suggestion": "1", "answer": "", "session": "asks", "question": "1"},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 200
    body = agent_client.get(URL).json()
    assert (body["decision"], body["suggestion"], body["answered_by"]) == ("allow", 1, "olivia")


def test_the_agents_text_is_escaped_everywhere_it_is_shown(agent, agent_client, engineer_client):
    hostile_suggestion = {
        "type": "addRules",
        "rules": [{"toolName": HOSTILE, "ruleContent": HOSTILE}],
        "behavior": "allow",
        "destination": "session",
    }
    _ask(
        agent_client,
        agent,
        tool_name=HOSTILE,
        tool_input={"command": HOSTILE, "description": HOSTILE, HOSTILE: HOSTILE},
        permission_suggestions=[hostile_suggestion, {"type": HOSTILE, "destination": HOSTILE}],
    )

    html = engineer_client.get("/sessions/asks/").content.decode()

    assert "<script>" not in html
    assert html.count("&lt;script&gt;") >= 5  # tool, command, description, input, both suggestions


@pytest.mark.parametrize(
    ("payload", "field", "text"),
    [
        ({"tool_name": "Bash", "tool_input": {"command": "ls", "description": "List"}}, "command", "ls"),
        ({"tool_name": "Edit", "tool_input": {"file_path": "/a/b.py", "old_string": "x"}}, "file path", "/a/b.py"),
        ({"tool_name": "WebFetch", "tool_input": {"url": "https://x.test", "prompt": "p"}}, "url", "https://x.test"),
        ({"tool_name": "mcp__db__query", "tool_input": {"sql": "select 1", "query": "q"}}, "query", "q"),
    ],
)
def test_the_subject_is_the_field_that_says_what_the_tool_does(payload, field, text):
    subject = permission_subject(payload)

    assert (subject.field, subject.text) == (field, text)


def test_no_subject_when_the_input_has_no_such_field():
    assert permission_subject({"tool_name": "mcp__x__y", "tool_input": {"n": 3}}) is None
    assert permission_subject({"tool_name": "Bash", "tool_input": "not a dict"}) is None


@pytest.mark.parametrize(
    ("suggestion", "label"),
    [
        ({"type": "addDirectories", "directories": ["/srv/data"], "destination": "session"},
         "Always allow access to /srv/data for this session"),
        ({"type": "addRules", "rules": [{"toolName": "WebFetch"}], "behavior": "allow", "destination": "userSettings"},
         "Always allow WebFetch in all your projects"),
        ({"type": "removeDirectories", "directories": ["/x"], "destination": "cliArg"},
         "Allow, and apply removeDirectories for this run"),
        ("not a dict", ""),
    ],
)  # fmt: skip
def test_suggestions_in_words(suggestion, label):
    assert suggestion_label(suggestion) == label
