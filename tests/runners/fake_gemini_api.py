"""A scripted stand-in for the Gemini API, for running the real Gemini CLI in tests.

The CLI is pointed at it with ``GOOGLE_GEMINI_BASE_URL=<fake.url>`` and any ``GEMINI_API_KEY`` (the
CLI takes a base URL over plain HTTP only on 127.0.0.1 or localhost). It answers what the CLI's
``@google/genai`` SDK asks: ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse`` as
server-sent events (``data: <GenerateContentResponse>`` and a blank line each), ``:generateContent``
as one JSON body, ``:countTokens`` with a count; other GETs an empty 200 and anything else a 404 in
the API's error format (``{"error": {"code", "message", "status"}}``).

The conversation is scripted per test as a list of replies, ``function_call(...)`` or ``text(...)``.
The reply to a request of the main conversation is the script's entry number *n*, where *n* is how
many ``functionResponse`` parts the request carries for calls this fake made (ids ``<tag>_NN``): the
first request gets the call, the one that comes back with its result gets the next entry. Stateless,
so a retried request gets the same answer; a resumed conversation, which carries an earlier fake's
results, starts this script from its beginning. A request is of the main conversation when it
offers the functions the script calls; what the CLI asks on the side (a JSON answer such as its
next-speaker check or its model router's choice) gets a short answer shaped to the schema it asks for.

``fail=(status, message)`` answers every model request with that API error instead (the CLI's retries
included: it is asked again and fails again); ``fail`` may also be a function of the request's body
that says which error, or None to answer it. ``hold_at=n`` holds the answer to the main request
carrying ``n`` results until ``go`` is set (``held`` is set once it arrived). Every request is kept
in ``requests`` (method, path, JSON body) so a test can show what was asked. The server, the script's
cursor, the hold and the record are fake_model_api.py's, shared with the other stand-ins; this module
is the Gemini API's wire format.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.runners.fake_model_api import FakeModelAPI, ModelAPIHandler, Reply, Seen, text

PROMPT_TOKENS = 120
CANDIDATE_TOKENS = 30
SIDE_TEXT = "OK"
# The API's status names for the HTTP codes a test makes it answer with.
STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 429: "RESOURCE_EXHAUSTED"}


def function_call(name: str, args: dict, *, text: str = "") -> Reply:
    """A reply that calls ``name`` with ``args`` (after a short text, if given)."""
    return Reply("function_call", text=text, name=name, arguments=args)


def function_responses(body: dict, prefix: str = "") -> int:
    """How many ``functionResponse`` parts the request's contents carry (for call ids starting ``prefix``)."""
    count = 0
    for content in body.get("contents") or []:
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else []:
            answer = part.get("functionResponse") if isinstance(part, dict) else None
            if isinstance(answer, dict) and str(answer.get("id", "")).startswith(prefix):
                count += 1
    return count


def offered_functions(body: dict) -> set[str]:
    names = set()
    for tool in body.get("tools") or []:
        for declaration in (tool.get("functionDeclarations") or []) if isinstance(tool, dict) else []:
            if isinstance(declaration, dict):
                names.add(str(declaration.get("name")))
    return names


