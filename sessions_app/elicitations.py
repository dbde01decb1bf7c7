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

import datetime as dt
import math
import re

from config.api.errors import DomainError
from sessions_app.models import StreamEvent

ELICITATION_CHOICES = ("accept", "decline", "cancel")
FIELD_PREFIX = "field:"  # a form field's name: "field:<property>"
VALUE_MAX_CHARS = 10_000
TRUE_WORDS = {"on", "true", "1", "yes"}  # "on": a ticked checkbox
FALSE_WORDS = {"off", "false", "0", "no"}
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# JSON's number grammar (HTML's input type=number sends the same), in ASCII digits only.
INTEGER = re.compile(r"-?[0-9]+")
NUMBER = re.compile(r"-?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# JSON Schema's formats (RFC 3339 full-date and date-time); a date is also checked to exist.
DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
DATE_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:[Zz]|[+-][0-9]{2}:[0-9]{2})"
)
EMAIL = re.compile(r"[^@\s]+@[^@\s]+")
URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s]+")


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
            # What the schema bounds a value to (numbers, and strings' lengths); None where it does not.
            "minimum": _bound(spec.get("minimum")),
            "maximum": _bound(spec.get("maximum")),
            "min_length": _length(spec.get("minLength")),
            "max_length": _length(spec.get("maxLength")),
        }
        if kind == "choice":
            labels = spec.get("enumNames") or []
            field["choices"] = [
                (str(value), str(labels[i]) if i < len(labels) else str(value)) for i, value in enumerate(spec["enum"])
            ]
        fields.append(field)
    return fields


def _bound(value: object) -> int | float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return value if ok else None


def _length(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _kind(spec: dict) -> str:
    if isinstance(spec.get("enum"), list) and spec["enum"]:
        return "choice"
    if spec.get("type") in ("number", "integer", "boolean"):
        return spec["type"]
    return "text"


def elicitation_content(*, schema: object, form: dict[str, str], order: object = None) -> dict:
    """The typed content of an accept from the form's values (``field:<name>`` keys; an unticked
    checkbox is absent). A DomainError names the first field that is missing, of the wrong type or
    outside what its schema allows."""
    content: dict = {}
    for field in elicitation_fields(schema, order):
        raw = form.get(field["input_name"])
        if field["kind"] == "boolean":
            content[field["name"]] = _boolean(field, str(raw or "").strip().lower())
            continue
        raw = str(raw or "").strip()
        if not raw:
            if field["required"]:
                raise DomainError(f"{field['label']} is required: fill it in, or decline.")
            continue
        content[field["name"]] = _typed(field, raw)
    return content


def _boolean(field: dict, raw: str) -> bool:
    if raw in TRUE_WORDS:
        return True
    if not raw or raw in FALSE_WORDS:
        return False
    raise DomainError(f"{field['label']} is true or false (tick the box or not), not {raw[:50]!r}.")


def _typed(field: dict, raw: str) -> object:
    label = field["label"]
    if len(raw) > VALUE_MAX_CHARS:
        raise DomainError(f"{label} is {len(raw)} characters; the limit is {VALUE_MAX_CHARS}.")
    if field["kind"] == "choice":
        if raw not in {value for value, _ in field["choices"]}:
            raise DomainError(f"{label} must be one of: {', '.join(v for v, _ in field['choices'])}.")
        return raw
    if field["kind"] in ("integer", "number"):
        return _in_range(field, _number(field, raw))
    return _text(field, raw)


def _number(field: dict, raw: str) -> int | float:
    """An integer or number as JSON writes it, in ASCII digits: Python's int() and float() also take
    "1_0", Arabic-Indic digits, "NaN" and "Infinity", and the last two (or "1e999", which overflows to
    infinity) are no JSON at all (the database's JSON check refused the answer with a 500)."""
    label, whole = field["label"], field["kind"] == "integer"
    if INTEGER.fullmatch(raw):
        value = int(raw)
        if not INT64_MIN <= value <= INT64_MAX:
            raise DomainError(f"{label} is out of range: at most {INT64_MAX:,} either side of 0.")
        return value
    if whole:
        raise DomainError(f"{label} must be a whole number such as 12 or -3, not {raw[:50]!r}.")
    if not NUMBER.fullmatch(raw):
        raise DomainError(f"{label} must be a number such as 12, -3.5 or 1.5e3, not {raw[:50]!r}.")
    value = float(raw)
    if not math.isfinite(value):
        raise DomainError(f"{label} is out of range: {raw[:50]} is beyond what a number can hold.")
    return value


def _in_range(field: dict, value: int | float) -> int | float:
    low, high = field["minimum"], field["maximum"]
    if low is not None and value < low:
        raise DomainError(f"{field['label']} must be at least {low}, not {value}.")
    if high is not None and value > high:
        raise DomainError(f"{field['label']} must be at most {high}, not {value}.")
    return value


def _text(field: dict, raw: str) -> str:
    label, fmt = field["label"], field["format"]
    if field["min_length"] is not None and len(raw) < field["min_length"]:
        raise DomainError(f"{label} needs at least {field['min_length']} characters.")
    if field["max_length"] is not None and len(raw) > field["max_length"]:
        raise DomainError(f"{label} takes at most {field['max_length']} characters.")
    if fmt == "date" and not _is_date(raw):
        raise DomainError(f"{label} must be a date as YYYY-MM-DD (one that exists), not {raw[:50]!r}.")
    if fmt == "date-time" and not _is_date_time(raw):
        raise DomainError(f"{label} must be a date and time such as 2026-03-01T09:30:00Z, not {raw[:50]!r}.")
    if fmt == "email" and not EMAIL.fullmatch(raw):
        raise DomainError(f"{label} must be an email address, not {raw[:50]!r}.")
    if fmt == "uri" and not URI.fullmatch(raw):
        raise DomainError(f"{label} must be a URI such as https://example.com/, not {raw[:50]!r}.")
    return raw


def _is_date(raw: str) -> bool:
    if not DATE.fullmatch(raw):
        return False
    try:
        dt.date.fromisoformat(raw)
    except ValueError:  # 2026-02-30
        return False
    return True


def _is_date_time(raw: str) -> bool:
    if not DATE_TIME.fullmatch(raw):
        return False
    try:
        dt.datetime.fromisoformat(raw.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def elicitation_form_values(post) -> dict[str, str]:
    """The ``field:*`` values of a submitted answer form (a QueryDict or a dict)."""
    return {key: post.get(key) for key in post if str(key).startswith(FIELD_PREFIX)}
