"""The README's curl tour, run as written through the API: a new user's first commands must work.

The block is read from README.md and each command is parsed (the few curl options it uses, as curl
reads them: ``-d`` is a POST, form-encoded unless a header says otherwise; ``-T`` a PUT of the file),
so a README that drifts from the API fails here.
"""

import re
import shlex
from pathlib import Path

import pytest

from ledger.models import ToolInvocation
from sessions_app.models import AgentSession, Checkpoint, Milestone, StreamEvent
from workspaces.models import Artifact

README = Path(__file__).resolve().parents[2] / "README.md"
BASE = "http://127.0.0.1:8000"


def _tour_block() -> str:
    [block] = [b for b in re.findall(r"```sh\n(.*?)```", README.read_text(), re.S) if "\nAPI=http" in b]
    return block


def _commands(block: str) -> list[list[str]]:
    """Shell words of each command: backslash-newlines joined, quotes spanning lines kept together."""
    commands, pending = [], ""
    for line in block.splitlines():
        pending += line + "\n"
        if line.endswith("\\"):
            continue
        try:
            words = shlex.split(pending.replace("\\\n", " "), comments=True)
        except ValueError:  # a quote still open: the command goes on on the next line
            continue
        if words:
            commands.append(words)
        pending = ""
    assert not pending.strip(), f"unfinished command: {pending}"
    return commands


def _request(words: list[str], variables: dict, files: dict) -> dict:
    """A curl command as a request: method, path, body, headers."""
    words = [re.sub(r"\$(\w+)", lambda m: variables[m.group(1)], word) for word in words]
    request = {"method": None, "path": None, "data": None, "headers": {}}
    args = iter(words[1:])
    for arg in args:
        if arg == "-s":
            continue
        elif arg == "-H":
            name, _, value = next(args).partition(":")
            request["headers"][name.strip().lower()] = value.strip()
        elif arg == "-d":
            request["data"] = next(args).encode()
            request["method"] = request["method"] or "POST"
            request["headers"].setdefault("content-type", "application/x-www-form-urlencoded")
        elif arg == "-X":
            request["method"] = next(args)
        elif arg == "-T":
            request["data"] = files[next(args)]
            request["method"] = "PUT"
        elif arg.startswith("http"):
            assert arg.startswith(BASE), arg
            request["path"] = arg[len(BASE) :]
        else:
            raise AssertionError(f"the tour uses a curl option this test does not know: {arg}")
    request["method"] = request["method"] or "GET"
    return request


def _run_tour(client, key: str) -> list[tuple[str, str, int]]:
    variables, files, answers = {}, {}, []
    for words in _commands(_tour_block()):
        if "=" in words[0] and len(words) == 1:  # KEY=... / API=...
            name, _, value = words[0].partition("=")
            variables[name] = key if name == "KEY" else value
        elif words[0] == "echo":
            assert words[-2] == ">", words
            files[words[-1]] = (" ".join(words[1:-2]) + "\n").encode()
        elif words[0] == "curl":
            request = _request(words, variables, files)
            headers = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in request["headers"].items()}
            content_type = headers.pop("HTTP_CONTENT_TYPE", "application/octet-stream")
            response = client.generic(
                request["method"], request["path"], request["data"] or b"", content_type=content_type, **headers
            )
            answers.append((request["method"], request["path"], response.status_code))
        else:
            raise AssertionError(f"the tour runs a command this test does not know: {words}")
    return answers


FIRST_RUN = [
    ("GET", "/api/v1/agents/me/", 200),
    ("POST", "/api/v1/sessions/", 201),
    ("POST", "/api/v1/sessions/tour-1/events/", 201),
    ("POST", "/api/v1/sessions/tour-1/events/", 201),
    ("POST", "/api/v1/sessions/tour-1/tool-calls/", 201),
    ("PATCH", "/api/v1/sessions/tour-1/tool-calls/toolu_01/", 200),
    ("POST", "/api/v1/sessions/tour-1/milestones/", 201),
    ("POST", "/api/v1/sessions/tour-1/checkpoints/", 201),
    ("PUT", "/api/v1/sessions/tour-1/files/work_products/notes.md", 201),
    ("GET", "/api/v1/sessions/tour-1/files/work_products/notes.md", 200),
    ("GET", "/api/v1/sessions/tour-1/resume/", 200),
]


@pytest.mark.django_db
def test_the_readme_tour_runs_as_written_and_stores_what_it_says(client, agent_client):
    # when the tour runs with the agent's key
    answers = _run_tour(client, agent_client.key)

    # then every step answers as a first run should, and each kind of record is stored
    assert answers == FIRST_RUN
    session = AgentSession.objects.get(pk="tour-1")
    assert session.status == "running"
    events = StreamEvent.objects.filter(session=session).order_by("seq").values_list("type", "client_id")
    # the milestone adds its own event to the stream
    assert list(events) == [("log", "ev-1"), ("plan_update", "ev-2"), ("log", "ev-3"), ("milestone", None)]
    call = ToolInvocation.objects.get(session=session)
    assert (call.client_id, call.tool_name, call.status) == ("toolu_01", "Bash", "success")
    assert Milestone.objects.get(session=session).text == "Login redirect loop fixed"
    assert Checkpoint.objects.get(session=session).state == {"step": 3, "todo": ["write the regression test"]}
    notes = Artifact.objects.get(path="work_products/notes.md")
    assert notes.size == len(b"# Login fix: the redirect now keeps ?next=\n")


@pytest.mark.django_db
def test_running_the_tour_again_changes_nothing(client, agent_client):
    # given the tour run once
    _run_tour(client, agent_client.key)
    counts = [model.objects.count() for model in (AgentSession, StreamEvent, ToolInvocation, Milestone, Checkpoint)]

    # when it runs again (an agent retrying every step)
    answers = _run_tour(client, agent_client.key)

    # then every step answers 200 with what was stored, and nothing is added
    assert [status for _, _, status in answers] == [200] * len(FIRST_RUN)
    assert [m.objects.count() for m in (AgentSession, StreamEvent, ToolInvocation, Milestone, Checkpoint)] == counts
    assert Artifact.objects.get(path="work_products/notes.md").versions.count() == 1
