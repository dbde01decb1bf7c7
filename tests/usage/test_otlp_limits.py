"""An OTLP export is bounded before it is decoded (issue 24): 13.6 KB of gzip holding 7 million empty
log records took 11 s and a gigabyte. At most OTLP_MAX_BODY_BYTES once inflated (4 MiB) and at most
OTLP_MAX_RECORDS log records, spans or data points (10,000); over either, a 413 whose message names
the limit, and nothing stored. Protobuf and JSON, all three signals."""

import json

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tests.factories import SessionFactory
from tests.usage import payloads as p
from usage.models import UsageRecord

pytestmark = pytest.mark.django_db

LOGS = "/api/v1/otlp/v1/logs"
TRACES = "/api/v1/otlp/v1/traces"
METRICS = "/api/v1/otlp/v1/metrics"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
SESSION = "5e0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, written by hand: the proto classes would build millions of
    messages to write what a bomb is."""
    length, out = len(payload), bytearray([number << 3 | 2])
    while length >= 0x80:
        out.append(length & 0x7F | 0x80)
        length >>= 7
    out.append(length)
    return bytes(out) + payload


def _empty_records(count: int) -> bytes:
    """An export of ``count`` empty records in one scope of one resource (logs and traces alike:
    resource 1, scope 2, record 2)."""
    return _field(1, _field(2, _field(2, b"") * count))


def _post(client, url, body, content_type, **headers):
    return client.post(url, data=body, content_type=content_type, **headers)


def test_the_issues_bomb_is_refused_at_the_record_limit(agent_client):
    bomb = p.gzipped(_empty_records(1_000_000))  # 2 MB inflated: under the size, a hundred times the records

    response = _post(agent_client, LOGS, bomb, PROTOBUF, HTTP_CONTENT_ENCODING="gzip")

    assert len(bomb) < 4096
    assert response.status_code == 413
    assert response.json() == {
        "code": 8,
        "message": "The export holds more than 10000 log records (OTLP_MAX_RECORDS): send it in smaller batches.",
    }


def test_a_body_inflating_past_4_mib_is_refused(agent_client):
    bomb = p.gzipped(_empty_records(2_200_000))  # 4.4 MB inflated

    response = _post(agent_client, LOGS, bomb, PROTOBUF, HTTP_CONTENT_ENCODING="gzip")
    plain = _post(agent_client, TRACES, b"\x0a\x00" * (2 * 1024 * 1024 + 1), PROTOBUF)

    assert response.status_code == 413
    assert response.json()["message"] == (
        "The body inflates to more than 4194304 bytes (OTLP_MAX_BODY_BYTES): send it in smaller batches."
    )
    assert plain.status_code == 413
    assert "4194304 bytes (OTLP_MAX_BODY_BYTES)" in plain.json()["message"]


@pytest.mark.parametrize("encoding", [PROTOBUF, JSON])
def test_logs_at_the_limit_are_stored_and_one_more_is_refused(agent_client, settings, encoding):
    settings.OTLP_MAX_RECORDS = 100
    SessionFactory(agent=agent_client.agent, id=SESSION)
    records = [p.claude_api_request(SESSION, sequence=n) for n in range(101)]

    def body(rows):
        return p.logs_protobuf(*rows) if encoding == PROTOBUF else p.as_json(p.logs_json(*rows))

    over = _post(agent_client, LOGS, body(records), encoding)
    assert (over.status_code, UsageRecord.objects.count()) == (413, 0)
    assert "more than 100 log records (OTLP_MAX_RECORDS)" in over.json()["message"]
    at = _post(agent_client, LOGS, body(records[:100]), encoding)
    assert (at.status_code, UsageRecord.objects.count()) == (200, 100)


def _spans_json(count: int) -> bytes:
    document = p.gen_ai_spans(SESSION)
    chat = document["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    document["resourceSpans"][0]["scopeSpans"][0]["spans"] = [{**chat, "spanId": f"{n:016x}"} for n in range(count)]
    return p.as_json(document)


def test_spans_over_the_limit_in_either_encoding(agent_client, settings):
    settings.OTLP_MAX_RECORDS = 100

    as_json = _post(agent_client, TRACES, _spans_json(101), JSON)
    as_protobuf = _post(agent_client, TRACES, p.traces_protobuf(json.loads(_spans_json(101))), PROTOBUF)
    at = _post(agent_client, TRACES, _spans_json(100), JSON)

    for response in (as_json, as_protobuf):
        assert response.status_code == 413
        assert "more than 100 spans (OTLP_MAX_RECORDS)" in response.json()["message"]
    assert at.status_code == 200
    assert UsageRecord.objects.count() == 100


def _metrics(points_per_metric: int, metrics: int) -> ExportMetricsServiceRequest:
    request = ExportMetricsServiceRequest()
    scope = request.resource_metrics.add().scope_metrics.add()
    for n in range(metrics):
        metric = scope.metrics.add(name=f"claude_code.token.usage.{n}")
        for i in range(points_per_metric):
            point = (metric.sum if n % 2 else metric.histogram).data_points.add()
            point.time_unix_nano = p.T0 + i
    return request


def test_data_points_over_the_limit_in_either_encoding(agent_client, settings):
    settings.OTLP_MAX_RECORDS = 100
    over, at = _metrics(17, 6), _metrics(20, 5)  # 102 and 100 data points over sums and histograms

    as_protobuf = _post(agent_client, METRICS, over.SerializeToString(), PROTOBUF)
    as_json = _post(agent_client, METRICS, json_format.MessageToJson(over).encode(), JSON)
    fine = _post(agent_client, METRICS, at.SerializeToString(), PROTOBUF)

    for response in (as_protobuf, as_json):
        assert response.status_code == 413
        assert "more than 100 data points (OTLP_MAX_RECORDS)" in response.json()["message"]
    assert fine.status_code == 200


def test_a_flood_of_empty_resources_is_refused_too(agent_client):
    flood = p.gzipped(_field(1, b"") * 1_000_000)

    response = _post(agent_client, TRACES, flood, PROTOBUF, HTTP_CONTENT_ENCODING="gzip")

    assert response.status_code == 413


def test_a_malformed_body_is_still_a_400(agent_client):
    response = _post(agent_client, LOGS, _field(1, _field(2, b"\x12\x05ab")), PROTOBUF)

    assert response.status_code == 400
    assert "not an OTLP logs protobuf message" in response.json()["message"]


@pytest.mark.parametrize(
    ("url", "body", "field", "what"),
    [
        (LOGS, _field(1, _field(2, _field(2, _field(6, b"") * 1001))), "rejectedLogRecords", "A log record"),
        (TRACES, _field(1, _field(2, _field(2, _field(9, b"") * 1001))), "rejectedSpans", "A span"),
        (
            TRACES,
            _field(1, _field(1, _field(1, b"") * 1001) + _field(2, _field(2, b"") * 3)),
            "rejectedSpans",
            "A resource",
        ),
    ],
)
def test_a_record_with_more_than_1000_attributes_is_refused_unread(agent_client, url, body, field, what):
    response = _post(agent_client, url, body, PROTOBUF)

    assert response.status_code == 200
    assert _partial(response.content, url) == (
        1 if what != "A resource" else 3,
        f"{what} has 1001 attributes; at most 1000 are taken.",
    )


def _partial(content: bytes, url: str) -> tuple[int, str]:
    if url == LOGS:
        answer = ExportLogsServiceResponse.FromString(content).partial_success
        return answer.rejected_log_records, answer.error_message
    answer = ExportTraceServiceResponse.FromString(content).partial_success
    return answer.rejected_spans, answer.error_message
