"""Secrets never reach the database: every text and JSON value an agent sends is redacted on ingest.

One module, applied at the API's input boundary (``config/api/redacted_fields.py`` and the event
fast path ``sessions_app/api/fast.py``) to event payloads, milestones, checkpoints, session intent,
metadata and transition reasons, the task and campaign fields an orchestrator writes; by the
services to tool-call summaries (``summarize``, after the raw input is hashed) and to people's
answers to input requests; and by ``config/log_filters.py`` to request log lines. Two kinds of rule:

- **Key names.** In JSON, the string values under a key whose words say secret (``password``,
  ``api_key``, ``Authorization``, ``client_secret``, ``sessionid``, ``Cookie``...) are replaced
  whole by ``[REDACTED]``, however deep. Numbers and booleans stay (``input_tokens: 1234`` is a
  count, not a secret), and so do keys that only describe one (``token_type``, ``password_file``).
- **Value shapes**, in any string: provider key formats (AWS, GitHub, GitLab, Slack, Stripe,
  OpenAI, Anthropic, Google, npm, PyPI, Hugging Face, SendGrid, Switchyard's own ``sy_`` keys),
  JWTs, bearer tokens, PEM private keys, ``mysql -pSECRET``, ``curl -u user:SECRET``,
  ``--password=SECRET``, ``NAME_TOKEN=SECRET``, ``?password=SECRET`` in query strings, an AWS secret
  access key on its own, and ``scheme://user:SECRET@host`` in any scheme. Only the secret part
  is replaced: the text around it stays readable.

Why our own patterns and not detect-secrets' plugins: measured at 476 µs per event with its
default settings (199 µs with its 25 regex plugins alone), i.e. 2,100-5,000 events/s on a core,
where batch ingest must stay above 20,000 events/s on the whole two-core machine (bench/HISTORY.md,
"Redaction"). Here each string of a clean event costs one lower-casing and one regular-expression
scan for the literals the rules need (``_ANY_LITERAL``, a trie); a string that holds some pays for
the rules of those literals only. Values that are unchanged are not copied.
"""

import json
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

REDACTED = "[REDACTED]"

# --- key names --------------------------------------------------------------------------------
# A name is split into lower-case words (camelCase, snake_case, kebab-case, dotted); it names a
# secret when a word, or two words together, say so.
_SECRET_WORDS = frozenset(
    {
        "password", "passwd", "passphrase", "passcode", "secret", "secrets", "token", "apikey",
        "authorization", "auth", "credential", "credentials", "cookie", "cookies", "sessionid",
        "privatekey", "accesskey", "secretkey", "otp", "totp",
    }
)  # fmt: skip
_SECRET_PAIRS = frozenset(
    {
        ("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"), ("signing", "key"),
        ("encryption", "key"), ("master", "key"), ("client", "secret"), ("session", "key"),
        ("session", "token"), ("session", "secret"), ("session", "cookie"), ("auth", "key"),
        ("license", "key"), ("account", "key"), ("shared", "key"), ("x", "pass"), ("db", "pass"),
    }
)  # fmt: skip
_SECRET_ENDINGS = ("token", "secret", "apikey", "accesskey", "secretkey", "privatekey", "passwd", "password")
# A key whose last word is one of these describes a secret without holding it.
_DESCRIBING_WORDS = frozenset(
    {
        "count", "counts", "length", "len", "size", "limit", "limits", "type", "types", "kind",
        "expires", "expiry", "expiration", "in", "at", "ttl", "name", "names", "url", "uri",
        "endpoint", "path", "file", "filename", "dir", "env", "policy", "required", "enabled",
        "present", "set", "hint", "rotated", "rotation", "prefix", "algorithm", "scheme",
    }
)  # fmt: skip
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


@lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True when a JSON key or variable name says its value is a secret (``DB_PASSWORD``, ``apiKey``)."""
    words = [w for w in _WORD_SPLIT.split(_CAMEL.sub("_", name).lower()) if w]
    if not words or words[-1] in _DESCRIBING_WORDS:
        return False
    if words == ["pwd"]:
        return False  # the shell's working directory
    if any(w in _SECRET_WORDS or w.endswith(_SECRET_ENDINGS) or "passw" in w for w in words):
        return True  # PGPASSWORD, csrftoken, clientSecret, openaiapikey
    if len(words) > 1 and words[-1] == "pwd":
        return True  # MYSQL_PWD, but not PWD (the shell's working directory)
    return any(pair in _SECRET_PAIRS for pair in zip(words, words[1:], strict=False))


# --- value shapes -----------------------------------------------------------------------------
_PEM = re.compile(
    r"(-----BEGIN ([A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----)(?:\\n|\s)*(.*?)(?=-----END \2-----|\Z)", re.DOTALL
)
# scheme://user:password@host, any scheme. The password runs to the last @ before the host.
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{0,30}://[^/\s:@\"'<>]*:)([^/\s\"'<>]*)@")
# Provider key formats, each with the literal (lower-cased) that must be in a text for it to match.
_TOKEN_SHAPES = [
    (("akia", "asia", "abia", "acca"), r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"),  # AWS access key ids
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"\bgh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub tokens
    (("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{30,}"),
    (
        ("glpat-", "glptt-", "gldt-", "glrt-", "glcbt-", "gloas-", "glsoat-", "glffct-", "glimt-", "glft-", "glagent-"),
        r"\bgl(?:pat|ptt|dt|rt|cbt|oas|soat|ffct|imt|ft|agent)-[A-Za-z0-9_-]{20,}",  # GitLab
    ),
    (("xox",), r"\bxox[abposre]-[A-Za-z0-9-]{10,}"),  # Slack tokens
    (("xapp-",), r"\bxapp-\d-[A-Za-z0-9-]{10,}"),
    (("hooks.slack.com/services/",), r"(?<=hooks\.slack\.com/services/)[A-Za-z0-9/]{20,}"),  # Slack webhooks
    (("sk_", "rk_"), r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),  # Stripe secret / restricted keys
    (("whsec_",), r"\bwhsec_[A-Za-z0-9]{16,}"),  # Stripe webhook secrets
    (("sk-",), r"\bsk-[A-Za-z0-9_-]{20,}"),  # OpenAI (sk-, sk-proj-) and Anthropic (sk-ant-) keys
    (("aiza",), r"\bAIza[0-9A-Za-z_-]{35}"),  # Google API keys
    (("gocspx-",), r"\bGOCSPX-[A-Za-z0-9_-]{20,}"),  # Google OAuth client secrets
    (("ya29.",), r"\bya29\.[0-9A-Za-z_-]{20,}"),  # Google OAuth access tokens
    (("npm_",), r"\bnpm_[A-Za-z0-9]{36}\b"),
    (("pypi-",), r"\bpypi-[A-Za-z0-9_-]{50,}"),
    (("hf_",), r"\bhf_[A-Za-z0-9]{30,}\b"),  # Hugging Face
    (("sg.",), r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),  # SendGrid
    (("sy_",), r"\bsy_[0-9a-f]{8}_[A-Za-z0-9_-]{20,}"),  # Switchyard agent keys
    (("eyj",), r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),  # JWTs
    # An AWS secret access key in free text: 40 base64 characters with upper and lower case and a
    # digit or symbol, not part of a longer word or path, in a text that speaks of AWS or secrets.
    # A git SHA (lower-case hex) never matches.
    (
        ("aws", "secret", "akia", "asia"),
        r"(?<![A-Za-z0-9/+=._-])(?=[A-Za-z0-9/+]{0,39}[A-Z])(?=[A-Za-z0-9/+]{0,39}[a-z])"
        r"(?=[A-Za-z0-9/+]{0,39}[0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=._-])",
    ),
]
# An Authorization header written out: keep the scheme word, replace what follows.
_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest|negotiate|apikey)\s+)?)"
    r"(?!\[REDACTED\])([^\s\"',;]+)"
)
# Authorization schemes in free text. The credential must contain a digit or a symbol, so prose
# ("basic functionality", "bearer authentication") is left alone.
_AUTH_SCHEME = re.compile(
    r"(?i)\b((?:bearer|basic|token|digest)\s+)(?=[A-Za-z0-9._~+/-]*[0-9._~+/=-])([A-Za-z0-9._~+/-]{8,}=*)"
)
# mysql and friends take the password glued to -p (-pSECRET); -p alone prompts.
_MYSQL_P = re.compile(
    r"\b((?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlsh|mariadb|mariadb-dump)\b[^\n|;&]*?\s-p)"
    r"(?!\s)(?!\[REDACTED\])(\"[^\"]*\"|'[^']*'|[^\s\"']+)"
)
# curl/wget/httpie -u user:password (the user stays).
_CURL_USER = re.compile(
    r"\b((?:curl|wget|http|https|xh)\b[^\n|;&]*?\s(?:-u|--user|--proxy-user)(?:\s+|=)[\"']?[^\s:\"']*:)"
    r"(?!\[REDACTED\])([^\s\"']+)"
)
# NAME=value, NAME: value, "name": "value", --name=value, ?name=value, --name value, SNAKE_NAME value.
# Found from the secret-ish word inside the name, then ``is_secret_name`` decides on the whole name.
_NAME_HINTS = ("pass", "pwd", "secret", "token", "key", "auth", "credential", "cookie", "session", "otp")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_VALUE = r"(?!\[REDACTED\])(\"[^\"]*\"|'[^']*'|[^\s\"',;&#)}\]]+)"
_NAMED_AT = re.compile(r"(-{0,2})([A-Za-z0-9_.-]+)(?:(\"?'?\s*[:=]\s*)|(\s+))" + _VALUE)
# Passwords after a short option: sshpass -p, redis-cli -a, docker login -p.
_SHORT_OPTION_PASSWORD = re.compile(
    r"\b((?:sshpass\s+-p|redis-cli\b[^\n|;&]*?\s-a|docker\s+login\b[^\n|;&]*?\s-p)\s*)" + _VALUE
)
# In a query string, a few short names are credentials as well.
_QUERY_PARAM = re.compile(
    r"(?i)([?&;](?:key|code|sig|signature|x-amz-signature|x-amz-credential|x-amz-security-token)=)([^&\s#\"']+)"
)


def _named_values(text: str) -> str:
    if "=" not in text and ":" not in text and "_" not in text and "--" not in text:
        return text  # no separator and no option or snake-case name: prose ("the session key")
    low = text.lower()
    # Found in the lower-cased text, whose positions are the text's unless lower-casing changed a
    # length (a few non-ASCII letters do): then the case-blind search of the original.
    hints = _NAME_HINT.finditer(low) if len(low) == len(text) else _NAME_HINT_ANY_CASE.finditer(text)
    parts, done, pos = [], 0, 0
    for hint in hints:
        if hint.start() < pos:
            continue
        start = hint.start()
        while start > 0 and text[start - 1] in _NAME_CHARS:
            start -= 1
        pos = hint.end()
        match = _NAMED_AT.match(text, start)
        if match is None:
            continue
        dashes, name, assigned, spaced, value = match.groups()
        if not is_secret_name(name):
            continue
        if spaced is not None and not (dashes or "_" in name):
            continue  # "password reset" in prose: a bare word, a space, another word
        if text.startswith(" " + REDACTED, match.end()):
            continue  # "Authorization: Bearer [REDACTED]": the credential is already gone
        value_start, value_end = match.span(5)
        if value[:1] in "\"'" and len(value) >= 2:
            value_start, value_end = value_start + 1, value_end - 1  # keep the quotes
        parts += [text[done:value_start], REDACTED]
        done = pos = value_end
    if not parts:
        return text
    parts.append(text[done:])
    return "".join(parts)


def _url_password(match: re.Match) -> str:
    return match.group(1) + REDACTED + "@"


def _keep_first(match: re.Match) -> str:
    return match.group(1) + REDACTED


def _sub(pattern: re.Pattern, replacement) -> Callable[[str], str]:
    return lambda text: pattern.sub(replacement, text)


# Every rule with the lower-cased literals of which a text must hold one for the rule to apply.
_RULES: list[tuple[tuple[str, ...], Callable[[str], str]]] = [
    (("-----begin",), _sub(_PEM, _keep_first)),
    (("://",), lambda text: _URL_CREDENTIALS.sub(_url_password, text) if "@" in text else text),
    *[(literals, _sub(re.compile(pattern), REDACTED)) for literals, pattern in _TOKEN_SHAPES],
    (("authorization",), _sub(_AUTH_HEADER, _keep_first)),
    (("bearer", "basic", "token", "digest"), _sub(_AUTH_SCHEME, _keep_first)),
    (("mysql", "mariadb"), _sub(_MYSQL_P, _keep_first)),
    (("-u",), _sub(_CURL_USER, _keep_first)),  # also in --user, --proxy-user
    (("sshpass", "redis-cli", "docker"), _sub(_SHORT_OPTION_PASSWORD, _keep_first)),
    (("key=", "code=", "sig"), _sub(_QUERY_PARAM, _keep_first)),
    (_NAME_HINTS, _named_values),
]


def _trie(words: list[str]) -> str:
    """One regular expression for "any of these words", as a trie: each position of a clean text
    costs the engine one test of its first character instead of one per word."""
    heads: dict[str, list[str]] = {}
    for word in words:
        heads.setdefault(word[0], []).append(word[1:])
    branches = []
    for head, tails in sorted(heads.items()):
        if "" in tails:
            branches.append(re.escape(head))  # a shorter word covers every longer one it starts
        else:
            branches.append(re.escape(head) + _trie(tails))
    return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"


_NAME_HINT = re.compile(_trie(list(_NAME_HINTS)))
_NAME_HINT_ANY_CASE = re.compile(_NAME_HINT.pattern, re.IGNORECASE)
# The pre-check: one search for every rule's literals at once. The trie keeps only the shortest of
# literals that start alike ("key" for "key="), so each literal it can find maps to the rules of
# every literal that starts with it.
_LITERALS = sorted({literal for literals, _ in _RULES for literal in literals})
_ANY_LITERAL = re.compile(_trie(_LITERALS))
_RULES_BY_FOUND = {
    found: tuple(i for i, (literals, _) in enumerate(_RULES) if any(lit.startswith(found) for lit in literals))
    for found in _LITERALS
    if not any(other != found and found.startswith(other) for other in _LITERALS)
}


def redact_text(text: str) -> str:
    """The text with every secret-shaped part replaced by ``[REDACTED]``.

    A clean text costs one lower-casing and one scan for the rules' literals; a text that holds
    some pays for the rules of those literals, and only those.
    """
    if len(text) < 6:
        return text
    found = set(_ANY_LITERAL.findall(text.lower()))
    if not found:
        return text
    for index in sorted({index for literal in found for index in _RULES_BY_FOUND[literal]}):
        text = _RULES[index][1](text)
    return text


_MISSING = object()


def _redact_walk(value: Any, under_secret: bool, depth: int) -> Any:
    """The value redacted, or ``_MISSING`` when nothing in it changed (nothing is copied then)."""
    if isinstance(value, str):
        if under_secret:
            return REDACTED if value and value != REDACTED else _MISSING
        redacted = redact_text(value)
        return _MISSING if redacted is value else redacted
    if depth > 64:
        return REDACTED
    if isinstance(value, dict):
        changed = None
        for key, item in value.items():
            new_item = _redact_walk(item, under_secret or (isinstance(key, str) and is_secret_name(key)), depth + 1)
            # A key is text too, though a secret as a key is rare: only long ones that are more than
            # a plain identifier (a URL, a header line) are looked at.
            new_key = redact_text(key) if isinstance(key, str) and len(key) > 16 and not key.isidentifier() else key
            if new_item is not _MISSING or new_key is not key:
                if changed is None:
                    changed = dict(value)
                if new_key is not key:
                    del changed[key]
                changed[new_key] = item if new_item is _MISSING else new_item
        return _MISSING if changed is None else changed
    if isinstance(value, list):
        changed = None
        for index, item in enumerate(value):
            new_item = _redact_walk(item, under_secret, depth + 1)
            if new_item is not _MISSING:
                if changed is None:
                    changed = list(value)
                changed[index] = new_item
        return _MISSING if changed is None else changed
    return _MISSING


def redact_json(value: Any) -> Any:
    """A JSON value with secrets replaced; the very same object when there was nothing to replace.

    Strings under a secret-named key are replaced whole, however deep; every other string, and
    every long key, is scanned for secret shapes (``redact_text``). Numbers, booleans and null stay.
    """
    redacted = _redact_walk(value, False, 0)
    return value if redacted is _MISSING else redacted


def summarize(value: Any, *, max_chars: int) -> str:
    """A redacted, length-capped text summary of any JSON value."""
    if value is None:
        return ""
    if isinstance(value, str):
        text = redact_text(value)
    else:
        text = json.dumps(redact_json(value), ensure_ascii=False, sort_keys=True, default=str)
    if len(text) > max_chars:
        keep = max(0, max_chars - len(f"… [{len(text)} more chars]"))
        text = text[:keep] + f"… [{len(text) - keep} more chars]"
    return text
