"""What apps above sessions_app check when a session is opened on a task, and do when a session
changes status or an agent shows a sign of life, without sessions_app importing them (the layers in
pyproject).

The same pattern as board/claim_gates.py and ledger/tool_use_gates.py: an app registers a hook from
``AppConfig.ready()`` (here composition/apps.py, which wires board and workspaces in), and the
service calls every hook at the point where it used to call that app itself, inside its own
transaction and locks, so what happens and in which order is unchanged. Chosen over a "close"
service in the top layer that the views call: every caller of ``session_transition`` (the API, the
admin, runs) and of a heartbeat (the key authentication, the heartbeat endpoints) keeps the effect
without having to know about it.
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
