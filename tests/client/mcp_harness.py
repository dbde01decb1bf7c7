"""Talk to `switchyard mcp` with the mcp package's own client over stdio, from sync test code.

The MCP client is async; the tests also use the ORM, which must not run inside an event loop.
So the client lives in a thread with its own loop, and ``call`` hands it one tool call at a time.
"""

import asyncio
import sys
import threading
from pathlib import Path

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters


class McpConversation:
    def __init__(self, *, url: str, key: str, cwd: Path, timeout: float = 60, env: dict | None = None):
        self.params = StdioServerParameters(
            # The installed console script, as an agent's MCP configuration would run it.
            command=str(Path(sys.executable).parent / "switchyard"),
            args=["mcp"],
            env={"SWITCHYARD_URL": url, "SWITCHYARD_KEY": key, **(env or {})},
            cwd=str(cwd),
        )
        self.timeout = timeout
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._client: Client | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self.loop.run_until_complete, args=(self._run(),), daemon=True)

    async def _run(self) -> None:
        self._stop = asyncio.Event()
        try:
            async with Client(self.params, read_timeout_seconds=self.timeout) as client:
                self._client = client
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

    def tool_names(self) -> set[str]:
        return {tool.name for tool in self._run_coro(self._client.list_tools()).tools}

    def call(self, name: str, arguments: dict | None = None) -> tuple[str, bool]:
        """The tool's text and whether it is an error result."""
        result = self._run_coro(self._client.call_tool(name, arguments or {}))
        text = "\n".join(part.text for part in result.content if getattr(part, "type", "") == "text")
        return text, bool(result.is_error)

    def close(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(self.timeout)
