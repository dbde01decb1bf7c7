"""Markdown priority files (SPEC §5) into items. Pure: no database, no files.

Each checkbox list item is one item. Its identity (``key``) is a sha256 of the file name, the
heading path and the item text, each case- and whitespace-normalised, with heading numbering and
priority markers left out: renumbering sections, moving a section between P1 and P0 or fixing the
case of a word updates the same task instead of making a new one.
"""

import hashlib
import re
from dataclasses import dataclass, field

HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
CHECKBOX = re.compile(r"^(?P<indent>[ \t]*)(?:[-*+]|\d{1,9}[.)])\s+\[(?P<mark>[ xX])\]\s+(?P<text>.*?)\s*$")
LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])\s")
FENCE = re.compile(r"^[ \t]*(```|~~~)")
PRIORITY_LEVEL = re.compile(r"^\s*(?:[-*]\s+)?\*\*\s*Priority Level\s*:?\s*\*\*\s*:?\s*(?P<value>.+?)\s*$", re.I)
# A marker is a P-code or one of four words, standing alone (not "Highway" nor "P10").
MARKER = re.compile(r"(?<![\w-])(P[0-3]|critical|high|medium|low)(?![\w-])", re.I)
MARKER_WORDS = {"critical": "P0", "high": "P1", "medium": "P2", "low": "P3"}
# A leading marker written as a tag in a heading: "P0:", "[P1]", "(P2) -", "P3 —".
LEADING_CODE = re.compile(r"^[\[(]?P[0-3][\])]?\s*[:\-–—|]?\s*", re.I)
NUMBERING = re.compile(r"^(?:\d+(?:\.\d+)*[.)]?|[IVXivx]+\.)\s+")
AGENT = re.compile(r"(?<!\S)@([A-Za-z0-9][A-Za-z0-9_-]{0,63})(?![\w@.-])")
# A label must start with a letter, so "fix #123" keeps its issue number in the title. It may be
# scoped, "#repo:shop" or "#runner:gpu" (a colon, then a name); "#bug: text" is still the label "bug".
TAG = re.compile(r"(?<!\S)#([A-Za-z][\w-]{0,99}(?::[A-Za-z0-9][\w-]{0,99})?)(?![\w#])")
# The label naming the repository the task's runs work in (SPEC §8): "repo:<name>".
REPO_LABEL = "repo:"
DEFAULT_PRIORITY = "P2"
MAX_TITLE = 500
MAX_LABEL = 100


@dataclass(frozen=True)
class PriorityItem:
    key: str  # sha256 hex: the task's source_key
    title: str
    description: str
    priority: str  # P0..P3
    done: bool
    labels: tuple[str, ...]
    suggested_agent: str
    line: int  # 1-based, for messages
    repository: str = ""  # the name in its first "repo:<name>" label; the label stays a label too


@dataclass
class _Open:
    """The item being read: its description lines are collected until the indentation ends."""

    indent: int
    line: int
    mark: str
    text: str
    headings: tuple[str, ...]
    lines: list[str] = field(default_factory=list)


def marker_priority(text: str) -> str | None:
    """P0..P3 for the first marker in ``text`` ("P1", "High", "critical"), else None."""
    found = MARKER.search(text)
    if found is None:
        return None
    word = found.group(1).lower()
    return MARKER_WORDS.get(word, word.upper())


def heading_label(text: str) -> str:
    """A heading as a label: emphasis, numbering ("1.", "2.3") and a leading P-code tag removed."""
    text = text.replace("**", "").replace("__", "").strip()
    text = NUMBERING.sub("", text)
    text = LEADING_CODE.sub("", text)
    return " ".join(text.split()).rstrip(":").strip()[:MAX_LABEL]


def normalise(text: str) -> str:
    return " ".join(text.split()).casefold()


def item_key(*, file_name: str, headings: tuple[str, ...], text: str) -> str:
    path = "\x1e".join(normalise(h) for h in headings)
    return hashlib.sha256(f"{file_name}\x1f{path}\x1f{normalise(text)}".encode()).hexdigest()


