"""A scripted stand-in for the OpenAI Responses API, for running the real Codex CLI in tests.

Codex is pointed at it through a custom model provider in its ``config.toml`` (``codex_config``
below writes one: ``model_provider = "standin"``, ``[model_providers.standin] base_url =
"<fake.url>/v1"``, ``wire_api = "responses"``, its key in an environment variable). It answers
``POST /v1/responses`` with a stream of server-sent events as the API sends them:
``response.created`` and ``response.in_progress``, then per output item
``response.output_item.added``, its deltas (``response.function_call_arguments.delta`` / ``.done``,
or ``response.content_part.added``, ``response.output_text.delta`` / ``.done``,
``response.content_part.done``), ``response.output_item.done``, and ``response.completed`` with the
response's usage (``input_tokens``, ``input_tokens_details.cached_tokens``, ``output_tokens``).

The conversation is scripted per test as a list of replies, ``shell(...)`` or ``text(...)``. The
reply to a request is the script's entry number *n*, where *n* is how many ``function_call_output``
items the request's ``input`` carries for calls this fake issued (call ids ``call_<tag>_NN``): the
first request gets the shell call, the one that comes back with its output gets the next entry.
Stateless, so a retried request gets the same answer; a resumed thread (whose requests carry an
earlier fake's calls and outputs) starts this script from its beginning.

``shell(command)`` calls whichever shell tool the request offers (Codex offers one of
``shell_command`` {command: str}, ``exec_command`` {cmd: str} or ``shell`` {command: [argv]},
depending on the model and its features), so the script does not depend on that choice.

``fail=(status, message)`` answers every request with that HTTP error in the API's error format
(``{"error": {"message", "type", "code"}}``), as a broken or unauthorised provider would.

``hold_at=n`` holds the answer to the request carrying ``n`` outputs until ``go`` is set (``held`` is set
once it arrived). Every request is kept in ``requests`` (method, path, JSON body) so a test can show what
was asked. The server, the script's cursor, the hold and the record are fake_model_api.py's, shared with
the other stand-ins; this module is the Responses API's wire format.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.runners.fake_model_api import (  # noqa: F401 - text, for the tests' scripts
    FakeModelAPI,
    ModelAPIHandler,
    Reply,
    Seen,
    text,
)

MODEL = "gpt-standin"
API_KEY_ENV = "STANDIN_OPENAI_KEY"
INPUT_TOKENS = 1200
CACHED_TOKENS = 200
OUTPUT_TOKENS = 80
# The shell tools Codex may offer, and how each takes a command line.
SHELL_TOOLS = {
    "shell_command": lambda command: {"command": command},
    "exec_command": lambda command: {"cmd": command},
    "shell": lambda command: {"command": ["bash", "-lc", command]},
}
ERROR_TYPES = {401: ("invalid_request_error", "invalid_api_key"), 429: ("rate_limit_error", "rate_limit_exceeded")}


def shell(command: str) -> Reply:
    return Reply("shell", text=command)


def call_outputs(body: dict, prefix: str) -> int:
    """How many ``function_call_output`` items the request's input carries for call ids starting ``prefix``."""
    return sum(
        1
        for item in body.get("input") or []
        if isinstance(item, dict)
        and item.get("type") in ("function_call_output", "custom_tool_call_output")
        and str(item.get("call_id", "")).startswith(prefix)
    )


def offered_tools(body: dict) -> list[str]:
    return [str(tool.get("name")) for tool in body.get("tools") or [] if isinstance(tool, dict) and tool.get("name")]


def input_texts(body: dict, role: str = "user") -> list[str]:
    """The text of the request's input messages of ``role``."""
    texts = []
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "message" and item.get("role") == role:
            content = item.get("content")
            parts = [{"text": content}] if isinstance(content, str) else content or []
            texts += [str(p.get("text", "")) for p in parts if isinstance(p, dict)]
    return texts


def codex_config(home: Path, url: str, *, retries: int = 0) -> Path:
    """``<home>/.codex/config.toml`` naming the stand-in at ``url`` as the model provider, as a person
    would for a gateway (the runner copies it into a run's private home). No retries, so a failing
    provider fails at once; nothing on the side (update checks, analytics)."""
    folder = home / ".codex"
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "config.toml"
    config.write_text(
        "\n".join(
            [
                f'model = "{MODEL}"',
                'model_provider = "standin"',
                "check_for_update_on_startup = false",
                "",
                "[analytics]",
                "enabled = false",
                "",
                "[model_providers.standin]",
                'name = "Responses API stand-in"',
                f'base_url = "{url}/v1"',
                f'env_key = "{API_KEY_ENV}"',
                'wire_api = "responses"',
                f"request_max_retries = {retries}",
                f"stream_max_retries = {retries}",
                "",
            ]
        )
    )
    return config