def filled(schema: Any) -> Any:
    """A value of the JSON schema's shape: its first enum value, "OK" for a string, an object of its
    properties. Enough for the CLI's side questions (next speaker: "user"; the router: a model)."""
    if not isinstance(schema, dict):
        return SIDE_TEXT
    if schema.get("enum"):
        return "user" if "user" in schema["enum"] else schema["enum"][0]
    kind = str(schema.get("type") or "").lower()
    if kind == "object" or "properties" in schema:
        return {name: filled(sub) for name, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return 0
    if kind == "boolean":
        return False
    return SIDE_TEXT


class GenerateContentHandler(ModelAPIHandler):
    """``POST /v1beta/models/<model>:<method>`` for the methods the CLI's SDK calls."""

    def error(self, status: int, message: str) -> None:
        name = STATUS_NAMES.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
        self.send_json(status, {"error": {"code": status, "message": message, "status": name}})

    def do_POST(self) -> None:
        fake = self.fake
        body = self.read_body()
        path = self.path.split("?", 1)[0]
        model, _, method = path.rpartition("/")[2].partition(":")
        if not isinstance(body, dict) or method not in ("streamGenerateContent", "generateContent", "countTokens"):
            fake.record(Seen("POST", self.path, body))
            self.error(404, f"No route for POST {path} in the fake.")
            return
        if method == "countTokens":
            fake.record(Seen("POST", self.path, body))
            self.send_json(200, {"totalTokens": PROMPT_TOKENS})
            return
        failure = fake.fail(body) if callable(fake.fail) else fake.fail
        if failure is not None:
            fake.record(Seen("POST", self.path, body))
            self.error(*failure)
            return
        reply, main = fake.reply_for(body)
        fake.record(Seen("POST", self.path, body, main=main))
        chunks = fake.chunks(body, reply, model)
        if method == "generateContent":
            self.send_json(200, fake.whole(chunks))
            return
        self.start_stream()
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
            self.wfile.flush()


class FakeGeminiAPI(FakeModelAPI):
    """``with FakeGeminiAPI([function_call("run_shell_command", {...}), text("Done.")]) as fake: ... fake.url``"""

    handler = GenerateContentHandler

    def __init__(
        self,
        script: list[Reply],
        *,
        tag: str = "fake",
        hold_at: int | None = None,
        fail: tuple[int, str] | Callable[[dict], tuple[int, str] | None] | None = None,
    ):
        super().__init__(script, prefix=f"{tag}_", hold_at=hold_at)
        self.fail = fail

    # --- what to answer ---------------------------------------------------------------------------
    def is_main(self, body: dict) -> bool:
        wanted = {reply.name for reply in self.script if reply.kind == "function_call"}
        offered = offered_functions(body)
        return bool(offered) and wanted <= offered

    def reply_for(self, body: dict) -> tuple[Reply, bool]:
        if not self.is_main(body):
            config = body.get("generationConfig") or {}
            schema = config.get("responseJsonSchema") or config.get("responseSchema")
            if config.get("responseMimeType") == "application/json" or schema:
                return text(json.dumps(filled(schema))), False
            return text(SIDE_TEXT), False
        return self.entry(function_responses(body, self.prefix)), True

    def chunks(self, body: dict, reply: Reply, model: str) -> list[dict]:
        """The reply as the API streams it: text in pieces, then the call (if any), the last chunk
        with the finish reason and the usage."""
        index = function_responses(body, self.prefix)
        parts: list[dict] = [{"text": reply.text[i : i + 12]} for i in range(0, len(reply.text), 12)]
        if reply.kind == "function_call":
            parts.append(
                {"functionCall": {"id": f"{self.prefix}{index:02d}", "name": reply.name, "args": reply.arguments}}
            )
        parts = parts or [{"text": ""}]
        response_id = f"resp_fake_{self.next_id():04d}"
        out = []
        for number, part in enumerate(parts):
            chunk: dict[str, Any] = {
                "candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}],
                "modelVersion": model,
                "responseId": response_id,
            }
            if number == len(parts) - 1:
                chunk["candidates"][0]["finishReason"] = "STOP"
                chunk["usageMetadata"] = {
                    "promptTokenCount": PROMPT_TOKENS,
                    "candidatesTokenCount": CANDIDATE_TOKENS,
                    "totalTokenCount": PROMPT_TOKENS + CANDIDATE_TOKENS,
                }
            out.append(chunk)
        return out

    def whole(self, chunks: list[dict]) -> dict:
        """The streamed chunks as one generateContent answer."""
        parts = [part for chunk in chunks for part in chunk["candidates"][0]["content"]["parts"]]
        last = chunks[-1]
        candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        return {**last, "candidates": [candidate]}
