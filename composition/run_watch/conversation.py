"""A run's conversation, from what its agent left: the provider's structured output in the run's log
(Claude Code stream-json, Codex JSONL, Gemini CLI stream-json; recognised by its lines, so a ``[providers.x]`` running
``claude`` is read as Claude), else, for agents that print text (demo, shell), the session's own
events (its words, plans, questions) and the ledger's tool calls, in the order they happened."""

from __future__ import annotations

import json

from composition.run_watch import claude_stream, codex_jsonl, gemini_stream
from composition.run_watch.items import Conversation, Plan, Question, Step, Text, ToolCall, json_lines
from ledger.models import ToolInvocation
from runners.models import Run
from sessions_app.event_bodies import plan_steps
from sessions_app.logs import MAX_CHUNK, session_log_read, session_log_tail_offset
from sessions_app.models import StreamEvent

LOG_WINDOW = MAX_CHUNK // 2  # the last 512 KiB, parsed per redraw; a long run's start is left out, and said so
EVENTS_MAX = 400
QUESTIONS_MAX = 100
ITEMS_MAX = 200  # steps shown; the raw log has the rest
TOTALS_WINDOW = 64 * 1024
CALLS_MAX = 400
SNIFF_LINES = 20
CLAUDE_TYPES = frozenset({"assistant", "user", "result"})
CODEX_TYPES = frozenset({"thread.started", "turn.started", "turn.completed", "item.started", "item.completed"})


def log_format(data: bytes) -> str:
    """``claude``, ``codex``, ``gemini`` or ``text``: what the first JSON lines of a log look like."""
    for index, line in enumerate(json_lines(data)):
        kind = line.get("type")
        if kind in CLAUDE_TYPES and ("message" in line or kind == "result"):
            return "claude"
        if kind in CODEX_TYPES:
            return "codex"
        if kind == "system" and line.get("subtype") == "init" and "session_id" in line:
            return "claude"
        if kind in ("init", "tool_use", "tool_result") or (kind == "message" and "role" in line):
            return "gemini"
        if index >= SNIFF_LINES:
            break
    return "text"


def run_conversation(run: Run) -> Conversation:
    if run.session is None:
        return Conversation()
    offset = session_log_tail_offset(session=run.session, window=LOG_WINDOW)
    chunk = session_log_read(session=run.session, offset=offset, limit=LOG_WINDOW)
    data = chunk.data.encode("utf-8")
    kind = log_format(data)
    if kind == "claude":
        conversation = claude_stream.parse(data)
    elif kind == "codex":
        conversation = codex_jsonl.parse(data)
    elif kind == "gemini":
        conversation = gemini_stream.parse(data)
    else:
        return _from_events(run)
    conversation.truncated = offset > 0
    _place_questions(conversation, _questions(run))
    return _last_items(conversation)


def _answer_text(payload: dict) -> str:
    decision = str(payload.get("decision") or "")
    answer = str(payload.get("answer") or "")
    said = {"allow": "Allowed", "deny": "Denied"}.get(decision, decision.capitalize())
    text = f"{said}: {answer}" if said and answer and answer != decision else said or answer
    who = payload.get("answered_by")
    return f"{text} (by {who})" if isinstance(who, str) and who else text


def _questions(run: Run) -> list[tuple[dict, Question]]:
    """The session's questions (permission requests from the agent's hooks, its own questions) with
    their answers: what the provider's output does not hold."""
    events = StreamEvent.objects.filter(session=run.session, type=StreamEvent.Type.INPUT_REQUEST).order_by("-seq")
    asked: dict[int, tuple[dict, Question]] = {}
    for event in list(events[:QUESTIONS_MAX])[::-1]:
        payload = event.payload if isinstance(event.payload, dict) else {}
        if "answer" in payload or "decision" in payload:
            found = asked.get(payload.get("in_reply_to")) or (asked[max(asked)] if asked else None)
            if found is not None:
                found[1].answer = _answer_text(payload)
        elif isinstance(payload.get("question"), str):
            asked[event.seq] = (payload, Question(text=payload["question"]))
    return list(asked.values())


