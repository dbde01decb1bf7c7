"""Who gives an opening session its workspace (sessions_app/session_hooks.py): workspaces registers
its services from ``ready()``, as sessions_app may not import them."""

import pytest

from sessions_app import session_hooks
from sessions_app.session_hooks import (
    session_workspace_create,
    session_workspace_discard_empty,
    session_workspace_provider_register,
    session_workspace_shared,
)
from workspaces.files.services import workspace_create_for_session, workspace_discard_empty, workspace_shared


@pytest.fixture
def no_provider(monkeypatch):
    # The registered provider, put back as it was after the test (workspaces', in the running app).
    monkeypatch.setattr(session_hooks._workspace_provider, "_registered", None)


def test_in_the_running_app_the_provider_is_workspaces_services():
    assert session_hooks._workspace_provider.get() == {
        "shared": workspace_shared,
        "create": workspace_create_for_session,
        "discard": workspace_discard_empty,
    }


def test_each_call_goes_to_the_registered_function_with_its_arguments(no_provider):
    # given
    calls = []
    session_workspace_provider_register(
        shared=lambda: calls.append(("shared",)) or "the shared one",
        create=lambda *, folder_name: calls.append(("create", folder_name)) or "a new one",
        discard=lambda *, workspace: calls.append(("discard", workspace)),
    )

    # when
    answers = [
        session_workspace_shared(),
        session_workspace_create(folder_name="session_x"),
        session_workspace_create(),
        session_workspace_discard_empty(workspace="a new one"),
    ]

    # then
    assert answers == ["the shared one", "a new one", "a new one", None]
    assert calls == [("shared",), ("create", "session_x"), ("create", None), ("discard", "a new one")]


@pytest.mark.parametrize(
    "call",
    [
        session_workspace_shared,
        lambda: session_workspace_create(folder_name=None),
        lambda: session_workspace_discard_empty(workspace=None),
    ],
)
def test_without_a_provider_each_call_is_an_error_naming_the_workspaces_app(no_provider, call):
    with pytest.raises(RuntimeError, match="the workspaces app must be installed"):
        call()
