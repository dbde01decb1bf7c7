"""The kernel's extension points (config/extension_points.py): hooks an app above registers by name
from ``ready()``, called in order, and a provider whose absence is an error naming the app."""

import pytest

from config.extension_points import Hooks, Provider


def _recorder(calls: list, label: str):
    def hook(**arguments):
        calls.append((label, arguments))
        return label

    return hook


def test_hooks_are_called_with_the_same_arguments_in_the_order_they_were_registered():
    # given
    calls = []
    hooks = Hooks()
    hooks.register(name="b", hook=_recorder(calls, "second-name-first"))
    hooks.register(name="a", hook=_recorder(calls, "first-name-second"))

    # when
    answers = hooks.call_each(agent="agent-1")

    # then: registration order, not name order
    assert answers == ["second-name-first", "first-name-second"]
    assert calls == [("second-name-first", {"agent": "agent-1"}), ("first-name-second", {"agent": "agent-1"})]


def test_registering_a_name_again_replaces_its_hook_in_the_same_place():
    # given: ready() ran twice, the second time with a new callable for "a"
    hooks = Hooks()
    hooks.register(name="a", hook=lambda: "old a")
    hooks.register(name="b", hook=lambda: "b")
    hooks.register(name="a", hook=lambda: "new a")

    # then: one "a", still first
    assert hooks.call_each() == ["new a", "b"]
    assert [name for name, _ in hooks.items()] == ["a", "b"]


def test_iterating_and_items_give_the_registered_callables_in_order():
    def first():
        pass

    def second():
        pass

    hooks = Hooks()
    hooks.register(name="one", hook=first)
    hooks.register(name="two", hook=second)

    assert list(hooks) == [first, second]
    assert list(hooks.items()) == [("one", first), ("two", second)]


def test_no_hooks_registered_calls_nothing_and_answers_nothing():
    hooks = Hooks()

    assert hooks.call_each(agent="agent-1") == []
    assert list(hooks) == [] and list(hooks.items()) == []


def test_a_hook_that_raises_stops_the_ones_after_it():
    # given
    calls = []

    def refuse(**arguments):
        raise ValueError("refused")

    hooks = Hooks()
    hooks.register(name="before", hook=_recorder(calls, "before"))
    hooks.register(name="refuse", hook=refuse)
    hooks.register(name="after", hook=_recorder(calls, "after"))

    # when
    with pytest.raises(ValueError, match="refused"):
        hooks.call_each(task=1)

    # then
    assert calls == [("before", {"task": 1})]


def test_hooks_are_separate_per_instance():
    first, second = Hooks(), Hooks()
    first.register(name="a", hook=lambda: "a")

    assert second.call_each() == []


def test_the_provider_gives_back_what_was_registered():
    def writer():
        pass

    provider = Provider(what="domain event writer", app="ledger")
    provider.register(writer)

    assert provider.get() is writer


def test_registering_a_provider_again_replaces_it():
    provider = Provider(what="domain event writer", app="ledger")
    provider.register("first")
    provider.register("second")

    assert provider.get() == "second"


def test_without_a_registration_the_provider_names_what_is_missing_and_the_app_to_install():
    provider = Provider(what="session workspace provider", app="workspaces")

    with pytest.raises(RuntimeError) as raised:
        provider.get()

    assert str(raised.value) == "No session workspace provider is registered: the workspaces app must be installed."
