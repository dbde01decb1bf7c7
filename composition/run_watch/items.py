"""What a conversation is made of, whichever provider wrote it. Plain data: the templates escape
every string (the agent wrote them all), and only ``Text.markdown`` goes through the sanitising
markdown filter."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal

INPUT_MAX = 20_000  # characters of a tool's input or output kept for the page
# The input key a person reads first, per kind of tool: the command, the file, the pattern.
HEADLINE_KEYS = ("command", "cmd", "file_path", "path", "notebook_path", "pattern", "query", "url", "description")


def cap(text: str, limit: int = INPUT_MAX) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n… [{len(text) - limit} more characters]"


def as_text(value: object) -> str:
    """A tool's input or output as text: a string as it is, anything else as indented JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return cap(value)
    return cap(json.dumps(value, ensure_ascii=False, indent=2, default=str))


@dataclass
class Text:
    markdown: str
    kind: str = "text"


@dataclass
class Question:
    text: str
    answer: str = ""
    kind: str = "question"


@dataclass
class Step:
    text: str
    status: str = "pending"  # pending | in_progress | completed


@dataclass
class Plan:
    steps: list[Step]
    kind: str = "plan"


@dataclass
class Notice:
    """Something that went wrong, said by the agent's program rather than the agent."""

    text: str
    kind: str = "notice"


@dataclass
class ToolCall:
    id: str
    name: str
    input: object = None
    output: str | None = None  # None: no result yet
    is_error: bool = False
    kind: str = "tool"

    @property
    def status(self) -> str:
        if self.output is None:
            return "running"
        return "error" if self.is_error else "done"

    @property
    def headline(self) -> str:
        """The one line that says what the call does (``git status``, ``src/app.py``)."""
        value = self.input
        if isinstance(value, dict):
            for key in HEADLINE_KEYS:
                found = value.get(key)
                if isinstance(found, str) and found.strip():
                    return found.strip().splitlines()[0][:300]
            return ""
        return value.strip().splitlines()[0][:300] if isinstance(value, str) and value.strip() else ""

    @property
    def input_text(self) -> str:
        return as_text(self.input)


@dataclass
class Conversation:
    items: list = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    cost_usd: Decimal | None = None
    model: str = ""
    truncated: bool = False  # the log was longer than what was read: its start is left out

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_creation_tokens


def json_lines(data: bytes):
    """The JSON objects of a JSONL text, one per line; lines that are not (stderr, a cut first line)
    are skipped."""
    for raw in data.split(b"\n"):
        raw = raw.strip()
        if not raw.startswith(b"{"):
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict):
            yield line
