"""An agent that reports its usage as Claude Code does: through the real OpenTelemetry SDK and its
OTLP/HTTP exporters, configured only by the environment the runner gives it
(OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS), with batching processors whose last
export happens as the process exits.

    python otel_agent.py

``OTEL_AGENT_READY`` names a file it creates once it runs; it then waits for the file
``OTEL_AGENT_GO`` to appear (the test stops the server meanwhile), emits ``OTEL_AGENT_REQUESTS``
api_request log records (1000 input and 200 output tokens each) and one GenAI chat span (300 and
50), shuts its providers down (the final export) and writes what each export answered to
``OTEL_AGENT_DONE``. Exit 0 when every export succeeded, 1 otherwise.
"""

import json
import os
import sys
import time
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

INPUT, OUTPUT = 1000, 200
SPAN_INPUT, SPAN_OUTPUT = 300, 50
results: list[str] = []


class Logs(OTLPLogExporter):
    def export(self, batch):
        answer = super().export(batch)
        results.append(f"logs:{answer.name}")
        return answer


class Spans(OTLPSpanExporter):
    def export(self, spans):
        answer = super().export(spans)
        results.append(f"traces:{answer.name}")
        return answer


def main() -> int:
    Path(os.environ["OTEL_AGENT_READY"]).write_text(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", ""))
    go = Path(os.environ["OTEL_AGENT_GO"])
    while not go.exists():
        time.sleep(0.05)
    resource = Resource.create({"service.name": "claude-code", "service.version": "2.1.332"})
    # Short timeouts: against a server that is away, the exporters give up as Claude Code's do.
    logs = LoggerProvider(resource=resource)
    logs.add_log_record_processor(BatchLogRecordProcessor(Logs(timeout=3)))
    traces = TracerProvider(resource=resource)
    traces.add_span_processor(BatchSpanProcessor(Spans(timeout=3)))
    logger = logs.get_logger("com.anthropic.claude_code.events")
    for sequence in range(int(os.environ.get("OTEL_AGENT_REQUESTS", "3"))):
        attributes = {
            "event.name": "api_request",
            "event.sequence": sequence,
            "model": "claude-sonnet-4-5",
            "input_tokens": str(INPUT),
            "output_tokens": str(OUTPUT),
            "cache_read_tokens": "0",
            "cache_creation_tokens": "0",
            "cost_usd": "0.006",
        }
        logger.emit(body="claude_code.api_request", attributes=attributes)
    span_attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": SPAN_INPUT,
        "gen_ai.usage.output_tokens": SPAN_OUTPUT,
    }
    with traces.get_tracer("agent").start_as_current_span("chat gpt-4o", attributes=span_attributes):
        pass
    logs.shutdown()
    traces.shutdown()
    Path(os.environ["OTEL_AGENT_DONE"]).write_text(json.dumps(results))
    return 0 if results and all(result.endswith(":SUCCESS") for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
