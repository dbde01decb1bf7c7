"""``/mcp``: the `switchyard mcp` tools over MCP's Streamable HTTP transport, served by the web app.

A remote agent connects with one URL and its agent key (``Authorization: Bearer <key>``); nothing
is installed where it runs. The tools are the stdio server's own (switchyard_client/mcp/tools.py):
each call is made by a typed ``Client`` whose transport is this process's Django app (WSGI, in a
worker thread), with the caller's key. So a tool goes through the same authentication, scope
checks, validation and services as the REST API, and there is one implementation of every tool.

Stateless Streamable HTTP (a fresh transport per POST, no ``Mcp-Session-Id``): with several web
processes any one may take the next request. What an agent keeps between calls (its session, its
open question) is in the cache (Redis with REDIS_URL, so shared by every process), per key.
A key bound to a run's session (SPEC §8) always works in that session.

A waiting ``ask_product_owner`` holds no worker thread (tools.py ``_asker``: it sleeps on the event
loop), and one key has at most MCP_WAITS_PER_KEY waits at once in a process (``WaitSlots``): one
agent's waits can neither take the threads the key check and other agents' calls need nor pile up.

The SDK's session manager needs its task group running: ASGI servers differ in whether they send
``lifespan`` (the channels router in config/asgi.py refuses it), so it starts on the first request.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Mapping

import anyio
import httpx
from django.conf import settings
from django.core.cache import cache
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections
from django.http.request import split_domain_port, validate_host
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings

from sessions_app.keys import api_key_authenticate
from sessions_app.models import AgentApiKey
from switchyard_client.api.client import Client
from switchyard_client.mcp.tools import Agent, Memory, build_tools_server

MCP_PATH = "/mcp"
MEMORY_SECONDS = 7 * 24 * 3600  # an agent idle for a week opens a new session
AGENT_SCOPES = {AgentApiKey.Scope.AGENT, AgentApiKey.Scope.ORCHESTRATE}


class CachedMemory(Memory):
    """An agent's session and open question, in the cache under its key's public prefix."""

    def __init__(self, api_key: AgentApiKey):
        self.cache_key = f"switchyard:mcp:{api_key.prefix}"
        kept = cache.get(self.cache_key) or {}
        super().__init__(session_id=api_key.session_id or kept.get("session_id"), question_seq=kept.get("question_seq"))

    def save(self) -> None:
        cache.set(self.cache_key, {"session_id": self.session_id, "question_seq": self.question_seq}, MEMORY_SECONDS)


class WaitSlots:
    """The ask_product_owner waits each key has in this process, at most settings.MCP_WAITS_PER_KEY:
    the web app's WaitGate (switchyard_client/mcp/tools.py). One event loop per process, so a dict
    is enough (no await between the check and the count)."""

    def __init__(self) -> None:
        self.held: dict[str, int] = {}

    @contextlib.asynccontextmanager
    async def hold(self, headers: Mapping[str, str] | None) -> AsyncIterator[None]:
        who = hashlib.sha256(_bearer(headers).encode()).hexdigest()  # not the key itself, even in memory
        limit = settings.MCP_WAITS_PER_KEY
        if self.held.get(who, 0) >= limit:
            raise ToolError(
                f"This key already has {limit} ask_product_owner calls waiting for an answer, the most at once "
                "(MCP_WAITS_PER_KEY): ask with wait_seconds 0 and use check_answer, or wait for one to end."
            )
        self.held[who] = self.held.get(who, 0) + 1
        try:
            yield
        finally:
            self.held[who] -= 1
            if not self.held[who]:
                del self.held[who]


def _bearer(headers: Mapping[str, str] | None) -> str:
    value = (headers or {}).get("authorization", "")
    scheme, _, key = value.partition(" ")
    return key.strip() if scheme.lower() == "bearer" else ""


class _InProcessTransport(httpx.WSGITransport):
    """This process's Django app as an httpx transport, the outer request's proxy header added: the
    outer request came through the proxy already, and without it SECURE_SSL_REDIRECT would answer
    the inner ones with a redirect."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if settings.SECURE_PROXY_SSL_HEADER:
            name, value = settings.SECURE_PROXY_SSL_HEADER
            request.headers[name.removeprefix("HTTP_").replace("_", "-")] = value
        return super().handle_request(request)