def _place_questions(conversation: Conversation, questions: list[tuple[dict, Question]]) -> None:
    """Each permission request just before the tool call it asked about (same tool, same input);
    the others at the end, the newest last."""
    for payload, question in questions:
        index = next(
            (
                at
                for at, item in enumerate(conversation.items)
                if isinstance(item, ToolCall)
                and item.name == payload.get("tool_name")
                and item.input == payload.get("tool_input")
            ),
            None,
        )
        if index is None:
            conversation.items.append(question)
        else:
            conversation.items.insert(index, question)


def _plan_steps(payload: dict) -> list[Step]:
    return [Step(text=text, status=status) for text, status in plan_steps(payload)]


def _from_events(run: Run) -> Conversation:
    """The session's words, plans and questions, and the ledger's tool calls, by time."""
    session = run.session
    wanted = (
        StreamEvent.Type.LOG,
        StreamEvent.Type.PLAN_UPDATE,
        StreamEvent.Type.INPUT_REQUEST,
        StreamEvent.Type.MILESTONE,
    )
    events = list(StreamEvent.objects.filter(session=session, type__in=wanted).order_by("-seq")[:EVENTS_MAX])[::-1]
    calls = list(ToolInvocation.objects.filter(session=session).order_by("-started_at", "-id")[:CALLS_MAX])[::-1]
    timed: list[tuple] = []
    questions: dict[int, Question] = {}
    for event in events:
        payload = event.payload if isinstance(event.payload, dict) else {}
        item = None
        if event.type in (StreamEvent.Type.LOG, StreamEvent.Type.MILESTONE):
            text = payload.get("message") or payload.get("text") or payload.get("title")
            item = Text(markdown=str(text)) if isinstance(text, str) and text.strip() else None
        elif event.type == StreamEvent.Type.PLAN_UPDATE:
            steps = _plan_steps(payload)
            item = Plan(steps=steps) if steps else None
        elif "answer" in payload:
            # An answer names its question (in_reply_to), or answers the last one asked.
            asked = questions.get(payload.get("in_reply_to")) or (questions[max(questions)] if questions else None)
            if asked is not None:
                asked.answer = str(payload["answer"])
        elif isinstance(payload.get("question"), str):
            item = questions[event.seq] = Question(text=payload["question"])
        if item is not None:
            timed.append((event.timestamp, 0, event.seq, item))
    for call in calls:
        output = None
        if call.status != ToolInvocation.Status.RUNNING:
            output = call.output_summary or call.error or ""
        item = ToolCall(
            id=str(call.pk),
            name=call.tool_name,
            input=_input(call.input_summary),
            output=output,
            is_error=call.status not in (ToolInvocation.Status.RUNNING, ToolInvocation.Status.SUCCESS),
        )
        timed.append((call.started_at, 1, call.pk, item))
    timed.sort(key=lambda entry: entry[:3])
    return _last_items(Conversation(items=[entry[3] for entry in timed], truncated=len(events) >= EVENTS_MAX))


def _last_items(conversation: Conversation) -> Conversation:
    """The last ITEMS_MAX steps: a panel redrawn every 2 s stays quick on a long run."""
    if len(conversation.items) > ITEMS_MAX:
        conversation.items = conversation.items[-ITEMS_MAX:]
        conversation.truncated = True
    return conversation


def _input(summary: str) -> object:
    """The ledger keeps a call's input as (redacted) text, JSON when the agent sent an object."""
    if summary.startswith("{"):
        try:
            return json.loads(summary)
        except ValueError:
            pass
    return summary


def run_totals(run: Run) -> Conversation | None:
    """An ended attempt's tokens and cost as its own output says them (Claude Code's result line is
    its log's last): the log's tail parsed, for attempts with no usage records. None when it says none."""
    if run.session is None:
        return None
    offset = session_log_tail_offset(session=run.session, window=TOTALS_WINDOW)
    data = session_log_read(session=run.session, offset=offset, limit=TOTALS_WINDOW).data.encode("utf-8")
    if log_format(data) != "claude":
        return None  # Codex's usage is per turn, all over its log; text agents say none
    conversation = claude_stream.parse(data)
    return conversation if conversation.cost_usd is not None else None
