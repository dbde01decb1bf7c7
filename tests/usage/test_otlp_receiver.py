"""The OTLP/HTTP receiver (usage/api/views.py): Claude Code's api_request log records and GenAI spans
become usage rows; bad bodies are refused in the OTLP way and store nothing."""

import datetime as dt
import json
from decimal import Decimal

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from sessions_app.models import AgentApiKey
from tests.factories import AgentFactory, CampaignFactory, SessionFactory, TaskFactory
from tests.usage import payloads as p
from usage.models import UsageRecord

pytestmark = pytest.mark.django_db

LOGS = "/api/v1/otlp/v1/logs"
TRACES = "/api/v1/otlp/v1/traces"
METRICS = "/api/v1/otlp/v1/metrics"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
CLAUDE_SESSION = "7f3c2a10-9d8e-4b1a-a6f2-5c4d3e2b1a09"


def post(client, url, body: bytes, content_type: str, **headers):
    return client.post(url, data=body, content_type=content_type, **headers)


@pytest.fixture
def claude_session(agent):
    """The session the hook opened under Claude Code's own session id, on a task of a campaign."""
    task = TaskFactory(title="Ship it", campaign=CampaignFactory(name="Launch"))
    return SessionFactory(agent=agent, id=CLAUDE_SESSION, task=task)


def test_claude_code_api_request_in_json_becomes_a_usage_row_of_its_session(agent_client, claude_session):
    body = p.as_json(p.logs_json(p.claude_api_request(CLAUDE_SESSION), p.claude_user_prompt(CLAUDE_SESSION)))

    response = post(agent_client, LOGS, body, JSON)

    assert response.status_code == 200
    assert response["Content-Type"] == JSON
    assert response.json() == {}
    row = UsageRecord.objects.get()
    assert row.agent == agent_client.agent
    assert row.session == claude_session
    assert row.task == claude_session.task
    assert (row.input_tokens, row.output_tokens, row.cache_read_tokens, row.cache_creation_tokens) == (
        1200,
        340,
        5000,
        800,
    )
    assert row.cost_usd == Decimal("0.0123")
    assert row.duration_ms == 2345
    assert row.model == "claude-sonnet-4-5-20250929"
    assert row.operation == "api_request"
    assert row.source == UsageRecord.Source.OTLP_LOG
    assert row.external_session_id == CLAUDE_SESSION
    assert row.occurred_at == dt.datetime.fromtimestamp(p.T0 / 1e9, tz=dt.UTC)


def test_string_values_and_the_exact_micros(agent_client, claude_session):
    older = p.claude_api_request(CLAUDE_SESSION, sequence=1, as_strings=True, cost_usd="0.5")
    micros = p.claude_api_request(CLAUDE_SESSION, sequence=2, cost_usd=0.1 + 0.2, cost_usd_micros=300_001)

    response = post(agent_client, LOGS, p.as_json(p.logs_json(older, micros)), JSON)

    assert response.status_code == 200
    rows = UsageRecord.objects.order_by("cost_usd")
    assert [(r.input_tokens, r.cost_usd) for r in rows] == [(1200, Decimal("0.300001")), (1200, Decimal("0.5"))]


def test_protobuf_and_gzip_bodies_answer_in_protobuf(agent_client, claude_session):
    body = p.logs_protobuf(
        p.claude_api_request(CLAUDE_SESSION, sequence=1), p.claude_api_request(CLAUDE_SESSION, sequence=2)
    )

    response = post(agent_client, LOGS, p.gzipped(body), PROTOBUF, HTTP_CONTENT_ENCODING="gzip")

    assert response.status_code == 200
    assert response["Content-Type"] == PROTOBUF
    answer = ExportLogsServiceResponse()
    answer.ParseFromString(response.content)
    assert not answer.HasField("partial_success")
    assert UsageRecord.objects.filter(session=claude_session).count() == 2


def test_gzipped_json(agent_client, claude_session):
    body = p.gzipped(p.as_json(p.logs_json(p.claude_api_request(CLAUDE_SESSION))))

    response = post(agent_client, LOGS, body, "application/json; charset=utf-8", HTTP_CONTENT_ENCODING="gzip")

    assert response.status_code == 200
    assert UsageRecord.objects.get().session == claude_session