_transport: _InProcessTransport | None = None


def _in_process_client(key: str, host: str) -> Client:
    """A Client whose requests go to this process's Django app, never over the network."""
    global _transport
    if _transport is None:
        _transport = _InProcessTransport(app=WSGIHandler())
    return Client(url=f"https://{host}", key=key, transport=_transport)


def agent_for(headers: Mapping[str, str] | None) -> Agent:
    """The agent of one tool call, from the request's key (checked again by the API on each call)."""
    key = _bearer(headers)
    try:
        api_key = api_key_authenticate(key=key)
    finally:
        close_old_connections()
    if api_key is None:  # revoked between the outer check and this call
        raise ToolError("Invalid or revoked API key.")
    client = _in_process_client(key, (headers or {}).get("host", "localhost"))
    return Agent(client, CachedMemory(api_key), session_intent="Work through MCP over HTTP")


def _refusal(headers: Mapping[str, str]) -> tuple[int, str] | None:
    """Why a request to /mcp is refused (status, message), or None: the host, the key and its scopes."""
    domain, _port = split_domain_port(headers.get("host", ""))
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return 400, f"Host {headers.get('host', '')!r} is not one of this server's ALLOWED_HOSTS."
    key = _bearer(headers)
    if not key:
        return 401, "Authenticate with an agent key: Authorization: Bearer <key>."
    try:
        api_key = api_key_authenticate(key=key)
    finally:
        close_old_connections()
    if api_key is None:
        return 401, "Invalid or revoked API key."
    scopes = set(api_key.scopes or ())
    if not scopes & AGENT_SCOPES:
        return 403, (
            f"This key's scopes ({', '.join(sorted(scopes)) or 'none'}) do not reach /mcp: "
            "it needs a key of scope agent or orchestrate."
        )
    return None


async def _send_json(send, status: int, message: str) -> None:
    body = json.dumps({"detail": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class McpHttpApp:
    """The ASGI app for ``/mcp``: checks the key, then hands the request to the SDK's transport."""

    def __init__(self) -> None:
        self.wait_slots = WaitSlots()
        self.server = build_tools_server(agent_for, closes_agent=True, wait_gate=self.wait_slots.hold)
        # Hosts are checked against ALLOWED_HOSTS above, as Django checks them; the SDK's own check
        # would allow localhost only. A browser page cannot call /mcp without the agent's key.
        self.transport = self.server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self._manager_task: asyncio.Task | None = None
        self._started: asyncio.Event | None = None
        self._failure: Exception | None = None

    async def _run_manager(self) -> None:
        try:
            async with self.server.session_manager.run():
                self._started.set()
                await anyio.sleep_forever()
        except Exception as exc:
            # Waiting requests must fail, not hang on an event that never comes.
            self._failure = exc
            self._started.set()
            raise

    async def _ensure_manager(self) -> None:
        # One event loop per server process; asyncio is single-threaded, so no lock is needed
        # between the check and the assignment (no await in between).
        if self._started is None:
            self._started = asyncio.Event()
            self._manager_task = asyncio.get_running_loop().create_task(self._run_manager())
        await self._started.wait()
        if self._failure is not None:
            raise RuntimeError("the MCP session manager did not start") from self._failure

    async def __call__(self, scope, receive, send) -> None:
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        refusal = await anyio.to_thread.run_sync(_refusal, headers)
        if refusal is not None:
            await _send_json(send, *refusal)
            return
        await self._ensure_manager()
        await self.transport(scope, receive, send)


application = McpHttpApp()
