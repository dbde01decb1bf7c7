"""Secrets never reach the ledger: summaries are redacted, then length-capped.

Two passes. Values under keys that name a secret (``password``, ``api_key``,
``Authorization``...) are replaced whole; then the serialised text is scanned for
secrets that appear anywhere (bearer tokens, private key blocks, well-known key shapes).
"""

import json
import re
from typing import Any

REDACTED = "[REDACTED]"

_SECRET_KEY_NAME = re.compile(
    r"(pass(word|wd|phrase)?|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|"
    r"authorization|auth|credential|cookie|session[_-]?key|client[_-]?secret)",
    re.IGNORECASE,
)

_PATTERNS = [
    # PEM private keys, whole block (or from BEGIN to the end if the block was cut off).
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL),
    re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\bsk-(ant-)?[A-Za-z0-9_-]{16,}"),  # OpenAI / Anthropic style keys
    re.compile(r"\bsy_[0-9a-f]{8}_[A-Za-z0-9_-]{20,}"),  # Switchyard agent keys
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub tokens
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{30,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),  # Slack
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key id
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),  # Google API key
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),  # JWT
    # key=value / key: value pairs in free text, such as command lines and env dumps.
    re.compile(
        r"(?i)\b([A-Z0-9_]*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key))(\s*[=:]\s*|\s+)"
        r"(?!\[REDACTED\])(\"[^\"]*\"|'[^']*'|[^\s,;&\"']+)"
    ),
    # credentials inside URLs: scheme://user:password@host
    re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+):[^@\s/]+@"),
]


def _redact_text(text: str) -> str:
    for pattern in _PATTERNS[:-2]:
        text = pattern.sub(REDACTED, text)
    text = _PATTERNS[-2].sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _PATTERNS[-1].sub(lambda m: f"{m.group(1)}:{REDACTED}@", text)
    return text


def _redact_structure(value: Any, depth: int = 0) -> Any:
    if depth > 50:
        return REDACTED
    if isinstance(value, dict):
        return {
            key: REDACTED
            if isinstance(key, str) and _SECRET_KEY_NAME.search(key) and value[key] not in (None, "", [], {})
            else _redact_structure(value[key], depth + 1)
            for key in value
        }
    if isinstance(value, list):
        return [_redact_structure(item, depth + 1) for item in value]
    return value


def summarize(value: Any, *, max_chars: int) -> str:
    """A redacted, length-capped text summary of any JSON value."""
    if value is None:
        return ""
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(_redact_structure(value), ensure_ascii=False, sort_keys=True, default=str)
    text = _redact_text(text)
    if len(text) > max_chars:
        keep = max(0, max_chars - len(f"… [{len(text)} more chars]"))
        text = text[:keep] + f"… [{len(text) - keep} more chars]"
    return text
