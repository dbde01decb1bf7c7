"""An MCP server's elicitation answered by a person: a form built from the requested schema.

`switchyard hook` records Claude Code's ``Elicitation`` (an MCP server asks the user for input) as an
``input_request`` event with ``question`` (the server's message), ``requested_schema`` and
``choices: ["accept", "decline", "cancel"]``, and waits for the answer as for a permission
(permission_requests.py). The session page and the card's run box show a form with one field per
property of the schema; MCP restricts a requested schema to a flat object of primitive
properties: string (with ``enum``, ``format``, ``minLength``/``maxLength``), number, integer and
boolean. The answer stores ``decision`` (accept / decline / cancel) and, with an accept, ``content``
(the values, typed as the schema says); the hook prints Claude Code's
``{"hookSpecificOutput": {"hookEventName": "Elicitation", "action": ..., "content": {...}}}``.
"""

from __future__ import annotations

from config.api.errors import DomainError
from sessions_app.models import StreamEvent

ELICITATION_CHOICES = ("accept", "decline", "cancel")
FIELD_PREFIX = "field:"  # a form field's name: "field:<property>"
VALUE_MAX_CHARS = 10_000
TRUE_WORDS = {"on", "true", "1", "yes"}


def is_elicitation_question(question: StreamEvent | None) -> bool:
    payload = question.payload if question is not None else None
    return isinstance(payload, dict) and list(payload.get("choices") or []) == list(ELICITATION_CHOICES)


def elicitation_fields(schema: object, order: object = None) -> list[dict]:
    """The form's fields: name, label, help, kind (text, number, integer, boolean, choice), required,
    choices (value, label) and the default. In ``order`` (the property names as the MCP server sent
    them, which the hook records as ``field_order``: PostgreSQL's jsonb does not keep an object's key
    order), else in the schema's."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return []
    required = set(schema.get("required") or [])
    properties = schema["properties"]
    names = [n for n in order if n in properties] if isinstance(order, list) else []
    names += [n for n in properties if n not in names]
    fields = []
    for name in names:
        spec = properties[name]
        spec = spec if isinstance(spec, dict) else {}
        kind = _kind(spec)
        field = {
            "name": str(name),
            "input_name": FIELD_PREFIX + str(name),
            "label": str(spec.get("title") or name),
            "help": str(spec.get("description") or ""),
            "kind": kind,
            "required": name in required,
            "default": spec.get("default"),
            "format": str(spec.get("format") or ""),
        }
        if kind == "choice":
            labels = spec.get("enumNames") or []
            field["choices"] = [
                (str(value), str(labels[i]) if i < len(labels) else str(value)) for i, value in enumerate(spec["enum"])
            ]
        fields.append(field)
    return fields


def _kind(spec: dict) -> str:
    if isinstance(spec.get("enum"), list) and spec["enum"]:
        return "choice"
    if spec.get("type") in ("number", "integer", "boolean"):
        return spec["type"]
    return "text"


def elicitation_content(*, schema: object, form: dict[str, str], order: object = None) -> dict:
    """The typed content of an accept from the form's values (``field:<name>`` keys; an unticked
    checkbox is absent). A DomainError names the first field that is missing or of the wrong type."""
    content: dict = {}
    for field in elicitation_fields(schema, order):
        raw = form.get(field["input_name"])
        if field["kind"] == "boolean":
            content[field["name"]] = str(raw or "").strip().lower() in TRUE_WORDS
            continue
        raw = str(raw or "").strip()
        if not raw:
            if field["required"]:
                raise DomainError(f"{field['label']} is required: fill it in, or decline.")
            continue
        content[field["name"]] = _typed(field, raw)
    return content


def _typed(field: dict, raw: str) -> object:
    label = field["label"]
    if len(raw) > VALUE_MAX_CHARS:
        raise DomainError(f"{label} is {len(raw)} characters; the limit is {VALUE_MAX_CHARS}.")
    if field["kind"] == "choice":
        if raw not in {value for value, _ in field["choices"]}:
            raise DomainError(f"{label} must be one of: {', '.join(v for v, _ in field['choices'])}.")
        return raw
    if field["kind"] == "integer":
        try:
            return int(raw)
        except ValueError:
            raise DomainError(f"{label} must be a whole number, not {raw!r}.") from None
    if field["kind"] == "number":
        try:
            number = float(raw)
        except ValueError:
            raise DomainError(f"{label} must be a number, not {raw!r}.") from None
        return int(number) if number.is_integer() and "." not in raw else number
    return raw


def elicitation_form_values(post) -> dict[str, str]:
    """The ``field:*`` values of a submitted answer form (a QueryDict or a dict)."""
    return {key: post.get(key) for key in post if str(key).startswith(FIELD_PREFIX)}
