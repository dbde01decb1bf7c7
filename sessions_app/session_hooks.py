"""What apps above sessions_app check when a session is opened on a task, and do when a session
changes status or an agent shows a sign of life, without sessions_app importing them (the layers in
pyproject); and who gives an opening session its workspace.

The same pattern as board/claim_gates.py and ledger/tool_use_gates.py: an app registers a hook from
``AppConfig.ready()`` (here composition/apps.py, which wires board and workspaces in), and the
service calls every hook at the point where it used to call that app itself, inside its own
transaction and locks, so what happens and in which order is unchanged. Chosen over a "close"
service in the top layer that the views call: every caller of ``session_transition`` (the API, the
admin, runs) and of a heartbeat (the key authentication, the heartbeat endpoints) keeps the effect
without having to know about it.

The session workspace is not a hook list but one provider (workspaces/apps.py registers
workspaces.files.services' functions): ``session_open`` needs exactly one workspace back, made in
its transaction, and a session never opens without one, so nothing registered is an error.
"""

from collections.abc import Callable

_task_gates: dict[str, Callable] = {}
_status_hooks: dict[str, Callable] = {}
_alive_hooks: dict[str, Callable] = {}


def session_task_gate_register(*, name: str, gate: Callable) -> None:
    """``gate(task=..., agent=...)`` raises a DomainError when a session of ``agent`` may not name
    ``task`` (the board's: one another agent holds). Registered by name: ``ready()`` may run more than once."""
    _task_gates[name] = gate


def session_task_gates_run(*, task, agent) -> None:
    for gate in _task_gates.values():
        gate(task=task, agent=agent)


def session_status_hook_register(*, name: str, hook: Callable) -> None:
    """``hook(actor=..., session=..., previous=..., status=...)`` runs when a session has moved from
    ``previous`` to ``status``, in the transition's transaction (the session row locked). Registered by
    name: ``ready()`` may run more than once."""
    _status_hooks[name] = hook


def session_status_changed(*, actor, session, previous: str, status: str) -> None:
    for hook in _status_hooks.values():
        hook(actor=actor, session=session, previous=previous, status=status)


def agent_alive_hook_register(*, name: str, hook: Callable) -> None:
    """``hook(agent=...)`` runs when an agent's sign of life was written (a heartbeat, a request):
    what it holds elsewhere must not expire while it works."""
    _alive_hooks[name] = hook


def agent_alive_hooks_run(*, agent) -> None:
    for hook in _alive_hooks.values():
        hook(agent=agent)


_workspace_provider: dict[str, Callable] = {}


def session_workspace_provider_register(*, shared: Callable, create: Callable, discard: Callable) -> None:
    """``shared()`` returns the flat shared workspace, ``create(folder_name=...)`` a new session folder
    (a name of None: the provider picks it), ``discard(workspace=...)`` removes one made for a session
    that was never stored. Registering again replaces them: ``ready()`` may run more than once."""
    _workspace_provider.update(shared=shared, create=create, discard=discard)


def _workspace_call(name: str) -> Callable:
    call = _workspace_provider.get(name)
    if call is None:
        raise RuntimeError("No session workspace provider is registered: the workspaces app must be installed.")
    return call


def session_workspace_shared():
    return _workspace_call("shared")()


def session_workspace_create(*, folder_name: str | None = None):
    return _workspace_call("create")(folder_name=folder_name)


def session_workspace_discard_empty(*, workspace) -> None:
    _workspace_call("discard")(workspace=workspace)