def test_an_exporter_retrying_the_same_batch_counts_once_in_either_encoding(agent_client, claude_session):
    records = [p.claude_api_request(CLAUDE_SESSION, sequence=n) for n in (1, 2, 3)]

    first = post(agent_client, LOGS, p.as_json(p.logs_json(*records)), JSON)
    again = post(agent_client, LOGS, p.as_json(p.logs_json(*records)), JSON)
    as_protobuf = post(agent_client, LOGS, p.logs_protobuf(*records), PROTOBUF)

    assert (first.status_code, again.status_code, as_protobuf.status_code) == (200, 200, 200)
    assert UsageRecord.objects.count() == 3


def test_the_same_record_twice_in_one_batch_is_stored_once(agent_client, claude_session):
    record = p.claude_api_request(CLAUDE_SESSION)

    response = post(agent_client, LOGS, p.as_json(p.logs_json(record, record)), JSON)

    assert response.status_code == 200
    assert UsageRecord.objects.count() == 1


def test_another_agents_session_is_never_written(agent_client, other_agent):
    theirs = SessionFactory(agent=other_agent, id=CLAUDE_SESSION, task=TaskFactory())

    response = post(agent_client, LOGS, p.as_json(p.logs_json(p.claude_api_request(CLAUDE_SESSION))), JSON)

    assert response.status_code == 200
    row = UsageRecord.objects.get()
    assert row.agent == agent_client.agent  # the key's agent: usage is never moved to another agent
    assert row.session is None
    assert row.task is None
    assert row.external_session_id == CLAUDE_SESSION
    assert not theirs.usage_records.exists()


def test_an_unknown_session_is_kept_on_the_agent(agent_client):
    response = post(agent_client, LOGS, p.as_json(p.logs_json(p.claude_api_request("nobody-knows"))), JSON)

    assert response.status_code == 200
    row = UsageRecord.objects.get()
    assert (row.agent, row.session, row.external_session_id) == (agent_client.agent, None, "nobody-knows")


def test_a_run_key_puts_claude_codes_own_session_id_on_the_runs_session(make_agent_client, agent):
    # Inside a run Claude Code's session id is uuid5 of the run's session id, not the session id.
    run_session = SessionFactory(agent=agent, id="run-session-1", task=TaskFactory())
    sibling = SessionFactory(agent=agent, id=CLAUDE_SESSION)
    client = make_agent_client(agent)
    AgentApiKey.objects.filter(pk=client.api_key.pk).update(session=run_session)

    response = post(client, LOGS, p.as_json(p.logs_json(p.claude_api_request(CLAUDE_SESSION))), JSON)

    assert response.status_code == 200
    row = UsageRecord.objects.get()
    assert row.session == run_session  # not the sibling: a bound key writes only to its session
    assert row.task == run_session.task
    assert not sibling.usage_records.exists()


def test_invalid_values_are_a_partial_success_and_the_valid_records_stay(agent_client, claude_session):
    records = [
        p.claude_api_request(CLAUDE_SESSION, sequence=1),
        p.claude_api_request(CLAUDE_SESSION, sequence=2, input_tokens=-5),
        p.claude_api_request(CLAUDE_SESSION, sequence=3, cost_usd="NaN"),
    ]

    response = post(agent_client, LOGS, p.as_json(p.logs_json(*records)), JSON)

    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedLogRecords"] == "2"
    assert "input_tokens" in partial["errorMessage"]
    assert UsageRecord.objects.count() == 1


def test_event_name_alone_or_the_record_field_is_enough(agent_client, claude_session):
    only_attribute = p.claude_api_request(CLAUDE_SESSION, sequence=1)
    only_attribute["body"] = {"stringValue": "An API request was made"}
    only_field = p.claude_api_request(CLAUDE_SESSION, sequence=2)
    only_field["body"] = {}
    only_field["attributes"] = [a for a in only_field["attributes"] if a["key"] != "event.name"]
    only_field["eventName"] = "claude_code.api_request"

    response = post(agent_client, LOGS, p.as_json(p.logs_json(only_attribute, only_field)), JSON)

    assert response.status_code == 200
    assert UsageRecord.objects.count() == 2


