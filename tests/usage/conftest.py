# The live-server fixtures (tests/client/live.py) for the tests with the real OpenTelemetry exporters,
# and `switchyard hook` started on a payload (tests/client/hook_person.py) for the live budget tests.
from tests.client.hook_person import start_hook  # noqa: F401
from tests.client.live import agent_key, server_roots, sy_server  # noqa: F401
