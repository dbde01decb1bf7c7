"""OTLP bodies shaped as the exporters send them.

``claude_api_request`` is a log record as Claude Code 2.1.x exports it with
OTEL_EXPORTER_OTLP_PROTOCOL=http/json: the event name in the body and in ``event.name``, every
attribute a string (as its JavaScript SDK sends them), ``session.id`` the Claude Code session.
"""

import gzip
import json

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span

T0 = 1_795_000_000_000_000_000  # 2026-11-18 in Unix nanoseconds
CLAUDE_RESOURCE = [
    {"key": "service.name", "value": {"stringValue": "claude-code"}},
    {"key": "service.version", "value": {"stringValue": "2.1.332"}},
    {"key": "os.type", "value": {"stringValue": "linux"}},
    {"key": "host.arch", "value": {"stringValue": "amd64"}},
]


def _string(key: str, value) -> dict:
    return {"key": key, "value": {"stringValue": str(value)}}


def _int(key: str, value) -> dict:
    return {"key": key, "value": {"intValue": value}}


def claude_api_request(
    session_id: str,
    *,
    sequence: int = 1,
    model: str = "claude-sonnet-4-5-20250929",
    input_tokens: int | str = 1200,
    output_tokens: int | str = 340,
    cache_read_tokens: int | str = 5000,
    cache_creation_tokens: int | str = 800,
    cost_usd: float | str = 0.0123,
    cost_usd_micros: int | None = None,
    duration_ms: int | str = 2345,
    time_unix_nano: int = T0,
    as_strings: bool = False,
) -> dict:
    """One claude_code.api_request log record in the OTLP JSON mapping, as Claude Code 2.1.332 sent it
    (captured from the pinned CLI): tokens and durations as intValue numbers, cost_usd a doubleValue
    beside cost_usd_micros. ``as_strings`` sends every value as a string instead (older releases)."""
    number = _string if as_strings else _int
    if as_strings:
        cost = [_string("cost_usd", cost_usd)]
    else:
        cost = [{"key": "cost_usd", "value": {"doubleValue": cost_usd}}]
        if cost_usd_micros is not None:
            cost.append(_int("cost_usd_micros", cost_usd_micros))
    return {
        "timeUnixNano": str(time_unix_nano),
        "observedTimeUnixNano": str(time_unix_nano),
        "body": {"stringValue": "claude_code.api_request"},
        "attributes": [
            _string("user.id", "5fdec74e34049e80f4d568a48181ccc6fd5d868db99f3e317b81cd3d1bbb1126"),
            _string("session.id", session_id),
            _string("anthropic.provider", "firstParty"),
            {"key": "anthropic.custom_base_url", "value": {"boolValue": False}},
            _string("terminal.type", "non-interactive"),
            _string("event.name", "api_request"),
            _string("event.timestamp", "2026-11-18T19:06:40.000Z"),
            _int("event.sequence", sequence),
            _string("prompt.id", f"prompt-{sequence}"),
            _string("model", model),
            number("input_tokens", input_tokens),
            number("output_tokens", output_tokens),
            number("cache_read_tokens", cache_read_tokens),
            number("cache_creation_tokens", cache_creation_tokens),
            _int("cache_creation_5m_tokens", 0),
            _int("cache_creation_1h_tokens", 0),
            *cost,
            number("duration_ms", duration_ms),
            _int("ttft_ms", 15),
            _string("request_id", f"req_{sequence:04d}"),
            _string("speed", "normal"),
            _string("query_source", "sdk"),
        ],
        "droppedAttributesCount": 0,
    }


def claude_user_prompt(session_id: str) -> dict:
    """Another of Claude Code's events, which carries no usage."""
    return {
        "timeUnixNano": str(T0),
        "body": {"stringValue": "claude_code.user_prompt"},
        "attributes": [_string("session.id", session_id), _string("event.name", "user_prompt")],
    }


def logs_json(*records: dict) -> dict:
    return {
        "resourceLogs": [
            {
                "resource": {"attributes": CLAUDE_RESOURCE},
                "scopeLogs": [
                    {
                        "scope": {"name": "com.anthropic.claude_code.events", "version": "2.1.332"},
                        "logRecords": list(records),
                    }
                ],
            }
        ]
    }


