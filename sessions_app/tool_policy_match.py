"""Which tool-policy rule decides a tool use (sessions_app/tool_policy.py has the rules' syntax).

A use is seen as its key argument as written and as the forms a rule is matched against, each a
text with holes (tool_policy_shell.py: what the server cannot know):

- Bash: one form per simple command the line runs (tool_policy_shell.py). Each command is decided
  on its own, by the first rule (in order) that takes it: an "ask" or "deny" rule takes it when some
  text in its holes would match; an "allow" rule only when every text would (it covers the command).
  The line as written is decided too, by the first rule whose glob matches it (as rules were read
  before), so that no rule matches less than it did. The call's verdict is the most severe of these
  (deny, then ask, then allow), so
  ``pytest -q; rm -rf /`` is asked about under ``allow Bash(pytest *)``, ``ask Bash`` even though
  its first command is exempt, and each command can be exempt by a rule of its own.
- File tools: the path resolved (path_forms). The first rule that takes it decides: "allow" when it
  matches the absolute path or the path relative to the cwd, "ask" and "deny" also the path as written.
- Any other tool: its key argument as written, by the first rule that matches it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cached_property

from sessions_app.tool_policy_glob import glob_covers, glob_matches
from sessions_app.tool_policy_shell import HOLE, Segment, Word, shell_commands

KEY_FIELDS = {
    "Bash": "command",
    "Read": "file_path",
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
    "WebFetch": "url",
    "WebSearch": "query",
    "Glob": "pattern",
    "Grep": "pattern",
    "Task": "subagent_type",
    "Agent": "subagent_type",
}
FILE_TOOLS = frozenset({"Read", "Write", "Edit", "MultiEdit", "NotebookEdit"})
SEVERITY = {"allow": 0, "ask": 1, "deny": 2}
Form = tuple[Segment, ...]


@dataclass(frozen=True)
class Rule:
    """A rule's pattern, parsed: ``tool`` and ``argument`` globs (None: any argument)."""

    tool: str
    argument: str | None
    action: str
    source: object = None  # the ToolPolicy row


def tool_key_argument(tool_name: str, tool_input: object) -> str:
    """What ``Tool(argument)`` is matched against, as written (sessions_app/tool_policy.py)."""
    field = KEY_FIELDS.get(tool_name)
    if field and isinstance(tool_input, dict):
        return str(tool_input.get(field) or "")
    return json.dumps(tool_input, separators=(",", ":"), sort_keys=True, ensure_ascii=False, default=str)


@dataclass
class ToolUse:
    """A tool use as the rules see it; its forms are read once however many rules look."""

    tool_name: str
    tool_input: object
    cwd: str = ""

    @property
    def shell(self) -> bool:
        return self.tool_name == "Bash" and isinstance(self.tool_input, dict)

    @cached_property
    def written(self) -> str:
        return tool_key_argument(self.tool_name, self.tool_input)

    @cached_property
    def forms(self) -> list[Form]:
        if self.shell:
            return [_joined_words(words) for words in shell_commands(self.written)]
        if self.tool_name in FILE_TOOLS and isinstance(self.tool_input, dict):
            return path_forms(self.written, self.cwd)
        return [(self.written,)]


def deciding_rule(rules: list[Rule], use: ToolUse) -> Rule | None:
    """The rule that decides ``use`` (the module's docstring), from ``rules`` in their order."""
    rules = [rule for rule in rules if fnmatchcase(use.tool_name, rule.tool)]
    if not rules:
        return None
    if not use.shell:
        return next((rule for rule in rules if _takes_one(rule, use)), None)
    decided = [next((rule for rule in rules if _takes_command(rule, form)), None) for form in use.forms]
    decided.append(next((rule for rule in rules if _takes_written(rule, use)), None))
    worst = None
    for rule in decided:
        if rule is not None and (worst is None or SEVERITY[rule.action] > SEVERITY[worst.action]):
            worst = rule
    return worst


def _takes_command(rule: Rule, form: Form) -> bool:
    if rule.argument is None:
        return True
    if rule.action == "allow":
        return glob_covers(form, rule.argument)
    return glob_matches(form, rule.argument)


def _takes_written(rule: Rule, use: ToolUse) -> bool:
    """The line as written, as rules were read before commands were: an "allow" rule that takes it
    only adds an allow to the commands' verdicts, so it never hides one of them."""
    return rule.argument is None or fnmatchcase(use.written, rule.argument)


def _takes_one(rule: Rule, use: ToolUse) -> bool:
    if rule.argument is None:
        return True
    if rule.action == "allow":
        return any(glob_covers(form, rule.argument) for form in use.forms)
    return fnmatchcase(use.written, rule.argument) or any(glob_matches(form, rule.argument) for form in use.forms)


def _joined_words(words: list[Word]) -> Form:
    segments: list[Segment] = []
    for index, word in enumerate(words):
        if index:
            segments.append(" ")
        segments.extend(word)
    return tuple(segments)


def path_forms(path: str, cwd: str) -> list[Form]:
    """A file path made absolute (against ``cwd`` when relative) with ``//``, ``.`` and ``..``
    collapsed, and the same relative to ``cwd`` when inside it. A part the server cannot know (``~``,
    a relative path with no absolute cwd) is a hole. Links are not followed: the server cannot see
    the agent's disk."""
    if not path:
        return [("",)]
    home = path.startswith("~")
    if home:  # ~ or ~user: some home folder
        path = path.partition("/")[2]
    elif not path.startswith("/") and cwd.startswith("/"):
        path = f"{cwd}/{path}"
    absolute = _collapsed(path)
    if home or not path.startswith("/"):
        return [(HOLE, absolute)]
    forms: list[Form] = [(absolute,)]
    base = _collapsed(cwd).rstrip("/") if cwd.startswith("/") else None
    if base is not None and absolute.startswith(base + "/"):
        forms.append((absolute[len(base) + 1 :],))
    return forms


def _collapsed(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)
