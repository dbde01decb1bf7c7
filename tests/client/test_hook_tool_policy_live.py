"""A PreToolUse the server's tool policy marks (issue 15, part 2): a real `switchyard hook` process
records Claude Code's PreToolUse against the live server; the call's answer carries the verdict; for
"ask" the hook waits while a person answers on the session page, then prints Claude Code's
permissionDecision; a denied call is finished as failed. A tool no rule marks costs nothing more."""

import time

import pytest

from ledger.models import ToolInvocation
from sessions_app.models import Agent, AgentSession, StreamEvent, ToolPolicy
from tests.client.hook_events import FIXTURES, SID
from tests.client.hook_person import (
    answer_in_thread,
    hook_output,
    signed_in_engineer,
    wait_until_waiting,
)

pytestmark = pytest.mark.django_db(transaction=True)

PRE_TOOL = FIXTURES["PreToolUse"]  # Bash: pytest -q tests/auth
REASON = "Switchyard's tool policy 'Bash(pytest *)' (the suite is slow)"


def _decision(decision: str, reason: str) -> dict:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }


@pytest.mark.parametrize(
    ("form", "expected", "status"),
    [
        (
            {"decision": "allow", "answer": ""},
            _decision("allow", f"Allowed by eng in Switchyard ({REASON})."),
            "running",
        ),
        (
            {"decision": "deny", "answer": "Run only tests/auth/test_login.py."},
            _decision("deny", f"Denied by eng in Switchyard ({REASON}): Run only tests/auth/test_login.py."),
            "failure",
        ),
    ],
)
def test_an_ask_rule_makes_the_hook_wait_for_the_persons_decision(
    sy_server, agent_key, start_hook, form, expected, status
):
    # given a global rule that asks before the suite runs
    ToolPolicy.objects.create(pattern="Bash(pytest *)", note="the suite is slow")
    proc = start_hook(PRE_TOOL, url=sy_server.url, key=agent_key, timeout=40)
    wait_until_waiting(SID, proc)
    time.sleep(0.3)
    assert proc.poll() is None

    # when a person answers on the session page
    person, answered = answer_in_thread(sy_server.url, SID, signed_in_engineer(), **form)
    output, err = hook_output(proc)
    person.join(10)

    # then the hook prints Claude Code's decision; a denied call is over
    assert answered["response"].status_code == 302, err
    assert output == expected
    assert AgentSession.objects.get(pk=SID).status == AgentSession.Status.RUNNING
    call = ToolInvocation.objects.get(session_id=SID, client_id="toolu_01Bash")
    assert call.status == status
    question = StreamEvent.objects.get(session_id=SID, client_id=f"policy-{call.pk}")
    assert question.payload["policy"] == "Bash(pytest *)"


def test_a_deny_rule_is_printed_at_once_and_the_call_fails(sy_server, agent_key, start_hook):
    ToolPolicy.objects.create(pattern="Bash(pytest *)", action="deny", note="the suite is slow")
    started = time.monotonic()

    output, _ = hook_output(start_hook(PRE_TOOL, url=sy_server.url, key=agent_key, timeout=40))

    assert time.monotonic() - started < 10
    assert output == _decision("deny", f"Denied by {REASON}.")
    call = ToolInvocation.objects.get(session_id=SID, client_id="toolu_01Bash")
    assert (call.status, call.error) == ("failure", f"Denied by {REASON}.")


def test_a_tool_no_rule_marks_prints_nothing_and_runs(sy_server, agent_key, start_hook):
    ToolPolicy.objects.create(pattern="Write")

    output, err = hook_output(start_hook(PRE_TOOL, url=sy_server.url, key=agent_key, timeout=40))

    assert output is None and err == ""
    assert ToolInvocation.objects.get(session_id=SID, client_id="toolu_01Bash").status == "running"
    assert not StreamEvent.objects.filter(session_id=SID, type="input_request").exists()


def test_nobody_answers_the_default_deny_is_printed_and_the_session_runs_again(sy_server, agent_key, start_hook):
    ToolPolicy.objects.create(pattern="Bash")

    output, _ = hook_output(start_hook(PRE_TOOL, url=sy_server.url, key=agent_key, timeout=2))

    reason = "Switchyard's tool policy 'Bash'"
    assert output == _decision("deny", f"Nobody answered {reason} in Switchyard within 2 s; denied by default.")
    session = AgentSession.objects.get(pk=SID)
    assert session.status == AgentSession.Status.RUNNING
    change = StreamEvent.objects.filter(session=session, type="status_change").order_by("-seq").first()
    assert change.payload["reason"] == "nobody answered the tool policy's question within 2 s: deny"


def test_another_agents_rule_does_not_apply(sy_server, agent_key, other_key, start_hook):
    ToolPolicy.objects.create(agent=Agent.objects.get(slug="codex-2"), pattern="Bash")

    output, _ = hook_output(start_hook(PRE_TOOL, url=sy_server.url, key=agent_key, timeout=40))

    assert output is None


def test_a_relative_path_is_resolved_against_the_calls_cwd_the_hook_sends(sy_server, agent_key, start_hook):
    # given a rule on /etc, and a session the hook opened in the project's folder
    ToolPolicy.objects.create(pattern="Edit(/etc/*)", action="deny", note="system files")
    output, _ = hook_output(start_hook(PRE_TOOL, url=sy_server.url, key=agent_key, timeout=40))
    assert output is None
    assert AgentSession.objects.get(pk=SID).metadata["cwd"] != "/etc"

    # when Claude Code, now in /etc, edits a relative path
    edit = {
        **PRE_TOOL,
        "cwd": "/etc",
        "tool_name": "Edit",
        "tool_input": {"file_path": "./ssh/../passwd", "old_string": "a", "new_string": "b"},
        "tool_use_id": "toolu_02Edit",
    }
    output, _ = hook_output(start_hook(edit, url=sy_server.url, key=agent_key, timeout=40))

    # then the path is /etc/passwd for the rule: denied
    reason = "Switchyard's tool policy 'Edit(/etc/*)' (system files)"
    assert output == _decision("deny", f"Denied by {reason}.")
    assert ToolInvocation.objects.get(session_id=SID, client_id="toolu_02Edit").status == "failure"
