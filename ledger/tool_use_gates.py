"""What apps above the ledger say about a tool use as it is recorded, without the ledger importing
them (the layers in pyproject): usage's budgets answer "exceeded: wait for a person" (usage/budgets.py).

The hook's PreToolUse records the call (``POST /api/v1/sessions/{id}/tool-calls/``); the answer to
that one request carries each gate's verdict under the gate's name (``"budget": {...}``), so a tool use
no gate objects to costs the hook no extra round trip. An app registers its gate from
``AppConfig.ready()``.
"""

from collections.abc import Callable

from config.extension_points import Hooks

_gates = Hooks()


def tool_use_gate_register(*, name: str, gate: Callable) -> None:
    """``gate(session=..., tool_name=...)`` answers a JSON-safe dict, or None when it has nothing to say.
    Registered by name: ``ready()`` may run more than once."""
    _gates.register(name=name, hook=gate)


def tool_use_verdicts(*, session, tool_name: str) -> dict:
    """The gates' verdicts on this session using this tool, by gate name (empty: go on)."""
    verdicts = {}
    for name, gate in _gates.items():
        verdict = gate(session=session, tool_name=tool_name)
        if verdict is not None:
            verdicts[name] = verdict
    return verdicts