def test_gen_ai_spans_in_json_become_a_model_call_and_a_tool_call(agent_client, claude_session):
    response = post(agent_client, TRACES, p.as_json(p.gen_ai_spans(CLAUDE_SESSION)), JSON)

    assert response.status_code == 200
    assert response.json() == {}
    chat = UsageRecord.objects.get(tool_name="")
    assert (chat.model, chat.operation, chat.input_tokens, chat.output_tokens, chat.cache_read_tokens) == (
        "gpt-4o-2024-08-06",
        "chat",
        900,
        120,
        300,
    )
    assert chat.duration_ms == 1500
    assert chat.session == claude_session
    assert chat.source == UsageRecord.Source.OTLP_SPAN
    tool = UsageRecord.objects.get(tool_name="get_weather")
    assert (tool.operation, tool.input_tokens, tool.duration_ms, tool.session) == (
        "execute_tool",
        0,
        50,
        claude_session,
    )
    assert UsageRecord.objects.count() == 2  # the invoke_agent span's sum is not counted again


def test_gen_ai_spans_in_gzipped_protobuf_and_their_retry(agent_client, claude_session):
    body = p.gzipped(p.traces_protobuf(p.gen_ai_spans(CLAUDE_SESSION)))

    first = post(agent_client, TRACES, body, PROTOBUF, HTTP_CONTENT_ENCODING="gzip")
    again = post(agent_client, TRACES, p.as_json(p.gen_ai_spans(CLAUDE_SESSION)), JSON)

    assert (first.status_code, again.status_code) == (200, 200)
    answer = ExportTraceServiceResponse()
    answer.ParseFromString(first.content)
    assert not answer.HasField("partial_success")
    assert UsageRecord.objects.count() == 2


def test_the_conversation_id_names_the_session_too(agent_client, claude_session):
    document = p.gen_ai_spans("ignored")
    document["resourceSpans"][0]["resource"]["attributes"] = []
    chat = document["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    chat["attributes"].append({"key": "gen_ai.conversation.id", "value": {"stringValue": CLAUDE_SESSION}})

    post(agent_client, TRACES, p.as_json(document), JSON)

    assert UsageRecord.objects.get(operation="chat").session == claude_session
    assert UsageRecord.objects.get(operation="execute_tool").session is None


def test_metrics_are_taken_and_not_stored(agent_client):
    body = ExportMetricsServiceRequest()
    metric = body.resource_metrics.add().scope_metrics.add().metrics.add()
    metric.name = "claude_code.token.usage"
    metric.sum.data_points.add(as_int=1200)

    protobuf = post(agent_client, METRICS, body.SerializeToString(), PROTOBUF)
    as_json = post(agent_client, METRICS, b'{"resourceMetrics": []}', JSON)

    assert (protobuf.status_code, as_json.status_code) == (200, 200)
    assert protobuf["Content-Type"] == PROTOBUF
    assert UsageRecord.objects.count() == 0


def test_an_empty_export_is_fine(agent_client):
    assert post(agent_client, LOGS, b"", PROTOBUF).status_code == 200
    assert post(agent_client, TRACES, b"{}", JSON).json() == {}
    assert UsageRecord.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "content_type", "headers"),
    [
        (b"\xff\xff\xff\xff", PROTOBUF, {}),
        (b"{not json", JSON, {}),
        (b" \n", JSON, {}),
        (b"[]", JSON, {}),
        (b'{"resourceLogs": "nope"}', JSON, {}),
        (b'{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"traceId": "zz"}]}]}]}', JSON, {}),
        (b"not gzip at all", PROTOBUF, {"HTTP_CONTENT_ENCODING": "gzip"}),
        (p.gzipped(b"\xff\xff\xff\xff"), PROTOBUF, {"HTTP_CONTENT_ENCODING": "gzip"}),
        (p.gzipped(p.as_json(p.logs_json(p.claude_api_request("s")))[:-1]), JSON, {"HTTP_CONTENT_ENCODING": "gzip"}),
        (p.gzipped(p.as_json(p.logs_json(p.claude_api_request("s"))))[:-8], JSON, {"HTTP_CONTENT_ENCODING": "gzip"}),
    ],
)
def test_a_bad_body_is_a_400_status_in_its_own_encoding_and_stores_nothing(agent_client, body, content_type, headers):
    response = post(agent_client, LOGS, body, content_type, **headers)

    assert response.status_code == 400
    # A google.rpc.Status in the OTLP JSON mapping, also for a protobuf request (see the view).
    assert response["Content-Type"] == JSON
    answer = response.json()
    assert answer["code"] == 3
    assert answer["message"]
    assert UsageRecord.objects.count() == 0


