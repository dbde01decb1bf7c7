from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from runners.models import Runner
from sessions_app.keys import api_key_authenticate
from sessions_app.models import Agent, AgentApiKey

pytestmark = pytest.mark.django_db


def _call(*args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("create_runner_key", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_creates_the_runner_its_agent_and_a_run_key_printed_alone_on_the_last_line():
    out, err = _call("build-1", "--label", "linux", "--label", "gpu", "--capacity", "4")

    key = out.strip().splitlines()[-1]
    runner = Runner.objects.select_related("agent").get()
    assert (runner.name, runner.labels, runner.capacity, runner.status) == ("build-1", ["linux", "gpu"], 4, "offline")
    assert runner.agent.slug == "runner-build-1"
    stored = AgentApiKey.objects.get()
    assert (stored.agent_id, stored.scopes, stored.name) == (runner.agent_id, ["run"], "runner build-1")
    assert key not in (stored.key_hash, stored.prefix)
    assert api_key_authenticate(key=key).pk == stored.pk
    assert err == (
        "Created runner 'build-1' (agent 'runner-build-1', labels: linux, gpu, capacity 4); "
        f"new key {stored.prefix}… (scope: run). Store it now: it is not shown again.\n"
    )


def test_an_existing_runner_gets_another_key_and_keeps_its_settings_unless_given():
    _call("build-1", "--label", "linux", "--capacity", "3")

    out, err = _call("build-1")

    assert list(Runner.objects.values_list("name", "labels", "capacity")) == [("build-1", ["linux"], 3)]
    assert AgentApiKey.objects.count() == 2
    assert Agent.objects.count() == 1
    assert err.startswith("Runner 'build-1' (agent 'runner-build-1', labels: linux, capacity 3)")
    _call("build-1", "--capacity", "8")
    assert list(Runner.objects.values_list("labels", "capacity")) == [(["linux"], 8)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no spaces"], "A runner's name must be 1-48 letters"),
        (["x" * 49], "A runner's name must be 1-48 letters"),
        (["build-1", "--capacity", "0"], "capacity must be at least 1"),
        (["build-1", "--label", " "], "Labels must be non-empty strings"),
    ],
)
def test_bad_input_is_a_clear_error_and_creates_nothing(args, message):
    with pytest.raises(CommandError, match=message):
        _call(*args)

    assert (Runner.objects.count(), Agent.objects.count(), AgentApiKey.objects.count()) == (0, 0, 0)


def test_help_explains_the_options():
    from runners.management.commands.create_runner_key import Command

    parser = Command().create_parser("manage.py", "create_runner_key")
    text = " ".join(parser.format_help().split())  # argparse wraps lines

    assert "--label LABEL" in text
    assert "--capacity CAPACITY" in text
    assert "it is shown only this once" in text
    assert "manage.py create_runner_key build-1 --label linux --label gpu --capacity 4" in text
