# The live-server fixtures (tests/client/live.py) for the tests with the real OpenTelemetry exporters.
from tests.client.live import agent_key, server_roots, sy_server  # noqa: F401