def logs_protobuf(*records: dict) -> bytes:
    """The same export in protobuf, built from the proto classes (not through our JSON decoder)."""
    request = ExportLogsServiceRequest()
    resource_logs = request.resource_logs.add()
    for attribute in CLAUDE_RESOURCE:
        resource_logs.resource.attributes.append(_kv(attribute))
    scope_logs = resource_logs.scope_logs.add()
    scope_logs.scope.name = "com.anthropic.claude_code.events"
    for record in records:
        log = LogRecord(
            time_unix_nano=int(record["timeUnixNano"]),
            observed_time_unix_nano=int(record.get("observedTimeUnixNano", 0)),
            body=AnyValue(string_value=record["body"]["stringValue"]),
        )
        log.attributes.extend(_kv(attribute) for attribute in record["attributes"])
        scope_logs.log_records.append(log)
    return request.SerializeToString()


def _kv(attribute: dict) -> KeyValue:
    value = attribute["value"]
    if "intValue" in value:
        return KeyValue(key=attribute["key"], value=AnyValue(int_value=int(value["intValue"])))
    if "doubleValue" in value:
        return KeyValue(key=attribute["key"], value=AnyValue(double_value=float(value["doubleValue"])))
    if "boolValue" in value:
        return KeyValue(key=attribute["key"], value=AnyValue(bool_value=value["boolValue"]))
    return KeyValue(key=attribute["key"], value=AnyValue(string_value=value["stringValue"]))


def gen_ai_spans(session_id: str, *, trace_id: str = "5b8efff798038103d269b633813fc60c") -> dict:
    """A framework's trace in the OTLP JSON mapping: an agent span (not counted), a chat span with
    usage, and an execute_tool span, per the GenAI semantic conventions."""

    def span(span_id, name, start, end, attributes, parent=""):
        return {
            "traceId": trace_id,
            "spanId": span_id,
            "parentSpanId": parent,
            "name": name,
            "kind": 3,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(end),
            "attributes": attributes,
            "status": {},
        }

    agent = [
        _string("gen_ai.operation.name", "invoke_agent"),
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "900"}},
    ]
    chat = [
        _string("gen_ai.operation.name", "chat"),
        _string("gen_ai.system", "openai"),
        _string("gen_ai.request.model", "gpt-4o"),
        _string("gen_ai.response.model", "gpt-4o-2024-08-06"),
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "900"}},
        {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "120"}},
        {"key": "gen_ai.usage.cache_read.input_tokens", "value": {"intValue": "300"}},
    ]
    tool = [
        _string("gen_ai.operation.name", "execute_tool"),
        _string("gen_ai.tool.name", "get_weather"),
        _string("gen_ai.tool.call.id", "call_mszuSIzqtI65i1wAUOE8w5H4"),
    ]
    spans = [
        span("eee19b7ec3c1b174", "invoke_agent weather", T0, T0 + 3_000_000_000, agent),
        span("eee19b7ec3c1b175", "chat gpt-4o", T0, T0 + 1_500_000_000, chat, parent="eee19b7ec3c1b174"),
        span(
            "eee19b7ec3c1b176",
            "execute_tool get_weather",
            T0 + 1_600_000_000,
            T0 + 1_650_000_000,
            tool,
            "eee19b7ec3c1b174",
        ),
    ]
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [_string("service.name", "weather-agent"), _string("session.id", session_id)]
                },
                "scopeSpans": [{"scope": {"name": "openai-agents"}, "spans": spans}],
            }
        ]
    }


def traces_protobuf(document: dict) -> bytes:
    """A JSON-mapping trace export in protobuf, built from the proto classes."""
    request = ExportTraceServiceRequest()
    for resource_spans in document["resourceSpans"]:
        out = request.resource_spans.add()
        out.resource.attributes.extend(_any_kv(a) for a in resource_spans["resource"]["attributes"])
        for scope_spans in resource_spans["scopeSpans"]:
            scope = out.scope_spans.add()
            for item in scope_spans["spans"]:
                span = Span(
                    trace_id=bytes.fromhex(item["traceId"]),
                    span_id=bytes.fromhex(item["spanId"]),
                    parent_span_id=bytes.fromhex(item["parentSpanId"]),
                    name=item["name"],
                    kind=item["kind"],
                    start_time_unix_nano=int(item["startTimeUnixNano"]),
                    end_time_unix_nano=int(item["endTimeUnixNano"]),
                )
                span.attributes.extend(_any_kv(a) for a in item["attributes"])
                scope.spans.append(span)
    return request.SerializeToString()


def _any_kv(attribute: dict) -> KeyValue:
    return _kv(attribute)


def as_json(document: dict) -> bytes:
    return json.dumps(document).encode()


def gzipped(body: bytes) -> bytes:
    # mtime=0: the same bytes in every process, so a parametrized test's id is the same in each
    # pytest-xdist worker (they must collect the same tests).
    return gzip.compress(body, mtime=0)
