"""A scripted stand-in for the Anthropic Messages API, for running the real Claude Code CLI in tests.

Claude Code is pointed at it with ``ANTHROPIC_BASE_URL=<fake.url>`` and any ``ANTHROPIC_API_KEY``.
It answers ``POST /v1/messages`` (streamed as server-sent events, or as one JSON body when the
request does not ask for a stream) the way the API does: ``message_start``, then per content
block ``content_block_start`` / ``content_block_delta`` (``text_delta`` or ``input_json_delta``) /
``content_block_stop``, then ``message_delta`` with the stop reason and usage, and ``message_stop``.

The conversation is scripted per test as a list of replies, ``tool_use(...)`` or ``text(...)``. The
reply to a request of the main conversation is the script's entry number *n*, where *n* is how many
``tool_result`` blocks the request carries for tool uses this fake issued (ids ``toolu_<tag>_NN``): the
first request gets the tool use, the one that comes back with its result gets the next entry (the
final text, say). Stateless, so a retried request gets the same answer; a resumed conversation, which
carries an earlier fake's tool results, starts this script from its beginning. A request is of the main conversation when it offers the tools the script uses;
everything else Claude Code asks on the side (a quota probe, a title for the session, a Bash command's
prefix, a topic check) gets a short text. ``count_tokens`` gets a count; other GETs and HEADs get an
empty 200 (connectivity checks), anything else a 404 in the API's error format.

Subagents (the Task/Agent tool): ``subagents={marker: script}`` scripts the conversation of a subagent
whose first message (its prompt) contains ``marker``, with tool use ids ``toolu_<tag>sub<N>_NN`` (N: the
marker's place in the dict), counted like the main script's; without it a subagent's requests are
answered as side requests.

``hold_at=n`` holds the answer to the main request carrying ``n`` results until ``go`` is set (``held`` is
set once it arrived). Every request is kept in ``requests`` (method, path, JSON body) so a test can show
what was asked. The server, the script's cursor, the hold and the record are fake_model_api.py's,
shared with the other stand-ins; this module is the Messages API's wire format.
"""

from __future__ import annotations

import json

from tests.runners.fake_model_api import FakeModelAPI, ModelAPIHandler, Reply, Seen, text

MODEL_FALLBACK = "claude-sonnet-4-5"
SIDE_TEXT = "OK"
INPUT_TOKENS = 120
OUTPUT_TOKENS = 30


def tool_use(name: str, input: dict, *, text: str = "") -> Reply:
    """A reply that calls ``name`` with ``input`` (after a short text, if given)."""
    return Reply("tool_use", text=text, name=name, arguments=input)


def tool_results(body: dict, prefix: str = "") -> int:
    """How many ``tool_result`` blocks the request's messages carry (for tool use ids starting ``prefix``)."""
    count = 0
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            count += sum(
                1
                for block in content
                if isinstance(block, dict)
                and block.get("type") == "tool_result"
                and str(block.get("tool_use_id", "")).startswith(prefix)
            )
    return count


def _offered_tools(body: dict) -> set[str]:
    return {str(tool.get("name")) for tool in body.get("tools") or [] if isinstance(tool, dict)}


def _chunks(value: str, size: int) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]


class MessagesHandler(ModelAPIHandler):
    """``POST /v1/messages`` (and its ``count_tokens``) as the API answers it; HEAD for connectivity checks."""

    def id_header(self) -> dict[str, str]:
        return {"request-id": f"req_fake_{self.fake.next_id():04d}"}

    def do_HEAD(self) -> None:
        self.fake.record(Seen("HEAD", self.path, None))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        fake = self.fake
        body = self.read_body()
        path = self.path.split("?", 1)[0]
        if path.endswith("/v1/messages/count_tokens"):
            fake.record(Seen("POST", self.path, body))
            self.send_json(200, {"input_tokens": INPUT_TOKENS})
            return
        if not path.endswith("/v1/messages") or not isinstance(body, dict):
            fake.record(Seen("POST", self.path, body))
            error = {"type": "not_found_error", "message": f"No route for POST {path} in the fake."}
            self.send_json(404, {"type": "error", "error": error})
            return
        reply, main = fake.reply_for(body)
        fake.record(Seen("POST", self.path, body, main=main))
        message, blocks = fake.message(body, reply, tool_results(body, fake.prefix))
        if not body.get("stream"):
            self.send_json(200, message)
            return
        self.start_stream(self.id_header())
        for name, data in fake.events(message, blocks):
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()


