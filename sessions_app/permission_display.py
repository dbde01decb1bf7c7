"""What a person reads first in a permission request, and the "always allow" choices it offers.

A permission request (permission_requests.py) carries Claude Code's ``tool_input`` and its
``permission_suggestions`` (the "Yes, and don't ask again for ..." of its own dialog: sdk.d.ts
``PermissionUpdate`` of @anthropic-ai/claude-agent-sdk 0.3.332). The page shows the one value
that says what the tool will do (the command, the file, the URL) before the whole input, and each
suggestion as a button in words. Everything here is agent-written: these functions return plain
strings, escaped by the templates like any other.
"""

from dataclasses import dataclass

# The input field that says what a tool will do, by tool; then the usual names for other tools.
SUBJECT_FIELDS = {
    "Bash": ("command",),
    "BashOutput": ("bash_id",),
    "Read": ("file_path",),
    "Write": ("file_path",),
    "Edit": ("file_path",),
    "MultiEdit": ("file_path",),
    "NotebookEdit": ("notebook_path",),
    "WebFetch": ("url",),
    "WebSearch": ("query",),
    "Glob": ("pattern",),
    "Grep": ("pattern",),
    "Task": ("description", "prompt"),
}
SUBJECT_FALLBACK = ("command", "file_path", "notebook_path", "path", "url", "query", "pattern", "prompt")
SUBJECT_MAX_CHARS = 4000
DESCRIPTION_MAX_CHARS = 500

# Where a rule is kept, as Claude Code's destinations say it (sdk.d.ts PermissionUpdateDestination).
DESTINATIONS = {
    "session": "for this session",
    "localSettings": "in this project (your local settings)",
    "projectSettings": "in this project (shared settings)",
    "userSettings": "in all your projects",
    "cliArg": "for this run",
}
MODES = {
    "acceptEdits": "accept edits",
    "bypassPermissions": "bypass permissions",
    "default": "default",
    "plan": "plan",
    "dontAsk": "don't ask",
}
SUGGESTIONS_SHOWN = 5


@dataclass(frozen=True)
class PermissionSubject:
    field: str  # the input field shown ("command", "file_path"), for its label
    text: str


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def permission_subject(payload: object) -> PermissionSubject | None:
    """The command, file path, URL or pattern of the request's tool input, whole (up to
    SUBJECT_MAX_CHARS); None when the input has no such text field."""
    if not isinstance(payload, dict) or not isinstance(payload.get("tool_input"), dict):
        return None
    tool_input = payload["tool_input"]
    fields = SUBJECT_FIELDS.get(str(payload.get("tool_name") or ""), ()) + SUBJECT_FALLBACK
    for field in fields:
        value = tool_input.get(field)
        if isinstance(value, str) and value.strip():
            return PermissionSubject(field=field.replace("_", " "), text=_cap(value, SUBJECT_MAX_CHARS))
    return None


def permission_description(payload: object) -> str:
    """The agent's own words for the call (Bash's ``description``), when it gave some."""
    tool_input = payload.get("tool_input") if isinstance(payload, dict) else None
    value = tool_input.get("description") if isinstance(tool_input, dict) else None
    subject = permission_subject(payload)
    if not isinstance(value, str) or (subject is not None and subject.text == value):
        return ""
    return _cap(value.strip(), DESCRIPTION_MAX_CHARS)


def _rule_text(rule: object) -> str:
    if not isinstance(rule, dict) or not isinstance(rule.get("toolName"), str):
        return "a rule"
    content = rule.get("ruleContent")
    return f"{rule['toolName']}({content})" if isinstance(content, str) and content else rule["toolName"]


def suggestion_label(suggestion: object) -> str:
    """A suggestion in words: "Always allow Bash(npm test:*) in this project (your local settings)"."""
    if not isinstance(suggestion, dict):
        return ""
    where = DESTINATIONS.get(str(suggestion.get("destination")), "")
    kind = suggestion.get("type")
    if kind in ("addRules", "replaceRules") and isinstance(suggestion.get("rules"), list):
        rules = ", ".join(_rule_text(rule) for rule in suggestion["rules"][:10])
        behavior = suggestion.get("behavior")
        verb = {"allow": "Always allow", "deny": "Allow now, then always deny", "ask": "Allow now, then always ask for"}
        text = f"{verb.get(behavior, 'Allow, and add the rule')} {rules}"
    elif kind == "addDirectories" and isinstance(suggestion.get("directories"), list):
        text = "Always allow access to " + ", ".join(str(path) for path in suggestion["directories"][:10])
    elif kind == "setMode" and isinstance(suggestion.get("mode"), str):
        text = f"Allow, and switch to {MODES.get(suggestion['mode'], suggestion['mode'])} mode"
    elif isinstance(kind, str) and kind:
        text = f"Allow, and apply {kind}"
    else:
        return ""
    return _cap(f"{text} {where}".strip(), 300)


def permission_suggestions(payload: object) -> list[tuple[int, str]]:
    """The suggestions a person may apply with Allow, as (index in the request, label): the index
    is what the answer sends back (input_requests.py checks it, the hook applies its own copy)."""
    suggestions = payload.get("permission_suggestions") if isinstance(payload, dict) else None
    if not isinstance(suggestions, list):
        return []
    labelled = [(index, suggestion_label(suggestion)) for index, suggestion in enumerate(suggestions)]
    return [(index, label) for index, label in labelled if label][:SUGGESTIONS_SHOWN]
