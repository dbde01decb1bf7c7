"""A rule's glob against a text with holes in it (sessions_app/tool_policy_shell.py: a ``$VAR``, a
command name the server cannot know). ``glob_matches``: some text in the holes makes ``fnmatchcase``
match (for "ask" and "deny": the glob and the text are both read as patterns, and they match when
some string fits both). ``glob_covers``: every text in the holes does (for "allow")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fnmatch import fnmatchcase
from functools import lru_cache

from sessions_app.tool_policy_shell import HOLE, Segment

STAR = object()
MAX_STATES = 2_000_000  # more than this is taken as a match (never as allowed)
CharTest = Callable[[str], bool]


def glob_matches(segments: Sequence[Segment], glob: str) -> bool:
    """fnmatchcase for a text given as parts, where HOLE is any text."""
    if HOLE not in segments:
        return fnmatchcase("".join(segments), glob)  # type: ignore[arg-type]
    rule = _glob_tokens(glob)
    text: list[object] = []
    for segment in segments:
        text.extend([STAR] if segment is HOLE else segment)  # type: ignore[arg-type]
    if (len(rule) + 1) * (len(text) + 1) > MAX_STATES:
        return True
    return _overlap(rule, text)


def glob_covers(segments: Sequence[Segment], glob: str) -> bool:
    """fnmatchcase for every text the holes may hold. Decided for a glob whose only ``*`` ends it
    (``pytest *``, ``git commit *``): the text before the first hole holds the glob's head in full;
    any other glob covers no text with a hole (never allowed by guess)."""
    if HOLE not in segments:
        return fnmatchcase("".join(segments), glob)  # type: ignore[arg-type]
    rule = _glob_tokens(glob)
    if STAR not in rule or rule.index(STAR) != len(rule) - 1:
        return False
    head = rule[:-1]
    known = "".join(s for s in segments[: segments.index(HOLE)])  # type: ignore[misc]
    return len(known) >= len(head) and all(test(char) for test, char in zip(head, known, strict=False))


def _overlap(rule: list, text: list) -> bool:
    """Is there a string both patterns match? A walk over pairs of positions (i in rule, j in text)."""
    seen = set()
    todo = [(0, 0)]
    end = (len(rule), len(text))
    while todo:
        state = todo.pop()
        if state == end:
            return True
        if state in seen:
            continue
        seen.add(state)
        i, j = state
        r = rule[i] if i < len(rule) else None
        t = text[j] if j < len(text) else None
        if r is STAR:
            todo.append((i + 1, j))  # the rule's * matches nothing more
            if t is not None:
                todo.append((i, j + 1))  # ... or takes the text's next character (or hole)
        if t is STAR:
            todo.append((i, j + 1))  # the hole is empty
            if r is not None and r is not STAR:
                todo.append((i + 1, j))  # ... or gives a character the rule's ? or [set] takes
        if r is not None and r is not STAR and t is not None and t is not STAR and r(t):
            todo.append((i + 1, j + 1))
    return False


@lru_cache(maxsize=512)
def _glob_tokens(glob: str) -> list:
    """fnmatch's glob as STAR or a test of one character (fnmatch.translate's reading of it)."""
    tokens: list = []
    index = 0
    while index < len(glob):
        char = glob[index]
        index += 1
        if char == "*":
            if not tokens or tokens[-1] is not STAR:
                tokens.append(STAR)
        elif char == "?":
            tokens.append(_any)
        elif char == "[":
            end = _set_end(glob, index)
            if end < 0:
                tokens.append(_is("["))
            else:
                tokens.append(_set_test(glob[index - 1 : end + 1]))
                index = end + 1
        else:
            tokens.append(_is(char))
    return tokens


def _set_end(glob: str, start: int) -> int:
    index = start
    if index < len(glob) and glob[index] == "!":
        index += 1
    if index < len(glob) and glob[index] == "]":
        index += 1
    while index < len(glob) and glob[index] != "]":
        index += 1
    return index if index < len(glob) else -1


def _set_test(glob_set: str) -> CharTest:
    return lambda c: fnmatchcase(c, glob_set)


def _is(char: str) -> CharTest:
    return lambda c: c == char


def _any(_c: str) -> bool:
    return True