class ResponsesHandler(ModelAPIHandler):
    """``POST /v1/responses`` as the API streams it, and ``GET /v1/models``."""

    def id_header(self) -> dict[str, str]:
        return {"x-request-id": f"req_{self.fake.next_id():04d}"}

    def error(self, status: int, message: str) -> None:
        kind, code = ERROR_TYPES.get(status, ("server_error", None))
        self.send_json(status, {"error": {"message": message, "type": kind, "param": None, "code": code}})

    def do_GET(self) -> None:
        self.fake.record(Seen("GET", self.path, None))
        if self.path.split("?")[0].endswith("/models"):
            self.send_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "test"}]})
            return
        self.error(404, f"No route for GET {self.path} in the stand-in.")

    def do_POST(self) -> None:
        fake = self.fake
        body = self.read_body()
        fake.record(Seen("POST", self.path, body))
        if not self.path.split("?")[0].endswith("/responses") or not isinstance(body, dict):
            self.error(404, f"No route for POST {self.path} in the stand-in.")
            return
        if self.headers.get("Authorization") != "Bearer test-key":
            self.error(401, "Incorrect API key provided.")
            return
        if fake.fail is not None:
            self.error(*fake.fail)
            return
        item = fake.item_for(body, fake.reply_for(body))
        self.start_stream()
        try:
            for event in fake.events(body, item):
                self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # Codex went away meanwhile (killed, cancelled) while this answer was held


class FakeResponses(FakeModelAPI):
    """``with FakeResponses([shell("echo hi > a"), text("Done.")]) as fake: ... fake.url``"""

    handler = ResponsesHandler

    def __init__(
        self, script: list[Reply], *, tag: str = "fake", hold_at: int | None = None, fail: tuple[int, str] | None = None
    ):
        super().__init__(script, prefix=f"call_{tag}_", hold_at=hold_at)
        self.fail = fail

    def model_requests(self) -> list[Seen]:
        with self._lock:
            return [seen for seen in self.requests if seen.path.split("?")[0].endswith("/responses")]

    def describe_request(self, seen: Seen) -> str:
        return f"{seen.method} {seen.path} tools={offered_tools(seen.body) if isinstance(seen.body, dict) else None}"

    # --- what to answer ---------------------------------------------------------------------------
    def reply_for(self, body: dict) -> Reply:
        return self.entry(call_outputs(body, self.prefix))

    def item_for(self, body: dict, reply: Reply) -> dict:
        if reply.kind == "text":
            part = {"type": "output_text", "text": reply.text, "annotations": []}
            return {
                "id": f"msg_{self.next_id():04d}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [part],
            }
        offered = offered_tools(body)
        name = next((tool for tool in SHELL_TOOLS if tool in offered), None)
        if name is None:
            raise LookupError(f"the request offers no shell tool the stand-in knows: {offered}")
        return {
            "id": f"fc_{self.next_id():04d}",
            "type": "function_call",
            "status": "completed",
            "call_id": f"{self.prefix}{call_outputs(body, self.prefix):02d}",
            "name": name,
            "arguments": json.dumps(SHELL_TOOLS[name](reply.text)),
        }

    def events(self, body: dict, item: dict) -> list[dict]:
        """The stream of one response holding ``item``, event by event."""
        response = {
            "id": f"resp_{self.next_id():04d}",
            "object": "response",
            "created_at": 1764327600,
            "status": "in_progress",
            "model": body.get("model") or MODEL,
            "output": [],
            "usage": None,
        }
        out: list[dict] = [
            {"type": "response.created", "response": response},
            {"type": "response.in_progress", "response": response},
        ]
        opened = {**item, "status": "in_progress"}
        if item["type"] == "message":
            opened["content"] = []
        else:
            opened["arguments"] = ""
        out.append({"type": "response.output_item.added", "output_index": 0, "item": opened})
        where = {"item_id": item["id"], "output_index": 0}
        if item["type"] == "message":
            words = item["content"][0]["text"]
            empty = {"type": "output_text", "text": "", "annotations": []}
            out.append({"type": "response.content_part.added", **where, "content_index": 0, "part": empty})
            for start in range(0, len(words), 12):
                piece = words[start : start + 12]
                out.append({"type": "response.output_text.delta", **where, "content_index": 0, "delta": piece})
            out.append({"type": "response.output_text.done", **where, "content_index": 0, "text": words})
            out.append({"type": "response.content_part.done", **where, "content_index": 0, "part": item["content"][0]})
        else:
            raw = item["arguments"]
            for start in range(0, len(raw), 16):
                out.append(
                    {"type": "response.function_call_arguments.delta", **where, "delta": raw[start : start + 16]}
                )
            out.append({"type": "response.function_call_arguments.done", **where, "arguments": raw})
        out.append({"type": "response.output_item.done", "output_index": 0, "item": item})
        usage = {
            "input_tokens": INPUT_TOKENS,
            "input_tokens_details": {"cached_tokens": CACHED_TOKENS},
            "output_tokens": OUTPUT_TOKENS,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
        }
        done = {**response, "status": "completed", "output": [item], "usage": usage}
        out.append({"type": "response.completed", "response": done})
        for number, event in enumerate(out):
            event["sequence_number"] = number
        return out
