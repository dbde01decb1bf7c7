# The runner fixtures, and for the live Claude run the live server and a runner offering claude.
from tests.client.live import server_roots, sy_server  # noqa: F401
from tests.runners.conftest import person, runner, runner_and_key  # noqa: F401
from tests.runners.test_runner_claude_e2e import machine, repository  # noqa: F401
