"""A small stdio MCP server whose one tool asks the user for input (an MCP elicitation), for running the
real Claude Code CLI against it (test_claude_code_elicitation.py).

``file_issue(title)`` asks where the issue should go (a form: a repository, a priority from a list, a
notify flag) and returns, as its result, exactly what came back: the action and the content.
So what a person answered in Switchyard can be followed all the way to the model's next request.
Written with the official ``mcp`` package (2.x, where FastMCP is ``MCPServer``).

The question is asked through a ``Resolve``d parameter returning ``Elicit``, not ``ctx.elicit``:
Claude Code 2.1.332 opens stdio servers on protocol 2026-07-28, where a server may no longer send
``elicitation/create`` mid-call (``ctx.elicit`` fails with "no back-channel for server-initiated
requests"); the tool answers ``input_required`` instead and Claude Code calls it again with the
user's response. ``Resolve`` does that on 2026-07-28 and sends ``elicitation/create`` on older
protocols, so the tool is the same on both.

Run: ``python tests/runners/elicit_mcp_server.py`` (Claude Code starts it from ``--mcp-config``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Elicit, ElicitationResult, MCPServer, Resolve
from pydantic import BaseModel, Field

SERVER_NAME = "tracker"
QUESTION = "Where should the issue go?"


class Placement(BaseModel):
    repo: str = Field(title="Repository", description="owner/name")
    priority: Literal["low", "high"] = Field(title="Priority")
    notify: bool = Field(default=False, title="Notify the owners")


server = MCPServer(SERVER_NAME)


def ask_placement(title: str) -> Elicit[Placement]:
    return Elicit(f"{QUESTION} ({title})", Placement)


@server.tool()
async def file_issue(title: str, placement: Annotated[ElicitationResult[Placement], Resolve(ask_placement)]) -> dict:
    """File an issue; asks the user where it should go."""
    content = placement.data.model_dump() if placement.action == "accept" else None
    return {"title": title, "action": placement.action, "content": content}


if __name__ == "__main__":
    server.run("stdio")
