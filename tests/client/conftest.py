# The live-server fixtures of the client, CLI and hook tests (see live.py).
from tests.client.live import agent_key, dead_url, other_key, server_roots, sy, sy_server  # noqa: F401
