"""A permission request answered by a person while `switchyard hook` waits (issue 15, part 2): a real
hook process reads Claude Code's PermissionRequest payload on stdin, records it against the live
server and waits; a person answers through the session page's form over HTTP from another thread;
the hook prints Claude Code's decision JSON. Also: nobody answers (the default), and another agent's
hook gets no answer to a session not its own."""

import json
import subprocess
import time

import httpx
import pytest

from sessions_app.models import AgentSession, StreamEvent
from tests.client.hook_events import FIXTURES, SID
from tests.client.hook_person import answer_in_thread, signed_in_engineer, wait_until_waiting

pytestmark = pytest.mark.django_db(transaction=True)

REQUEST = FIXTURES["PermissionRequest"]


def _output(proc: subprocess.Popen, timeout: float = 60) -> tuple[dict | None, str]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return (json.loads(out) if out.strip() else None), err


@pytest.mark.parametrize(
    ("form", "decision"),
    [
        ({"decision": "allow", "answer": ""}, {"behavior": "allow"}),
        (
            {"decision": "deny", "answer": "Run only the unit tests."},
            {"behavior": "deny", "message": "Denied by eng in Switchyard: Run only the unit tests."},
        ),
        # "Always allow Bash(pytest:*) ...": the suggestion Claude Code sent, applied by Claude Code itself
        (
            {"suggestion": "0", "answer": ""},
            {"behavior": "allow", "updatedPermissions": REQUEST["permission_suggestions"]},
        ),
    ],
    ids=["allow", "deny", "always-allow"],
)
def test_the_hook_waits_and_prints_the_persons_decision(sy_server, agent_key, start_hook, form, decision):
    # given a hook process waiting on a permission request
    proc = start_hook(REQUEST, url=sy_server.url, key=agent_key, timeout=40)
    wait_until_waiting(SID, proc)
    time.sleep(0.3)
    assert proc.poll() is None  # still waiting for a person

    # when a person answers through the page, from another thread
    cookies = signed_in_engineer()
    sent_at = time.monotonic()
    person, answered = answer_in_thread(sy_server.url, SID, cookies, **form)
    output, err = _output(proc)
    took = time.monotonic() - sent_at
    person.join(10)

    # then the hook prints Claude Code's decision, soon after the answer
    assert answered["response"].status_code == 302
    assert output == {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}
    assert took < 10, err
    assert AgentSession.objects.get(pk=SID).status == AgentSession.Status.RUNNING
    question = StreamEvent.objects.get(session_id=SID, payload__hook="PermissionRequest")
    assert question.payload["choices"] == ["allow", "deny"] and question.payload["tool_name"] == "Bash"


def test_nobody_answers_the_default_deny_is_printed_and_the_session_runs_again(sy_server, agent_key, start_hook):
    started = time.monotonic()
    proc = start_hook(REQUEST, url=sy_server.url, key=agent_key, timeout=3)

    output, _ = _output(proc)

    assert 2.5 <= time.monotonic() - started < 15
    assert output == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {
                "behavior": "deny",
                "message": "Nobody answered this permission request in Switchyard within 3 s; denied by default.",
            },
        }
    }
    session = AgentSession.objects.get(pk=SID)
    assert session.status == AgentSession.Status.RUNNING
    change = StreamEvent.objects.filter(session=session, type="status_change").order_by("-seq").first()
    assert change.payload["reason"] == "nobody answered the permission request within 3 s: deny"


def test_the_default_can_leave_the_decision_to_claude_code(sy_server, agent_key, start_hook):
    proc = start_hook(REQUEST, url=sy_server.url, key=agent_key, timeout=2, SWITCHYARD_PERMISSION_DEFAULT="ask")

    output, _ = _output(proc)

    assert output is None


def test_another_agents_hook_gets_no_answer_to_a_session_not_its_own(sy_server, agent_key, other_key, start_hook):
    # given the session of claude-1, waiting on its permission request
    mine = start_hook(REQUEST, url=sy_server.url, key=agent_key, timeout=30)
    wait_until_waiting(SID, mine)
    seq = StreamEvent.objects.get(session_id=SID, payload__hook="PermissionRequest").client_id
    # when another agent asks for that question's answer
    status = httpx.get(
        f"{sy_server.url}/api/v1/sessions/{SID}/input-requests/{seq}/",
        headers={"Authorization": f"Bearer {other_key}"},
    ).status_code
    # then it is refused, and its own hook on that session decides by default at once
    assert status == 403
    started = time.monotonic()
    theirs = start_hook(REQUEST, url=sy_server.url, key=other_key, timeout=30)
    output, err = _output(theirs)
    assert time.monotonic() - started < 10
    assert output["hookSpecificOutput"]["decision"]["behavior"] == "deny"
    assert "403" in err
    mine.kill()
    mine.communicate()
