"""`switchyard mcp`: the Switchyard API as Model Context Protocol tools, served over stdio.

An MCP-speaking agent (Claude Code, Codex, any MCP client) adds this server once and can then
claim work, report progress, checkpoint, write files, hold worktrees and ask the product owner
a question, all through the typed ``Client``. It needs the optional ``mcp`` package
(``pip install './client[mcp]'``); the rest of the client does not. The tools themselves are in
tools.py, shared with the web app's ``/mcp`` (Streamable HTTP, no local install).

The session: ``SWITCHYARD_SESSION`` or the CLI's current session (``.switchyard/session``),
else one is opened on the first tool call (intent from ``SWITCHYARD_INTENT``) and remembered
there, so the CLI and the MCP server of one agent share it.

Questions: ``ask_product_owner`` posts an ``input_request`` event and moves the session to
``waiting_for_input``, then waits up to ``wait_seconds`` for the answer a person types on the
session page. If none comes in time, the answer is handed back on a later call: every tool's
result starts with it once it has arrived, and ``check_answer`` asks directly.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

from switchyard_client.api.client import Client
from switchyard_client.api.keepalive import Keepalive
from switchyard_client.api.state import current_session, remember_session
from switchyard_client.mcp.tools import Agent, Memory, build_tools_server


class ProcessMemory(Memory):
    """The process's memory; a newly opened session is also written where the CLI finds it."""

    def __init__(self) -> None:
        super().__init__(session_id=current_session())
        self._remembered = self.session_id

    def save(self) -> None:
        if self.session_id is not None and self.session_id != self._remembered:
            remember_session(self.session_id)
            self._remembered = self.session_id


def build_server(client: Client | None = None) -> MCPServer:
    agent = Agent(
        client or Client(),
        ProcessMemory(),
        session_intent=os.environ.get("SWITCHYARD_INTENT", "Work through MCP"),
    )
    return build_tools_server(lambda _headers: agent)


def main() -> None:
    client = Client()
    # Between tool calls the agent may think for minutes: the heartbeat keeps its claims alive.
    with Keepalive(client):
        build_server(client).run("stdio")


if __name__ == "__main__":
    main()
