"""What the scripted stand-ins for the model APIs share, whatever their wire format.

fake_anthropic.py (Messages API, for Claude Code), fake_gemini_api.py (for the Gemini CLI) and
fake_openai_responses.py (Responses API, for Codex) each speak one API; this module holds the rest, so
the three behave alike where a test relies on it:

- a threaded HTTP server on 127.0.0.1 (a free port: ``fake.url``), started and stopped by ``with``;
- the script and its cursor: a request gets the script's entry number *n*, *n* counted by the
  stand-in from the results of its own calls that the request carries back, so the fake keeps no
  state (a retried request gets the same answer) and a resumed conversation starts the script anew;
- ``hold_at=n``: the answer to the request that carries *n* results waits until the test sets
  ``go`` (``held`` is set once that request arrived), so a test can act while the CLI waits on the
  model; ``stop()`` lets a held answer go (into a closed socket) so its thread ends;
- every request kept in ``requests`` as a ``Seen``, and ``describe()``: one line each, for an
  assertion's message.

A stand-in subclasses ``FakeModelAPI``, names its ``handler`` (a ``ModelAPIHandler`` with the API's
routes), and may say more of a request in ``describe()``. A script is a list of ``Reply``: ``text(...)``
here, and each stand-in's call of a tool.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self

# How long a held answer waits for ``go`` at most: a test that never sets it still ends (stop() sets it too).
HOLD_SECONDS = 180


@dataclass(frozen=True)
class Reply:
    """One entry of a script: words, or a call of a tool (words first, if any). ``kind`` is the API's
    word for it ("text", or "tool_use", "function_call", "shell")."""

    kind: str
    text: str = ""  # the words; for Codex's "shell", the command line
    name: str = ""  # the tool's
    arguments: dict = field(default_factory=dict)


def text(value: str) -> Reply:
    return Reply("text", text=value)


@dataclass
class Seen:
    """One request as the stand-in saw it; ``main`` when it belonged to the scripted conversation."""

    method: str
    path: str
    body: Any
    main: bool = False


class ModelAPIHandler(BaseHTTPRequestHandler):
    """The HTTP side every stand-in shares; a subclass adds the API's routes (``do_POST``)."""

    # HTTP/1.0: each answer ends by closing the connection, so a stream needs no chunking.
    protocol_version = "HTTP/1.0"
    server: ModelAPIServer

    @property
    def fake(self) -> Any:
        return self.server.fake

    def log_message(self, format: str, *args: object) -> None:  # quiet: the test prints describe()
        pass

    def send_json(self, status: int, body: object, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in {**self.id_header(), **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def id_header(self) -> dict[str, str]:
        """The header that names a JSON answer, for an API that sends one (its own name and format)."""
        return {}

    def start_stream(self, headers: Mapping[str, str] | None = None) -> None:
        """The head of a server-sent events answer; the caller writes the events."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()

    def read_body(self) -> Any:
        """The request's JSON body; its text when it is not JSON, None when it has none."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def do_GET(self) -> None:  # connectivity checks: an empty 200
        self.fake.record(Seen("GET", self.path, None))
        self.send_json(200, {})


class ModelAPIServer(ThreadingHTTPServer):
    daemon_threads = True  # a handler still holding an answer does not keep the test process alive

    def __init__(self, fake: FakeModelAPI):
        self.fake = fake
        super().__init__(("127.0.0.1", 0), fake.handler)


class FakeModelAPI:
    """``with Subclass(script) as fake: ... fake.url``: see the module's docstring."""

    handler: ClassVar[type[ModelAPIHandler]]  # the API's routes and wire format
    end_of_script = text("(the script has ended)")  # the reply past the script's last entry

    def __init__(self, script: list[Reply], *, prefix: str, hold_at: int | None = None):
        self.script = list(script)
        self.prefix = prefix  # of the ids of this fake's calls, by which it counts their results
        self.hold_at = hold_at
        self.held = threading.Event()
        self.go = threading.Event()
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        self._ids = 0
        self._server = ModelAPIServer(self)
        self._thread = threading.Thread(target=self._server.serve_forever, name=type(self).__name__, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.go.set()  # a held handler thread answers (into a closed socket) and ends
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def entry(self, index: int) -> Reply:
        """The script's entry number ``index`` (how many results of this fake's calls the request
        carries), after holding it if ``index`` is ``hold_at``."""
        if self.hold_at is not None and index == self.hold_at:
            self.held.set()
            self.go.wait(HOLD_SECONDS)
        return self.script[index] if index < len(self.script) else self.end_of_script

    def main_requests(self) -> list[Seen]:
        with self._lock:
            return [seen for seen in self.requests if seen.main]

    def describe(self) -> str:
        """One line per request, for an assertion's message."""
        with self._lock:
            return "\n".join(self.describe_request(seen) for seen in self.requests)

    def describe_request(self, seen: Seen) -> str:
        return f"{seen.method} {seen.path}{' main' if seen.main else ''}"

    def record(self, seen: Seen) -> None:
        with self._lock:
            self.requests.append(seen)

    def next_id(self) -> int:
        """A number for the next id the fake makes up (a message's, a request's): unique per fake."""
        with self._lock:
            self._ids += 1
            return self._ids