class FakeAnthropic(FakeModelAPI):
    """``with FakeAnthropic([tool_use("Bash", {...}), text("Done.")]) as fake: ... fake.url``"""

    handler = MessagesHandler

    def __init__(
        self,
        script: list[Reply],
        *,
        tag: str = "fake",
        subagents: dict[str, list[Reply]] | None = None,
        hold_at: int | None = None,
    ):
        super().__init__(script, prefix=f"toolu_{tag}_", hold_at=hold_at)
        self.subagents = {
            marker: (f"toolu_{tag}sub{n}_", list(replies))
            for n, (marker, replies) in enumerate((subagents or {}).items())
        }

    def describe_request(self, seen: Seen) -> str:
        model = seen.body.get("model") if isinstance(seen.body, dict) else None
        tag = " main" if seen.main else ""
        return f"{seen.method} {seen.path} model={model}{tag}"

    # --- what to answer ---------------------------------------------------------------------------
    def _is_main(self, body: dict) -> bool:
        wanted = {reply.name for reply in self.script if reply.kind == "tool_use"}
        offered = _offered_tools(body)
        return bool(offered) and (wanted <= offered if wanted else True)

    def subagent_of(self, body: dict) -> tuple[str, list[Reply]] | None:
        """(tool use id prefix, script) of the subagent this request is from, if scripted."""
        messages = body.get("messages") or []
        first = json.dumps(messages[0]) if messages else ""
        return next((found for marker, found in self.subagents.items() if marker in first), None)

    def reply_for(self, body: dict) -> tuple[Reply, bool]:
        subagent = self.subagent_of(body) if self.subagents else None
        if subagent is not None:
            prefix, script = subagent
            index = tool_results(body, prefix)
            return (script[index] if index < len(script) else text("(the subagent's script has ended)")), False
        if not self._is_main(body):
            return text(SIDE_TEXT), False
        return self.entry(tool_results(body, self.prefix)), True

    def message(self, body: dict, reply: Reply, index: int) -> tuple[dict, list[dict]]:
        """The message as the API would return it whole, and its content blocks."""
        blocks: list[dict] = []
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        if reply.kind == "tool_use":
            subagent = self.subagent_of(body) if self.subagents else None
            prefix = subagent[0] if subagent is not None else self.prefix
            if subagent is not None:
                index = tool_results(body, prefix)
            blocks.append(
                {"type": "tool_use", "id": f"{prefix}{index:02d}", "name": reply.name, "input": reply.arguments}
            )
        message = {
            "id": f"msg_fake_{self.next_id():04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or MODEL_FALLBACK,
            "content": blocks,
            "stop_reason": "tool_use" if reply.kind == "tool_use" else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": INPUT_TOKENS,
                "output_tokens": OUTPUT_TOKENS,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }
        return message, blocks

    def events(self, message: dict, blocks: list[dict]) -> list[tuple[str, dict]]:
        start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
        events: list[tuple[str, dict]] = [("message_start", {"type": "message_start", "message": start})]
        events.append(("ping", {"type": "ping"}))
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                opening = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": part} for part in _chunks(block["text"], 12)]
            else:
                opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                raw = json.dumps(block["input"])
                deltas = [{"type": "input_json_delta", "partial_json": part} for part in _chunks(raw, 16)]
            events.append(
                ("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening})
            )
            for delta in deltas:
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": message["usage"]["output_tokens"]},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return events
