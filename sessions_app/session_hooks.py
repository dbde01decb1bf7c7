"""What apps above sessions_app check when a session is opened on a task, and do when a session
changes status or an agent shows a sign of life, without sessions_app importing them (the layers in
pyproject); who besides its owner may read a session; and who gives an opening session its workspace.

The pattern of config/extension_points.py: an app registers a hook from ``AppConfig.ready()`` (here
composition/apps.py, which wires board and workspaces in), and the service calls every hook at the
point where it used to call that app itself, inside its own transaction and locks, so what happens
and in which order is unchanged. Chosen over a "close" service in the top layer that the views call:
every caller of ``session_transition`` (the API, the admin, runs) and of a heartbeat (the key
authentication, the heartbeat endpoints) keeps the effect without having to know about it.

The session workspace is not a hook list but one provider (workspaces/apps.py registers
workspaces.files.services' functions): ``session_open`` needs exactly one workspace back, made in
its transaction, and a session never opens without one, so nothing registered is an error.
"""

from collections.abc import Callable

from config.extension_points import Hooks, Provider

_task_gates = Hooks()
_status_hooks = Hooks()
_alive_hooks = Hooks()
_read_grants = Hooks()
_opened_hooks = Hooks()


def session_task_gate_register(*, name: str, gate: Callable) -> None:
    """``gate(task=..., agent=...)`` raises a DomainError when a session of ``agent`` may not name
    ``task`` (the board's: one another agent holds). Registered by name: ``ready()`` may run more than once."""
    _task_gates.register(name=name, hook=gate)


def session_task_gates_run(*, task, agent) -> None:
    _task_gates.call_each(task=task, agent=agent)


def session_status_hook_register(*, name: str, hook: Callable) -> None:
    """``hook(actor=..., session=..., previous=..., status=...)`` runs when a session has moved from
    ``previous`` to ``status``, in the transition's transaction (the session row locked). Registered by
    name: ``ready()`` may run more than once."""
    _status_hooks.register(name=name, hook=hook)


def session_status_changed(*, actor, session, previous: str, status: str) -> None:
    _status_hooks.call_each(actor=actor, session=session, previous=previous, status=status)


def agent_alive_hook_register(*, name: str, hook: Callable) -> None:
    """``hook(agent=...)`` runs when an agent's sign of life was written (a heartbeat, a request):
    what it holds elsewhere must not expire while it works."""
    _alive_hooks.register(name=name, hook=hook)


def agent_alive_hooks_run(*, agent) -> None:
    _alive_hooks.call_each(agent=agent)


def session_opened_hook_register(*, name: str, hook: Callable) -> None:
    """``hook(session=...)`` runs when a session naming a task was opened, in its transaction: the
    board's card follows the newest session of the agent that holds it."""
    _opened_hooks.register(name=name, hook=hook)


def session_opened(*, session) -> None:
    _opened_hooks.call_each(session=session)


def session_read_grant_register(*, name: str, grant: Callable) -> None:
    """``grant(actor=..., session=...)`` returns True when ``actor``, who does not own ``session``,
    may still read it (never write): runners' lets an ``orchestrate`` key read the sessions of runs,
    which it queues and reviews. Asked only after the owner check failed, so an owner pays nothing."""
    _read_grants.register(name=name, hook=grant)


def session_read_granted(*, actor, session) -> bool:
    return any(grant(actor=actor, session=session) for grant in _read_grants)


# The three callables by name (shared, create, discard), registered together.
_workspace_provider: Provider[dict[str, Callable]] = Provider(what="session workspace provider", app="workspaces")


def session_workspace_provider_register(*, shared: Callable, create: Callable, discard: Callable) -> None:
    """``shared()`` returns the flat shared workspace, ``create(folder_name=...)`` a new session folder
    (a name of None: the provider picks it), ``discard(workspace=...)`` removes one made for a session
    that was never stored. Registering again replaces them: ``ready()`` may run more than once."""
    _workspace_provider.register({"shared": shared, "create": create, "discard": discard})


def session_workspace_shared():
    return _workspace_provider.get()["shared"]()


def session_workspace_create(*, folder_name: str | None = None):
    return _workspace_provider.get()["create"](folder_name=folder_name)


def session_workspace_discard_empty(*, workspace) -> None:
    _workspace_provider.get()["discard"](workspace=workspace)
