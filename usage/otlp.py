"""OTLP/HTTP bodies in and out: decoded with the opentelemetry-proto messages, never by hand.

A body is protobuf (``application/x-protobuf``) or the OTLP JSON mapping (``application/json``),
optionally gzipped. The JSON mapping is protobuf's JSON with two differences that json_format
does not know: trace and span ids are hex (not base64), and enums are integers (which json_format
takes as they are). Everything else (camelCase keys, int64 as strings, unknown fields ignored) is
json_format's own. See https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding.

An export is bounded before it is decoded (issue 24: 13.6 KB of gzip held 7 million empty log
records, which took 11 s and a gigabyte to decode and walk): at most OTLP_MAX_BODY_BYTES once
inflated (4 MiB, the OpenTelemetry Collector's and gRPC's default message size; the gzip stream is
inflated up to the limit and no further) and at most OTLP_MAX_RECORDS log records, spans or data
points (10,000; SDKs export 512 at a time). The records are counted on the wire before protobuf
builds a message of them, and the count stops at the limit, so a refusal costs no more than that.
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
    records: str  # what its records are called, in messages
    # Where its records are in the request: the field numbers at each level, outermost first (a data
    # point is under one of the five kinds of a metric), and the same by JSON names.
    path: tuple[frozenset[int], ...]
    json_path: tuple[frozenset[str], ...]


def _names(*names: str) -> frozenset[str]:
    """A field's JSON names: lowerCamelCase, as exporters send them, and the proto name json_format also takes."""
    spelled = set(names)
    for name in names:
        head, *rest = name.split("_")
        spelled.add(head + "".join(part.title() for part in rest))
    return frozenset(spelled)


_METRIC_KINDS = _names("gauge", "sum", "histogram", "exponential_histogram", "summary")
LOGS = Signal(
    "logs",
    logs_service_pb2.ExportLogsServiceRequest,
    logs_service_pb2.ExportLogsServiceResponse,
    "rejected_log_records",
    "log records",
    (frozenset({1}), frozenset({2}), frozenset({2})),
    (_names("resource_logs"), _names("scope_logs"), _names("log_records")),
)
METRICS = Signal(
    "metrics",
    metrics_service_pb2.ExportMetricsServiceRequest,
    metrics_service_pb2.ExportMetricsServiceResponse,
    "rejected_data_points",
    "data points",
    (frozenset({1}), frozenset({2}), frozenset({2}), frozenset({5, 7, 9, 10, 11}), frozenset({1})),
    (_names("resource_metrics"), _names("scope_metrics"), _names("metrics"), _METRIC_KINDS, _names("data_points")),
)
TRACES = Signal(
    "traces",
    trace_service_pb2.ExportTraceServiceRequest,
    trace_service_pb2.ExportTraceServiceResponse,
    "rejected_spans",
    "spans",
    (frozenset({1}), frozenset({2}), frozenset({2})),
    (_names("resource_spans"), _names("scope_spans"), _names("spans")),
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
        raise BodyInvalid(
            f"The body inflates to more than {limit} bytes (OTLP_MAX_BODY_BYTES): send it in smaller batches.",
            status=413,
        )
    if not inflater.eof:
        raise BodyInvalid("The gzip body is truncated.")
    return body


def decode(signal: Signal, body: bytes, *, encoding: str, max_records: int) -> Message:
    """The export request in ``body``; BodyInvalid (413) when it holds more than ``max_records``
    records, counted before the message is built."""
    message = signal.request()
    if encoding == PROTOBUF:
        _count_on_the_wire(signal, body, max_records)
        try:
            message.ParseFromString(body)
        except (DecodeError, RecursionError, ValueError) as exc:
            raise BodyInvalid(f"The body is not an OTLP {signal.name} protobuf message: {exc}.") from None
        return message
    if not body:
        return message  # an empty export, as an empty protobuf body is; blanks alone are not JSON (400)
    try:
        # Plain json, not the API's strict parser: what it refuses (NUL, lone surrogates, huge
        # integers) may sit in fields OTLP says to ignore; the fields read are checked by
        # json_format, and the strings kept are cleaned in usage.extract.
        document = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise BodyInvalid(f"The body is not JSON: {str(exc)[:200]}.") from None
    _count_in_json(signal, document, max_records)
    try:
        json_format.ParseDict(_to_proto_json(document, message.DESCRIPTOR, ""), message, ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError, TypeError, ValueError, AttributeError) as exc:
        raise BodyInvalid(f"The body is not an OTLP {signal.name} export request: {str(exc)[:300]}") from None
    return message


def _too_many(signal: Signal, limit: int) -> BodyInvalid:
    return BodyInvalid(
        f"The export holds more than {limit} {signal.records} (OTLP_MAX_RECORDS): send it in smaller batches.",
        status=413,
    )


class _Malformed(Exception):
    """Not protobuf where the count looked: the parser says what is wrong."""


def _varint(body: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(body) or shift > 63:
            raise _Malformed
        byte = body[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _count_on_the_wire(signal: Signal, body: bytes, limit: int) -> None:
    """Count the records of a protobuf export without decoding it, stopping past ``limit``.

    Only the levels above the records are read (a record is skipped by its length), and every field
    met there counts against ``limit`` too: a flood of empty resource entries, or of fields of no
    interest, cannot make the count itself long. A body that is not protobuf where it looks stops the
    count, and ParseFromString reports it."""
    last = len(signal.path) - 1
    seen = [0, 0]  # records, other fields read

    def walk(start: int, end: int, depth: int) -> None:
        pos, wanted = start, signal.path[depth]
        while pos < end:
            key, pos = _varint(body, pos)
            wire, number = key & 7, key >> 3
            seen[1] += 1
            if wire == 2:
                length, pos = _varint(body, pos)
                if pos + length > end:
                    raise _Malformed
                if number in wanted:
                    if depth == last:
                        seen[0] += 1
                    else:
                        walk(pos, pos + length, depth + 1)
                pos += length
            elif wire == 0:
                _, pos = _varint(body, pos)
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            else:
                raise _Malformed
            if seen[0] > limit or seen[1] > 10 * limit:
                raise _too_many(signal, limit)

    try:
        walk(0, len(body), 0)
    except _Malformed:
        return


def _count_in_json(signal: Signal, document, limit: int) -> None:
    """The same count in a JSON export (already parsed: counting is len() of its arrays)."""
    level = [document]
    for names in signal.json_path:
        found = []
        for item in level:
            if not isinstance(item, dict):
                continue  # _to_proto_json says what is wrong with it
            for name in names & item.keys():
                value = item[name]
                found.extend(value if isinstance(value, list) else [value])
        if len(found) > limit:
            raise _too_many(signal, limit)
        level = found


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