@pytest.mark.parametrize(
    ("content_type", "headers"),
    [("text/plain", {}), ("application/octet-stream", {}), (JSON, {"HTTP_CONTENT_ENCODING": "br"})],
)
def test_an_unsupported_content_type_or_encoding_is_a_415(agent_client, claude_session, content_type, headers):
    body = p.as_json(p.logs_json(p.claude_api_request(CLAUDE_SESSION)))

    response = post(agent_client, LOGS, body, content_type, **headers)

    assert response.status_code == 415
    assert response.json()["message"]
    assert UsageRecord.objects.count() == 0


def test_a_body_over_the_limit_is_a_413_also_when_it_inflates_past_it(agent_client, settings, claude_session):
    settings.OTLP_MAX_BODY_BYTES = 4096
    bomb = p.gzipped(b"\x00" * 10_000_000)  # about 10 KB of gzip, 10 MB inflated
    big = b"{" + b" " * 5000 + b"}"

    inflated = post(agent_client, LOGS, bomb, PROTOBUF, HTTP_CONTENT_ENCODING="gzip")
    declared = post(agent_client, LOGS, big, JSON)

    assert len(bomb) < 4096 * 4
    assert inflated.status_code == 413
    assert inflated.json()["code"] == 8
    assert declared.status_code == 413
    assert "4096" in declared.json()["message"]
    assert UsageRecord.objects.count() == 0


def test_no_key_is_a_401_and_a_runner_key_a_403(api_client_factory, make_agent_client):
    runner = make_agent_client(AgentFactory(slug="runner-1"), scopes=[AgentApiKey.Scope.RUN])
    body = p.as_json(p.logs_json(p.claude_api_request(CLAUDE_SESSION)))

    anonymous = post(api_client_factory(), LOGS, body, JSON)
    refused = post(runner, LOGS, body, JSON)

    assert anonymous.status_code == 401
    assert refused.status_code == 403
    assert "agent or orchestrate" in refused.json()["message"]
    assert UsageRecord.objects.count() == 0


def test_staff_in_a_browser_is_not_an_exporter(staff_client):
    response = post(staff_client, LOGS, p.as_json(p.logs_json(p.claude_api_request("s"))), JSON)

    assert response.status_code == 403
    assert UsageRecord.objects.count() == 0


@pytest.fixture
def api_client_factory():
    from rest_framework.test import APIClient

    return APIClient


def test_nul_bytes_and_long_strings_are_trimmed_not_a_500(agent_client):
    record = p.claude_api_request("s" * 500)
    record["attributes"] = [a for a in record["attributes"] if a["key"] != "model"]
    record["attributes"].append({"key": "model", "value": {"stringValue": "claude\u0001" + "x" * 500}})

    response = post(agent_client, LOGS, p.logs_protobuf(record), PROTOBUF)

    assert response.status_code == 200
    row = UsageRecord.objects.get()
    assert len(row.model) == 200
    assert len(row.external_session_id) == 128


def test_unknown_fields_are_ignored_whatever_they_hold(agent_client, claude_session):
    document = p.logs_json(p.claude_api_request(CLAUDE_SESSION))
    document["resourceLogs"][0]["future\u0000field"] = {"x": "\ud800", "n": 2**80}
    body = json.dumps(document).encode()

    response = post(agent_client, LOGS, body, JSON)

    assert response.status_code == 200
    assert UsageRecord.objects.get().session == claude_session


def test_a_nul_in_a_kept_string_is_dropped(agent_client):
    record = p.claude_api_request("sess\u0000ion")
    record["attributes"].append({"key": "model", "value": {"stringValue": "a\u0000b"}})
    record["attributes"] = [a for a in record["attributes"] if a["key"] != "model"] + [record["attributes"][-1]]

    response = post(agent_client, LOGS, json.dumps(p.logs_json(record)).encode(), JSON)

    assert response.status_code == 200
    row = UsageRecord.objects.get()
    assert (row.model, row.external_session_id) == ("ab", "session")


def test_a_request_with_no_body_at_all_is_an_empty_export(agent_client):
    response = agent_client.post(LOGS)

    assert response.status_code == 200
    assert response["Content-Type"] == JSON
    assert response.json() == {}
    assert UsageRecord.objects.count() == 0
