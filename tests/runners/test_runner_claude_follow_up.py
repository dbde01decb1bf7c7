"""Request changes continues the same Claude Code session (SPEC §10), with the real CLI.

A live server, a real `switchyard runner` offering the built-in `claude` provider, a real git
repository, and the scripted Messages API (fake_anthropic.py). Run 1 commits a file; a person
requests changes; run 2 is started by the same runner as `claude -p --resume <run 1's session>`,
and the model sees the earlier conversation in its request (run 1's prompt and tool result) before
the request for changes; the branch gets run 2's commit on top of run 1's.
"""

import pytest

from board.models import Task
from config.actors import Actor
from runners.models import Run
from runners.review import task_review
from runners.task_diff import task_change
from sessions_app.models import AgentSession
from switchyard_client.runner.providers import session_uuid
from tests.client.live import server_roots, sy_server  # noqa: F401
from tests.factories import UserFactory
from tests.runners.fake_anthropic import FakeAnthropic, Reply, text, tool_results, tool_use
from tests.runners.live_runner import run_in, wait_for
from tests.runners.test_runner_claude_e2e import (  # noqa: F401 - fixtures
    machine,
    queue_claude,
    repository,
    worktree_of,
)
from tests.workspaces.conftest import git

pytestmark = pytest.mark.usefixtures("transactional_db")

FIRST = "Write a.txt and commit it"
REQUEST = "Also write b.txt and commit it."


def _user_texts(body: dict) -> list[str]:
    texts = []
    for message in body.get("messages") or []:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        texts += [b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    return texts


class TurnsFake(FakeAnthropic):
    """One conversation in turns: the script of the turn whose marker the newest user text carries
    (turn n's tool use ids are ``toolu_t<n>_NN``), so a resumed conversation gets its next turn."""

    def __init__(self, turns: dict[str, list[Reply]]):
        super().__init__([reply for script in turns.values() for reply in script], tag="t0")
        self.turns = [(marker, f"toolu_t{n}_", script) for n, (marker, script) in enumerate(turns.items())]

    def turn_of(self, body: dict):
        for said in reversed(_user_texts(body)):
            for marker, prefix, script in self.turns:
                if marker in said:
                    return prefix, script
        return None

    def reply_for(self, body: dict):
        if not self._is_main(body):
            return text("OK"), False
        turn = self.turn_of(body)
        if turn is None:
            return text("(no turn)"), True
        prefix, script = turn
        index = tool_results(body, prefix)
        return (script[index] if index < len(script) else text("(the turn has ended)")), True

    def message(self, body: dict, reply: Reply, index: int):
        message, blocks = super().message(body, reply, index)
        turn = self.turn_of(body)
        for block in blocks:
            if block["type"] == "tool_use" and turn is not None:
                block["id"] = f"{turn[0]}{tool_results(body, turn[0]):02d}"
        return message, blocks


def carried_tool_results(body: dict) -> set[str]:
    return {
        b.get("tool_use_id")
        for m in body.get("messages") or []
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    }


def test_request_changes_resumes_the_claude_session_on_the_same_branch(machine, repository, sy_server):  # noqa: F811
    person = Actor(user=UserFactory(username="po", is_staff=True))
    first = queue_claude(person, repository, FIRST)
    tree = worktree_of(repository, first)
    fake = TurnsFake(
        {
            FIRST: [
                tool_use("Bash", {"command": "echo a > a.txt && git add a.txt && git commit -qm 'Add a'"}),
                text("a.txt committed."),
            ],
            REQUEST: [
                tool_use("Bash", {"command": "echo b > b.txt && git add b.txt && git commit -qm 'Add b'"}),
                text("b.txt committed too."),
            ],
        }
    )
    with fake:
        machine.point_at(fake)
        machine.start()
        wait_for(lambda: run_in(first, "succeeded", "failed"), timeout=240, what="run 1", machines=[machine])
        assert first.status == "succeeded", f"{first.error}\n{machine.output()}\n{fake.describe()}"
        # Claude Code ran under the session id the runner set, and the runner told the server.
        assert first.agent_session == session_uuid(first.session_id)
        assert Task.objects.get(pk=first.task_id).status == "review"

        review = task_review(actor=person, task=first.task, decision="request_changes", message=REQUEST)
        second = review.run
        assert (second.kind, second.resumes_id, second.prompt) == ("continue", first.pk, REQUEST)
        wait_for(lambda: run_in(second, "succeeded", "failed"), timeout=240, what="run 2", machines=[machine])
        main = fake.main_requests()

    assert second.status == "succeeded", f"{second.error}\n{machine.output()}\n{fake.describe()}"
    # The same runner resumed the session: its console says so, and the conversation went on.
    assert f"run {second.pk} started: claude" in machine.output() and "resuming" in machine.output()
    asked = [seen.body for seen in main if REQUEST in "".join(_user_texts(seen.body))]
    assert asked, fake.describe()
    # The model saw run 1's prompt and its tool's result before the request for changes.
    said = _user_texts(asked[0])
    assert any(FIRST in t for t in said) and said.index(next(t for t in said if REQUEST in t)) > 0, said
    assert "toolu_t0_00" in carried_tool_results(asked[-1]), carried_tool_results(asked[-1])
    assert "toolu_t1_00" in carried_tool_results(main[-1].body)
    # Run 2 is a session of its own in Switchyard, which names the one it continues.
    assert second.session_id != first.session_id
    assert AgentSession.objects.get(pk=second.session_id).metadata["continues"] == first.session_id
    assert second.agent_session  # the Claude session it worked in, for the next request
    # The branch: run 1's commit, then run 2's; the task's change has both files; back in review.
    assert git(tree, "log", "--format=%s", "-2").split("\n")[:2] == ["Add b", "Add a"]
    assert {f.path for f in task_change(task=Task.objects.get(pk=first.task_id)).files} == {"a.txt", "b.txt"}
    assert Task.objects.get(pk=first.task_id).status == "review"
    assert second.summary["commits_ahead"] == 1 and second.summary["files_changed"] == ["b.txt"]
    assert Run.objects.filter(task_id=first.task_id).count() == 2
