"""The change page's diff as HTML table rows: a file's lines highlighted by Pygments, laid out
unified or side by side, with "show more" rows between the hunks.

Rows are built here, not in a template loop: a 5,000-line change is 5,000 rows, and Django's
template engine spends about ten times as long per row as these few string joins (bench/diff_bench.py).
Everything in a row but our own markup is the agent's (paths, code): each piece goes through
``escape`` before it is joined, and Pygments' tokens are escaped the same way (its own HTML
formatter is not used, so no markup of it reaches the page unescaped either).
"""

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from html import escape
from pathlib import PurePosixPath
from urllib.parse import quote

from django.core.cache import cache
from pygments.lexers import get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

# Past these a file's lines are shown as plain text: Pygments' regular expressions on a megabyte of
# minified code would hold the page for seconds.
HIGHLIGHT_MAX_CHARS = 200_000
HIGHLIGHT_MAX_LINE = 2_000
# Pygments' Python lexer takes about 0.3 ms a line here: a 5,000-line change is seconds of it. So
# highlighted lines are cached by their text (the same text is the same HTML, whichever task shows
# it), and one request highlights at most this many lines not in the cache; the rest of the page
# is plain until a later view (each one highlights the next files, its own budget's worth).
HIGHLIGHT_BUDGET_LINES = 1_500
HIGHLIGHT_CACHE_SECONDS = 7 * 24 * 3600
# Unchanged lines a "show more" row loads at once, either side of a long gap.
CONTEXT_STEP = 20

UNIFIED, SPLIT = "unified", "split"
_MARK = {"added": "+", "removed": "-", "context": " "}
_ROW = {"added": "add", "removed": "del", "context": "ctx"}


@dataclass(frozen=True)
class Gap:
    """Unchanged lines not in the diff: new lines ``new``..``end`` (``end`` 0: to the end of the
    file), old ones from ``old``."""

    old: int
    new: int
    end: int

    @property
    def size(self) -> int | None:
        return self.end - self.new + 1 if self.end else None


@lru_cache(maxsize=512)
def _lexer_class(key: str):
    # get_lexer_for_filename tries every lexer's patterns: about a millisecond, so once per kind of name.
    try:
        return type(get_lexer_for_filename(key))
    except ClassNotFound:
        return TextLexer


def _lexer_key(path: str) -> str:
    name = PurePosixPath(path).name
    suffix = PurePosixPath(name).suffix.lower()
    return f"x{suffix}" if suffix else name


def _lexer(path: str):
    return _lexer_class(_lexer_key(path))(stripnl=False, ensurenl=False, stripall=False)


def highlight(path: str, texts: list[str]) -> list[str]:
    """Each of ``texts`` (one line each) as escaped HTML with Pygments' token classes; one lexing of
    the lines together, so a construct running over several lines keeps its colour."""
    source = "\n".join(texts)
    if len(source) > HIGHLIGHT_MAX_CHARS or any(len(t) > HIGHLIGHT_MAX_LINE for t in texts):
        return [escape(t) for t in texts]
    lines: list[str] = []
    current: list[str] = []
    for token, value in _lexer(path).get_tokens(source):
        css = _css_class(token)
        parts = value.split("\n")
        for index, part in enumerate(parts):
            if index:
                lines.append("".join(current))
                current = []
            if part:
                current.append(f'<span class="{css}">{escape(part)}</span>' if css else escape(part))
    lines.append("".join(current))
    if len(lines) != len(texts):  # a lexer that dropped or added a newline: plain rather than misaligned
        return [escape(t) for t in texts]
    return lines


def highlight_files(files: list[tuple[str, list[str]]], *, budget: int | None = None) -> list[list[str]]:
    """``highlight`` of each (path, lines) of a page: from the cache (one round trip for the page),
    else highlighted while the request's budget lasts, else plain."""
    budget = HIGHLIGHT_BUDGET_LINES if budget is None else budget
    keys = [_cache_key(path, texts) for path, texts in files]
    found = cache.get_many(keys) if keys else {}
    fresh: dict[str, list[str]] = {}
    out = []
    for (path, texts), key in zip(files, keys, strict=True):
        lines = found.get(key)
        if lines is None and len(texts) <= budget:
            budget -= len(texts)
            lines = fresh[key] = highlight(path, texts)
        out.append(lines if lines is not None else [escape(t) for t in texts])
    if fresh:
        cache.set_many(fresh, timeout=HIGHLIGHT_CACHE_SECONDS)
    return out