def _indent_width(text: str) -> int:
    return len(text.expandtabs(4)) - len(text.expandtabs(4).lstrip(" "))


def _description(lines: list[str]) -> str:
    while lines and not lines[-1].strip():
        lines.pop()
    widths = [_indent_width(line) for line in lines if line.strip()]
    cut = min(widths, default=0)
    return "\n".join(line.expandtabs(4)[cut:] if line.strip() else "" for line in lines)


def _title_and_tags(text: str) -> tuple[str, str, list[str]]:
    agents = AGENT.findall(text)
    tags = TAG.findall(text)
    title = " ".join(TAG.sub("", AGENT.sub("", text)).split())
    # An item that is only tags keeps its text as the title rather than becoming blank.
    return (title or " ".join(text.split()))[:MAX_TITLE], (agents[0].lower() if agents else ""), tags


def priority_file_parse(text: str, *, file_name: str) -> list[PriorityItem]:
    """Every checkbox item of a priority file, in file order."""
    file_priority = None
    stack: list[tuple[int, str]] = []  # (level, raw heading text)
    current: _Open | None = None
    in_fence = False
    finished: list[_Open] = []

    for number, line in enumerate(text.splitlines(), start=1):
        fence = FENCE.match(line)
        under_item = current is not None and (not line.strip() or _indent_width(line) > current.indent)
        if in_fence or fence:
            # Code blocks hold no items or headings; indented under an item they are its description.
            in_fence = in_fence != bool(fence)
            if under_item:
                current.lines.append(line)
            elif current is not None:
                finished.append(current)
                current = None
            continue
        heading = HEADING.match(line)
        box = CHECKBOX.match(line)
        if current is not None and (heading or box or not under_item):
            finished.append(current)
            current = None
        level_match = PRIORITY_LEVEL.match(line)
        if level_match and file_priority is None:
            file_priority = marker_priority(level_match.group("value"))
        if heading:
            level = len(heading.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading.group(2)))
        elif box:
            current = _Open(
                indent=_indent_width(box.group("indent")),
                line=number,
                mark=box.group("mark"),
                text=box.group("text"),
                headings=tuple(heading_text for _, heading_text in stack),
            )
        elif current is not None:
            current.lines.append(line)
    if current is not None:
        finished.append(current)
    # The file's Priority Level line may come after some items; it applies to all of them.
    seen: dict[str, int] = {}
    return [_item(opened, file_name=file_name, file_priority=file_priority, seen=seen) for opened in finished]


def _item(current: _Open, *, file_name: str, file_priority: str | None, seen: dict[str, int]) -> PriorityItem:
    path = tuple(label for label in (heading_label(h) for h in current.headings) if label)
    labels = list(path)
    title, agent, tags = _title_and_tags(current.text)
    for tag in tags:
        if tag[:MAX_LABEL] not in labels:
            labels.append(tag[:MAX_LABEL])
    priority = next(
        (code for code in (marker_priority(h) for h in reversed(current.headings)) if code),
        file_priority or DEFAULT_PRIORITY,
    )
    # @agent and #label are left out of the identity: adding one updates the task, not replaces it.
    key_text = " ".join(TAG.sub("", AGENT.sub("", current.text)).split()) or current.text
    key = item_key(file_name=file_name, headings=path, text=key_text)
    # The same item twice under one heading: the second is its own task, numbered by order.
    seen[key] = seen.get(key, 0) + 1
    if seen[key] > 1:
        key = hashlib.sha256(f"{key}#{seen[key]}".encode()).hexdigest()
    return PriorityItem(
        key=key,
        title=title,
        description=_description(current.lines),
        priority=priority,
        done=current.mark in "xX",
        labels=tuple(dict.fromkeys(labels)),
        suggested_agent=agent,
        line=current.line,
        repository=label_repository(labels),
    )


def label_repository(labels) -> str:
    """The repository name a ``repo:<name>`` label gives, or ""."""
    return next((label[len(REPO_LABEL) :] for label in labels if label.startswith(REPO_LABEL)), "")
