"""What in an OTLP export is usage: Claude Code's api_request log records and GenAI spans.

Pure functions over the decoded messages; nothing here touches the database.

- Log records: Claude Code's ``claude_code.api_request`` event (checked against Claude Code 2.1.x:
  the name is the record's body, its ``event.name`` attribute is ``api_request``; newer SDKs also
  set the record's ``event_name`` field; any of the three is enough). Its attributes carry
  ``session.id``, ``model``, ``cost_usd`` (a double; 2.1.x also sends ``cost_usd_micros``, an exact
  integer, used when present), ``input_tokens``, ``output_tokens``, ``cache_read_tokens``,
  ``cache_creation_tokens`` and ``duration_ms`` (integers; strings of digits are taken too).
  Other records (user_prompt, tool_result, ...) are taken and dropped.
- Spans: GenAI semantic conventions. A model call (``gen_ai.operation.name`` chat,
  text_completion, generate_content, embeddings, or none with token counts) is one usage row; an
  ``execute_tool`` span is a tool-call row (no tokens) named by ``gen_ai.tool.name``.
  ``invoke_agent``/``create_agent`` spans are not counted: frameworks put the sum of the model
  calls beneath them there, which would count the same tokens twice.
"""

import datetime as dt
import hashlib
import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from django.utils import timezone

from usage.models import COST_MAX, TOKENS_MAX

API_REQUEST_NAMES = frozenset({"claude_code.api_request", "api_request"})
MODEL_CALLS = frozenset({"chat", "text_completion", "generate_content", "embeddings", ""})
AGENT_SPANS = frozenset({"invoke_agent", "create_agent"})
SESSION_KEYS = ("session.id", "gen_ai.conversation.id")
# Every attribute of a log record that is_api_request and _api_request read: a Claude Code record
# carries about 25, and converting the others (user.id, prompt.id, ...) only to drop them cost about
# as much as the rest of the extraction (bench/HISTORY.md, "OTLP ingest (issue 15)").
LOG_KEYS = frozenset(
    {
        *SESSION_KEYS,
        "event.name",
        "event.timestamp",
        "model",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_creation_tokens",
        "cost_usd",
        "cost_usd_micros",
        "duration_ms",
    }
)
INT64_MAX = 2**63 - 1
# Attributes of one record or resource, at most (OpenTelemetry SDKs send 128 at most): a record with
# more is refused before they are read, so 4 MiB of empty attributes is not a second of Python.
ATTRIBUTES_MAX = 1000
CENT_FRACTION = Decimal("0.00000001")


class RecordInvalid(ValueError):
    """A usage record with a value the database must not hold (negative, not a number, over the caps
    of usage.models: TOKENS_MAX tokens, COST_MAX dollars)."""


@dataclass(frozen=True)
class UsageItem:
    source: str
    idempotency_key: str
    occurred_at: dt.datetime
    external_session_id: str = ""
    model: str = ""
    operation: str = ""
    tool_name: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    cost_usd: Decimal = Decimal(0)
    duration_ms: int | None = None
    # A tool span's own start and outcome, for the tool-call row it also becomes (usage.tool_spans).
    started_at: dt.datetime | None = None
    error: str = ""


@dataclass
class Extracted:
    items: list[UsageItem]
    rejected: int = 0
    error: str = ""

    def reject(self, message: str, count: int = 1) -> None:
        self.rejected += count
        self.error = self.error or message


def _too_many_attributes(what: str, pairs) -> str:
    """Why a record (or a resource's) is refused for its attributes, or "" when it is not."""
    if len(pairs) <= ATTRIBUTES_MAX:
        return ""
    return f"{what} has {len(pairs)} attributes; at most {ATTRIBUTES_MAX} are taken."


def any_value(value):
    """An OTLP AnyValue as a Python value (strings, numbers, bools; arrays and maps as lists and dicts)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return getattr(value, kind)


def attributes(pairs, keys: frozenset[str] | None = None) -> dict:
    """The attributes as a dict (the last of a repeated key wins); with ``keys``, only those: a
    record's other attributes are never converted, which is most of the work on a large export."""
    if keys is None:
        return {pair.key: any_value(pair.value) for pair in pairs}
    return {pair.key: any_value(pair.value) for pair in pairs if pair.key in keys}