def _cache_key(path: str, texts: list[str]) -> str:
    digest = hashlib.sha256("\n".join(texts).encode("utf-8", "surrogatepass")).hexdigest()
    return f"diff-hl:1:{_lexer_class(_lexer_key(path)).__name__}:{digest}"


@lru_cache(maxsize=256)
def _css_class(token) -> str:
    while token not in STANDARD_TYPES:
        token = token.parent
    return STANDARD_TYPES[token]


def hunk_spans(hunk: dict) -> tuple[int, int, int, int]:
    """(first old, last old, first new, last new) line of a hunk; a side with no lines starts after
    the line its header names (``@@ -5,2 +4,0 @@`` deletes after new line 4)."""
    old_first = hunk["old_start"] if hunk["old_lines"] else hunk["old_start"] + 1
    new_first = hunk["new_start"] if hunk["new_lines"] else hunk["new_start"] + 1
    return old_first, old_first + hunk["old_lines"] - 1, new_first, new_first + hunk["new_lines"] - 1


def comment_line(line: dict) -> int | None:
    """The number a comment on ``line`` names, as runners.task_diff.diff_lines counts them."""
    return line["old"] if line["kind"] == "removed" else line["new"]


class RowWriter:
    """Rows of one page: ``view`` unified or split, comments by (path, line) already rendered as
    HTML, and the URL "show more" rows load from."""

    def __init__(self, *, view: str, context_url: str, comments: dict[tuple[str, int | None], str]):
        self.view = view
        self.context_url = context_url
        self.comments = comments
        self.columns = 3 if view == UNIFIED else 4
        self._url = escape(context_url)
        self._quoted: dict[str, str] = {}

    def file_rows(self, path: str, hunks: list[dict], code: list[str], *, trailing: bool) -> str:
        """A shown file's rows: a gap row before each hunk that does not start at line 1, the hunk's
        header and lines (``code``: each line's HTML, in order), and (``trailing``: the file goes on
        past the last hunk) a last gap row."""
        html = iter(code)
        out: list[str] = []
        seen: set[int] = set()
        old_end = new_end = 0
        for hunk in hunks:
            old_first, old_last, new_first, new_last = hunk_spans(hunk)
            if new_first > new_end + 1:
                out.append(self.gap_row(path, Gap(old=old_end + 1, new=new_end + 1, end=new_first - 1)))
            out.append(self._header(hunk))
            out.append(self._lines(path, hunk["lines"], html, seen))
            old_end, new_end = old_last, new_last
        if trailing and hunks:
            out.append(self.gap_row(path, Gap(old=old_end + 1, new=new_end + 1, end=0)))
        return "".join(out)

    def context_rows(self, path: str, gap: Gap, texts: list[str]) -> str:
        """Unchanged lines ``texts`` (new lines from ``gap.new``) loaded into a gap: all of them when
        they are few, else the ends nearest the hunks with a gap row between."""
        if gap.end and len(texts) > 2 * CONTEXT_STEP:
            head, tail = texts[:CONTEXT_STEP], texts[-CONTEXT_STEP:]
            middle = Gap(
                old=gap.old + CONTEXT_STEP, new=gap.new + CONTEXT_STEP, end=gap.new + len(texts) - CONTEXT_STEP - 1
            )
            tail_gap = Gap(old=middle.old + middle.size, new=middle.end + 1, end=gap.end)
            return self._context(path, gap, head) + self.gap_row(path, middle) + self._context(path, tail_gap, tail)
        more = not gap.end and len(texts) > CONTEXT_STEP
        shown = texts[:CONTEXT_STEP] if more else texts
        out = self._context(path, gap, shown)
        if more:
            out += self.gap_row(path, Gap(old=gap.old + len(shown), new=gap.new + len(shown), end=0))
        return out

    def _context(self, path: str, gap: Gap, texts: list[str]) -> str:
        lines = [
            {"kind": "context", "old": gap.old + i, "new": gap.new + i, "text": text} for i, text in enumerate(texts)
        ]
        return self._lines(path, lines, iter(highlight(path, texts)), set())

    def gap_row(self, path: str, gap: Gap) -> str:
        # The query by hand, the path quoted once a file: a big change has thousands of these rows.
        quoted = self._quoted.get(path)
        if quoted is None:
            quoted = self._quoted[path] = quote(path, safe="")
        query = f"path={quoted}&amp;old={gap.old}&amp;new={gap.new}&amp;end={gap.end}&amp;view={self.view}"
        if gap.size and gap.size <= 2 * CONTEXT_STEP:
            what = f"Show {gap.size} more line{'s' if gap.size > 1 else ''}"
        else:
            what = "Show more lines"
        where = f"lines {gap.new}–{gap.end}" if gap.end else f"after line {gap.new - 1}"
        return (
            f'<tr class="gap"><td colspan="{self.columns}"><button type="button" class="more" '
            f'hx-get="{self._url}?{query}" hx-target="closest tr" hx-swap="outerHTML" '
            f'aria-label="{what}: {where}">⋯ {what}</button></td></tr>'
        )

    def _header(self, hunk: dict) -> str:
        ranges = f"@@ -{hunk['old_start']},{hunk['old_lines']} +{hunk['new_start']},{hunk['new_lines']} @@"
        text = f"{ranges} {escape(hunk['header'])}" if hunk["header"] else ranges
        return f'<tr class="hunk"><td colspan="{self.columns}">{text}</td></tr>'

    def _lines(self, path: str, lines: list[dict], html, seen: set[int]) -> str:
        if self.view == UNIFIED:
            return "".join(self._unified(path, line, next(html), seen) for line in lines)
        return self._split(path, lines, html, seen)

    def _number(self, number: int | None, commentable: bool) -> str:
        if number is None:
            return '<td class="num"></td>'
        if commentable:
            # No type, no data-line: 5,000 rows of bytes; outside a form it submits nothing, and
            # static/js/change.js reads the number from its text.
            return f'<td class="num"><button class="ln">{number}</button></td>'
        return f'<td class="num">{number}</td>'

    def _comments(self, path: str, line: dict, seen: set[int]) -> str:
        number = comment_line(line)
        if number is None or number in seen:
            return ""
        seen.add(number)
        body = self.comments.get((path, number))
        if not body:
            return ""
        return f'<tr class="comments"><td colspan="{self.columns}">{body}</td></tr>'

    def _unified(self, path: str, line: dict, code: str, seen: set[int]) -> str:
        kind = line["kind"]
        removed = kind == "removed"
        return (
            f'<tr class="{_ROW[kind]}">{self._number(line["old"], removed)}{self._number(line["new"], not removed)}'
            f'<td class="code"><span class="mark">{_MARK[kind]}</span>{code}</td></tr>'
            + self._comments(path, line, seen)
        )

    def _split(self, path: str, lines: list[dict], html, seen: set[int]) -> str:
        """Side by side: a run of removed lines beside the run of added lines that follows it."""
        out: list[str] = []
        index = 0
        while index < len(lines):
            line = lines[index]
            if line["kind"] == "context":
                code = next(html)
                out.append(
                    f'<tr class="ctx">{self._number(line["old"], False)}<td class="code">{code}</td>'
                    f'{self._number(line["new"], True)}<td class="code">{code}</td></tr>'
                    + self._comments(path, line, seen)
                )
                index += 1
                continue
            removed: list[tuple[dict, str]] = []
            added: list[tuple[dict, str]] = []
            while index < len(lines) and lines[index]["kind"] == "removed":
                removed.append((lines[index], next(html)))
                index += 1
            while index < len(lines) and lines[index]["kind"] == "added":
                added.append((lines[index], next(html)))
                index += 1
            for pair in range(max(len(removed), len(added))):
                left = removed[pair] if pair < len(removed) else None
                right = added[pair] if pair < len(added) else None
                out.append(
                    "<tr>"
                    + (
                        f'{self._number(left[0]["old"], True)}<td class="code del">{left[1]}</td>'
                        if left
                        else '<td class="num"></td><td class="code none"></td>'
                    )
                    + (
                        f'{self._number(right[0]["new"], True)}<td class="code add">{right[1]}</td>'
                        if right
                        else '<td class="num"></td><td class="code none"></td>'
                    )
                    + "</tr>"
                )
                for side in (left, right):
                    if side:
                        out.append(self._comments(path, side[0], seen))
        return "".join(out)
