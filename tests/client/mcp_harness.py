"""Talk to `switchyard mcp` with the mcp package's own client over stdio, from sync test code.

The MCP client is async; the tests also use the ORM, which must not run inside an event loop.
So the client lives in a thread with its own loop, and ``call`` hands it one tool call at a time.
"""

import asyncio
import sys
import threading
from contextlib import AsyncExitStack
from pathlib import Path

import httpx2
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

# The tools `switchyard mcp` and /mcp both serve (client/src/switchyard_client/mcp/tools.py).
TOOLS = {
    "claim_next_task",
    "complete_task",
    "fail_task",
    "report_progress",
    "record_milestone",
    "save_checkpoint",
    "load_checkpoint",
    "write_file",
    "claim_worktree",
    "release_worktree",
    "ask_product_owner",
    "check_answer",
}


class McpConversation:
    """Over stdio (``switchyard mcp`` as a subprocess) by default; ``McpConversation.http`` over
    Streamable HTTP to the web app's ``/mcp``."""

    def __init__(
        self,
        *,
        url: str,
        key: str,
        cwd: Path | None = None,
        timeout: float = 60,
        env: dict | None = None,
        http: bool = False,
        mode: str = "auto",
    ):
        self.params = StdioServerParameters(
            # The installed console script, as an agent's MCP configuration would run it.
            command=str(Path(sys.executable).parent / "switchyard"),
            args=["mcp"],
            env={"SWITCHYARD_URL": url, "SWITCHYARD_KEY": key, **(env or {})},
            cwd=str(cwd),
        )
        self.http_url = f"{url}/mcp" if http else None
        self.key = key
        self.mode = mode
        self.protocol_version: str | None = None
        self.timeout = timeout
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._client: Client | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self.loop.run_until_complete, args=(self._run(),), daemon=True)

    @classmethod
    def http(cls, *, url: str, key: str, mode: str = "auto", timeout: float = 60) -> "McpConversation":
        return cls(url=url, key=key, http=True, mode=mode, timeout=timeout)

    async def _run(self) -> None:
        self._stop = asyncio.Event()
        try:
            async with AsyncExitStack() as stack:
                if self.http_url is None:
                    server = self.params
                else:
                    headers = {"Authorization": f"Bearer {self.key}"}
                    # The SDK's transport takes the HTTP client (httpx2, what the mcp package uses) to carry the key.
                    http_client = await stack.enter_async_context(
                        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300))
                    )
                    server = streamable_http_client(self.http_url, http_client=http_client)
                client = await stack.enter_async_context(
                    Client(server, read_timeout_seconds=self.timeout, mode=self.mode)
                )
                self._client = client
                self.protocol_version = client.protocol_version
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:  # surfaced to the test thread by start()
            self._error = exc
            self._ready.set()

    def start(self) -> "McpConversation":
        self._thread.start()
        if not self._ready.wait(self.timeout) or self._error is not None:
            raise RuntimeError(f"the MCP server did not start: {self._error!r}")
        return self

    def _run_coro(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(self.timeout)

    def tools(self) -> dict:
        """Each tool by name, with its input and output schemas."""
        return {tool.name: tool for tool in self._run_coro(self._client.list_tools()).tools}

    def tool_names(self) -> set[str]:
        return set(self.tools())

    def call_full(self, name: str, arguments: dict | None = None) -> tuple[str, dict | None, bool]:
        """The tool's text, its structured content and whether it is an error result."""
        result = self._run_coro(self._client.call_tool(name, arguments or {}))
        text = "\n".join(part.text for part in result.content if getattr(part, "type", "") == "text")
        return text, result.structured_content, bool(result.is_error)

    def call(self, name: str, arguments: dict | None = None) -> tuple[str, bool]:
        """The tool's text and whether it is an error result."""
        text, _, error = self.call_full(name, arguments)
        return text, error

    def data(self, name: str, arguments: dict | None = None) -> dict:
        """The structured content of a call that must succeed."""
        text, structured, error = self.call_full(name, arguments)
        assert not error, text
        return structured

    def close(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(self.timeout)
