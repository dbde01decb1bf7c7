"""Buffer events and tool calls and send them as list writes: at ``max_items``, every ``interval``
seconds (a background thread), and on ``flush()``/``close()``, leaving the ``with`` block, or at
interpreter exit.

Each item gets its client id when it is added, so a batch that is retried after a lost answer is
answered with the stored rows instead of being stored twice. A 207 answer stores the good items;
the refused ones are kept in ``rejected`` (with the server's message) and never resent: sending
them again would be refused again.
"""

from __future__ import annotations

import atexit
import datetime as dt
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from switchyard_client.api.client import Client, iso, now_iso
from switchyard_client.api.errors import SwitchyardError
from switchyard_client.api.retry import client_id

MAX_BATCH = 1000  # the API's limit per list write


@dataclass
class Rejected:
    kind: str  # "event" or "tool_call"
    item: dict[str, Any]
    status: int
    message: str
    errors: Any = None


@dataclass
class FlushStats:
    sent: int = 0  # items acknowledged (stored or replayed)
    requests: int = 0
    rejected: list[Rejected] = field(default_factory=list)


class EventBatcher:
    def __init__(
        self,
        client: Client,
        session_id: str,
        *,
        max_items: int = 500,
        interval: float | None = 1.0,
        register_atexit: bool = True,
    ):
        if not 1 <= max_items <= MAX_BATCH:
            raise ValueError(f"max_items must be 1..{MAX_BATCH}")
        self.client = client
        self.session_id = session_id
        self.max_items = max_items
        self.interval = interval
        self.stats = FlushStats()
        self._buffers: dict[str, list[dict[str, Any]]] = {"event": [], "tool_call": []}
        self._lock = threading.Lock()  # guards the buffers
        self._send_lock = threading.Lock()  # one batch in flight at a time keeps the session's order
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        if interval:
            self._thread = threading.Thread(target=self._tick, name="switchyard-batcher", daemon=True)
            self._thread.start()
        if register_atexit:
            atexit.register(self.close)

    @property
    def rejected(self) -> list[Rejected]:
        return self.stats.rejected

    # adding ------------------------------------------------------------------------------------------
    def event(
        self, type: str, payload: dict[str, Any] | None = None, *, timestamp: dt.datetime | str | None = None
    ) -> str:
        """Queue an event; returns its client id. The timestamp defaults to now (not the flush time)."""
        item = {"id": client_id(), "type": type, "payload": payload or {}, "timestamp": iso(timestamp) or now_iso()}
        self._add("event", item)
        return item["id"]

    def tool_call(self, tool_name: str, input: Any = None, **fields: Any) -> str:
        """Queue a tool call (running, or finished with ``status``/``output``/``finished_at``); returns its id."""
        item = {"id": fields.pop("id", None) or client_id(), "tool_name": tool_name, "started_at": now_iso(), **fields}
        if input is not None:
            item["input"] = input
        for name in ("started_at", "finished_at"):
            if name in item:
                item[name] = iso(item[name])
        self._add("tool_call", item)
        return item["id"]

    def _add(self, kind: str, item: dict[str, Any]) -> None:
        if self._closed.is_set():
            raise RuntimeError("this EventBatcher is closed")
        with self._lock:
            self._buffers[kind].append(item)
            full = len(self._buffers[kind]) >= self.max_items
        if full:
            self.flush()

    # sending -----------------------------------------------------------------------------------------
    def flush(self) -> FlushStats:
        """Send everything queued so far. A network or server failure (after the client's retries) puts
        the items back at the front of the queue and raises."""
        with self._send_lock:
            for kind in ("event", "tool_call"):
                while True:
                    with self._lock:
                        chunk = self._buffers[kind][: self.max_items]
                        del self._buffers[kind][: len(chunk)]
                    if not chunk:
                        break
                    try:
                        self._send(kind, chunk)
                    except SwitchyardError:
                        with self._lock:
                            self._buffers[kind][:0] = chunk
                        raise
        return self.stats

    def _send(self, kind: str, chunk: list[dict[str, Any]]) -> None:
        if kind == "event":
            answer = self.client.events_append(self.session_id, chunk)
        else:
            answer = self.client.tool_calls_record(self.session_id, chunk)
        self.stats.requests += 1
        for result in answer["results"]:
            if result["status"] < 400:
                self.stats.sent += 1
            else:
                self.stats.rejected.append(
                    Rejected(
                        kind=kind,
                        item=chunk[result["index"]],
                        status=result["status"],
                        message=result.get("message", ""),
                        errors=result.get("errors"),
                    )
                )

    def pending(self) -> int:
        with self._lock:
            return sum(len(b) for b in self._buffers.values())

    def _tick(self) -> None:
        assert self.interval
        while not self._closed.wait(self.interval):
            try:
                self.flush()
            except SwitchyardError as exc:
                # Kept in the queue; the next tick or close() tries again.
                print(f"switchyard: batch not sent yet: {exc}", file=sys.stderr)

    def close(self) -> None:
        """Stop the timer and send what is left (errors go to stderr: this also runs at exit)."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        atexit.unregister(self.close)
        try:
            self.flush()
        except SwitchyardError as exc:
            print(f"switchyard: {self.pending()} queued items not sent: {exc}", file=sys.stderr)

    def __enter__(self) -> EventBatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