def _text(value, limit: int) -> str:
    if value is None or isinstance(value, (dict, list, bytes)):
        return ""
    return str(value).replace("\x00", "")[:limit]


def _count(name: str, value, *, maximum: int = TOKENS_MAX) -> int:
    if value is None or value == "":
        return 0
    if isinstance(value, bool):
        raise RecordInvalid(f"{name} must be a number, not a boolean.")
    try:
        number = float(value) if isinstance(value, (str, float)) else int(value)
    except (TypeError, ValueError):
        raise RecordInvalid(f"{name} must be a number: {str(value)[:40]!r}.") from None
    if isinstance(number, float):
        if not math.isfinite(number):
            raise RecordInvalid(f"{name} must be a finite number.")
        number = round(number)
    if not 0 <= number <= maximum:
        cap = " (the cap of one record)" if maximum != INT64_MAX else ""
        raise RecordInvalid(f"{name} must be from 0 to {maximum}{cap}: {number}.")
    return number


def _cost(value) -> Decimal:
    if value is None or value == "":
        return Decimal(0)
    if isinstance(value, (bool, dict, list, bytes)):
        raise RecordInvalid("cost_usd must be a number.")
    try:
        cost = Decimal(str(value))
    except InvalidOperation:
        raise RecordInvalid(f"cost_usd must be a number: {str(value)[:40]!r}.") from None
    if not cost.is_finite() or not 0 <= cost <= COST_MAX:
        raise RecordInvalid(f"cost_usd must be from 0 to {COST_MAX} (the cap of one record): {str(value)[:40]}.")
    return cost.quantize(CENT_FRACTION)


def _time(nanos: int) -> dt.datetime | None:
    if not nanos:
        return None
    try:
        return dt.datetime.fromtimestamp(nanos / 1e9, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        raise RecordInvalid(f"The timestamp {nanos} is out of range.") from None


def _iso_time(value) -> dt.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)


def _session(attrs: dict, resource: dict) -> str:
    for source in (attrs, resource):
        for key in SESSION_KEYS:
            found = _text(source.get(key), 128)
            if found:
                return found
    return ""


