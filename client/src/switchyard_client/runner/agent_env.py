"""The environment a run's agent starts with, which relays Claude Code's and Gemini CLI's telemetry to Switchyard."""

from __future__ import annotations

import os
from pathlib import Path

from switchyard_client.runner.config import ProviderConfig
from switchyard_client.runner.state import RunState


def agent_env(
    state: RunState, *, provider: ProviderConfig, url: str, otlp_endpoint: str, prompt: str, hook_dir: Path
) -> dict[str, str]:
    """This runner's environment without its keys, then the provider's ``env`` table, Claude Code's
    and Gemini CLI's telemetry (to ``otlp_endpoint``, the runner's relay) and the run's SWITCHYARD_* variables."""
    s, task = state, state.assignment.get("task") or {}
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SWITCHYARD_RUNNER_KEY", "SWITCHYARD_KEY", "SWITCHYARD_SESSION")
    }
    env.update(provider.env)
    # Claude Code's telemetry (tokens and cost per request, README "Tokens and cost") goes, with the
    # run's key, to the runner's relay (otlp_relay.py), which keeps it on disk until the server's
    # OTLP receiver has it; a provider's own env table may send it elsewhere.
    telemetry = {
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "OTEL_LOGS_EXPORTER": "otlp",
        "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_endpoint,
        "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer {s.agent_key}",
        # Gemini CLI's (0.61): its own switches, over its settings.json; OTLP/HTTP (JSON) to the same relay,
        # with the header above. Its token counts are on its llm_call spans, which carry them only with
        # traces on; prompts and answers stay out of them.
        "GEMINI_TELEMETRY_ENABLED": "true",
        "GEMINI_TELEMETRY_TARGET": "local",
        "GEMINI_TELEMETRY_OTLP_ENDPOINT": otlp_endpoint,
        "GEMINI_TELEMETRY_OTLP_PROTOCOL": "http",
        "GEMINI_TELEMETRY_TRACES_ENABLED": "true",
        "GEMINI_TELEMETRY_LOG_PROMPTS": "false",
    }
    env.update({name: value for name, value in telemetry.items() if name not in provider.env})
    env.update(
        SWITCHYARD_URL=url,
        SWITCHYARD_SESSION=s.session,
        SWITCHYARD_KEY=s.agent_key,
        SWITCHYARD_RUN=str(s.id),
        SWITCHYARD_ATTEMPT=str(s.attempt),
        # Marks every process of this attempt, also those that leave its process group: the run's
        # watchdog and the runner find and stop them all (watchdog.py).
        SWITCHYARD_FENCE=s.fence,
        SWITCHYARD_TASK=str(task.get("id") or ""),
        SWITCHYARD_TASK_TITLE=str(task.get("title") or ""),
        SWITCHYARD_TASK_DESCRIPTION=str(task.get("description") or ""),
        SWITCHYARD_WORKDIR=s.workdir,
        SWITCHYARD_PROMPT=prompt,
        # The hook's spool and memory per run: a spooled request is replayed with this run's key only.
        SWITCHYARD_STATE_DIR=str(hook_dir),
    )
    return env
