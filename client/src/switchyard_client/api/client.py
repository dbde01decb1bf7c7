# Over 400 lines: one class, a method per agent endpoint of the API (SPEC §6); split, it would be cut mid-class.
"""A typed client for the agent endpoints of the Switchyard API (SPEC §6).

Every write that the API makes idempotent carries a client id chosen here before the first try,
so the retries in ``retry.py`` never store a second row. Errors are ``SwitchyardError`` subclasses
with the status and the server's message.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

import httpx

from switchyard_client.api import types as t
from switchyard_client.api.errors import ConfigurationError, ConnectionFailed, SwitchyardError, error_for
from switchyard_client.api.retry import RetryPolicy, client_id, send_with_retry

_UNSET: Any = object()
USER_AGENT = "switchyard-client/0.1"


def api_base(url: str) -> str:
    """``http://host:8000`` or ``http://host:8000/api/v1`` → the latter, with a trailing slash."""
    url = url.rstrip("/")
    if not url.endswith("/api/v1"):
        url += "/api/v1"
    return url + "/"


def iso(value: dt.datetime | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware (the API refuses naive times)")
    return value.isoformat()


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


@functools.cache
def _shared_ssl_context(cert_file: str | None, cert_dir: str | None) -> Any:
    # What httpx.Client builds by default (certifi's bundle, or SSL_CERT_FILE / SSL_CERT_DIR), once
    # per process and per those variables instead of once per client: loading the bundle costs about
    # 1 MB and 150 ms of CPU, and a runner makes a client per run.
    return httpx.create_ssl_context()


@functools.cache
def _no_ca_context() -> Any:
    # For an http:// server nothing is verified, so certifi's bundle (~1 MB of a runner's memory) is
    # not loaded. A context with no CAs still verifies: an https:// URL reached through it (a redirect)
    # fails its handshake instead of going unchecked.
    import ssl

    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def _ssl_context(base_url: str) -> Any:
    if base_url.startswith("http://"):
        return _no_ca_context()
    return _shared_ssl_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


def _seg(value: str | int) -> str:
    return quote(str(value), safe="")


def _compact(**fields: Any) -> dict[str, Any]:
    """The fields that were given: the API treats a missing field and a default differently (strict input)."""
    return {k: v for k, v in fields.items() if v is not _UNSET and v is not None}


class Client:
    """``Client()`` reads ``SWITCHYARD_URL`` and ``SWITCHYARD_KEY``; both can be passed instead."""

    def __init__(
        self,
        url: str | None = None,
        key: str | None = None,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ):
        url = url or os.environ.get("SWITCHYARD_URL", "")
        key = key or os.environ.get("SWITCHYARD_KEY", "")
        if not url:
            raise ConfigurationError("SWITCHYARD_URL is not set (e.g. http://127.0.0.1:8000).")
        if not key:
            raise ConfigurationError("SWITCHYARD_KEY is not set (an agent key, sy_...).")
        self.base_url = api_base(url)
        self.retry = retry or RetryPolicy()
        self._auth = f"Bearer {key}"
        self._shared = False
        self._http = httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": self._auth, "User-Agent": USER_AGENT},
            timeout=timeout,
            transport=transport,
            verify=_ssl_context(self.base_url),
        )

    def with_key(self, key: str, *, retry: RetryPolicy | None = None) -> Client:
        """A client for another key over this one's connections (a runner's per-run agent keys): no
        httpx client, pool and socket per key. Every request it sends carries its own key; closing it
        leaves this one open."""
        other = object.__new__(Client)
        other.base_url, other.retry = self.base_url, retry or self.retry
        other._auth, other._shared, other._http = f"Bearer {key}", True, self._http
        return other

    # plumbing -------------------------------------------------------------------------------------
    def close(self) -> None:
        if not self._shared:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = _UNSET,
        params: Mapping[str, Any] | None = None,
        content_path: Path | None = None,
        content: bytes | None = None,
        content_stream: Callable[[], Iterable[bytes]] | None = None,
        headers: Mapping[str, str] | None = None,
        idempotent: bool = True,
        stream_to: Path | None = None,
    ) -> httpx.Response:
        """Send with retries; a non-2xx final answer raises its ``SwitchyardError``.

        ``content_stream()`` makes the body's pieces afresh for each try (sent chunked unless
        ``headers`` give a Content-Length)."""

        # The key on each request, not only the httpx client's: a with_key() client shares another's.
        sent_headers = {**(headers or {}), "Authorization": self._auth}

        def send() -> httpx.Response:
            kwargs: dict[str, Any] = {"params": params, "headers": sent_headers}
            if json is not _UNSET:
                kwargs["json"] = json
            if content is not None:
                kwargs["content"] = content
            if content_stream is not None:
                kwargs["content"] = content_stream()
            if content_path is not None:
                # A fresh read on every try: a retried upload sends the whole file again.
                with open(content_path, "rb") as fh:
                    kwargs["content"] = fh.read()
            if stream_to is None:
                return self._http.request(method, path, **kwargs)
            with self._http.stream(method, path, **kwargs) as response:
                if response.is_success:
                    with open(stream_to, "wb") as out:
                        for chunk in response.iter_bytes():
                            out.write(chunk)
                else:
                    response.read()
                return response

        try:
            response = send_with_retry(send, policy=self.retry, idempotent=idempotent)
        except httpx.TransportError as exc:
            raise ConnectionFailed(
                f"Switchyard at {self.base_url} did not answer: {exc or type(exc).__name__}"
            ) from exc
        if response.is_success:
            return response
        raise error_for(response.status_code, _body(response))

    def _get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None}).json()

    def _post(self, path: str, body: Any = None, *, idempotent: bool = True) -> Any:
        response = self.request("POST", path, json={} if body is None else body, idempotent=idempotent)
        return response.json() if response.content else None

    def _list(self, path: str, params: Mapping[str, Any] | None = None, *, limit: int = 1000) -> list[Any]:
        """Every item of a paginated list, following ``next``, up to ``limit``."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        query.setdefault("page_size", min(limit, 1000))
        items: list[Any] = []
        page = 1
        while len(items) < limit:
            body = self.request("GET", path, params={**query, "page": page}).json()
            if isinstance(body, list):  # an unpaginated list
                return body[:limit]
            items.extend(body["results"])
            if not body.get("next"):
                break
            page += 1
        return items[:limit]

    def _batch(self, path: str, items: list[dict[str, Any]]) -> t.BatchResult:
        """POST a list. A batch where some or all items were refused still answers per item: that is
        returned, not raised (statuses 207, and 400/409/413 with ``results``)."""
        try:
            return cast(t.BatchResult, self._post(path, items))
        except SwitchyardError as exc:
            if isinstance(exc.body, dict) and "results" in exc.body:
                return cast(t.BatchResult, exc.body)
            raise

    # agents ----------------------------------------------------------------------------------------
    def agent_me(self) -> t.Agent:
        return self._get("agents/me/")

    def agent_heartbeat(self) -> t.Agent:
        return self._post("agents/me/heartbeat/")

    # sessions --------------------------------------------------------------------------------------
    def session_open(
        self,
        *,
        intent: str = "",
        id: str | None = None,
        labels: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        repo: str | None = None,
        branch: str | None = None,
        pr_url: str | None = None,
        parent: str | None = None,
        task: int | None = None,
        status: str | None = None,
        workspace: str | None = None,
    ) -> t.Session:
        """Open a session; with an ``id`` that is already yours, re-attach to it (200)."""
        body = _compact(
            id=id,
            intent=intent,
            labels=labels,
            metadata=metadata,
            repo=repo,
            branch=branch,
            pr_url=pr_url,
            parent=parent,
            task=task,
            status=status,
            workspace=workspace,
        )
        # Without an id a retry after a lost answer would open a second session.
        return self._post("sessions/", body, idempotent=id is not None)

    def session_list(self, *, limit: int = 1000, **filters: Any) -> list[t.Session]:
        """Filters: status, agent, parent, intent (contains), started_after, started_before."""
        return self._list("sessions/", filters, limit=limit)

    def session_get(self, session_id: str) -> t.Session:
        return self._get(f"sessions/{_seg(session_id)}/")

    def session_transition(self, session_id: str, status: str, *, reason: str = "") -> t.Transition:
        # Moving to the status it already has is a no-op 200, so a retry is harmless.
        return self._post(f"sessions/{_seg(session_id)}/transition/", _compact(status=status, reason=reason or None))

    def session_heartbeat(self, session_id: str) -> t.Session:
        return self._post(f"sessions/{_seg(session_id)}/heartbeat/")

    def session_resume(self, session_id: str) -> t.Resume:
        """The latest checkpoint, open tool calls, milestones, claimed tasks and status."""
        return self._get(f"sessions/{_seg(session_id)}/resume/")

    resume = session_resume

    def session_log(self, session_id: str, *, offset: int = 0, limit: int | None = None) -> t.LogChunk:
        return self._get(f"sessions/{_seg(session_id)}/log/", offset=offset, limit=limit)

    # stream events ---------------------------------------------------------------------------------
    def event_append(
        self,
        session_id: str,
        type: str,
        payload: dict[str, Any] | None = None,
        *,
        id: str | None = None,
        timestamp: dt.datetime | str | None = None,
    ) -> t.StreamEvent:
        body = _compact(id=id or client_id(), type=type, payload=payload, timestamp=iso(timestamp))
        return self._post(f"sessions/{_seg(session_id)}/events/", body)

    def events_append(self, session_id: str, items: Iterable[dict[str, Any]]) -> t.BatchResult:
        """At most 1,000 items, each ``{"type", "payload", "timestamp"?, "id"?}``; ids are added where missing."""
        return self._batch(f"sessions/{_seg(session_id)}/events/", with_ids(items))

    def events_list(self, session_id: str, *, after_seq: int = 0, limit: int = 100) -> t.EventPage:
        return self._get(f"sessions/{_seg(session_id)}/events/", after_seq=after_seq, limit=limit)

    # tool calls ------------------------------------------------------------------------------------
    def tool_call_start(
        self,
        session_id: str,
        tool_name: str,
        input: Any = _UNSET,
        *,
        id: str | None = None,
        started_at: dt.datetime | str | None = None,
    ) -> t.ToolCall:
        """Record a running call. The server keeps a redacted summary and the sha256 of the full input."""
        body = _compact(id=id or client_id(), tool_name=tool_name, input=input, started_at=iso(started_at))
        if input is None:
            body["input"] = None
        return self._post(f"sessions/{_seg(session_id)}/tool-calls/", body)

    def tool_calls_record(self, session_id: str, items: Iterable[dict[str, Any]]) -> t.BatchResult:
        """A batch of calls, running or finished (``status``, ``output``, ``finished_at``)."""
        return self._batch(f"sessions/{_seg(session_id)}/tool-calls/", with_ids(items))

    def tool_call_finish(
        self,
        tool_call_id: int,
        status: str = "success",
        *,
        output: Any = _UNSET,
        error: str | None = None,
        finished_at: dt.datetime | str | None = None,
    ) -> t.ToolCall:
        """Finish a running call by its server id (once; the same finish again is a harmless 200)."""
        body = _finish_body(status, output, error, finished_at)
        return self.request("PATCH", f"tool-calls/{int(tool_call_id)}/", json=body).json()

    def tool_call_finish_by_client_id(
        self,
        session_id: str,
        client_id: str,
        status: str = "success",
        *,
        output: Any = _UNSET,
        error: str | None = None,
        finished_at: dt.datetime | str | None = None,
    ) -> t.ToolCall:
        """Finish a running call by the id the client recorded it with (e.g. a tool_use_id)."""
        body = _finish_body(status, output, error, finished_at)
        path = f"sessions/{_seg(session_id)}/tool-calls/{_seg(client_id)}/"
        return self.request("PATCH", path, json=body).json()

    def tool_call_get(self, tool_call_id: int) -> t.ToolCall:
        return self._get(f"tool-calls/{int(tool_call_id)}/")

    def tool_call_get_by_client_id(self, session_id: str, client_id: str) -> t.ToolCall:
        return self._get(f"sessions/{_seg(session_id)}/tool-calls/{_seg(client_id)}/")

    def tool_calls_list(self, session_id: str, *, status: str | None = None, limit: int = 1000) -> list[t.ToolCall]:
        return self._list(f"sessions/{_seg(session_id)}/tool-calls/", {"status": status}, limit=limit)

    # checkpoints and milestones --------------------------------------------------------------------
    def checkpoint_save(self, session_id: str, state: Any, *, id: str | None = None) -> t.Checkpoint:
        return self._post(f"sessions/{_seg(session_id)}/checkpoints/", {"id": id or client_id(), "state": state})

    def checkpoint_latest(self, session_id: str) -> t.Checkpoint:
        """The latest checkpoint; ``NotFound`` when there is none."""
        return self._get(f"sessions/{_seg(session_id)}/checkpoints/")

    def milestone_record(self, session_id: str, text: str, *, id: str | None = None) -> t.Milestone:
        return self._post(f"sessions/{_seg(session_id)}/milestones/", {"id": id or client_id(), "text": text})

    def milestones_list(self, session_id: str) -> list[t.Milestone]:
        return self._get(f"sessions/{_seg(session_id)}/milestones/")

    # workspace files -------------------------------------------------------------------------------
    def file_put(
        self,
        session_id: str,
        path: str,
        data: bytes | str | Path,
        *,
        tool_call: int | None = None,
        tool_use_id: str | None = None,
    ) -> t.ArtifactWrite:
        """Write ``data`` (bytes, or a local file's path) to ``path`` in the session's workspace.

        Writing the same bytes again adds nothing, so a retried upload is harmless.
        """
        params = _compact(tool_call=tool_call, tool_use_id=tool_use_id)
        url = f"sessions/{_seg(session_id)}/files/{quote(path.lstrip('/'), safe='/')}"
        headers = {"Content-Type": "application/octet-stream"}
        if isinstance(data, bytes):
            response = self.request("PUT", url, content=data, params=params, headers=headers)
        else:
            response = self.request("PUT", url, content_path=Path(data), params=params, headers=headers)
        return response.json()

    def file_get(self, session_id: str, path: str, *, to: str | Path | None = None) -> bytes | None:
        """The file's bytes, or with ``to`` streamed into that local file (and None returned)."""
        url = f"sessions/{_seg(session_id)}/files/{quote(path.lstrip('/'), safe='/')}"
        if to is not None:
            self.request("GET", url, stream_to=Path(to))
            return None
        return self.request("GET", url).content

    def files_list(self, session_id: str, *, limit: int = 1000) -> list[t.Artifact]:
        return self._list(f"sessions/{_seg(session_id)}/files/", limit=limit)

    def artifact_export(self, artifact_id: int, destination: str, *, overwrite: bool = False) -> t.Export:
        body = {"destination": destination, "overwrite": overwrite}
        return self._post(f"artifacts/{int(artifact_id)}/export/", body)

    # tasks and campaigns ---------------------------------------------------------------------------
    def tasks_list(self, *, limit: int = 1000, **filters: Any) -> list[t.Task]:
        return self._list("tasks/", filters, limit=limit)

    def task_get(self, task_id: int) -> t.Task:
        return self._get(f"tasks/{int(task_id)}/")

    def task_create(self, title: str, **fields: Any) -> t.Task:
        """Staff or an agent with the ``orchestrate`` scope. Not idempotent: never retried once sent."""
        return self._post("tasks/", {"title": title, **fields}, idempotent=False)

    def task_claim_next(self, *, session: str | None = None, campaign: int | None = None) -> t.Task | None:
        """Claim the best ready task; None when nothing is ready (204)."""
        # Not repeatable: a retry after a lost answer could claim a second task.
        return self._post("tasks/claim-next/", _compact(session=session, campaign=campaign), idempotent=False)

    def task_claim(self, task_id: int, *, session: str | None = None) -> t.Task:
        return self._post(f"tasks/{int(task_id)}/claim/", _compact(session=session))

    def task_release(self, task_id: int) -> t.Task:
        return self._post(f"tasks/{int(task_id)}/release/")

    def task_complete(self, task_id: int, *, review: bool = False) -> t.Task:
        return self._post(f"tasks/{int(task_id)}/complete/", {"review": review})

    def task_fail(self, task_id: int, error: str, *, retry: bool = False) -> t.Task:
        return self._post(f"tasks/{int(task_id)}/fail/", {"error": error, "retry": retry})

    def campaigns_list(self, *, limit: int = 1000) -> list[t.Campaign]:
        return self._list("campaigns/", limit=limit)

    def campaign_get(self, campaign_id: int) -> t.Campaign:
        return self._get(f"campaigns/{int(campaign_id)}/")

    def campaign_create(self, definition: dict[str, Any]) -> t.Campaign:
        return self._post("campaigns/", definition, idempotent=False)

    # repositories and worktrees --------------------------------------------------------------------
    def repositories_list(self, *, limit: int = 1000) -> list[t.Repository]:
        return self._list("repositories/", limit=limit)

    def worktree_create(
        self,
        repository_id: int,
        type: str,
        name: str | None = None,
        *,
        ref: str | None = None,
        pr_number: int | None = None,
    ) -> t.Worktree:
        """Create ``<type>-<name>`` beside the clone; idempotent (200 when it exists)."""
        body = _compact(type=type, name=name, ref=ref, pr_number=pr_number)
        return self._post(f"repositories/{int(repository_id)}/worktrees/", body)

    def worktree_get(self, worktree_id: int) -> t.Worktree:
        return self._get(f"worktrees/{int(worktree_id)}/")

    def worktree_claim(self, worktree_id: int, *, wait: bool = False) -> t.WorktreeClaim:
        """Claim on a lease (claiming again renews); with ``wait`` a taken one queues (outcome "queued")."""
        return self._post(f"worktrees/{int(worktree_id)}/claim/", {"wait": wait})

    def worktree_release(self, worktree_id: int) -> t.Worktree:
        return self._post(f"worktrees/{int(worktree_id)}/release/")

    def worktree_config_sync(self, worktree_id: int, *, repair: bool = False) -> dict[str, Any]:
        return self._post(f"worktrees/{int(worktree_id)}/config-sync/", {"repair": repair})

    def worktree_remove(self, worktree_id: int, *, force: bool = False) -> t.Worktree:
        params = {"force": "true" if force else "false"}
        return self.request("DELETE", f"worktrees/{int(worktree_id)}/", params=params).json()


def with_ids(items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of ``items``, each with a client id, so the whole batch can be retried safely."""
    return [item if item.get("id") else {**item, "id": client_id()} for item in items]


def _finish_body(status: str, output: Any, error: str | None, finished_at: dt.datetime | str | None) -> dict:
    body = _compact(status=status, output=output, error=error, finished_at=iso(finished_at))
    if output is None:
        body["output"] = None
    return body


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text[:500]
