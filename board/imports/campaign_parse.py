"""Campaign definitions (SPEC §5) checked field by field. Pure: no database, no files.

Every problem is collected with the path of the field (``leads[2].score``), so a person fixing
the file sees them all at once. Keys the format does not know are ignored: definitions written
for the older tools carry extra fields (budget, channels) that must not stop an import.
"""

import datetime
import json
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from board.models import Lead
from board.services import priority_normalise
from config.api.errors import DomainError

MAX_DELIVERABLES = 500
MAX_LEADS = 5000
SCORE_RANGE = (-1_000_000, 1_000_000)


@dataclass(frozen=True)
class LeadDef:
    name: str
    company: str = ""
    email: str = ""
    status: str = Lead.Status.NEW
    score: int = 0


@dataclass(frozen=True)
class CampaignDef:
    type: str
    name: str = ""
    priority: str = "P2"
    deliverables: tuple[str, ...] = ()
    target_audience: str = ""
    goal: str = ""
    starts_on: datetime.date | None = None
    ends_on: datetime.date | None = None
    leads: tuple[LeadDef, ...] = ()
    repository: str = ""  # the name of the registered repository its tasks' runs work in, or ""


@dataclass
class _Errors:
    items: dict[str, list[str]] = field(default_factory=dict)

    def add(self, path: str, message: str) -> None:
        self.items.setdefault(path, []).append(message)


def _kind(value) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list", dict: "an object"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _text(doc: dict, key: str, errors: _Errors, *, path: str, max_length: int, required: bool = False) -> str:
    value = doc.get(key)
    if value is None:
        if required:
            errors.add(path, "is required.")
        return ""
    if not isinstance(value, str):
        errors.add(path, f"must be a string, not {_kind(value)}.")
        return ""
    value = value.strip()
    if required and not value:
        errors.add(path, "must not be empty.")
    if len(value) > max_length:
        errors.add(path, f"is longer than {max_length} characters.")
    return value


def _date(doc: dict, key: str, errors: _Errors) -> datetime.date | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        errors.add(key, f"must be a date string (YYYY-MM-DD), not {_kind(value)}.")
        return None
    try:
        return datetime.date.fromisoformat(value)
    except ValueError:
        errors.add(key, f"{value[:40]!r} is not a date (YYYY-MM-DD).")
        return None


def _deliverables(doc: dict, errors: _Errors) -> tuple[str, ...]:
    value = doc.get("deliverables")
    if value is None:
        return ()
    if not isinstance(value, list):
        errors.add("deliverables", f"must be a list of strings, not {_kind(value)}.")
        return ()
    if len(value) > MAX_DELIVERABLES:
        errors.add("deliverables", f"has {len(value)} entries; at most {MAX_DELIVERABLES}.")
        return ()
    found = []
    for index, entry in enumerate(value):
        if not isinstance(entry, str) or not entry.strip():
            errors.add(f"deliverables[{index}]", f"must be a non-empty string, not {_kind(entry)}.")
        elif len(entry.strip()) > 200:
            errors.add(f"deliverables[{index}]", "is longer than 200 characters.")
        else:
            found.append(" ".join(entry.split()))
    # A deliverable named twice is one task, not two with the same identity.
    return tuple(dict.fromkeys(found))


def _lead(entry, path: str, errors: _Errors) -> LeadDef | None:
    if not isinstance(entry, dict):
        errors.add(path, f"must be an object, not {_kind(entry)}.")
        return None
    before = len(errors.items)
    name = _text(entry, "name", errors, path=f"{path}.name", max_length=200, required=True)
    company = _text(entry, "company", errors, path=f"{path}.company", max_length=200)
    email = _text(entry, "email", errors, path=f"{path}.email", max_length=254)
    if email:
        try:
            validate_email(email)
        except ValidationError:
            errors.add(f"{path}.email", f"{email[:60]!r} is not an email address.")
    status = _text(entry, "status", errors, path=f"{path}.status", max_length=16).lower() or Lead.Status.NEW
    if status not in Lead.Status.values:
        errors.add(f"{path}.status", f"must be one of {', '.join(Lead.Status.values)}.")
    score = entry.get("score", 0)
    if score is None:
        score = 0
    if isinstance(score, bool) or not isinstance(score, int):
        errors.add(f"{path}.score", f"must be a whole number, not {_kind(score)}.")
    elif not SCORE_RANGE[0] <= score <= SCORE_RANGE[1]:
        errors.add(f"{path}.score", f"must be between {SCORE_RANGE[0]} and {SCORE_RANGE[1]}.")
    if len(errors.items) != before:
        return None
    return LeadDef(name=name, company=company, email=email, status=status, score=score)


def _leads(doc: dict, errors: _Errors) -> tuple[LeadDef, ...]:
    value = doc.get("leads")
    if value is None:
        return ()
    if not isinstance(value, list):
        errors.add("leads", f"must be a list of objects, not {_kind(value)}.")
        return ()
    if len(value) > MAX_LEADS:
        errors.add("leads", f"has {len(value)} entries; at most {MAX_LEADS}.")
        return ()
    leads = (_lead(entry, f"leads[{index}]", errors) for index, entry in enumerate(value))
    return tuple(lead for lead in leads if lead is not None)


def _priority(doc: dict, errors: _Errors) -> str:
    value = doc.get("priority")
    if value is not None and not isinstance(value, str):
        errors.add("priority", f"must be a string like 'high' or 'P1', not {_kind(value)}.")
        return "P2"
    try:
        return priority_normalise(value)
    except DomainError as exc:
        errors.add("priority", exc.message)
        return "P2"


def campaign_definition_parse(text: str, *, file_name: str) -> CampaignDef:
    """A checked definition, or a 400 naming the file and every field that is wrong."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DomainError(
            f"{file_name!r} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}."
        ) from None
    except RecursionError:
        raise DomainError(f"{file_name!r} is nested too deeply to be a campaign definition.") from None
    if not isinstance(doc, dict):
        raise DomainError(f"{file_name!r} must hold a JSON object, not {_kind(doc)}.")
    errors = _Errors()
    definition = CampaignDef(
        type=_text(doc, "type", errors, path="type", max_length=100, required=True),
        name=_text(doc, "name", errors, path="name", max_length=200),
        priority=_priority(doc, errors),
        deliverables=_deliverables(doc, errors),
        target_audience=_text(doc, "target_audience", errors, path="target_audience", max_length=500),
        goal=_text(doc, "goal", errors, path="goal", max_length=10_000),
        starts_on=_date(doc, "starts_on", errors),
        ends_on=_date(doc, "ends_on", errors),
        leads=_leads(doc, errors),
        # Checked against the registered repositories by the import (this module reads no database).
        repository=_text(doc, "repository", errors, path="repository", max_length=100),
    )
    if definition.starts_on and definition.ends_on and definition.ends_on < definition.starts_on:
        errors.add("ends_on", "is before starts_on.")
    if errors.items:
        path, messages = next(iter(errors.items.items()))
        more = f" (and {len(errors.items) - 1} more)" if len(errors.items) > 1 else ""
        raise DomainError(f"{file_name!r}: {path} {messages[0]}{more}", extra={"errors": errors.items})
    return definition
