"""The real Claude Code CLI (tests/runners/claude_cli.py: pinned, against the scripted Messages API of
tests/runners/fake_anthropic.py) exporting its own telemetry to the live app, with the environment
the README shows and the runner sets: its claude_code.api_request log records become usage rows of
the session its hook opened under Claude Code's session id. Both OTLP protocols it offers."""

import subprocess
import time
import uuid

import pytest

from sessions_app.models import AgentSession
from tests.runners.claude_cli import claude_env, hook_settings, require_claude
from tests.runners.fake_anthropic import INPUT_TOKENS, OUTPUT_TOKENS, FakeAnthropic, text, tool_use
from usage.models import UsageRecord

pytestmark = pytest.mark.django_db(transaction=True)


def _run_claude(claude, *, fake, server_url: str, key: str, session: str, protocol: str, tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    env = claude_env(
        home=tmp_path / "home",
        api_url=fake.url,
        SWITCHYARD_URL=server_url,
        SWITCHYARD_KEY=key,
        SWITCHYARD_STATE_DIR=str(tmp_path / "switchyard-state"),
        SWITCHYARD_HOOK_BUDGET="5",
        CLAUDE_CODE_ENABLE_TELEMETRY="1",
        OTEL_LOGS_EXPORTER="otlp",
        OTEL_METRICS_EXPORTER="otlp",
        OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
        OTEL_EXPORTER_OTLP_ENDPOINT=f"{server_url}/api/v1/otlp",
        OTEL_EXPORTER_OTLP_HEADERS=f"Authorization=Bearer {key}",
        OTEL_LOGS_EXPORT_INTERVAL="500",
        OTEL_METRIC_EXPORT_INTERVAL="1000",
    )
    argv = [str(claude), "-p", "Write notes.txt", "--output-format", "stream-json", "--verbose"]
    argv += ["--allowedTools", "Bash", "--settings", hook_settings(), "--session-id", session]
    return subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=180)


def _rows_for(session: str, *, at_least: int, wait: float = 20.0):
    deadline = time.monotonic() + wait
    while True:
        rows = list(UsageRecord.objects.filter(external_session_id=session).order_by("occurred_at", "id"))
        if len(rows) >= at_least or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


@pytest.mark.parametrize("protocol", ["http/json", "http/protobuf"])
def test_claude_codes_api_requests_become_usage_rows_of_its_session(sy_server, agent_key, tmp_path, protocol):
    claude = require_claude()
    session = str(uuid.uuid4())
    script = [
        tool_use("Bash", {"command": "echo 'made by claude' > notes.txt", "description": "write the notes"}),
        text("Done: notes.txt is written."),
    ]
    with FakeAnthropic(script) as fake:
        done = _run_claude(
            claude,
            fake=fake,
            server_url=sy_server.url,
            key=agent_key,
            session=session,
            protocol=protocol,
            tmp_path=tmp_path,
        )
        main = fake.main_requests()
        traffic = fake.describe()

    assert done.returncode == 0, f"{done.stderr}\n{traffic}"
    assert len(main) == 2, traffic
    rows = _rows_for(session, at_least=2)
    opened = AgentSession.objects.get(pk=session)  # the hook opened it under Claude Code's own id
    assert len(rows) >= 2, f"{[(r.model, r.input_tokens) for r in rows]}\n{sy_server.output()}"
    assert {r.session_id for r in rows} == {opened.pk}
    assert {r.agent_id for r in rows} == {opened.agent_id}
    main_rows = [r for r in rows if r.input_tokens == INPUT_TOKENS and r.output_tokens == OUTPUT_TOKENS]
    assert len(main_rows) >= 2, [(r.model, r.input_tokens, r.output_tokens) for r in rows]
    assert all(r.model and r.operation == "api_request" and r.cost_usd > 0 for r in main_rows)
    assert all(r.duration_ms is not None for r in main_rows)