def _key(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def is_api_request(record, attrs: dict) -> bool:
    body = record.body.string_value if record.body.WhichOneof("value") == "string_value" else ""
    return bool({record.event_name, body, _text(attrs.get("event.name"), 100)} & API_REQUEST_NAMES)


def logs_usage(message) -> Extracted:
    """The usage rows in an ExportLogsServiceRequest."""
    out = Extracted(items=[])
    for resource_logs in message.resource_logs:
        refused = _too_many_attributes("A resource", resource_logs.resource.attributes)
        if refused:
            out.reject(refused, sum(len(scope.log_records) for scope in resource_logs.scope_logs))
            continue
        resource = attributes(resource_logs.resource.attributes)
        resource_bytes = resource_logs.resource.SerializeToString(deterministic=True)
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                refused = _too_many_attributes("A log record", record.attributes)
                if refused:
                    out.reject(refused)
                    continue
                attrs = attributes(record.attributes, LOG_KEYS)
                if not is_api_request(record, attrs):
                    continue
                try:
                    out.items.append(_api_request(record, attrs, resource, resource_bytes))
                except RecordInvalid as exc:
                    out.reject(str(exc))
    return out


def _api_request(record, attrs: dict, resource: dict, resource_bytes: bytes) -> UsageItem:
    occurred = (
        _time(record.time_unix_nano)
        or _time(record.observed_time_unix_nano)
        or _iso_time(attrs.get("event.timestamp"))
        or timezone.now()
    )
    return UsageItem(
        source="otlp-log",
        # The record's own bytes: the same record resent (in either encoding) has the same key.
        idempotency_key=_key(b"log", resource_bytes, record.SerializeToString(deterministic=True)),
        occurred_at=occurred,
        external_session_id=_session(attrs, resource),
        model=_text(attrs.get("model"), 200),
        operation="api_request",
        input_tokens=_count("input_tokens", attrs.get("input_tokens")),
        output_tokens=_count("output_tokens", attrs.get("output_tokens")),
        cache_read_tokens=_count("cache_read_tokens", attrs.get("cache_read_tokens")),
        cache_creation_tokens=_count("cache_creation_tokens", attrs.get("cache_creation_tokens")),
        cost_usd=_api_request_cost(attrs),
        duration_ms=_count("duration_ms", attrs["duration_ms"], maximum=INT64_MAX)
        if attrs.get("duration_ms") not in (None, "")
        else None,
    )


def _api_request_cost(attrs: dict) -> Decimal:
    # Claude Code 2.1.x sends cost_usd as a double and, exactly, cost_usd_micros; older ones the first only.
    micros = attrs.get("cost_usd_micros")
    if micros in (None, ""):
        return _cost(attrs.get("cost_usd"))
    return _cost(Decimal(_count("cost_usd_micros", micros, maximum=INT64_MAX)) / 1_000_000)


def _first(attrs: dict, *keys: str):
    for key in keys:
        if attrs.get(key) not in (None, ""):
            return attrs[key]
    return None


def _span_error(span, attrs: dict) -> str:
    """What went wrong in a span whose status is ERROR (OTLP StatusCode 2); "" when it went well."""
    if span.status.code != 2:
        return ""
    return _text(span.status.message or attrs.get("error.type") or "error", 2000)


def traces_usage(message) -> Extracted:
    """The usage rows in an ExportTraceServiceRequest."""
    out = Extracted(items=[])
    for resource_spans in message.resource_spans:
        refused = _too_many_attributes("A resource", resource_spans.resource.attributes)
        if refused:
            out.reject(refused, sum(len(scope.spans) for scope in resource_spans.scope_spans))
            continue
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                refused = _too_many_attributes("A span", span.attributes)
                if refused:
                    out.reject(refused)
                    continue
                attrs = attributes(span.attributes)
                if not any(key.startswith("gen_ai.") for key in attrs):
                    continue
                try:
                    item = _gen_ai_span(span, attrs, resource)
                except RecordInvalid as exc:
                    out.reject(str(exc))
                    continue
                if item is not None:
                    out.items.append(item)
    return out


def _gen_ai_span(span, attrs: dict, resource: dict) -> UsageItem | None:
    operation = _text(attrs.get("gen_ai.operation.name"), 64)
    tool = _text(attrs.get("gen_ai.tool.name"), 200)
    if operation in AGENT_SPANS:
        return None
    started, ended = _time(span.start_time_unix_nano), _time(span.end_time_unix_nano)
    duration = None
    if span.start_time_unix_nano and span.end_time_unix_nano >= span.start_time_unix_nano:
        duration = round((span.end_time_unix_nano - span.start_time_unix_nano) / 1e6)
    identity = (span.trace_id + span.span_id) or span.SerializeToString(deterministic=True)
    common = {
        "source": "otlp-span",
        "idempotency_key": _key(b"span", identity),
        "occurred_at": ended or started or timezone.now(),
        "external_session_id": _session(attrs, resource),
        "operation": operation,
        "duration_ms": duration,
    }
    if operation == "execute_tool" or (tool and not operation):
        return UsageItem(
            **common, tool_name=tool or _text(span.name, 200), started_at=started, error=_span_error(span, attrs)
        )
    tokens = {
        "input_tokens": _count(
            "gen_ai.usage.input_tokens", _first(attrs, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
        ),
        "output_tokens": _count(
            "gen_ai.usage.output_tokens",
            _first(attrs, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
        ),
        "cache_read_tokens": _count(
            "gen_ai.usage.cache_read.input_tokens",
            _first(attrs, "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens"),
        ),
        "cache_creation_tokens": _count(
            "gen_ai.usage.cache_creation.input_tokens",
            _first(attrs, "gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens"),
        ),
    }
    model = _text(_first(attrs, "gen_ai.response.model", "gen_ai.request.model"), 200)
    if operation not in MODEL_CALLS and not any(tokens.values()):
        return None  # some other gen_ai span (a retrieval, a guardrail) with nothing to count
    if not model and not any(tokens.values()):
        return None
    return UsageItem(**common, model=model, cost_usd=_cost(attrs.get("cost_usd")), **tokens)
