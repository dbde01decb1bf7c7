"""Both MCP transports checked by the official MCP Inspector's command-line mode (issue 15, part 5):
`switchyard mcp` over stdio and the web app's /mcp over Streamable HTTP, against a live server.

`.ci/run` installs the Inspector pinned into ``.tools/mcp-inspector`` (``npm install --prefix``). The
tests skip where node is missing; where the Inspector is not installed they skip too, unless
``REQUIRE_MCP_INSPECTOR=1`` (set in CI), where that fails them.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sessions_app.keys import api_key_create
from sessions_app.models import AgentSession, Checkpoint, StreamEvent
from tests.browser.server import ServerProcess
from tests.client.mcp_harness import TOOLS
from tests.factories import AgentFactory
from tests.worker import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

MCP_INSPECTOR_VERSION = "2.12.0"  # the version .ci/run installs; these tests were written against it
INSPECTOR = ROOT / ".tools" / "mcp-inspector" / "node_modules" / ".bin" / "mcp-inspector"


def _inspector() -> Path:
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the MCP Inspector needs it")
    binary = Path(os.environ.get("MCP_INSPECTOR", INSPECTOR))
    if not binary.is_file():
        message = f"the MCP Inspector is not installed at {binary} (.ci/run installs it)"
        if os.environ.get("REQUIRE_MCP_INSPECTOR") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return binary


@pytest.fixture(scope="module")
def live(django_db_setup, tmp_path_factory):
    server = ServerProcess(tmp_path_factory.mktemp("inspector") / "server.log").start()
    yield server
    server.stop()


@pytest.fixture
def key():
    return api_key_create(agent=AgentFactory(slug="inspected")).key


@pytest.fixture
def inspect(tmp_path):
    """Run the Inspector's CLI on a target; returns its JSON result."""
    binary = _inspector()
    home = tmp_path / "home"  # it keeps a catalog and secrets under ~/.mcp-inspector
    home.mkdir()

    def inspect(target: list[str], *args: str) -> dict:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
        done = subprocess.run(
            [str(binary), "--cli", *target, "--format", "json", "--connect-timeout", "60000", *args],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        return json.loads(done.stdout)["result"]

    return inspect


def _stdio(live, key: str, cwd: Path) -> list[str]:
    switchyard = str(Path(sys.executable).parent / "switchyard")
    return [switchyard, "mcp", "-e", f"SWITCHYARD_URL={live.url}", "-e", f"SWITCHYARD_KEY={key}", "--cwd", str(cwd)]


def _http(live, key: str, era: str) -> list[str]:
    return [
        f"{live.url}/mcp",
        "--transport",
        "http",
        "--header",
        f"Authorization: Bearer {key}",
        "--protocol-era",
        era,
    ]


@pytest.fixture(params=["stdio", "http-legacy", "http-modern"])
def target(request, live, key, tmp_path):
    if request.param == "stdio":
        cwd = tmp_path / "agent"
        cwd.mkdir()
        return _stdio(live, key, cwd)
    return _http(live, key, request.param.removeprefix("http-"))


def test_the_tools_are_listed_with_output_schemas(inspect, target):
    tools = {tool["name"]: tool for tool in inspect(target, "--method", "tools/list")["tools"]}

    assert set(tools) == TOOLS
    assert {"id", "title", "status"} <= set(tools["complete_task"]["outputSchema"]["properties"])
    assert all(tool["outputSchema"]["type"] == "object" for tool in tools.values())


def test_a_call_answers_the_object_itself_with_a_summary(inspect, target):
    logged = inspect(target, "--method", "tools/call", "--tool-name", "report_progress", "--tool-arg", "message=hi")
    saved = inspect(
        target,
        "--method",
        "tools/call",
        "--tool-name",
        "save_checkpoint",
        "--tool-args-json",
        json.dumps({"state": {"step": 1, "todo": ["a"]}}),
    )

    session = AgentSession.objects.get(agent__slug="inspected")
    event = StreamEvent.objects.get(session=session, type=StreamEvent.Type.LOG)
    checkpoint = Checkpoint.objects.get(session=session)
    # The object itself, not {"result": "<its JSON as a string>"}.
    assert (logged["structuredContent"]["seq"], logged["structuredContent"]["payload"]) == (
        event.seq,
        {"message": "hi"},
    )
    assert logged["content"] == [{"type": "text", "text": f"Logged as event #{event.seq}."}]
    assert saved["structuredContent"]["state"] == {"step": 1, "todo": ["a"]}
    assert saved["content"][0]["text"] == f"Checkpoint #{checkpoint.seq} saved ({checkpoint.size_bytes} bytes)."
    assert not logged.get("isError") and not saved.get("isError")
