from tests.runners.conftest import person, runner, runner_and_key  # noqa: F401 - the runner fixtures
