"""OTLP/HTTP bodies in and out: decoded with the opentelemetry-proto messages, never by hand.

A body is protobuf (``application/x-protobuf``) or the OTLP JSON mapping (``application/json``),
optionally gzipped. The JSON mapping is protobuf's JSON with two differences that json_format
does not know: trace and span ids are hex (not base64), and enums are integers (which json_format
takes as they are). Everything else (camelCase keys, int64 as strings, unknown fields ignored) is
json_format's own. See https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding.
"""

import base64
import binascii
import functools
import json
import zlib
from dataclasses import dataclass

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from google.rpc import status_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
# google.rpc.Code INVALID_ARGUMENT: what the OTLP spec asks a 400's Status to carry.
INVALID_ARGUMENT = 3
RESOURCE_EXHAUSTED = 8
_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"})


class BodyInvalid(Exception):
    """The body is not what the content type says (a 400), or too large once inflated (a 413)."""

    def __init__(self, message: str, *, status: int = 400):
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Signal:
    """One of the three OTLP endpoints: the request it decodes and the response it answers."""

    name: str
    request: type[Message]
    response: type[Message]
    rejected_field: str  # the ExportXPartialSuccess count field


LOGS = Signal(
    "logs",
    logs_service_pb2.ExportLogsServiceRequest,
    logs_service_pb2.ExportLogsServiceResponse,
    "rejected_log_records",
)
METRICS = Signal(
    "metrics",
    metrics_service_pb2.ExportMetricsServiceRequest,
    metrics_service_pb2.ExportMetricsServiceResponse,
    "rejected_data_points",
)
TRACES = Signal(
    "traces",
    trace_service_pb2.ExportTraceServiceRequest,
    trace_service_pb2.ExportTraceServiceResponse,
    "rejected_spans",
)


def inflate(raw: bytes, *, content_encoding: str, limit: int) -> bytes:
    """The body as sent before ``Content-Encoding`` (gzip or none), at most ``limit`` bytes:
    a small gzip that inflates past it is refused without being inflated further."""
    encoding = content_encoding.strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding != "gzip":
        raise BodyInvalid(f"Content-Encoding {encoding[:40]!r} is not supported: send gzip or none.", status=415)
    inflater = zlib.decompressobj(wbits=31)
    try:
        body = inflater.decompress(raw, limit + 1)
    except zlib.error as exc:
        raise BodyInvalid(f"The gzip body is corrupt: {exc}.") from None
    if len(body) > limit:
        raise BodyInvalid(f"The body inflates to more than {limit} bytes.", status=413)
    if not inflater.eof:
        raise BodyInvalid("The gzip body is truncated.")
    return body


def decode(signal: Signal, body: bytes, *, encoding: str) -> Message:
    message = signal.request()
    if encoding == PROTOBUF:
        try:
            message.ParseFromString(body)
        except (DecodeError, RecursionError, ValueError) as exc:
            raise BodyInvalid(f"The body is not an OTLP {signal.name} protobuf message: {exc}.") from None
        return message
    if not body.strip():
        return message  # an empty export, as an empty protobuf body is
    try:
        # Plain json, not the API's strict parser: what it refuses (NUL, lone surrogates, huge
        # integers) may sit in fields OTLP says to ignore; the fields read are checked by
        # json_format, and the strings kept are cleaned in usage.extract.
        document = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise BodyInvalid(f"The body is not JSON: {str(exc)[:200]}.") from None
    try:
        json_format.ParseDict(_to_proto_json(document, message.DESCRIPTOR, ""), message, ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError, TypeError, ValueError, AttributeError) as exc:
        raise BodyInvalid(f"The body is not an OTLP {signal.name} export request: {str(exc)[:300]}") from None
    return message


def _to_proto_json(value, descriptor, path: str):
    """The document checked against the message's shape and with its hex ids in base64.

    json_format iterates whatever it is given where a message belongs: a string there was read as
    an object of unknown (so ignored) keys and accepted. Every message position must be an object
    and every repeated one an array; the scalars json_format checks itself. OTLP JSON writes trace
    and span ids in hex, json_format reads bytes as base64."""
    if not isinstance(value, dict):
        raise BodyInvalid(f"{path or 'The body'} must be a JSON object.")
    fields = descriptor.fields_by_name
    out = {}
    for key, item in value.items():
        field = fields.get(key) or _by_json_name(descriptor).get(key)
        if field is None or item is None:
            out[key] = item  # unknown fields are ignored, nulls are defaults (as json_format does)
            continue
        where = f"{path}.{key}" if path else key
        if field.type == field.TYPE_BYTES and key in _ID_KEYS and isinstance(item, str):
            try:
                item = base64.b64encode(bytes.fromhex(item)).decode("ascii")
            except ValueError:
                raise BodyInvalid(f"{where} must be hex: {item[:40]!r}.") from None
        elif field.message_type is not None:
            if field.is_repeated:
                if not isinstance(item, list):
                    raise BodyInvalid(f"{where} must be a JSON array.")
                item = [_to_proto_json(entry, field.message_type, f"{where}[{n}]") for n, entry in enumerate(item)]
            else:
                item = _to_proto_json(item, field.message_type, where)
        out[key] = item
    return out


@functools.cache
def _by_json_name(descriptor) -> dict:
    return {field.json_name: field for field in descriptor.fields}


def encode(message: Message, *, encoding: str) -> bytes:
    if encoding == PROTOBUF:
        return message.SerializeToString()
    return json_format.MessageToJson(message, indent=None).encode("utf-8")


def export_response(signal: Signal, *, rejected: int, error: str, encoding: str) -> bytes:
    response = signal.response()
    if rejected or error:
        # Only set when something was refused: an empty partial_success means "all taken".
        setattr(response.partial_success, signal.rejected_field, rejected)
        response.partial_success.error_message = error
    return encode(response, encoding=encoding)


def status_body(message: str, *, code: int = INVALID_ARGUMENT, encoding: str) -> bytes:
    return encode(status_pb2.Status(code=code, message=message), encoding=encoding)


def hex_id(value: bytes) -> str:
    return binascii.hexlify(value).decode("ascii")
