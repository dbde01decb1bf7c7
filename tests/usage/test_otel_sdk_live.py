"""The real OpenTelemetry SDK and OTLP/HTTP exporters (opentelemetry-sdk,
opentelemetry-exporter-otlp-proto-http) exporting to the app under uvicorn: logs shaped as Claude
Code's api_request events, and GenAI spans."""

from decimal import Decimal

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import LogRecordExportResult, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult

from sessions_app.models import Agent
from tests.factories import SessionFactory, TaskFactory
from tests.usage import payloads as p
from usage.models import UsageRecord

pytestmark = pytest.mark.django_db(transaction=True)

CLAUDE_SESSION = "0b9d7c6e-1f2a-4c3b-8d4e-5f6a7b8c9d0e"


def _api_request(sequence: int) -> dict:
    # As Claude Code sets them: every value a string.
    return {
        "session.id": CLAUDE_SESSION,
        "event.name": "api_request",
        "event.timestamp": "2026-11-26T12:00:00.000Z",
        "event.sequence": sequence,
        "model": "claude-opus-4-1-20250805",
        "input_tokens": "2000",
        "output_tokens": "500",
        "cache_read_tokens": "10000",
        "cache_creation_tokens": "0",
        "cost_usd": "0.0675",
        "duration_ms": "4100",
    }


class RecordingLogExporter(OTLPLogExporter):
    """The real exporter, keeping each batch and what the export answered."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.calls: list[tuple[tuple, LogRecordExportResult]] = []

    def export(self, batch):
        result = super().export(batch)
        self.calls.append((tuple(batch), result))
        return result


@pytest.fixture
def claude_session(agent_key):
    agent = Agent.objects.get(slug="claude-1")
    return SessionFactory(agent=agent, id=CLAUDE_SESSION, task=TaskFactory(title="Live"))


def _logger_provider(exporter) -> LoggerProvider:
    provider = LoggerProvider(resource=Resource.create({"service.name": "claude-code", "service.version": "2.1.332"}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    return provider


def test_the_sdks_log_exporter_gzip_protobuf_becomes_usage_and_a_resend_adds_nothing(
    sy_server,
    agent_key,
    claude_session,
):
    exporter = RecordingLogExporter(
        endpoint=f"{sy_server.url}/api/v1/otlp/v1/logs",
        headers={"Authorization": f"Bearer {agent_key}"},
        compression=Compression.Gzip,
        timeout=10,
    )
    provider = _logger_provider(exporter)
    logger = provider.get_logger("com.anthropic.claude_code.events")

    for sequence in (1, 2):
        logger.emit(body="claude_code.api_request", attributes=_api_request(sequence))
    logger.emit(body="claude_code.user_prompt", attributes={"session.id": CLAUDE_SESSION, "event.name": "user_prompt"})
    provider.force_flush()
    batch, _ = exporter.calls[0]
    resent = exporter.export(batch)  # as an exporter does when the answer was lost
    provider.shutdown()

    assert [result for _, result in exporter.calls] == [LogRecordExportResult.SUCCESS] * 4
    assert resent == LogRecordExportResult.SUCCESS
    rows = UsageRecord.objects.order_by("id")
    assert rows.count() == 2
    assert {(r.session_id, r.task_id, r.input_tokens, r.output_tokens, r.cache_read_tokens) for r in rows} == {
        (CLAUDE_SESSION, claude_session.task_id, 2000, 500, 10000)
    }
    assert sum(r.cost_usd for r in rows) == Decimal("0.1350")


def test_the_exporter_configured_by_the_runners_environment(sy_server, agent_key, claude_session, monkeypatch):
    # What the runner sets for a run (and the README shows): the base endpoint and the header string.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"{sy_server.url}/api/v1/otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer {agent_key}")
    exporter = RecordingLogExporter(timeout=10)
    provider = _logger_provider(exporter)

    provider.get_logger("claude").emit(body="claude_code.api_request", attributes=_api_request(7))
    provider.shutdown()

    assert [result for _, result in exporter.calls] == [LogRecordExportResult.SUCCESS]
    assert UsageRecord.objects.get().session_id == CLAUDE_SESSION


def test_a_wrong_key_is_refused_and_nothing_stored(sy_server, claude_session):
    exporter = RecordingLogExporter(
        endpoint=f"{sy_server.url}/api/v1/otlp/v1/logs", headers={"Authorization": "Bearer sy_nope_nope"}, timeout=10
    )
    provider = _logger_provider(exporter)

    provider.get_logger("claude").emit(body="claude_code.api_request", attributes=_api_request(1))
    provider.shutdown()

    assert [result for _, result in exporter.calls] == [LogRecordExportResult.FAILURE]
    assert UsageRecord.objects.count() == 0


def test_the_sdks_span_exporter_with_gen_ai_attributes(sy_server, agent_key, claude_session):
    results = []

    class Recording(OTLPSpanExporter):
        def export(self, spans):
            results.append(super().export(spans))
            return results[-1]

    provider = TracerProvider(resource=Resource.create({"service.name": "weather-agent", "session.id": CLAUDE_SESSION}))
    provider.add_span_processor(
        SimpleSpanProcessor(
            Recording(
                endpoint=f"{sy_server.url}/api/v1/otlp/v1/traces",
                headers={"Authorization": f"Bearer {agent_key}"},
                timeout=10,
            )
        )
    )
    tracer = provider.get_tracer("openai-agents")

    with tracer.start_as_current_span("invoke_agent weather", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span(
            "chat gpt-4o",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.response.model": "gpt-4o-2024-08-06",
                "gen_ai.usage.input_tokens": 812,
                "gen_ai.usage.output_tokens": 64,
            },
        ):
            pass
        with tracer.start_as_current_span(
            "execute_tool get_weather",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"},
        ):
            pass
        with tracer.start_as_current_span("GET /weather", attributes={"http.request.method": "GET"}):
            pass
    provider.shutdown()

    assert results == [SpanExportResult.SUCCESS] * 4
    chat = UsageRecord.objects.get(operation="chat")
    assert (chat.model, chat.input_tokens, chat.output_tokens, chat.session_id) == (
        "gpt-4o-2024-08-06",
        812,
        64,
        CLAUDE_SESSION,
    )
    tool = UsageRecord.objects.get(operation="execute_tool")
    assert (tool.tool_name, tool.session_id) == ("get_weather", CLAUDE_SESSION)
    assert UsageRecord.objects.count() == 2


def test_claude_codes_http_json_export_through_the_live_server(sy_server, agent_key, claude_session):
    # Claude Code's OTEL_EXPORTER_OTLP_PROTOCOL=http/json: the JSON mapping, the bearer header.
    body = p.as_json(p.logs_json(p.claude_api_request(CLAUDE_SESSION)))
    headers = {"Authorization": f"Bearer {agent_key}", "Content-Type": "application/json"}

    plain = httpx.post(f"{sy_server.url}/api/v1/otlp/v1/logs", content=body, headers=headers, timeout=10)
    zipped = httpx.post(
        f"{sy_server.url}/api/v1/otlp/v1/logs",
        content=p.gzipped(body),
        headers={**headers, "Content-Encoding": "gzip"},
        timeout=10,
    )
    broken = httpx.post(f"{sy_server.url}/api/v1/otlp/v1/logs", content=b"{", headers=headers, timeout=10)

    assert (plain.status_code, plain.json()) == (200, {})
    assert zipped.status_code == 200
    assert broken.status_code == 400
    assert broken.json()["code"] == 3
    assert UsageRecord.objects.get().session_id == CLAUDE_SESSION
