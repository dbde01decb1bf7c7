# The live-server fixtures of the client, CLI and hook tests (see live.py), and a `switchyard hook`
# process started on a payload, for the tests of questions a person answers (hook_person.py).
from tests.client.hook_person import start_hook  # noqa: F401
from tests.client.live import agent_key, dead_url, other_key, server_roots, sy, sy_server  # noqa: F401
